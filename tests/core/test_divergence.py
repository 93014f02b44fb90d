"""A run that diverges (issue 44): --fast's Fourier path catches it and hands back its best evaluated image; the
tutorial's path keeps its last image and the command warns. The divergence is made by hand, so no CPU's rounding
decides the outcome: after a chosen evaluation one style loss is multiplied by 1e6 whatever the image, a loss that
jumps and stays up (far above ``JUMP``, and above anything LBFGS can bring it down to in the evaluations left)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from style_transfer.losses.tutorial import StyleLoss
from style_transfer.core.guard import JUMP, RESTARTS_IN_A_ROW
from style_transfer.fast.basis import ARM_BELOW, FOURIER
from style_transfer.core.image import PERSISTS, PIXELS, RESCUED
from style_transfer.core.lbfgs import LBFGS, StackedLBFGS
from style_transfer.core.run_stats import RunStats
from style_transfer.core.steps import LBFGS_MAX_ITER
from style_transfer.core.style_model import get_style_model_and_losses
from style_transfer.core.transfer import TransferSettings, get_input_optimizer, optimize
from style_transfer.io.metadata import read_record
from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD

from ..helpers import invoke_stylize
from ..rounding import moved_inputs

BLOW_UP = 1e6
STEPS = 59  # three LBFGS steps of 20


def blown_up(module: StyleLoss, after: int, until: int | None = None) -> None:
    """From the ``after``-th forward on (up to the ``until``-th, excluded), ``module``'s loss is ``BLOW_UP`` times
    what it is."""
    count = [0]
    forward = module.forward

    def forward_blown(x: torch.Tensor) -> torch.Tensor:
        out = forward(x)
        count[0] += 1
        if count[0] >= after and (until is None or count[0] < until):
            module.loss = module.loss * BLOW_UP
        return out

    module.forward = forward_blown  # type: ignore[method-assign]


def spiked(module: StyleLoss, at: int, factor: float = 1e3) -> None:
    """At the ``at``-th forward alone, ``module``'s loss is ``factor`` times what it is: one evaluation that jumps."""
    count = [0]
    forward = module.forward

    def forward_spiked(x: torch.Tensor) -> torch.Tensor:
        out = forward(x)
        count[0] += 1
        if count[0] == at:
            module.loss = module.loss * factor
        return out

    module.forward = forward_spiked  # type: ignore[method-assign]


def fourier_run(cnn, content, style, after: int | None, spike_at: int | None = None,
                until: int | None = None) -> tuple[torch.Tensor, RunStats, list[float], list[bool]]:
    model, style_losses, content_losses = get_style_model_and_losses(cnn, IMAGENET_MEAN, IMAGENET_STD, style, content)
    if after is not None:
        blown_up(style_losses[0], after, until)
    if spike_at is not None:
        spiked(style_losses[0], spike_at)  # the term that dominates the blown-up total
    losses: list[float] = []
    gave_up: list[bool] = []
    stats = RunStats()
    settings = TransferSettings.of(progress=lambda info: losses.append(info.loss), basis=FOURIER,
                                on_step_end=lambda optimizer, image, n: gave_up.append(
                                    bool(optimizer.param_groups[0].get("gave_up_basis"))))
    out = optimize(model, style_losses, content_losses, content.clone(), STEPS, 1e9, 1e3, settings, stats=stats)
    return out, stats, losses, gave_up


def clean_loss(cnn, content, style, image: torch.Tensor) -> float:
    """The tutorial's loss of ``image`` (no blow-up), style weight 1e9, content weight 1e3 as the runs."""
    model, style_losses, content_losses = get_style_model_and_losses(cnn, IMAGENET_MEAN, IMAGENET_STD, style, content)
    with torch.no_grad():
        model(image)
    return float(1e9 * sum(m.loss for m in style_losses) + 1e3 * sum(m.loss for m in content_losses))


