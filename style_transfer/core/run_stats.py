"""How the tutorial's loop went (``RunStats``): evaluations, a finite loss, the image kept on Ctrl-C."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..errors import Interrupted, NonFiniteLoss


@dataclass
class RunStats:
    """How a run went, filled in by the loop (pass one to ``stylize(..., stats=...)``).

    The loop also uses it to keep the last image whose loss was finite, so that a stopped
    run (Ctrl-C, a NaN loss) can hand back a good image.
    """

    evaluations: int = 0  # closure evaluations whose loss was finite
    converged: bool = False  # LBFGS converged: the gradient fell below its tolerance_grad; the run stopped
    # With ``keep_best`` (optimize's): the evaluation whose loss was the lowest, counted as ``evaluations`` counts.
    best_evaluation: int = 0
    best_loss: float = float("inf")
    last_loss: float = float("inf")
    handed_back: int | None = None  # the evaluation whose image the loop handed back; None: its last update
    # The evaluations after which the default's failed LBFGS steps were rescued (core/image.py, RescuedPixelImage)
    rescued_at: list[int] = field(default_factory=list)
    _image: torch.Tensor | None = field(default=None, repr=False)  # the image being optimised
    _last_good: torch.Tensor | None = field(default=None, repr=False)  # a copy, at the last finite loss
    _best: torch.Tensor | None = field(default=None, repr=False)  # that copy, at the lowest loss (keep_best)
    _keeping: bool = field(default=False, repr=False)

    def keep_best(self) -> None:
        """From now on also keep the image of the lowest finite loss (``best_image``); forget any kept before."""
        self._keeping, self._best, self.best_loss, self.best_evaluation = True, None, float("inf"), 0
        self.handed_back = None

    def keep_best_from(self, loss: float, evaluation: int, image: torch.Tensor) -> None:
        """``keep_best``, with the best so far as a checkpoint kept it (a resumed run hands back what the whole would)."""
        self.keep_best()
        self._best, self.best_loss, self.best_evaluation = image, float(loss), int(evaluation)

    def best_image(self) -> torch.Tensor | None:
        """The image of the lowest loss since ``keep_best`` (the loop's own copy, as evaluated), or None."""
        return self._best

    def check_finite(self, loss: float, image: torch.Tensor) -> None:
        """Count an evaluation whose ``loss`` (as the loop read it to the host) is finite and keep a copy of its image
        (``last_image``, and the best one's with ``keep_best``).

        Raises:
            NonFiniteLoss: the loss is NaN or infinite; it carries the last good image.
        """
        self._image = image
        if not math.isfinite(loss):
            kept = "no finite image to keep" if self._last_good is None else \
                f"kept the image of step {self.evaluations}"
            raise NonFiniteLoss(f"the loss became {loss} at step {self.evaluations + 1} (weights too "
                                f"large?); stopped, {kept}", self._good_image(), self.evaluations)
        self._last_good = image.detach().clone()
        self.evaluations += 1
        self.last_loss = loss
        if self._keeping and self.last_loss < self.best_loss:  # the copy just made: no second one
            self._best, self.best_loss, self.best_evaluation = self._last_good, self.last_loss, self.evaluations

    def stopped_early(self, optimizer: torch.optim.Optimizer, image: torch.Tensor, iterations_before: int,
                      unfinished: bool) -> bool:
        """True (and ``converged`` set) when the run is ``unfinished`` but the ``optimizer.step()``
        just run made no iteration: LBFGS found the gradient at its first evaluation below
        ``tolerance_grad`` and returned without moving the image.

        Only then may the loop stop: the tutorial's loop would evaluate the same image again
        and again until it passes ``num_steps``, so stopping gives the tutorial's image. A step
        that ends early on ``tolerance_change`` is not a stop: called again, LBFGS moves on,
        so the loop calls it again, as the tutorial does.
        """
        is_lbfgs = optimizer.param_groups[0].get("max_iter") is not None  # Adam never stops early
        done = optimizer.state[image].get("n_iter", 0) - iterations_before
        self.converged = unfinished and is_lbfgs and done == 0
        return self.converged

    def check_final(self, image: torch.Tensor) -> None:
        """Raise ``NonFiniteLoss`` if the result itself is not finite (LBFGS's last, unevaluated update)."""
        if not bool(torch.isfinite(image).all()):
            raise NonFiniteLoss(f"the image became non-finite after step {self.evaluations}; stopped, kept the "
                                f"image of step {self.evaluations}", self._good_image(), self.evaluations)

    def last_image(self) -> torch.Tensor | None:
        """The image the last finite evaluation saw (a copy, as the loop keeps it), or None."""
        return self._last_good

    def interrupted(self) -> Interrupted:
        """The ``Interrupted`` error for Ctrl-C now: the current image clamped, else the last good one."""
        image = None
        if self._image is not None and self.evaluations > 0:
            now = self._image.detach().clamp(0, 1).cpu()
            image = now if bool(torch.isfinite(now).all()) else self._good_image()
        return Interrupted(f"interrupted at step {self.evaluations}", image, self.evaluations)

    def _good_image(self) -> torch.Tensor | None:
        return None if self._last_good is None else self._last_good.clamp(0, 1).cpu()


def keeps_image_on_interrupt(function: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """Decorate the loop: give it a ``RunStats`` when the caller did not, and turn Ctrl-C
    (``KeyboardInterrupt``) into ``Interrupted`` carrying the current image."""

    @functools.wraps(function)
    def run(*args: object, stats: RunStats | None = None, **kwargs: object) -> torch.Tensor:
        stats = RunStats() if stats is None else stats
        try:
            return function(*args, stats=stats, **kwargs)
        except KeyboardInterrupt:
            raise stats.interrupted() from None

    return run
