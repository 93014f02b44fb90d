"""A run that diverges (issue 44): --fast's Fourier path catches it and hands back its best evaluated image; the
tutorial's path keeps its last image and the command warns. The divergence is made by hand, so no CPU's rounding
decides the outcome: after a chosen evaluation one style loss is multiplied by 1e6 whatever the image, a loss that
jumps and stays up (far above ``JUMP``, and above anything LBFGS can bring it down to in the evaluations left)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from style_transfer.losses.tutorial import StyleLoss
from style_transfer.fast.basis import ARM_BELOW, FOURIER, JUMP, RESTARTS_IN_A_ROW
from style_transfer.core.run_stats import RunStats
from style_transfer.core.style_model import get_style_model_and_losses
from style_transfer.core.transfer import TransferSettings, optimize
from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD

from ..helpers import invoke_stylize

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
    settings = TransferSettings(progress=lambda info: losses.append(info.loss), basis=FOURIER,
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


def test_the_default_warns_when_its_loss_ends_above_its_start(tmp_path: Path, monkeypatch) -> None:
    """The tutorial's path keeps its last image (not the best), and the command says in one line that the picture is
    probably noise, naming what to try; the same run without the blow-up says nothing of the kind."""
    args = ["images/chelsea.png", "images/ihc.png", "-o", str(tmp_path / "out.png"), "--weights", "random",
            "--size", "32", "--steps", "20", "--style-weight", "1e9", "--content-weight", "1e3"]
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
