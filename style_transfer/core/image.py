"""The image the optimiser moves: the basis a run moves it in (``Basis``, ``TransferSettings.basis``), the part of
the loop it hooks into (``ImageBasis``), and the tutorial's own, the pixels (``PIXELS``). The Fourier basis that
``--fast`` moves is ``fast.basis``, handed in from above: core imports none of fast.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import optim

from ..step_hooks import StepHooks

# The loop's optimiser over a variable, at a learning rate (None: the run's own; get_input_optimizer).
NewOptimizer = Callable[[torch.Tensor, "float | None"], optim.Optimizer]


class ImageBasis(StepHooks):
    """What the optimiser moves to change the image, for one run: ``variable``, with its ``optimizer``.

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


class Basis(Protocol):
    """What the optimiser moves (``TransferSettings.basis``): ``PIXELS`` (the tutorial's) or ``fast.basis.FOURIER``."""

    @property
    def name(self) -> str:
        """As ``StyleConfig.parametrization`` names it."""

    @property
    def keep_within(self) -> float | None:
        """The run hands back its best evaluated image unless its last evaluation's loss is within this share of
        it (None: LBFGS's last update, as the tutorial does)."""

    def image(self, image: torch.Tensor, new_optimizer: NewOptimizer, state: dict[str, Any] | None, *,
              lr: float, optimizer_name: str, planned: int) -> ImageBasis:
        """The run's ``ImageBasis`` over ``image``: ``state`` a checkpoint's optimiser state (loaded here), ``lr``
        the run's learning rate, ``planned`` the evaluations it plans (``planned_evaluations``)."""


class PixelImage(ImageBasis):
    """The tutorial's: the optimiser moves the image's pixels, clamped to [0, 1] before each evaluation."""

    def __init__(self, image: torch.Tensor, new_optimizer: NewOptimizer, state: dict[str, Any] | None) -> None:
        self.image = self.variable = image
        self.optimizer = new_optimizer(image, None)
        if state is not None:
            self.optimizer.load_state_dict(state)

    def before_evaluation(self, image: torch.Tensor) -> None:
        with torch.no_grad():
            image.clamp_(0, 1)


@dataclass(frozen=True)
class Pixels:
    """The tutorial's basis: the pixels, LBFGS's last update handed back."""

    name: str = "pixels"
    keep_within: float | None = None

    def image(self, image: torch.Tensor, new_optimizer: NewOptimizer, state: dict[str, Any] | None, *,
              lr: float, optimizer_name: str, planned: int) -> ImageBasis:
        return PixelImage(image, new_optimizer, state)


PIXELS = Pixels()
