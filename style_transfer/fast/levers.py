"""What ``--fast`` turns on beside the precision, worked out without torch (``stylize --print-config`` shows it)."""

from __future__ import annotations

from ..config.style import StyleConfig
from ..config.algorithm import history_of, parametrization_of, two_loop_of


def fast_levers(config: StyleConfig) -> dict[str, object]:
    """The speed settings ``config`` runs with apart from the precision (``fast.speed_from_config`` adds
    that, for the device): --fast moves the Fourier coefficients unless told otherwise, turns on channels_last and
    fused_gram, caps the LBFGS history where it moves the pixels, and takes the stacked LBFGS (``two_loop_of``). The
    fused Gram is the Gram loss's own backward: the other style losses (``style_loss``) run without it."""
    algorithm = {"history_size": history_of(config), "parametrization": parametrization_of(config),
                 "two_loop": two_loop_of(config)}
    if config.fast:
        return {"channels_last": True, "fused_gram": config.style_loss == "gram", **algorithm}
    return {"channels_last": config.channels_last, "fused_gram": config.fused_gram, **algorithm}