def test_a_diverging_fourier_run_gives_up_the_basis_and_hands_back_its_best_image(cnn, content_32, style_32) -> None:
    after = 8  # inside the first LBFGS step
    out, stats, losses, gave_up = fourier_run(cnn, content_32, style_32, after)
    assert losses[after - 1] > JUMP * min(losses[:after - 1])  # the jump was made
    assert min(losses[after - 1:]) > 10 * min(losses[:after - 1])  # ... and it stayed up: no restart could mend it
    # RESTARTS_IN_A_ROW restarts, then the rest of the run on the pixels (a checkpoint's optimiser state says so)
    assert gave_up[-1] and gave_up.index(True) <= RESTARTS_IN_A_ROW
    assert stats.best_evaluation < after and stats.handed_back == stats.best_evaluation
    assert stats.best_loss == pytest.approx(min(losses), rel=1e-6)  # float32 there, the terms summed in double here
    best = stats.best_image()
    assert best is not None and torch.equal(out, best.clamp(0, 1))  # the very image of the best evaluation
    # Control, the same run without the blow-up: it hands back an image of its own, better than the diverged run's
    # (so the diverged run's is its early best, not the end of a normal run); and that early best scores, without the
    # blow-up, below the photo it started from.
    control, *_ = fourier_run(cnn, content_32, style_32, None)
    diverged_score = clean_loss(cnn, content_32, style_32, out)
    assert clean_loss(cnn, content_32, style_32, control) < diverged_score
    assert diverged_score <= clean_loss(cnn, content_32, style_32, content_32)


def test_after_giving_up_the_basis_a_late_jump_on_the_pixels_goes_back_to_the_steps_best(cnn, content_32,
                                                                                       style_32) -> None:
    """LBFGS on the pixels can diverge late too (the README's first command did, at its 219th evaluation): the guard
    stays on them, armed once their loss has fallen below ``ARM_BELOW`` times their first. The blow-up gives the
    basis up and ends at evaluation 30 (the pixels' loss then falls a millionfold: armed); one evaluation made to jump
    (1e3x) after that: the next evaluation is an image the step had evaluated already (its lowest, the same loss to
    the bit), not LBFGS's next point."""
    after, until, spike = 8, 30, 45
    out, stats, losses, gave_up = fourier_run(cnn, content_32, style_32, after, spike_at=spike, until=until)
    assert gave_up.index(True) <= RESTARTS_IN_A_ROW  # on the pixels by the spike (each step end: <= 20 evaluations)
    pixels_first = losses[after + 4 * RESTARTS_IN_A_ROW]  # (a restart's evaluations at most 4 each before giving up)
    before = losses[until:spike - 1]  # the pixels' evaluations after the blow-up, before the spike
    assert min(before) < ARM_BELOW * pixels_first  # armed
    assert losses[spike - 1] > JUMP * min(before)  # the spike jumped
    assert losses[spike] in before  # back at the step's best: an image evaluated before, the same loss to the bit
    # (without the guard on the pixels it was LBFGS's next point: checked against the code before it)
    # Control, the same run without the spike: the jump at that evaluation is the hand-made one, not the run's own.
    _, _, control, _ = fourier_run(cnn, content_32, style_32, after, until=until)
    assert 100 * control[spike - 1] < losses[spike - 1]


def test_before_the_pixels_loss_has_fallen_a_jump_is_left_to_lbfgs(cnn, content_32, style_32) -> None:
    """An early jump on the pixels is LBFGS's own overshoot, which the tutorial's path makes and recovers from (VGG16,
    the cat in the deep field: 300x at the default's third evaluation, back by its 70th); damped restarts there
    crawled. The blow-up stays on, so the pixels' loss never falls to ``ARM_BELOW`` times their first: the same spike
    as above is followed by LBFGS's next point, an image not evaluated before."""
    after, spike = 8, 40
    _, _, losses, gave_up = fourier_run(cnn, content_32, style_32, after, spike_at=spike)
    assert gave_up.index(True) <= RESTARTS_IN_A_ROW
    pixels = losses[after + 4 * RESTARTS_IN_A_ROW:spike - 1]
    assert min(pixels) > ARM_BELOW * pixels[0]  # not armed
    assert losses[spike - 1] > JUMP * min(pixels)  # the spike jumped
    assert losses[spike] not in pixels  # no restart (the code before this rule went back to the step's best)


