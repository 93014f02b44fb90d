"""Video (issue 17): warping, DIS flow, Ruder et al.'s masks and Lai et al.'s warping error, on hand-made
flows checked against the formulas written out pixel by pixel here, and on synthetic clips."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("cv2", reason="the video extra is not installed")

from benchmarks.studies.flicker import moving_pattern  # noqa: E402
from style_transfer.video import flow  # noqa: E402

INNER = (slice(10, -10), slice(10, -10))  # away from the edges a shift uncovers


def constant_flow(h: int, w: int, u: float, v: float) -> np.ndarray:
    out = np.zeros((h, w, 2), np.float32)
    out[..., 0], out[..., 1] = u, v
    return out


def test_warp_by_an_integer_shift_is_the_shifted_image() -> None:
    rng = np.random.default_rng(0)
    image = rng.random((20, 30, 3)).astype(np.float32)
    warped = flow.warp(image, constant_flow(20, 30, 3, -2))  # sample at (x + 3, y - 2)
    assert np.array_equal(warped[2:, :-3], image[:-2, 3:])  # exact: integer positions, no blending
    assert not np.allclose(warped[2:, :-3], image[2:, :-3])  # the check could fail: it did move


def test_true_flow_warps_a_translated_clip_onto_the_next_frame_and_the_wrong_sign_does_not() -> None:
    frames = moving_pattern(96, 64, 2, (3, 2), square=False)
    backward = constant_flow(64, 96, -3, -2)  # frame 1's pixel x was at x - (3, 2) in frame 0
    right = np.abs(flow.warp(frames[0], backward) - frames[1])[INNER].mean()
    wrong = np.abs(flow.warp(frames[0], -backward) - frames[1])[INNER].mean()
    assert right < 1e-6  # integer shift: exact
    assert wrong > 0.05  # measured 0.13


def test_dis_recovers_the_motion_within_half_a_pixel() -> None:
    frames = moving_pattern(96, 64, 2, (3, 2), square=False)
    backward = flow.dis_flow(frames[1], frames[0])
    forward = flow.dis_flow(frames[0], frames[1])
    assert np.median(np.abs(backward[INNER] - (-3, -2)).reshape(-1, 2), axis=0).max() < 0.5
    assert np.median(np.abs(forward[INNER] - (3, 2)).reshape(-1, 2), axis=0).max() < 0.5


def bilinear(field: np.ndarray, x: float, y: float) -> np.ndarray:
    """field at (x, y), bilinear, edges repeated: written out for the reference below."""
    h, w = field.shape[:2]
    x, y = min(max(x, 0.0), w - 1.0), min(max(y, 0.0), h - 1.0)
    x0, y0 = int(math.floor(x)), int(math.floor(y))
    x1, y1 = min(x0 + 1, w - 1), min(y0 + 1, h - 1)
    ax, ay = x - x0, y - y0
    return ((1 - ax) * (1 - ay) * field[y0, x0] + ax * (1 - ay) * field[y0, x1] + (1 - ax) * ay * field[y1, x0]
            + ax * ay * field[y1, x1])


def reference_mask(b: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The issue's two rules (and the out-of-frame rule), pixel by pixel in float64; and the pixels within
    1e-4 of a threshold (float32 rounding may decide those either way)."""
    h, w = b.shape[:2]
    out, close = np.ones((h, w)), np.zeros((h, w), bool)
    for y in range(h):
        for x in range(w):
            bu, bv = float(b[y, x, 0]), float(b[y, x, 1])
            fu, fv = bilinear(f.astype(np.float64), x + bu, y + bv)
            margin = (bu + fu) ** 2 + (bv + fv) ** 2 - (0.01 * (bu * bu + bv * bv + fu * fu + fv * fv) + 0.5)
            if margin >= 0:
                out[y, x] = 0
            grad = 0.0
            for c in range(2):  # forward differences, 0 past the last row and column
                dx = float(b[y, x + 1, c] - b[y, x, c]) if x + 1 < w else 0.0
                dy = float(b[y + 1, x, c] - b[y, x, c]) if y + 1 < h else 0.0
                grad += dx * dx + dy * dy
            boundary = grad - (0.01 * (bu * bu + bv * bv) + 0.002)
            if boundary > 0:
                out[y, x] = 0
            if not (0 <= x + bu <= w - 1 and 0 <= y + bv <= h - 1):
                out[y, x] = 0
            close[y, x] = min(abs(margin), abs(boundary)) < 1e-4
    return out, close


