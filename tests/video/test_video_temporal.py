"""Video (issue 17): the temporal loss against a plain computation, and the core's hooks for it (a start
image, loss modules on the image, a loaded network), which change nothing when unused."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

pytest.importorskip("cv2", reason="the video extra is not installed")

from style_transfer.config.style import StyleConfig  # noqa: E402
from style_transfer.run.run import Run  # noqa: E402
from style_transfer.losses.temporal import TemporalLoss
from style_transfer.video.temporal import frame_start


def test_temporal_loss_value_and_gradient_are_the_plain_formula() -> None:
    generator = torch.Generator().manual_seed(0)
    image = torch.rand(1, 3, 7, 9, generator=generator, dtype=torch.float64).float().requires_grad_(True)
    target = torch.rand(1, 3, 7, 9, generator=generator)
    mask = (torch.rand(1, 1, 7, 9, generator=generator) > 0.4).float()
    loss = TemporalLoss(target, mask, weight=250.0)
    loss.calibrate(4.0)  # the frame's start loss L0
    loss.calibrate(9.0)  # later evaluations change nothing
    assert loss(image) is image  # transparent
    loss.loss.backward()
    x, t, m = (a.detach().double().numpy() for a in (image, target, mask))
    expected = 250.0 * 4.0 * (m * (x - t) ** 2).sum() / (3 * 7 * 9)  # D = every pixel and channel (Ruder's form)
    gradient = 250.0 * 4.0 * 2 * m * (x - t) / (3 * 7 * 9)
    assert float(loss.loss.detach()) == pytest.approx(expected, rel=1e-6)
    np.testing.assert_allclose(image.grad.double().numpy(), gradient, rtol=1e-5, atol=1e-9)
    assert (image.grad[0, :, mask[0, 0] == 0] == 0).all()  # no pull where the warp is unreliable


def test_temporal_loss_follows_a_smaller_working_size() -> None:
    target = torch.full((1, 3, 8, 12), 0.5)
    mask = torch.ones(1, 1, 8, 12)
    loss = TemporalLoss(target, mask, weight=1.0)
    loss(torch.zeros(1, 3, 4, 6))
    assert float(loss.loss) == 0.0  # not calibrated yet: the frame's first evaluation, where the term is 0 anyway
    loss.calibrate(2.0)
    loss(torch.zeros(1, 3, 4, 6))  # coarse-to-fine's first size
    assert float(loss.loss) == pytest.approx(2.0 * 0.25)


def test_a_still_clip_starts_from_the_previous_result_exactly() -> None:
    generator = torch.Generator().manual_seed(1)
    frame = torch.rand(1, 3, 24, 32, generator=generator)
    previous = torch.rand(1, 3, 24, 32, generator=generator)
    start = frame_start(previous, frame, frame)  # no motion: zero flow, every pixel reliable
    assert start.mask.shape == (1, 1, 24, 32) and bool((start.mask == 1).all())
    torch.testing.assert_close(start.start, previous, atol=1e-6, rtol=0)
    torch.testing.assert_close(start.warped, previous, atol=1e-6, rtol=0)


def first_event(run: Run) -> object:
    events = []
    run.execute(lambda e: (events.append(e), run.cancel()))
    return events[0]


def test_the_run_hooks_change_nothing_unused_and_do_what_they_say(cnn, content_32, style_32) -> None:
    config = StyleConfig(size=32, steps=1, weights="random")
    plain = first_event(Run(content_32, style_32, config))
    hooked = first_event(Run(content_32, style_32, config, cnn=cnn, init=content_32.clone(), image_losses=()))
    assert (hooked.style_loss, hooked.content_loss, hooked.tv_loss) == (plain.style_loss, plain.content_loss, 0.0)
    # a start image: the content loss of the first evaluation is no longer 0
    other = torch.flip(content_32, dims=[-1])
    moved = first_event(Run(content_32, style_32, config, cnn=cnn, init=other))
    assert plain.content_loss == 0.0 and moved.content_loss > 0
    # an image loss: its value on the start image is the extra term; style and content as before
    target = torch.zeros_like(content_32)
    mask = torch.ones(1, 1, *content_32.shape[-2:])
    temporal = TemporalLoss(target, mask, 10.0)
    temporal.calibrate(3.0)
    with_loss = first_event(Run(content_32, style_32, config, cnn=cnn, image_losses=[temporal]))
    assert with_loss.tv_loss == pytest.approx(30.0 * float((content_32 ** 2).mean()), rel=1e-5)
    assert (with_loss.style_loss, with_loss.content_loss) == (plain.style_loss, plain.content_loss)


def test_a_frame_keeps_its_reliable_pixels_within_the_bound(cnn, content_32, style_32) -> None:
    """The method's promise (temporal.py): a frame that hands back its best evaluated image has a total loss of at
    most its start loss L0, so 1/D sum c (x - w)^2 <= 1 / temporal_weight. The weight is set from a free run of the
    same frame (weight 0) so that the bound is a quarter of the deviation the style alone makes: binding, not met by
    standing still."""
    from style_transfer.io.images import pil_to_tensor

    config = StyleConfig(size=32, steps=20, weights="random", style_weight=1e9, content_weight=1e3)
    start = content_32.clone()
    mask = torch.ones(1, 1, *content_32.shape[-2:])
    mask[..., :, :8] = 0  # a disoccluded strip: free

    def frame(weight: float) -> tuple[float, TemporalLoss, list, object]:
        temporal = TemporalLoss(start, mask, weight)
        events: list = []

        def event(info) -> None:
            temporal.calibrate(info.loss)
            events.append(info)

        result = Run(content_32, style_32, config, cnn=cnn, init=start, image_losses=[temporal],
                     keep_best=0.0).execute(event)
        out = pil_to_tensor(result.image)
        return float((mask * (out - start) ** 2).mean()), temporal, events, result

    free, *_ = frame(0.0)
    weight = 4 / free
    deviation, temporal, events, result = frame(weight)
    assert events[0].tv_loss == 0.0 and temporal.start_loss == events[0].loss
    assert result.kept is not None and result.losses["loss"] == min(e.loss for e in events) <= events[0].loss
    rounding = 0.5 / 255  # the picture handed back is 8-bit
    assert deviation <= (math.sqrt(1 / weight) + rounding) ** 2 < free
