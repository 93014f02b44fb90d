"""How many closure evaluations the tutorial's loop runs, without torch (the command shows it before torch loads)."""

from __future__ import annotations

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
