"""The start image of a video frame: the previous result warped into it by the flow, where the flow is reliable.

The temporal loss that holds a frame to it is ``losses.temporal``; its default weight ``video.DEFAULT_TEMPORAL_WEIGHT``.

Pixels the flow marks as new (disoccluded, or entering at the frame's edge) start from the content frame, and each
pixel's evaluations are counted through the flow (``FrameStart.evaluations``): the temporal loss holds a pixel only
once it has had ``SETTLE`` times the first frame's evaluations. A new strip is a small share of the frame's Gram
matrices, so the style pulls it weakly: from the content it stays pale and, carried along, piles up as the view moves.
So a frame whose new pixels make a region (``PAINT_SHARE``) is first painted on its own as a still (the first frame's
evaluations), and those pixels start from that painting instead (``painted``) and count as settled.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F

from . import flow, require

# Times the first frame's evaluations a new pixel runs before the temporal loss holds it (0: held in the frame after it
# appears). 2 brought a panned texture's entered band nearest the rest's style; 1, 3 and 4 left it further.
SETTLE = 2.0
# A frame is painted first when its new pixels, opened by 3x3 (so that pixels where the flows disagree on noise
# alone do not count: a still clip's noise marked 2 % of its pixels, none after the opening), cover this share of it.
PAINT_SHARE = 0.002
# px: the painting reaches this far into the warp around what it paints, blended, and the temporal loss does not hold
# there this frame, so the seam is worked on (a panned clip's entered part showed fainter vertical lines than without).
SEAM = 2


@dataclass
class FrameStart:
    """What frame t starts from: the warped previous result, the masks, and the start image."""

    warped: torch.Tensor  # (1, 3, H, W): the previous result warped into frame t
    mask: torch.Tensor  # (1, 1, H, W): 1 where the temporal loss holds the pixel (reliable and settled)
    start: torch.Tensor  # (1, 3, H, W): the warp where reliable, the content frame elsewhere
    flow_seconds: float  # time spent on flow and masks
    reliable: torch.Tensor | None = None  # (1, 1, H, W): 1 where the warp is reliable (flow.reliable)
    evaluations: np.ndarray | None = None  # (H, W): evaluations each pixel had before frame t (0 where new)
    paint: torch.Tensor | None = None  # (1, 1, H, W): 1 on the pixels to start from a painting (``painted``); None:
    # no painting (the new pixels make no region)


def frame_start(previous_output: torch.Tensor, previous_input: torch.Tensor, current_input: torch.Tensor,
                evaluations: np.ndarray | None = None, settled: float = 0.0) -> FrameStart:
    """Flows between the input frames t-1 and t, the masks, and frame t's warped start.

    Args:
        previous_output: the stylised frame t-1; previous_input, current_input: the input frames t-1 and t;
            all ``(1, 3, H, W)`` in [0, 1] of one size (the working size).
        evaluations: ``(H, W)``, the evaluations each pixel of frame t-1 has had, its own included (None: every
            pixel settled). settled: the evaluations after which the temporal loss holds a pixel.
    """
    import time

    began = time.perf_counter()
    prev_in, cur_in, prev_out = (_hwc(t) for t in (previous_input, current_input, previous_output))
    backward, reliable = _motion(prev_in, cur_in)
    warped = flow.warp(prev_out, backward)
    start = warped * reliable[..., None] + cur_in * (1 - reliable[..., None])
    carried = None if evaluations is None else carry(evaluations, backward, reliable)
    mask = reliable if carried is None else reliable * (carried >= settled)
    new, carried = settle(reliable, carried, settled)
    seconds = time.perf_counter() - began
    device = current_input.device
    paint = _mask(new, device) if new is not None else None
    return FrameStart(_tensor(warped, device), _mask(mask, device), _tensor(start, device).clamp(0, 1), seconds,
                      _mask(reliable, device), carried, paint)


def settle(reliable: np.ndarray, carried: np.ndarray | None, settled: float) -> tuple[np.ndarray | None,
                                                                                    np.ndarray | None]:
    """The pixels to paint, those the flow marks as new (None: they make no region, the frame is not painted), and
    the counts ``carried`` after it: the painted pixels count as ``settled``."""
    new = reliable < 1
    if _opened(new).mean() < PAINT_SHARE:
        return None, carried
    if carried is not None:
        carried = np.where(new, np.float32(settled), carried).astype(np.float32)
    return new.astype(np.float32), carried


def painted(start: FrameStart, painting: torch.Tensor) -> FrameStart:
    """``start`` with the pixels ``start.paint`` marks taken from ``painting`` (the frame run as a still), blended into
    the warp over ``SEAM`` px around them, where the temporal loss does not hold this frame."""
    if start.paint is None:
        return start
    width = 2 * SEAM + 1
    keep = 1 - F.max_pool2d(start.paint, width, 1, SEAM)  # 0 on the painted pixels and the seam around them
    blend = F.avg_pool2d(keep, width, 1, SEAM, count_include_pad=False)  # still 0 on the painted pixels
    begin = blend * start.warped + (1 - blend) * painting.to(start.warped)
    return replace(start, start=begin.clamp(0, 1), mask=start.mask * keep)


def _opened(region: np.ndarray) -> np.ndarray:
    """A morphological opening by 3x3: ``region`` without its parts thinner than 3 px, but for those along the frame's
    edge (outside counts as in the region): a thin strip entering there stays."""
    cv2 = require("cv2")
    return cv2.morphologyEx(region.astype(np.uint8), cv2.MORPH_OPEN, np.ones((3, 3), np.uint8)) > 0


def carried_evaluations(previous_input: torch.Tensor, current_input: torch.Tensor,
                        evaluations: np.ndarray, settled: float) -> np.ndarray:
    """``FrameStart.evaluations`` alone: frame t-1's counts carried into t, painted pixels settled (for frames a
    resumed run skips)."""
    backward, reliable = _motion(_hwc(previous_input), _hwc(current_input))
    counts = settle(reliable, carry(evaluations, backward, reliable), settled)[1]
    assert counts is not None
    return counts


def carry(evaluations: np.ndarray, backward: np.ndarray, reliable: np.ndarray) -> np.ndarray:
    """Each pixel's evaluations warped from frame t-1 into t (bilinear), 0 where the warp is not reliable."""
    return (flow.warp(evaluations.astype(np.float32), backward) * reliable).astype(np.float32)


def _motion(prev_in: np.ndarray, cur_in: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    backward = flow.dis_flow(cur_in, prev_in)  # t -> t-1
    forward = flow.dis_flow(prev_in, cur_in)  # t-1 -> t
    return backward, flow.reliable(backward, forward)


def _hwc(image: torch.Tensor) -> np.ndarray:
    return image.detach()[0].permute(1, 2, 0).float().cpu().numpy()


def _tensor(image: np.ndarray, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)[None].contiguous().to(device)


def _mask(mask: np.ndarray, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(mask, dtype=np.float32))[None, None].to(device)
