"""How many closure evaluations the tutorial's loop runs, and how each of its steps is cut into ``optimizer.step``
calls, without torch (the command shows the count before torch loads)."""

from __future__ import annotations

from typing import NamedTuple

TORCH_LBFGS_HISTORY = 100  # torch.optim.LBFGS's default history_size, the tutorial's
LBFGS_MAX_ITER = 20  # torch.optim.LBFGS's default max_iter: evaluations per optimizer.step()


def planned_evaluations(num_steps: int, optimizer_name: str = "lbfgs") -> int:
    """The evaluations the tutorial's loop runs for ``num_steps`` when every LBFGS step runs in full.

    The loop calls ``optimizer.step`` while at most ``num_steps`` evaluations ran, and each LBFGS step
    runs up to ``LBFGS_MAX_ITER`` (20): 300 steps run 320. A step that ends early (its loss stops
    changing) makes the run end sooner or, rarely, one step later. Adam: one evaluation a step.
    """
    if optimizer_name == "adam":
        return num_steps + 1
    return LBFGS_MAX_ITER * (num_steps // LBFGS_MAX_ITER + 1)


class OptimizerStep(NamedTuple):
    """One ``optimizer.step`` of a step of the loop."""

    iterations: int  # LBFGS's iterations at most (its evaluations but for a step that stops early); Adam's: 1
    last: bool  # it runs the run's last evaluations (where a bf16 run finishes in float32)


def step_parts(done: int, num_steps: int, finish: int = 0, optimizer_name: str = "lbfgs") -> tuple[OptimizerStep, ...]:
    """The ``optimizer.step`` calls of the loop's next step, ``done`` evaluations run: one of ``LBFGS_MAX_ITER``
    iterations (Adam: of one evaluation). The step that may pass ``num_steps`` is the run's last; where a hook ends
    the run with ``finish`` evaluations of their own (a bf16 run's float32 finish, ``StepHooks.finish_evaluations``)
    an LBFGS last step is two: the rest of its iterations, then those."""
    last = done + LBFGS_MAX_ITER > num_steps
    if optimizer_name != "lbfgs":
        return (OptimizerStep(1, last),)
    if last and 0 < finish < LBFGS_MAX_ITER:
        return OptimizerStep(LBFGS_MAX_ITER - finish, False), OptimizerStep(finish, True)
    return (OptimizerStep(LBFGS_MAX_ITER, last),)
