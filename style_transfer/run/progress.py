"""A run's progress: what it tells before its first evaluation (``loading_text``, ``building_text``), and after each
(``Progress``): the count, the iterates' average, previews, the losses the result reports, the caller's event, the
early stop (``Plateau``) and the cancel (``Stopped``); its time (``Clock``)."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import torch

from ..config.style import StyleConfig
from ..core.averaging import IterateAverage
from ..core.run_stats import RunStats
from ..core.transfer import StepInfo
from ..io.files import shown
from .checkpoints import Checkpoints, Saved
from .inputs import Inputs
from .timing import Timing, size_stages

EventCallback = Callable[[StepInfo], None]


class Cancellable(Protocol):
    """What ``Progress`` asks of the run it watches (``run.Run``)."""

    @property
    def cancelled(self) -> bool: ...

    def cancel(self, reason: str = "cancelled") -> None: ...


class Stopped(KeyboardInterrupt):
    """Raised from the progress callback to end the loop between evaluations (``Run.cancel``).

    A KeyboardInterrupt, so that the loop's own handling turns it into ``Interrupted`` carrying the
    image of the last evaluation (``core.run_stats.keeps_image_on_interrupt``)."""


class Clock:
    """Seconds of optimisation: this process's, plus what a resumed run had spent before."""

    def __init__(self, before: float) -> None:
        self.before, self.start = before, time.perf_counter()

    def __call__(self) -> float:
        return self.before + time.perf_counter() - self.start


class Plateau:
    """``min_improvement`` R and ``patience`` K: stalled once the lowest loss seen improved by less than
    the fraction R over the last K evaluations (the lowest, not the last: LBFGS's loss spikes)."""

    def __init__(self, min_improvement: float | None, patience: int | None) -> None:
        self.rate, self.patience = min_improvement, patience
        self.best: list[float] = []

    def stalled(self, loss: float) -> bool:
        if self.rate is None or not self.patience:
            return False
        self.best.append(min(loss, self.best[-1]) if self.best else loss)
        if len(self.best) <= self.patience:
            return False
        then, now = self.best[-1 - self.patience], self.best[-1]
        return then - now < self.rate * abs(then)


class Progress:
    """``Run``'s progress callback: after each evaluation it counts, averages the iterates, makes a preview when
    asked, keeps the losses the result reports, tells ``on_event``, stops on a plateau or a cancel.

    Args:
        run: the run watched (its cancel). sizes, evaluations: the working sizes (long side) and the evaluations
            each plans, smallest first. saved: the checkpoint resumed from, or None. keeper: the run's checkpoints
            (they save the plateau's window and the average). final: the images at the last size. preview_every:
            ``RunOptions.preview_every``.
    """

    def __init__(self, run: Cancellable, config: StyleConfig, *, sizes: Sequence[int], evaluations: Sequence[int],
                 saved: Saved | None, keeper: Checkpoints, final: Inputs, preview_every: int, stats: RunStats,
                 clock: Clock, on_event: EventCallback | None) -> None:
        self.run, self.stats, self.clock, self.on_event = run, stats, clock, on_event
        self.total, self.scales, self.preview_every = sum(evaluations), len(sizes), preview_every
        # each size this process runs a part of its own (the time left), a resumed one less what it had run
        stages = size_stages(sizes, evaluations, final.size, start=saved.scale if saved else 0,
                             done=saved.evaluations_in_scale if saved else 0)
        self.timing = Timing([[stage] for stage in stages], clock=clock)
        self.done = saved.evaluations if saved else 0
        self.first_size = True  # on_stage is told of the first size's model only
        self.last: dict[str, float] = {}
        self.lowest: dict[str, float] = {}  # the terms of the size's lowest loss, for a run that hands back that image
        self.first: dict[str, float] = {}  # the size's first evaluation (a resumed size: its first since the resume)
        self.plateau = keeper.plateau = Plateau(config.min_improvement, config.patience)
        # the output is the average of the iterates, restarted at each size (start_size).
        self.averager = keeper.averager = IterateAverage(config.average) if config.average is not None else None
        if saved is not None:
            self.plateau.best = list(saved.plateau)  # as it was: a resumed run stops where it would have
        self.scale, self.inputs, self.last_scale = 0, final, False

    def start_size(self, scale: int, inputs: Inputs) -> None:
        if self.timing.frames:
            self.timing.end_frame()
        self.timing.start_frame()
        self.scale, self.inputs, self.last_scale = scale, inputs, scale == self.scales - 1
        if self.averager is not None:
            self.averager.reset()
        self.lowest.clear()
        self.first.clear()

    def _last_image(self) -> torch.Tensor:
        image = self.stats.last_image()
        assert image is not None  # progress is reported after a finite evaluation, whose image was kept
        return image

    def __call__(self, info: StepInfo) -> None:
        self.done += 1
        if self.averager is not None:
            self.averager.update(self._last_image())
        preview = None
        every = self.preview_every
        if every and self.done % every == 0:
            shown_image = self._last_image() if self.averager is None else self.averager.value()
            assert shown_image is not None  # the averager has just taken an image
            preview = self.inputs.finish(shown_image)
        now = self.clock()
        width, height = self.inputs.size
        self.timing.evaluated(width * height / 1e6, now)
        event = dataclasses.replace(info, step=self.done, total=self.total, elapsed=now, size=self.inputs.size,
                                    scale=self.scale, scales=self.scales, preview=preview,
                                    planned_left=self.timing.time_left())
        self.last.update(style=event.style_loss, content=event.content_loss, tv=event.tv_loss, loss=event.loss)
        if not event.loss >= self.lowest.get("loss", float("inf")):
            self.lowest.update(self.last)
        self.first.setdefault("loss", event.loss)
        if self.on_event is not None:
            self.on_event(event)
        if self.last_scale and self.plateau.stalled(event.loss):
            self.run.cancel("plateau")
        if self.run.cancelled:
            raise Stopped  # ends the loop here, between evaluations; the image is kept


def loading_text(config: StyleConfig) -> str:
    """What ``Run(on_stage=...)`` is told before the network loads: the model and where its weights come from."""
    model = config.model.upper()
    if config.weights == "random":
        return f"making {model} with seeded random weights"
    if config.weights in ("imagenet", "original"):
        return f"loading {model} weights ({config.weights})"
    return f"loading {model} weights from {shown(os.path.basename(config.weights))}"


def building_text(size: tuple[int, int], scale: int, scales: int) -> str:
    """What ``Run(on_stage=...)`` is told when the first size it runs starts: its (width, height), and which."""
    return f"building the model at {size[0]}x{size[1]}" + (f" (size {scale + 1} of {scales})" if scales > 1 else "")
