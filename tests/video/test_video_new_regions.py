"""Video: what the flow marks as new (a pan's entering strip, a disocclusion) starts from the content and is not held
by the temporal loss until it has had ``temporal.SETTLE`` times the first frame's evaluations, counted through the
flow; held after one frame (``SETTLE = 0``, the old behaviour) the entering strip stayed close to the content and piled
up as the view moved."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("av", reason="the video extra is not installed")
pytest.importorskip("cv2", reason="the video extra is not installed")

from benchmarks.studies.flicker import style_picture, write_frames  # noqa: E402
from style_transfer.config.style import StyleConfig  # noqa: E402
from style_transfer.io.images import load_image, pil_to_tensor  # noqa: E402
from style_transfer.losses.tutorial import gram_matrix  # noqa: E402
from style_transfer.networks.vgg import load_network  # noqa: E402
from style_transfer.video import temporal  # noqa: E402
from style_transfer.video.runner import VideoRun, VideoSettings  # noqa: E402

WIDTH, HEIGHT, SHIFT, PAN, HOLD, STEPS = 64, 48, 2, 9, 4, 10
ENTERED = SHIFT * PAN  # columns at the right edge that entered during the pan
BOUND = 3.7  # the entered band's style loss over the first frame's bands: see the slow test
# Random weights: the tutorial's loss weights scaled by 1000 so that LBFGS keeps curvature pairs (as test_video_run.py).
CONFIG = StyleConfig(size=WIDTH, steps=STEPS, weights="random", style_weight=1e9, content_weight=1e3)


def panned_texture(seed: int = 0) -> list[np.ndarray]:
    """Random 2x2 blocks (the same statistics everywhere, so two bands of one frame can be compared) moving left by
    SHIFT px a frame for PAN frames, then still for HOLD frames: by the end every entered pixel has had its
    evaluations."""
    rng = np.random.default_rng(seed)
    blocks = rng.random((HEIGHT // 2, (WIDTH + SHIFT * PAN) // 2 + 1, 3)).astype(np.float32)
    field = blocks.repeat(2, 0).repeat(2, 1)
    return [field[:, SHIFT * min(t, PAN):SHIFT * min(t, PAN) + WIDTH].copy() for t in range(PAN + 1 + HOLD)]


def band_losses(image: torch.Tensor, content: torch.Tensor, style: torch.Tensor, columns: slice) -> tuple[float, float]:
    """The tutorial's style loss (conv_1 to conv_5) and content loss (conv_4), with the run's weights, of one band of
    columns: the Gram matrix of the band's features alone against the style's, the content's features over the band
    alone. Images ``(1, 3, H, W)`` in [0, 1]."""
    network = load_network("vgg19", "random")
    normalization = network.normalization()
    mask = torch.zeros(1, 1, *image.shape[-2:])
    mask[..., columns] = 1

    def features(x: torch.Tensor) -> list[torch.Tensor]:
        out, x = [], normalization(x)
        for layer in network.features:
            # the losses see each conv's output, as the tutorial's model does (its ReLUs are not in place)
            x = F.relu(x) if isinstance(layer, torch.nn.ReLU) else layer(x)
            if isinstance(layer, torch.nn.Conv2d):
                out.append(x)
                if len(out) == 5:
                    break
        return out

    with torch.no_grad():
        ours, theirs, target = features(image), features(content), features(style)
        style_loss = 0.0
        for mine, wanted in zip(ours, target):
            weight = F.interpolate(mask, size=mine.shape[-2:], mode="area").reshape(-1)
            flat = mine[0].reshape(mine.shape[1], -1)
            gram = (flat * weight) @ flat.t() / (mine.shape[1] * weight.sum())
            style_loss += float(F.mse_loss(gram, gram_matrix(wanted)))
        weight = F.interpolate(mask, size=ours[3].shape[-2:], mode="area")
        content_loss = float((weight * (ours[3] - theirs[3]) ** 2).sum() / (weight.sum() * ours[3].shape[1]))
    return CONFIG.style_weight * style_loss, CONFIG.content_weight * content_loss


def test_new_pixels_count_from_zero_and_are_held_once_settled() -> None:
    frames = [torch.from_numpy(f).permute(2, 0, 1)[None] for f in panned_texture()[:3]]
    previous = torch.rand(1, 3, HEIGHT, WIDTH, generator=torch.Generator().manual_seed(0))
    counts = np.full((HEIGHT, WIDTH), 20.0, np.float32)  # every pixel of frame 0 had 20 evaluations
    start = temporal.frame_start(previous, frames[0], frames[1], counts, settled=40.0)
    inner = (slice(8, -8), slice(8, -8))
    assert start.evaluations is not None and start.reliable is not None
    assert (start.evaluations[:, -SHIFT:] == 0).all()  # the entering strip is new
    assert np.allclose(start.evaluations[inner], 20, atol=1e-4)  # the rest carries its count
    assert float(start.reliable[0, 0][inner].min()) == 1 and float(start.mask.max()) == 0  # none settled at 40
    torch.testing.assert_close(start.start[..., -SHIFT:], frames[1][..., -SHIFT:])  # new pixels start from the content
    held = temporal.frame_start(previous, frames[0], frames[1], counts, settled=20.0)
    torch.testing.assert_close(held.mask, held.reliable)  # settled at 20: every reliable pixel is held
    assert (held.mask[0, 0, :, -SHIFT:] == 0).all()
    # the next frame: the strip has moved SHIFT px left with its count (10, this frame's evaluations)
    carried = temporal.carried_evaluations(frames[1], frames[2], start.evaluations + 10)
    assert np.allclose(carried[8:-8, -2 * SHIFT], 10, atol=1e-3) and (carried[:, -SHIFT:] == 0).all()
    assert np.allclose(carried[inner], 30, atol=1e-3)
    old = temporal.frame_start(previous, frames[0], frames[1])  # no counts: every reliable pixel held
    torch.testing.assert_close(old.mask, old.reliable)


@pytest.mark.slow
@pytest.mark.video
def test_what_enters_a_pan_is_stylised_as_the_rest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At the last frame of a pan (and a hold), the band that entered against the mean of two equal bands of pixels
    from the first frame: its style loss under BOUND times theirs, its content loss under 1.5 times, in two summation
    orders (channels_last), each bound widened by 3x the orders' difference. The control, in this test: the old
    behaviour (a new pixel held from the next frame on) leaves the entered band's style loss over 2.5 times ours.

    Random weights at 64 px make the ratio chaotic, so BOUND comes from 12 runs (6 clips, 2 orders): ours 1.0 to 2.9,
    the old behaviour 4.7 to 8.1; the entered band's style loss of the old behaviour 4.3 to 25 times ours."""
    pictures = panned_texture(seed=1)
    clip = write_frames(str(tmp_path / "clip"), pictures)
    style_path = tmp_path / "style.png"
    style_picture(64).save(style_path)
    style = load_image(str(style_path), WIDTH)
    content = torch.from_numpy(pictures[-1]).permute(2, 0, 1)[None]

    def last_frame(channels_last: bool) -> tuple[tuple[float, float], tuple[float, float]]:
        """(style, content) losses of the entered band, and the mean of two bands from the first frame."""
        video = VideoRun(clip, [style_path], dataclasses.replace(CONFIG, channels_last=channels_last), VideoSettings())
        assert video.execute().stopped == "done"
        image = pil_to_tensor(video.stylised_frame(len(pictures) - 1))
        entered = band_losses(image, content, style, slice(WIDTH - ENTERED, None))
        kept = np.mean([band_losses(image, content, style, slice(k * ENTERED, (k + 1) * ENTERED)) for k in (0, 1)], 0)
        return entered, (float(kept[0]), float(kept[1]))

    ours = {}
    for channels_last in (False, True):
        entered, kept = ours[channels_last] = last_frame(channels_last)
        print(f"channels_last {channels_last}: entered band style {entered[0]:.1f} content {entered[1]:.1f}, "
              f"first frame's bands style {kept[0]:.1f} content {kept[1]:.1f}")
    # Each bound widened by 3x the two summation orders' difference, measured here (as tests/networks do).
    ratios = [(ours[c][0][0] / ours[c][1][0], ours[c][0][1] / ours[c][1][1]) for c in (False, True)]
    style_spread, content_spread = (abs(ratios[0][k] - ratios[1][k]) for k in (0, 1))
    assert max(r[0] for r in ratios) < BOUND + 3 * style_spread, ratios
    assert max(r[1] for r in ratios) < 1.5 + 3 * content_spread, ratios
    monkeypatch.setattr(temporal, "SETTLE", 0.0)
    old, old_kept = last_frame(False)
    print(f"held from the next frame: entered band style {old[0]:.1f} content {old[1]:.1f}, first frame's bands style "
          f"{old_kept[0]:.1f} content {old_kept[1]:.1f}")
    assert old[0] > 2.5 * max(ours[c][0][0] for c in (False, True))  # the old behaviour: the strip far less painted
