"""What ``--fast`` turns on beside the precision, worked out without torch (``stylize --print-config`` shows it)."""

from __future__ import annotations

from ..config import StyleConfig

# --fast's LBFGS history: the schedule (run/plans.py) was measured with 20 (alone, at 320 evaluations: 0.91x the time).
FAST_HISTORY_SIZE = 20


def fast_levers(config: StyleConfig) -> dict[str, object]:
    """The speed settings ``config`` runs with apart from the precision (``fast.speed_from_config`` adds
    that, for the device): --fast turns on channels_last and fused_gram and caps the LBFGS history. The fused
    Gram is the Gram loss's own backward: the other style losses (``style_loss``) run without it."""
    if config.fast:
        return {"channels_last": True, "fused_gram": config.style_loss == "gram",
                "history_size": min(config.history_size, FAST_HISTORY_SIZE)}
    return {"channels_last": config.channels_last, "fused_gram": config.fused_gram,
            "history_size": config.history_size}