def test_the_tutorials_loop_warns_when_its_loss_ends_above_its_start(tmp_path: Path, monkeypatch) -> None:
    """The tutorial's loop as written (--unguarded) keeps its last image (not the best), and the command says in one
    line that the picture is probably noise, naming what to try; the same run without the blow-up says nothing of the
    kind."""
    args = ["images/chelsea.png", "images/ihc.png", "-o", str(tmp_path / "out.png"), "--weights", "random",
            "--size", "32", "--steps", "20", "--style-weight", "1e9", "--content-weight", "1e3", "--unguarded"]
    plain = invoke_stylize(args)
    assert "warning:" not in plain.stderr
    original = StyleLoss.forward

    def forward(self, x):  # every style loss blown up from the third evaluation on
        out = original(self, x)
        self._seen = getattr(self, "_seen", 0) + 1
        if self._seen >= 3:
            self.loss = self.loss * BLOW_UP
        return out

    monkeypatch.setattr(StyleLoss, "forward", forward)
    diverged = invoke_stylize(args[:3] + [str(tmp_path / "noise.png")] + args[4:])
    warning = [line for line in diverged.stderr.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and "probably noise" in warning[0] and "--fast" in warning[0]
    assert "--style-weight" in warning[0]
    # The default, with the same jump: rescued after its first step, it hands back its lowest image, without a
    # warning, and the picture's record says when the rescue acted and which evaluation it kept.
    rescued = invoke_stylize(args[:3] + [str(tmp_path / "rescued.png")] + args[4:-1])
    assert "warning:" not in rescued.stderr
    record = read_record(tmp_path / "rescued.png")
    assert record["rescued_at"] == [20] and record["kept_evaluation"] <= 2


# --- the default's rescue (core/image.py, RescuedPixelImage) ---

def pixel_run(cnn, content, style, basis, after: int | None = None,
              until: int | None = None) -> tuple[torch.Tensor, RunStats, list[float]]:
    """The default's loop (``basis``: ``RESCUED``, or ``PIXELS`` for the tutorial's as written) at the suite's scaled
    weights, with the first style loss blown up from its ``after``-th forward (to its ``until``-th) where given."""
    model, style_losses, content_losses = get_style_model_and_losses(cnn, IMAGENET_MEAN, IMAGENET_STD, style, content)
    if after is not None:
        blown_up(style_losses[0], after, until)
    losses: list[float] = []
    stats = RunStats()
    settings = TransferSettings.of(progress=lambda info: losses.append(info.loss), basis=basis)
    out = optimize(model, style_losses, content_losses, content.clone(), STEPS, 1e9, 1e3, settings, stats=stats)
    return out, stats, losses


def steps_failed(losses: list[float]) -> bool:
    """Whether a step of the tutorial's loop failed, worked out from its losses alone: at the end of an LBFGS step
    (every LBFGS_MAX_ITER evaluations) the loss had stayed above JUMP times the lowest before it for PERSISTS
    evaluations in a row."""
    lowest, above = float("inf"), 0
    for n, loss in enumerate(losses, 1):
        above = above + 1 if loss > JUMP * lowest else 0
        lowest = min(lowest, loss)
        if n % LBFGS_MAX_ITER == 0 and above >= PERSISTS:
            return True
    return False


def test_where_no_step_fails_the_default_is_the_tutorials_loop_bit_for_bit(cnn, content_32, style_32) -> None:
    """The rescue only watches a run whose steps come back from their jumps (random weights jump about 6x within a
    step and come back in 3 evaluations): the same losses and the same image, to the bit, as the loop as written; on
    the inputs and on three moves of them by one rounding step."""
    for content, style in [(content_32, style_32), *moved_inputs(content_32, style_32)]:
        theirs, _, their_losses = pixel_run(cnn, content, style, PIXELS)
        ours, stats, losses = pixel_run(cnn, content, style, RESCUED)
        if steps_failed(their_losses):  # another CPU's rounding could make one fail: then it must be rescued
            assert stats.rescued_at
            continue
        assert stats.rescued_at == [] and stats.handed_back is None
        assert losses == their_losses and torch.equal(ours, theirs)


def test_a_failed_step_is_rescued_from_the_lowest_image(cnn, content_32, style_32) -> None:
    """A loss made to jump 1e6x from the 3rd evaluation to the end of the first LBFGS step (the 20th): that step
    failed, so the run goes back to its lowest image (the 21st evaluation is that image: the same loss to the bit) and
    goes on guarded, to a picture whose loss is a small part of the photo's. The control, the loop as written with the
    same jump, takes no rescue and goes on from LBFGS's own point."""
    out, stats, losses = pixel_run(cnn, content_32, style_32, RESCUED, after=3, until=21)
    assert stats.rescued_at == [20]
    assert min(losses[2:20]) > JUMP * min(losses[:2])  # the jump was made and stayed up for the step
    assert losses[20] == min(losses[:2])  # back at the lowest image
    assert clean_loss(cnn, content_32, style_32, out) < 0.1 * clean_loss(cnn, content_32, style_32, content_32)
    _, control, control_losses = pixel_run(cnn, content_32, style_32, PIXELS, after=3, until=21)
    assert control.rescued_at == [] and control_losses[20] != min(control_losses[:2])


def test_a_run_that_fails_to_the_end_hands_back_its_lowest_image(cnn, content_32, style_32) -> None:
    """The jump stays on to the end: rescued after the first step, the guarded steps never come below the lowest loss
    seen again, and the run hands back the lowest image it evaluated (the 2nd), not the last update, which the loop as
    written hands back (the control)."""
    out, stats, losses = pixel_run(cnn, content_32, style_32, RESCUED, after=3)
    assert stats.rescued_at == [20] and stats.handed_back == 2
    assert math.isclose(clean_loss(cnn, content_32, style_32, out), losses[1], rel_tol=1e-5)  # the 2nd's image
    theirs, control, their_losses = pixel_run(cnn, content_32, style_32, PIXELS, after=3)
    assert control.handed_back is None and their_losses[-1] > JUMP * losses[1]
    assert not math.isclose(clean_loss(cnn, content_32, style_32, theirs), losses[1], rel_tol=1e-3)


def test_a_rescue_travels_in_the_optimisers_state(content_32) -> None:
    """A checkpoint's optimiser state resumes a rescued run as rescued: the stacked LBFGS, the jump guard, its damping,
    and the run's lowest loss, image and evaluation."""
    image = content_32.clone().requires_grad_(True)
    stats = RunStats()

    def new_optimizer(variable, rate, two_loop=None):
        return get_input_optimizer(variable, lr=1.0 if rate is None else rate, two_loop=two_loop or "torch")

    rescued = RESCUED.image(image, new_optimizer, None, lr=1.0, optimizer_name="lbfgs", planned=40, stats=stats)
    assert isinstance(rescued.optimizer, LBFGS) and not isinstance(rescued.optimizer, StackedLBFGS)
    rescued.start_step(0)
    for loss in (10.0, *[100.0] * PERSISTS):
        stats.check_finite(loss, image)  # as the loop counts an evaluation before its hooks
        rescued.after_evaluation(loss)
    assert rescued.run_step(lambda: None) and stats.rescued_at == [1 + PERSISTS]
    assert isinstance(rescued.optimizer, StackedLBFGS)
    rescued.optimizer.param_groups[0]["lr"] = 0.25
    rescued.end_step(1 + PERSISTS)
    state = rescued.optimizer.state_dict()
    again_stats = RunStats()
    again = RESCUED.image(image, new_optimizer, state, lr=1.0, optimizer_name="lbfgs", planned=40, stats=again_stats)
    assert isinstance(again.optimizer, StackedLBFGS) and again_stats.rescued_at == [1 + PERSISTS]
    assert again.guard is not None and again.guard.damping == 0.25
    assert (again_stats.best_loss, again_stats.best_evaluation) == (10.0, 1)
    assert torch.equal(again_stats.best_image(), content_32)
