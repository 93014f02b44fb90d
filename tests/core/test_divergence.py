"""A run that diverges (issue 44): --fast's Fourier path catches it and hands back its best evaluated image; the
tutorial's path keeps its last image and the command warns. The divergence is made by hand, so no CPU's rounding
decides the outcome: after a chosen evaluation one style loss is multiplied by 1e6 whatever the image, a loss that
jumps and stays up (far above ``JUMP``, and above anything LBFGS can bring it down to in the evaluations left)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from style_transfer.losses.tutorial import StyleLoss
from style_transfer.fast.basis import FOURIER, JUMP, RESTARTS_IN_A_ROW
from style_transfer.core.run_stats import RunStats
from style_transfer.core.style_model import get_style_model_and_losses
from style_transfer.core.transfer import TransferSettings, optimize
from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD

from ..helpers import invoke_stylize

BLOW_UP = 1e6
STEPS = 59  # three LBFGS steps of 20


def blown_up(module: StyleLoss, after: int) -> None:
    """From the ``after``-th forward on, ``module``'s loss is ``BLOW_UP`` times what it is."""
    count = [0]
    forward = module.forward

    def forward_blown(x: torch.Tensor) -> torch.Tensor:
        out = forward(x)
        count[0] += 1
        if count[0] >= after:
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


def fourier_run(cnn, content, style, after: int | None,
                spike_at: int | None = None) -> tuple[torch.Tensor, RunStats, list[float], list[bool]]:
    model, style_losses, content_losses = get_style_model_and_losses(cnn, IMAGENET_MEAN, IMAGENET_STD, style, content)
    if after is not None:
        blown_up(style_losses[0], after)
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


def test_after_giving_up_the_basis_a_jump_on_the_pixels_goes_back_to_the_steps_best(cnn, content_32,
                                                                                  style_32) -> None:
    """LBFGS on the pixels can diverge late too (the README's first command did, at its 219th evaluation): the guard
    stays on them. One evaluation made to jump (1e3x) well after the run gave the basis up: the next evaluation is an
    image the step had evaluated already (its lowest, the same loss to the bit), not LBFGS's next point."""
    after, spike = 8, 40
    out, stats, losses, gave_up = fourier_run(cnn, content_32, style_32, after, spike_at=spike)
    assert gave_up.index(True) <= RESTARTS_IN_A_ROW  # on the pixels by the spike (each step end: <= 20 evaluations)
    before = losses[after + 4 * RESTARTS_IN_A_ROW:spike - 1]  # the pixels' evaluations before the spike
    assert losses[spike - 1] > JUMP * min(before)  # the spike jumped
    assert losses[spike] in before  # back at the step's best: an image evaluated before, the same loss to the bit
    # (without the guard on the pixels it was LBFGS's next point: checked against the code before it)
    # Control, the same run without the spike: the jump at that evaluation is the hand-made one, not the run's own.
    _, _, control, _ = fourier_run(cnn, content_32, style_32, after)
    assert 100 * control[spike - 1] < losses[spike - 1]


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
