"""RunOptions: how a run is watched and kept (previews, checkpoints); none of it changes the image."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class RunOptions:
    """How a run is watched and kept. None of these changes the image a run makes.

    Raises:
        ValueError: from ``__post_init__``, naming the field and the bad value.
    """

    preview_every: int = 0  # attach the current image to every N-th event (StepInfo.preview); 0: never
    checkpoint: str | None = None  # write the run's state to this file (atomically) to resume it later
    checkpoint_every: int = 0  # also every N evaluations (at the LBFGS step that passes them); 0: only on a stop
    resume: str | None = None  # continue the run saved in this checkpoint file (same inputs and settings)
    rates: str | None = None  # the book of this machine's rates to keep this run's in (run/rates.py); None: none

    def __post_init__(self) -> None:
        for name in ("preview_every", "checkpoint_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        for name in ("checkpoint", "resume", "rates"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, (str, os.PathLike)):
                raise ValueError(f"{name} must be a file path, got {value!r}")
        if self.checkpoint_every and self.checkpoint is None:
            raise ValueError("checkpoint_every needs a checkpoint file")
