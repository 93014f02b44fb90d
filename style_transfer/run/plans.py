"""What a run will do, worked out before it starts and without torch: its sizes, the evaluations each
size runs (``--fast``'s share of the steps from its ``fast.speed.Speed``).

``Run`` follows this plan, the progress bar and the web page show its total from the start, and
``stylize --print-config`` prints it before any model loads (this module imports no torch).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..config.choices import CPU_DEFAULT_SIZE, GPU_DEFAULT_SIZE, LATER_SHARE
from ..config.checks import filled
from ..config.style import StyleConfig
from ..core.steps import planned_evaluations  # the plan's counts are the loop's
from ..fast.speed import Speed, resolve_speed


def scale_sizes(size: int, scales: int = 1, min_size: int | None = None) -> list[int]:
    """The working sizes of a coarse-to-fine run, smallest first, ending at ``size``.

    ``scales`` sizes spaced by a factor of 2 (``size/2^(scales-1)``, ..., ``size``); or, with
    ``min_size``, sizes from ``min_size`` up to ``size`` spaced by at most a factor of 2.
    No size is below 16 px.
    """
    if min_size is not None and min_size < size:
        count = math.ceil(math.log2(size / min_size)) + 1
        ratio = (size / min_size) ** (1 / (count - 1))
        sizes = [round(min_size * ratio**k) for k in range(count - 1)] + [size]
    else:
        sizes = [round(size / 2**k) for k in range(scales - 1, 0, -1)] + [size]
    return [max(16, s) for s in sizes]


def scale_budgets(total_steps: int, count: int, scale_steps: Sequence[int] | None = None,
                  first: int | None = None) -> list[int]:
    """Evaluations per scale, smallest first: ``scale_steps`` when given; else the first size ``first`` (a run at
    one size's budget; None: ``total_steps``), where the picture's composition is set, and each larger size
    ``LATER_SHARE`` of ``total_steps`` (at least one), which refines the size before it, upsampled.
    """
    if scale_steps:
        if len(scale_steps) != count:
            raise ValueError(f"scale_steps has {len(scale_steps)} entries for {count} sizes; give one per size")
        return list(scale_steps)
    later = max(1, round(LATER_SHARE * total_steps))
    return [total_steps if first is None else first] + [later] * (count - 1)


@dataclass(frozen=True)
class RunPlan:
    """The sizes of a run and what each runs (smallest size first)."""

    sizes: tuple[int, ...]  # working sizes (long side, px)
    budgets: tuple[int, ...]  # evaluations asked for per size (--steps, or its coarse-to-fine split)
    loop_steps: tuple[int, ...]  # num_steps handed to the tutorial's loop per size
    evaluations: tuple[int, ...]  # what each size runs: its budget in whole LBFGS steps

    @property
    def total(self) -> int:
        """The evaluations the whole run plans (``StepInfo.total``)."""
        return sum(self.evaluations)


def plan_run(config: StyleConfig, size: int, speed: Speed | None = None) -> RunPlan:
    """The plan of a run of ``config`` at ``size`` px (``config.size``, or the device's default), at ``speed`` (the
    run's ``fast.speed.Speed``; None: ``config``'s).

    Raises:
        ValueError: ``scale_steps`` does not give one entry per size.
    """
    speed = speed if speed is not None else resolve_speed(config)  # the share does not depend on the device
    sizes = scale_sizes(size, filled(config.scales), config.min_size)  # [size] unless coarse-to-fine
    share = speed.steps_share  # --fast's share of --steps at one size, and at a coarse-to-fine run's first
    first = None if share is None else max(1, round(share * config.steps))
    budgets = scale_budgets(config.steps, len(sizes), config.scale_steps, first)
    if len(sizes) == 1 and first is not None:
        budgets = [first]
    # The tutorial's loop given --steps runs `steps` (whole LBFGS steps past it): one size, or a coarse-to-fine run's
    # first. A size given a budget of its own (--fast's share, a larger size, --scale-steps) gets budget - 1, so that
    # it runs its budget rounded up to whole LBFGS steps (the loop ends with the step that passes `steps`).
    tutorial = first is None and (len(sizes) == 1 or not config.scale_steps)
    loop_steps = [config.steps if k == 0 and tutorial else budget - 1 for k, budget in enumerate(budgets)]
    evaluations = [planned_evaluations(n, config.optimizer) for n in loop_steps]
    return RunPlan(tuple(sizes), tuple(budgets), tuple(loop_steps), tuple(evaluations))


# What a checkpoint holds besides its image copies (measured with torch.save: the settings and hashes, the zip's
# records): a few kB, and about a kB per curvature pair (its two records and LBFGS's two scalars per pair).
CHECKPOINT_OVERHEAD, CHECKPOINT_PAIR_OVERHEAD = 4_096, 1_100


def checkpoint_bytes(width: int, height: int, history_size: int, *, optimizer: str = "lbfgs",
                     average: bool = False) -> int:
    """About how large a checkpoint of a run at ``width`` x ``height`` px grows, in bytes.

    A checkpoint holds float32 copies of the ``(1, 3, H, W)`` image, ``12 * W * H`` bytes each: the image, and
    the optimiser's state: LBFGS's two per curvature pair (``history_size`` pairs once the run has made that many
    steps, fewer before), its direction, its last gradient and the lowest-loss image (which the default's rescue and
    --fast's hand-back go back to), so ``2 * history_size + 4`` copies; Adam's two moments, 3 copies; one more with
    ``average`` (the iterate average). 128x85 px with the default history of 100: 26.7 MB; 448x299 px: 328 MB.
    """
    copies = 2 * history_size + 4 if optimizer == "lbfgs" else 3
    pairs = history_size if optimizer == "lbfgs" else 0
    return 12 * width * height * (copies + bool(average)) + CHECKPOINT_PAIR_OVERHEAD * pairs + CHECKPOINT_OVERHEAD


def default_size_of(device_type: str) -> int:
    """The working size when none is given, by device type: ``CPU_DEFAULT_SIZE`` on a CPU, else 512."""
    return CPU_DEFAULT_SIZE if device_type == "cpu" else GPU_DEFAULT_SIZE
