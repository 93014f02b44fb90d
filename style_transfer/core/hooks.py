"""The loop's hooked parts that need torch: a style model that takes part in the steps (``HookedModel``: the bf16
model of ``fast.fast``) and the image's basis (``ImageBasis``: ``parametrization.PixelImage``, the tutorial's clamp,
and ``parametrization.FourierImage``). The hook points themselves are ``step_hooks.StepHooks``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn, optim

from ..step_hooks import StepHooks


class HookedModel(nn.Module, StepHooks):
    """A style model that takes part in the loop's steps (``TransferSettings.accelerate`` returns one)."""


class ImageBasis(StepHooks):
    """What the optimiser moves to change the image (``parametrization``): ``variable``, with its ``optimizer``.

    The tutorial's is the pixels themselves (``PixelImage``); a basis may replace its optimiser after a step
    (``run_step``), so the loop reads both from here at every step.
    """

    variable: torch.Tensor
    optimizer: optim.Optimizer

    def run_step(self, step: Callable[[], None]) -> bool:
        """Run one step of the loop (``step``). Returns whether it was cut short and the optimiser started again."""
        step()
        return False

    def end_step(self, evaluations: int) -> None:
        """After a step, ``evaluations`` run so far, before a checkpoint may keep the optimiser's state: the image
        of the step's last update."""

    def hand_back(self, image: torch.Tensor) -> None:
        """At the run's end, under no_grad, where the run hands back its last update: write it into ``image``."""
