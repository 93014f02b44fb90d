"""The jump guard: an evaluation whose loss jumps ends LBFGS's step, and the run goes back to the step's best.

``--fast`` guards every step (``fast.basis``). The default runs the tutorial's LBFGS unguarded and is rescued only once
one of its steps ends in a jump (``core.image.RescuedPixelImage``): from then on it is guarded the same way. How
the constants were measured: benchmarks/NOTEBOOK.md, 2026-12-02 "Time to quality" and 2026-12-04 "--fast never hands
back noise".
"""

from __future__ import annotations

import torch

# An evaluation whose loss is this many times the lowest of its LBFGS step ends the step: the run goes back to that
# lowest image with a fresh LBFGS (``JumpGuard.observe``): without it LBFGS's first steps in --fast's basis can jump the
# loss by orders of magnitude.
JUMP = 3.0
DAMPING = 4.0  # each jump divides LBFGS's learning rate by this; each step without one multiplies it by 2, up to 1
# Restarts in a row (no step without a jump between them) after which damping has not helped (``exhausted``): --fast
# then gives its basis up for the pixels (``fast.basis.FourierImage.run_step``): a step run unguarded instead could end
# in noise.
RESTARTS_IN_A_ROW = 3


class Jumped(Exception):
    """Raised from the closure when the loss jumped (``JUMP``): the image's basis restarts LBFGS from the step's
    best."""


class JumpGuard:
    """The jump guard over what LBFGS moves (``variable``): an evaluation whose loss is more than ``JUMP`` times the
    lowest of its LBFGS step ends the step (``Jumped``), the variable goes back to that step's lowest (``restart``)
    and LBFGS starts again, ``DAMPING`` times slower each time (``damped``), easing off after a clean step."""

    def __init__(self, variable: torch.Tensor) -> None:
        self.variable = variable
        self.restarts = 0
        self.in_a_row = 0  # restarts since the last step without a jump
        self.damping = 1.0  # the share of the learning rate LBFGS runs with now
        self.begin_step()

    def begin_step(self) -> None:
        """Forget the lowest loss seen: the jump guard looks within one LBFGS step (a checkpoint's span)."""
        self.best_loss = float("inf")
        self.best: torch.Tensor | None = None

    def observe(self, loss: float) -> None:
        """After an evaluation at the variable: keep it if its loss is the step's lowest.

        Raises:
            Jumped: the loss is more than ``JUMP`` times the step's lowest (``restart`` goes back there), when
                ``armed``.
        """
        if self.armed and loss > JUMP * self.best_loss:
            raise Jumped(f"the loss jumped to {loss:.4g}, {loss / self.best_loss:.1f}x the step's lowest")
        if loss < self.best_loss:
            self.best_loss = loss
            self.best = self.variable.detach().clone()

    @property
    def armed(self) -> bool:
        """Whether a jump ends the step; the basis's guard always is."""
        return True

    def damped(self, lr: float) -> float:
        """The learning rate after a jump, the run's own ``lr`` given: ``DAMPING`` times smaller than before."""
        self.damping /= DAMPING
        return lr * self.damping

    def ease(self, lr: float) -> float:
        """The learning rate after a step without a jump, the run's own ``lr`` given: twice the last, up to ``lr``."""
        self.damping = min(1.0, 2 * self.damping)
        return lr * self.damping

    @property
    def exhausted(self) -> bool:
        """``RESTARTS_IN_A_ROW`` restarts came with no clean step between: damping has not helped, give the basis up."""
        return self.in_a_row >= RESTARTS_IN_A_ROW

    def clean_step(self) -> None:
        """An LBFGS step ended without a jump: the restarts in a row start again from 0."""
        self.in_a_row = 0

    def resume(self, optimizer: torch.optim.Optimizer, lr: float) -> None:
        """Continue the damping and the restarts in a row as a checkpoint's ``optimizer`` state left them (``lr``:
        the run's own learning rate)."""
        self.damping = optimizer.param_groups[0]["lr"] / lr
        self.in_a_row = optimizer.param_groups[0].get("restarts_in_a_row", 0)

    def ended_clean(self, optimizer: torch.optim.Optimizer, lr: float) -> None:
        """An LBFGS step of ``optimizer`` ended without a jump: the restarts in a row start again from 0 and the
        damping eases off (``ease``; ``lr`` the run's own), in its state, where a checkpoint keeps them."""
        self.clean_step()
        optimizer.param_groups[0]["restarts_in_a_row"] = 0
        if self.damping < 1:
            optimizer.param_groups[0]["lr"] = self.ease(lr)

    def restarted(self, optimizer: torch.optim.Optimizer) -> None:
        """The fresh ``optimizer`` after a restart keeps the restarts in a row in its state (a checkpoint's)."""
        optimizer.param_groups[0]["restarts_in_a_row"] = self.in_a_row

    def restart(self) -> None:
        """Put back the step's lowest-loss variable (after ``Jumped``)."""
        assert self.best is not None  # a jump is measured against a loss seen, whose variable was kept
        with torch.no_grad():
            self.variable.copy_(self.best)
        self.restarts += 1
        self.in_a_row += 1
        self.begin_step()