def test_masks_match_the_formulas_on_hand_made_flows() -> None:
    rng = np.random.default_rng(3)
    h, w = 12, 14
    b = constant_flow(h, w, -1.0, 0.5)
    f = constant_flow(h, w, 1.0, -0.5)
    b[3:7, 4:9] = (2.0, 1.0)  # a region moving otherwise: boundaries and disagreement
    f[2:5, 8:12] = (0.3, -2.5)
    b += rng.normal(0, 0.02, b.shape).astype(np.float32)  # small smooth-ish noise: near the thresholds
    f[9:, :] += rng.normal(0, 0.6, f[9:, :].shape).astype(np.float32)
    expected, close = reference_mask(b, f)
    got = flow.reliable(b, f)
    assert got.dtype == np.float32 and got.shape == (h, w)
    assert 0.2 < expected.mean() < 0.9  # both kinds of pixel present: the comparison means something
    assert close.sum() <= 2  # almost every pixel is decided clearly
    assert np.array_equal(got[~close], expected[~close].astype(np.float32))
    # each rule on its own against its formula
    consistent = np.array([[(b[y, x, 0] + bilinear(f, x + b[y, x, 0], y + b[y, x, 1])[0]) ** 2
                            + (b[y, x, 1] + bilinear(f, x + b[y, x, 0], y + b[y, x, 1])[1]) ** 2
                            < 0.01 * ((b[y, x] ** 2).sum() + (bilinear(f, x + b[y, x, 0], y + b[y, x, 1]) ** 2).sum())
                            + 0.5 for x in range(w)] for y in range(h)])
    assert np.array_equal(flow.consistent(b, f)[~close], consistent[~close])
    assert flow.motion_boundary(b)[3:7, 3].all()  # the left edge of the region: b jumps by 3 px
    assert not flow.motion_boundary(constant_flow(h, w, -1.0, 0.5)).any()  # a uniform flow has no boundary


def moving_square(width: int, height: int, frames: int, shift: tuple[int, int] = (3, 0), side: int = 24, *,
                  seed: int = 0) -> list[np.ndarray]:
    """Frames ``(H, W, 3)``: a still textured background, a textured square moving by ``shift`` px per frame
    from ``(width // 4, height // 4)``; its trailing edge uncovers a strip of background each frame."""
    background = moving_pattern(width, height, 1, square=False, seed=seed)[0]
    texture = moving_pattern(side, side, 1, square=False, seed=seed + 5)[0] * 0.6 + 0.4
    out = []
    for t in range(frames):
        image = background.copy()
        x, y = width // 4 + shift[0] * t, height // 4 + shift[1] * t
        image[y:y + side, x:x + side] = texture
        out.append(image)
    return out


def test_the_mask_flags_the_disoccluded_strip_behind_a_moving_square() -> None:
    width, height, side = 128, 96, 24
    frames = moving_square(width, height, 2, (3, 0), side=side)
    backward = flow.dis_flow(frames[1], frames[0])
    forward = flow.dis_flow(frames[0], frames[1])
    mask = flow.reliable(backward, forward)
    strip = np.zeros((height, width), bool)  # where the square was and no longer is: background seen anew
    strip[height // 4: height // 4 + side, width // 4: width // 4 + 3] = True
    assert 1 - mask[strip].mean() >= 0.5  # measured 0.62
    assert 1 - mask[~strip].mean() <= 0.15  # measured 0.08
    # with the true flows, exactly: the strip (b = 0 there, but f at x is the square's 3 px) is flagged
    true_b = np.zeros((height, width, 2), np.float32)
    true_b[height // 4: height // 4 + side, width // 4 + 3: width // 4 + 3 + side] = (-3, 0)
    true_f = np.zeros((height, width, 2), np.float32)
    true_f[height // 4: height // 4 + side, width // 4: width // 4 + side] = (3, 0)
    exact = flow.reliable(true_b, true_f)
    assert not exact[strip].any()


def test_warping_error_is_the_hand_computed_mean_over_reliable_pixels() -> None:
    h, w = 6, 8
    previous = np.zeros((h, w, 3), np.float32)
    current = np.zeros((h, w, 3), np.float32)
    current[..., 0] = 0.3  # red differs by 0.3 everywhere
    current[2, 3] = (1.0, 1.0, 1.0)
    zero = np.zeros((h, w, 2), np.float32)
    # still flows: every pixel reliable; squared differences averaged over channels then pixels
    per_pixel = np.full((h, w), 0.09 / 3)
    per_pixel[2, 3] = 1.0  # (1 + 1 + 1) / 3
    assert flow.pair_error(previous, current, zero, zero) == pytest.approx(per_pixel.mean(), rel=1e-6)
    # flows that disagree everywhere: no reliable pixel, so the mean over all pixels (of the warp)
    forward = constant_flow(h, w, 0.0, 0.0)
    backward = constant_flow(h, w, 5.0, 0.0)  # |0 + 5|^2 = 25 >= 0.01 * 25 + 0.5 wherever sampled
    assert not flow.reliable(forward, backward).any()
    assert flow.pair_error(previous, current, forward, backward) == pytest.approx(per_pixel.mean(), rel=1e-6)
    # a shift: current is previous moved 2 px right, so previous(x) = current(x + 2): forward flow +2, error 0
    rng = np.random.default_rng(1)
    base = rng.random((h, w + 2, 3)).astype(np.float32)
    previous, current = base[:, 2:], base[:, :-2]  # current(x) = base(x) = previous(x - 2)
    forward, backward = constant_flow(h, w, 2, 0), constant_flow(h, w, -2, 0)
    mask = flow.reliable(forward, backward) > 0
    assert mask[:, :-2].all() and not mask[:, -2:].any()  # the right 2 columns sample outside the frame
    assert flow.pair_error(previous, current, forward, backward) == pytest.approx(0.0, abs=1e-12)
    wrong = flow.pair_error(previous, current, backward, forward)  # the wrong direction: a large error
    assert wrong > 0.05
