"""Optical flow (OpenCV's DIS), warping, and Ruder et al.'s reliability masks.

Conventions: images are ``(H, W, C)`` or ``(H, W)`` float32 numpy arrays; a flow is ``(H, W, 2)`` float32,
``flow[y, x] = (u, v)`` in pixels. The backward flow ``b`` of frame t points from t to t-1: frame t's pixel
x is seen at ``x + b(x)`` in frame t-1, so ``warp(previous, b)`` brings frame t-1 into frame t. The forward
flow ``f`` points from t-1 to t.

Masks (Ruder, Dosovitskiy and Brox 2016, as their consistencyChecker computes them): a pixel x of frame t
is unreliable where the flows disagree,

    |b + f~|^2 >= 0.01 (|b|^2 + |f~|^2) + 0.5,    f~ = f(x + b(x)) (bilinear),

or on a motion boundary,

    |grad b_u|^2 + |grad b_v|^2 > 0.01 |b|^2 + 0.002    (forward differences, 0 at the last row/column),

or where ``x + b(x)`` falls outside frame t-1 (nothing there to warp from). ``reliable`` is 1 elsewhere.
"""

from __future__ import annotations

import numpy as np

from . import require

OUTSIDE_UNRELIABLE = True  # the out-of-frame rule (Ruder's code has it; the formulas do not say it)


def to_gray(image: np.ndarray) -> np.ndarray:
    """An RGB image in [0, 1] ``(H, W, 3)`` as uint8 gray ``(H, W)`` (what DIS takes), BT.601 weights."""
    gray = image[..., 0] * 0.299 + image[..., 1] * 0.587 + image[..., 2] * 0.114
    return np.clip(np.rint(gray * 255), 0, 255).astype(np.uint8)


def dis_flow(source: np.ndarray, target: np.ndarray, preset: str = "medium") -> np.ndarray:
    """The flow from ``source`` to ``target`` (``source(x) ~ target(x + flow(x))``) by OpenCV's DIS.

    Args:
        source, target: RGB ``(H, W, 3)`` in [0, 1] or uint8 gray ``(H, W)``.
        preset: DIS's ``ultrafast``, ``fast`` or ``medium`` (the default: the most accurate).
    """
    cv2 = require("cv2")
    presets = {"ultrafast": cv2.DISOPTICAL_FLOW_PRESET_ULTRAFAST, "fast": cv2.DISOPTICAL_FLOW_PRESET_FAST,
               "medium": cv2.DISOPTICAL_FLOW_PRESET_MEDIUM}
    dis = cv2.DISOpticalFlow_create(presets[preset])
    a = source if source.ndim == 2 else to_gray(source)
    b = target if target.ndim == 2 else to_gray(target)
    return dis.calc(a, b, None).astype(np.float32)


def sample(image: np.ndarray, flow: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``image`` sampled at ``x + flow(x)`` (bilinear; edge pixels repeated outside), and where that is inside.

    Plain numpy in float32 (OpenCV's ``remap`` rounds positions to 1/32 px).

    Returns:
        ``(warped, inside)``: ``warped`` has ``image``'s shape; ``inside`` is a bool ``(H, W)``.
    """
    h, w = flow.shape[:2]
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    x, y = xs + flow[..., 0], ys + flow[..., 1]
    inside = (x >= 0) & (x <= w - 1) & (y >= 0) & (y <= h - 1)
    x, y = np.clip(x, 0, w - 1), np.clip(y, 0, h - 1)
    x0, y0 = np.floor(x).astype(np.intp), np.floor(y).astype(np.intp)
    x1, y1 = np.minimum(x0 + 1, w - 1), np.minimum(y0 + 1, h - 1)
    ax, ay = x - x0, y - y0
    if image.ndim == 3:
        ax, ay = ax[..., None], ay[..., None]
    image = np.asarray(image, dtype=np.float32)
    top = image[y0, x0] * (1 - ax) + image[y0, x1] * ax
    bottom = image[y1, x0] * (1 - ax) + image[y1, x1] * ax
    return (top * (1 - ay) + bottom * ay).astype(np.float32), inside


def warp(image: np.ndarray, flow: np.ndarray) -> np.ndarray:
    """``image`` sampled at ``x + flow(x)``: with the backward flow of frame t, frame t-1 brought into t."""
    return sample(image, flow)[0]


def consistent(backward: np.ndarray, forward: np.ndarray) -> np.ndarray:
    """Ruder's forward-backward check: True where ``|b + f~|^2 < 0.01 (|b|^2 + |f~|^2) + 0.5``."""
    f_at, _ = sample(forward, backward)
    mismatch = ((backward + f_at) ** 2).sum(-1)
    return mismatch < 0.01 * ((backward ** 2).sum(-1) + (f_at ** 2).sum(-1)) + 0.5


def motion_boundary(backward: np.ndarray) -> np.ndarray:
    """Ruder's motion boundaries: True where ``|grad b_u|^2 + |grad b_v|^2 > 0.01 |b|^2 + 0.002``."""
    dx = np.zeros_like(backward)
    dy = np.zeros_like(backward)
    dx[:, :-1] = backward[:, 1:] - backward[:, :-1]
    dy[:-1] = backward[1:] - backward[:-1]
    gradient = (dx ** 2 + dy ** 2).sum(-1)
    return gradient > 0.01 * (backward ** 2).sum(-1) + 0.002


def reliable(backward: np.ndarray, forward: np.ndarray) -> np.ndarray:
    """The reliability mask of frame t, float32 ``(H, W)``: 1 where the warp from t-1 can be trusted, else 0.

    Args:
        backward: the flow t -> t-1; forward: the flow t-1 -> t.
    """
    mask = consistent(backward, forward) & ~motion_boundary(backward)
    if OUTSIDE_UNRELIABLE:
        mask &= sample(backward[..., :1], backward)[1]
    return mask.astype(np.float32)


def warping_error(outputs: list[np.ndarray], inputs: list[np.ndarray]) -> float:
    """Lai et al. 2018's warping error: the flicker of ``outputs`` measured with the flow of ``inputs``.

    For each pair (t-1, t): output t warped back to t-1 with the inputs' flow t-1 -> t, the mean squared
    difference to output t-1 over the pixels reliable for that warp (RGB in [0, 1], averaged over channels;
    over all pixels when none is reliable); averaged over the pairs.

    Args:
        outputs, inputs: the frames, ``(H, W, 3)`` float32 in [0, 1], the same count and size.
    """
    if len(outputs) != len(inputs) or len(outputs) < 2:
        raise ValueError(f"warping_error needs two or more output frames and as many inputs, got "
                         f"{len(outputs)} and {len(inputs)}")
    errors = [pair_error(outputs[t - 1], outputs[t], dis_flow(inputs[t - 1], inputs[t]),
                         dis_flow(inputs[t], inputs[t - 1])) for t in range(1, len(outputs))]
    return float(np.mean(errors))


def pair_error(previous: np.ndarray, current: np.ndarray, forward: np.ndarray, backward: np.ndarray) -> float:
    """One pair's warping error: ``current`` warped to the previous frame by ``forward`` (t-1 -> t), the mean
    squared difference to ``previous`` over the pixels ``reliable(forward, backward)`` marks (all if none)."""
    mask = reliable(forward, backward) > 0
    squared = ((warp(current, forward) - previous) ** 2).mean(-1)
    return float(squared[mask].mean() if mask.any() else squared.mean())
