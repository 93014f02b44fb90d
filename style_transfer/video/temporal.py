"""The start image of a video frame: the previous result warped into it by the flow, where the flow is reliable.

The temporal loss that holds a frame to it is ``losses.temporal``; its default weight ``video.DEFAULT_TEMPORAL_WEIGHT``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from . import flow


@dataclass
class FrameStart:
    """What frame t starts from: the warped previous result, the mask, and the start image."""

    warped: torch.Tensor  # (1, 3, H, W): the previous result warped into frame t
    mask: torch.Tensor  # (1, 1, H, W): 1 where the warp is reliable
    start: torch.Tensor  # (1, 3, H, W): the warp where reliable, the content frame elsewhere
    flow_seconds: float  # time spent on flow and masks


def frame_start(previous_output: torch.Tensor, previous_input: torch.Tensor, current_input: torch.Tensor) -> FrameStart:
    """Flows between the input frames t-1 and t, the mask, and frame t's warped start.

    Args:
        previous_output: the stylised frame t-1; previous_input, current_input: the input frames t-1 and t;
            all ``(1, 3, H, W)`` in [0, 1] of one size (the working size).
    """
    import time

    began = time.perf_counter()
    prev_in, cur_in, prev_out = (_hwc(t) for t in (previous_input, current_input, previous_output))
    backward = flow.dis_flow(cur_in, prev_in)  # t -> t-1
    forward = flow.dis_flow(prev_in, cur_in)  # t-1 -> t
    mask = flow.reliable(backward, forward)
    warped = flow.warp(prev_out, backward)
    start = warped * mask[..., None] + cur_in * (1 - mask[..., None])
    seconds = time.perf_counter() - began
    device = current_input.device
    return FrameStart(_tensor(warped, device), torch.from_numpy(np.ascontiguousarray(mask))[None, None].to(device),
                      _tensor(start, device).clamp(0, 1), seconds)


def _hwc(image: torch.Tensor) -> np.ndarray:
    return image.detach()[0].permute(1, 2, 0).float().cpu().numpy()


def _tensor(image: np.ndarray, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)[None].contiguous().to(device)
