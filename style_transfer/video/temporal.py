"""The start image of a video frame: the previous result warped into it by the flow, where the flow is reliable.

The temporal loss that holds a frame to it is ``losses.temporal``; its default weight ``video.DEFAULT_TEMPORAL_WEIGHT``.

Pixels the flow marks as new (disoccluded, or entering at the frame's edge) start from the content frame, and each
pixel's evaluations are counted through the flow (``FrameStart.evaluations``): the temporal loss holds a pixel only
once it has had ``SETTLE`` times the first frame's evaluations. A new strip is a small share of the frame's Gram
matrices, so the style pulls it weakly; held after one frame it stays close to the content and piles up as the
view moves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from . import flow

# Times the first frame's evaluations a new pixel runs before the temporal loss holds it (0: held in the frame after it
# appears). 2 brought a panned texture's entered band nearest the rest's style; 1, 3 and 4 left it further.
SETTLE = 2.0


@dataclass
class FrameStart:
    """What frame t starts from: the warped previous result, the masks, and the start image."""

    warped: torch.Tensor  # (1, 3, H, W): the previous result warped into frame t
    mask: torch.Tensor  # (1, 1, H, W): 1 where the temporal loss holds the pixel (reliable and settled)
    start: torch.Tensor  # (1, 3, H, W): the warp where reliable, the content frame elsewhere
    flow_seconds: float  # time spent on flow and masks
    reliable: torch.Tensor | None = None  # (1, 1, H, W): 1 where the warp is reliable (flow.reliable)
    evaluations: np.ndarray | None = None  # (H, W): evaluations each pixel had before frame t (0 where new)


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
    mask, carried = reliable, None
    if evaluations is not None:
        carried = carry(evaluations, backward, reliable)
        mask = reliable * (carried >= settled)
    seconds = time.perf_counter() - began
    device = current_input.device
    return FrameStart(_tensor(warped, device), _mask(mask, device), _tensor(start, device).clamp(0, 1), seconds,
                      _mask(reliable, device), carried)


def carried_evaluations(previous_input: torch.Tensor, current_input: torch.Tensor,
                        evaluations: np.ndarray) -> np.ndarray:
    """``FrameStart.evaluations`` alone: frame t-1's counts carried into t (for frames a resumed run skips)."""
    backward, reliable = _motion(_hwc(previous_input), _hwc(current_input))
    return carry(evaluations, backward, reliable)


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
