"""Ruder et al.'s short-term temporal loss, for video (the start image of a frame: ``video.temporal``).

For frame t with ``w`` the previous stylised frame warped into t (``flow.warp`` with the backward flow) and
``c`` the reliability mask (``flow.reliable``), the loss is

    temporal_weight * L0 * 1/D * sum_k c_k (x_k - w_k)^2,    D = 3 H W (every pixel and channel; Ruder's form),

with ``L0`` the frame's content and style loss at its start (``calibrate``, from its first evaluation, where the
term is 0: the start is the warp wherever ``c = 1``). Ruder's weight is absolute, so its balance against the style
and content terms moves with the network's input scale, the loss weights, the size and how far a frame is from
converged; scaled by ``L0`` it does not. And it bounds the flicker: a frame that hands back an image whose total
loss is at most ``L0`` (its best evaluated one: ``video.runner`` runs it with ``keep_best=0``) has
``1/D sum c (x - w)^2 <= 1 / temporal_weight``. Images in [0, 1]; a frame with no reliable pixel has no term.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class TemporalLoss(nn.Module):
    """A transparent loss module on the image itself: stores ``.loss`` and returns its input.

    Args:
        target: the warped previous result ``(1, 3, H, W)`` in [0, 1].
        mask: the reliability mask ``(1, 1, H, W)`` (1 reliable, 0 not).
        weight: the temporal weight, relative to the frame's start loss (``calibrate``; until then the term is 0).

    Coarse-to-fine runs see the image at smaller sizes first: target and mask are resized to it
    (bilinear) then.
    """

    target: torch.Tensor
    mask: torch.Tensor

    def __init__(self, target: torch.Tensor, mask: torch.Tensor, weight: float) -> None:
        super().__init__()
        self.register_buffer("target", target.detach().float())
        self.register_buffer("mask", mask.detach().float())
        self.weight = float(weight)
        self.start_loss: float | None = None  # L0: the frame's loss at its first evaluation (calibrate)
        self.loss: torch.Tensor = torch.zeros(())

    def calibrate(self, start_loss: float) -> None:
        """Take ``start_loss`` as the frame's L0, once (later calls change nothing): the content, style and other
        terms of the frame's first evaluation, at its start image, where this term and its gradient are 0."""
        if self.start_loss is None:
            self.start_loss = float(start_loss)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        target, mask = self.target, self.mask
        if input.shape[-2:] != target.shape[-2:]:
            target = F.interpolate(target, size=input.shape[-2:], mode="bilinear", align_corners=False)
            mask = F.interpolate(mask, size=input.shape[-2:], mode="bilinear", align_corners=False)
        scale = self.weight * (self.start_loss or 0.0)
        self.loss = scale * (mask * (input - target) ** 2).mean()
        return input
