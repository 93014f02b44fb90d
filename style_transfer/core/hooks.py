"""The loop's hooked style model, which needs torch: a style model that takes part in the steps (``HookedModel``:
the bf16 model of ``fast.fast``). The image's basis is ``core.image``; the hook points are ``step_hooks.StepHooks``.
"""

from __future__ import annotations

from torch import nn

from ..step_hooks import StepHooks


class HookedModel(nn.Module, StepHooks):
    """A style model that takes part in the loop's steps (``Parts.accelerate`` returns one)."""
