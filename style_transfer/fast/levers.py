"""What ``--fast`` turns on beside the precision, worked out without torch (``stylize --print-config`` shows it)."""

from __future__ import annotations

from ..config.style import StyleConfig

# --fast's LBFGS history when it moves the pixels (--fast --parametrization pixels): the old schedule was measured with
# 20. In the Fourier basis --fast keeps torch's 100, which reached a given loss sooner (benchmarks/NOTEBOOK.md).
FAST_HISTORY_SIZE = 20
# What --fast moves when --parametrization is not given: the image's scaled Fourier coefficients (core/parametrization.py).
FAST_PARAMETRIZATION = "fourier"


def parametrization_of(config: StyleConfig) -> str:
    """What the optimiser moves: ``config.parametrization``, else fourier with --fast and the pixels without."""
    if config.parametrization is not None:
        return config.parametrization
    return FAST_PARAMETRIZATION if config.fast else "pixels"


def fast_levers(config: StyleConfig) -> dict[str, object]:
    """The speed settings ``config`` runs with apart from the precision (``fast.speed_from_config`` adds
    that, for the device): --fast moves the Fourier coefficients unless told otherwise, turns on channels_last and
    fused_gram, and caps the LBFGS history where it moves the pixels. The fused Gram is the Gram loss's own backward:
    the other style losses (``style_loss``) run without it."""
    parametrization = parametrization_of(config)
    if config.fast:
        history = config.history_size if parametrization != "pixels" else min(config.history_size, FAST_HISTORY_SIZE)
        return {"channels_last": True, "fused_gram": config.style_loss == "gram", "history_size": history,
                "parametrization": parametrization}
    return {"channels_last": config.channels_last, "fused_gram": config.fused_gram,
            "history_size": config.history_size, "parametrization": parametrization}
