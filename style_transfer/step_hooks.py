"""The points of the tutorial's loop where an option adds its part (``StepHooks``), declared once, torch-free.

``core.transfer.optimize`` runs the tutorial's LBFGS loop and calls every hook it is given at each point, in order;
it never asks an object what it can do. What implements them: the image's basis (``core.image``, ``fast.basis``), a bf16
style model's float32 start and finish (``fast.fast.FastStyleModel``) and the sliced loss's held draws
(``losses.statistics.SlicedStyleLoss``). At the root, below ``losses`` and ``core``, so that both can implement it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


class StepHooks:
    """What an option does at the loop's points; each default does nothing, so a hook names only its own."""

    def finish_evaluations(self) -> int:
        """Evaluations the run's last LBFGS step ends with as a step of their own (0: none; the bf16 finish)."""
        return 0

    def start_step(self, evaluations: int) -> None:
        """Before each step of the loop, ``evaluations`` run so far (a step is one ``optimizer.step``, or two
        where the run's last LBFGS step ends with ``finish_evaluations`` of its own)."""

    def switches_arithmetic(self, last: bool) -> bool:
        """Before each ``optimizer.step``, ``last`` when it runs the run's last evaluations.

        Returns:
            whether its first evaluation runs in another arithmetic than the one before it, so LBFGS must keep no
            curvature pair across the change.
        """
        return False

    def before_evaluation(self, image: torch.Tensor) -> None:
        """Before each evaluation: what the image holds (the tutorial's clamp, or a basis's decoded image)."""

    def after_backward(self, image: torch.Tensor) -> None:
        """After an evaluation's backward, ``image.grad`` set, before the evaluation is counted and reported."""

    def after_evaluation(self, loss: float) -> None:
        """After the evaluation was reported, with its loss (a basis's jump guard may end the step here)."""
