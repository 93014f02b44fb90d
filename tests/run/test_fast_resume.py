"""``--fast`` resumed from a checkpoint taken in the middle of a size gives the uninterrupted run, bit for bit.

VGG19 with seeded random weights, a 64 px image in two sizes (32 then 64 px), both loss weights x1000 so LBFGS stores
curvature pairs (``--fast`` keeps 100 of them in the Fourier basis): the checkpoint must carry them, the basis and the
guard's state, or the resumed path parts from the uninterrupted one within a step.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from style_transfer import StyleConfig
from style_transfer.config.run_options import RunOptions
from style_transfer.io.images import pil_to_tensor
from style_transfer.run.run import Run

from ..conftest import small_image

FAST = StyleConfig(fast=True, size=64, scales=2, scale_steps=(20, 40), weights="random", device="cpu",
                   style_weight=1e9, content_weight=1e3)


@pytest.mark.slow  # three runs: over 3 s on one core
def test_fast_resumed_mid_size_is_the_uninterrupted_run(tmp_path: Path) -> None:
    images = small_image("chelsea.png", (64, 43)), small_image("ihc.png", (64, 64))
    trace: list[tuple[int, float]] = []
    whole = Run(*images, FAST).execute(lambda e: trace.append((e.step, e.loss)))

    checkpoint = tmp_path / "run.ckpt"
    first = Run(*images, FAST, RunOptions(checkpoint=str(checkpoint)))
    stopped = first.execute(lambda e: first.cancel("interrupted") if e.step == 50 else None)
    assert (stopped.stopped, stopped.evaluations) == ("interrupted", 50)
    saved = torch.load(checkpoint, weights_only=True)
    # The second size (64 px, evaluations 21 to 60) after its first LBFGS step: the middle of a size.
    assert (saved["scale"], saved["evaluations_in_scale"], saved["evaluations"]) == (1, 20, 40)

    resumed_trace: list[tuple[int, float]] = []
    resumed = Run(*images, FAST, RunOptions(resume=str(checkpoint))).execute(
        lambda e: resumed_trace.append((e.step, e.loss)))
    assert resumed_trace[0][0] == 41
    assert resumed_trace == trace[40:]  # every loss after the checkpoint, to the bit
    assert (resumed.evaluations, resumed.stopped, resumed.kept, resumed.losses) == \
        (whole.evaluations, whole.stopped, whole.kept, whole.losses)
    assert torch.equal(pil_to_tensor(resumed.image), pil_to_tensor(whole.image))
