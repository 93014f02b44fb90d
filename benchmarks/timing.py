"""Seconds per evaluation, one way: stamps at each evaluation's end (after the device finished it), and the
median interval between them, leaving out the first ones (start-up, a bf16 run's float32 first step)."""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch


def sync(device: torch.device | str | None) -> None:
    """Wait for a CUDA device to finish its queued work (a no-op elsewhere), so a clock reads work done."""
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


class Clock:
    """A progress callback (or a plain call) that stamps each evaluation's end; ``stamps[0]`` is the start."""

    def __init__(self, device: torch.device | str | None = None) -> None:
        self.device = device
        self.stamps = [time.perf_counter()]

    def __call__(self, *_: Any) -> None:
        sync(self.device)
        self.stamps.append(time.perf_counter())

    @property
    def evaluations(self) -> int:
        return len(self.stamps) - 1

    @property
    def elapsed(self) -> float:
        return self.stamps[-1] - self.stamps[0]

    def per_evaluation(self, skip: int = 1) -> float | None:
        """The median time of the evaluations after the first ``skip``, each from the previous one's end (or None)."""
        times = [b - a for a, b in zip(self.stamps, self.stamps[1:])][skip:]
        return statistics.median(times) if times else None


def seconds(function: Any, device: torch.device | str | None = None) -> float:
    """Wall seconds of one call of ``function()``, the device's queued work included."""
    sync(device)
    start = time.perf_counter()
    function()
    sync(device)
    return time.perf_counter() - start

