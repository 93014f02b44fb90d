"""What the optimiser moves and remembers, and its LBFGS, for a ``StyleConfig`` (``--fast`` changes all three), worked
out once, torch-free.

The loop's settings (``run.settings.transfer_settings``, which a ``run.Run`` and a library user call) and
``fast.levers`` read it here, so the same ``StyleConfig`` gives the same algorithm either way.
"""

from __future__ import annotations

from .style import StyleConfig

# --fast's LBFGS history when it moves the pixels (--fast --parametrization pixels): the old schedule was measured with
# 20. In the Fourier basis --fast keeps torch's 100, which reached a given loss sooner (benchmarks/NOTEBOOK.md).
FAST_HISTORY_SIZE = 20
# What --fast moves when --parametrization is not given: the image's scaled Fourier coefficients (fast/basis.py).
FAST_PARAMETRIZATION = "fourier"


def parametrization_of(config: StyleConfig) -> str:
    """What the optimiser moves: ``config.parametrization``, else fourier with --fast and the pixels without."""
    if config.parametrization is not None:
        return config.parametrization
    return FAST_PARAMETRIZATION if config.fast else "pixels"


def two_loop_of(config: StyleConfig) -> str:
    """How LBFGS finds its direction (core/lbfgs.py): stacked with --fast, whose first steps it also keeps in scale
    where torch's would not; torch's own (the tutorial's) otherwise."""
    return "stacked" if config.fast and config.optimizer == "lbfgs" else "torch"


def history_of(config: StyleConfig) -> int:
    """LBFGS's curvature pairs: ``config.history_size``, capped at ``FAST_HISTORY_SIZE`` where --fast moves the
    pixels."""
    if config.fast and parametrization_of(config) == "pixels":
        return min(config.history_size, FAST_HISTORY_SIZE)
    return config.history_size
