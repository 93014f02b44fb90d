"""The image the optimiser moves: the basis a run moves it in (``Basis``, ``Parts.basis``), the part of
the loop it hooks into (``ImageBasis``), and the pixels: the tutorial's as written (``PIXELS``) and the default's,
rescued where a step of the tutorial's LBFGS ends in a jump (``RESCUED``). The Fourier basis that ``--fast`` moves is
``fast.basis``, handed in from above: core imports none of fast.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import optim

from ..step_hooks import StepHooks
from .guard import JUMP, JumpGuard, Jumped
from .run_stats import RunStats
from .steps import LBFGS_MAX_ITER

# A step of the tutorial's LBFGS failed when its loss stayed above JUMP times the run's lowest for its last quarter:
# LBFGS had that long to come back and did not (random weights' jumps come back within a few evaluations).
PERSISTS = LBFGS_MAX_ITER // 4
# A rescued run hands back its lowest-loss image unless its last evaluation is within this share of it (--fast's).
KEEP_WITHIN = 0.05


class NewOptimizer(Protocol):
    """The loop's optimiser over a variable (``get_input_optimizer``), at a learning rate (None: the run's own), its
    LBFGS's two-loop ``two_loop`` (None: the run's own)."""

    def __call__(self, variable: torch.Tensor, rate: float | None, two_loop: str | None = None) -> optim.Optimizer: ...


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
    """What the optimiser moves (``core.transfer.Parts.basis``): ``PIXELS`` (the tutorial's) or
    ``fast.basis.FOURIER``."""

    @property
    def name(self) -> str:
        """As ``StyleConfig.parametrization`` names it."""

    @property
    def keep_within(self) -> float | None:
        """The run hands back its best evaluated image unless its last evaluation's loss is within this share of
        it (None: LBFGS's last update, as the tutorial does)."""

    def image(self, image: torch.Tensor, new_optimizer: NewOptimizer, state: dict[str, Any] | None, *,
              lr: float, optimizer_name: str, planned: int, stats: RunStats) -> ImageBasis:
        """The run's ``ImageBasis`` over ``image``: ``state`` a checkpoint's optimiser state (loaded here), ``lr``
        the run's learning rate, ``planned`` the evaluations it plans (``planned_evaluations``), ``stats`` the run's
        (where a rescue is noted)."""


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


class RescuedPixelImage(PixelImage):
    """The default's: the tutorial's pixels and LBFGS, every evaluation left as the tutorial computes it, until an
    LBFGS step ends with its loss above ``JUMP`` times the run's lowest for its last ``PERSISTS`` evaluations.

    Such a step failed: on a strong style (a loss near 1e9) torch's LBFGS stores no first curvature pair (its
    curvature is negative) and steps along the gradient at the whole learning rate, which throws every pixel out of
    [0, 1] and the photo out of the picture, and the tutorial's run does not bring it back. A jump LBFGS comes back
    from within the step, as random weights' do, is the tutorial's and left alone. A failed step is rescued
    (``stats.rescued_at``): the image goes back to the lowest-loss one evaluated, and the rest of the run is guarded
    as ``--fast``'s steps are: a fresh LBFGS that keeps its first steps in scale (the stacked two-loop, core/lbfgs.py),
    and a jump within a step sends it back to that step's best at a quarter of the learning rate (``JumpGuard``).

    It hands back its lowest-loss image where the run was rescued and its last evaluation is more than ``KEEP_WITHIN``
    above it, or where the last evaluation ended above the first (otherwise LBFGS's last update, the tutorial's). The
    lowest-loss image is the one ``stats`` keeps (``RunStats.keep_best``: the copy it makes of each evaluated image).
    Its losses and the rescue travel in the optimiser's ``param_groups``, so a checkpoint resumes them.
    """

    def __init__(self, image: torch.Tensor, new_optimizer: NewOptimizer, state: dict[str, Any] | None, *,
                 base_lr: float, stats: RunStats) -> None:
        group = state["param_groups"][0] if state is not None and state.get("param_groups") else {}
        self.image = self.variable = image
        self.new_optimizer, self.base_lr, self.stats = new_optimizer, base_lr, stats
        # This size's rescues (a coarse-to-fine run makes one of these per size); the run's are in stats
        self.rescued_at: list[int] = list(group.get("rescued_at", ()))
        stats.rescued_at.extend(n for n in self.rescued_at if n not in stats.rescued_at)
        if group.get("best_image") is not None:  # the lowest-loss image so far, as the checkpoint kept it
            stats.keep_best_from(group["best_loss"], group["best_evaluation"], group["best_image"].to(image.device))
        else:
            stats.keep_best()
        self.first_loss: float | None = group.get("first_loss")
        self.above: int = group.get("above", 0)  # evaluations in a row above JUMP times the lowest before them
        self.last_loss = float("inf")
        self.guard = JumpGuard(image) if self.rescued_at else None
        self.optimizer = new_optimizer(image, None, "stacked" if self.guard is not None else None)
        if state is not None:
            self.optimizer.load_state_dict(state)
            if self.guard is not None:  # the damped learning rate and restarts continue as the checkpoint left them
                self.guard.resume(self.optimizer, base_lr)

    def start_step(self, evaluations: int) -> None:
        if self.guard is not None:
            self.guard.begin_step()

    def after_evaluation(self, loss: float) -> None:
        self.last_loss = loss
        if self.first_loss is None:
            self.first_loss = loss
        # stats counted this loss before the hooks: a lower one is its best now, and no loss is above 3x itself
        self.above = self.above + 1 if loss > JUMP * self.stats.best_loss else 0
        if self.guard is not None:
            self.guard.observe(loss)  # a loss that jumped ends the step (Jumped): back to the step's best

    def run_step(self, step: Callable[[], None]) -> bool:
        guard = self.guard
        if guard is None:  # the tutorial's step, untouched; a failed one is rescued
            step()
            if self.above < PERSISTS:
                return False
            lowest = self.stats.best_image()
            assert lowest is not None  # the losses above were measured against a lower one seen
            with torch.no_grad():
                self.image.copy_(lowest)
            self.rescued_at.append(self.stats.evaluations)
            self.stats.rescued_at.append(self.stats.evaluations)
            self.guard, self.above = JumpGuard(self.image), 0
            self.optimizer = self.new_optimizer(self.image, self.base_lr, "stacked")
            return True
        try:
            step()
        except Jumped:  # the step's best, a fresh LBFGS from there, damped
            guard.restart()
            self.optimizer = self.new_optimizer(self.image, guard.damped(self.base_lr), "stacked")
            guard.restarted(self.optimizer)
            return True
        guard.ended_clean(self.optimizer, self.base_lr)
        return False

    def end_step(self, evaluations: int) -> None:
        stats = self.stats
        self.optimizer.param_groups[0].update(  # kept by a checkpoint's state_dict
            rescued_at=list(self.rescued_at), first_loss=self.first_loss, above=self.above,
            best_image=stats.best_image(), best_loss=stats.best_loss, best_evaluation=stats.best_evaluation)

    def hand_back(self, image: torch.Tensor) -> None:
        lowest, stats = self.stats.best_image(), self.stats
        if lowest is None or self.first_loss is None:
            return
        rescued = bool(self.rescued_at) and self.last_loss > (1 + KEEP_WITHIN) * stats.best_loss
        if rescued or self.last_loss > self.first_loss:
            image.copy_(lowest)
            stats.handed_back = stats.best_evaluation


@dataclass(frozen=True)
class Pixels:
    """The pixels: the tutorial's loop as written (``PIXELS``: LBFGS's last update handed back), or the default's,
    rescued where a step fails (``RESCUED``: with LBFGS; ``RescuedPixelImage``)."""

    name: str = "pixels"
    keep_within: float | None = None
    rescued: bool = False

    def image(self, image: torch.Tensor, new_optimizer: NewOptimizer, state: dict[str, Any] | None, *,
              lr: float, optimizer_name: str, planned: int, stats: RunStats) -> ImageBasis:
        if self.rescued and optimizer_name == "lbfgs":
            return RescuedPixelImage(image, new_optimizer, state, base_lr=lr, stats=stats)
        return PixelImage(image, new_optimizer, state)


PIXELS = Pixels()
RESCUED = Pixels(rescued=True)
