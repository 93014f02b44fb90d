"""One run: ``Run`` (sizes, events, previews, checkpoints) and ``stylize()`` (``run``), its inputs made ready
(``prepare``), sizes and budgets worked out without torch (``plans``), the backward paths compared (``compare``).

``style_transfer.run.Run``, ``RunOptions``, ``RunResult`` and ``stylize`` import from here as before the package
was split; they load on first use, so ``style_transfer.run.plans`` stays free of torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = ("Run", "RunOptions", "RunResult", "EventCallback", "stylize", "check_fits", "checkpoint_settings",
            "STOP_REASONS")


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'style_transfer.run' has no attribute {name!r}")
    value = getattr(importlib.import_module(".run", __name__), name)
    globals()[name] = value
    return value
