"""How long a run takes on this machine, from its own evaluations: a still's sizes (``StepInfo.time_left``) or a
video's frames (``VideoRun.estimate``, ``time_left``), each a "frame" here.

Each frame's plan is its working sizes (one, or coarse-to-fine's) with the evaluations each runs (``run.plans``), so
its work is in megapixel-evaluations. The clock measures seconds per megapixel-evaluation over the evaluations after
each frame's first, and a frame's set-up (loading, flow, the model and style targets at its first evaluation, saving)
as what its first evaluation and its end took beyond that. The time left is the frame under way's planned work left
and, for each frame after it, a set-up plus its planned work.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Stage = tuple[int, float]  # the evaluations planned at one working size, and its megapixels


@dataclass(frozen=True)
class Estimate:
    """The whole run's time, at its rate so far."""

    seconds: float  # spent since the run began and left: the whole run
    frames: int  # frames this run stylises (not those found finished in the work folder)
    frame_seconds: float  # a frame after the first: its set-up and its planned evaluations
    evaluation_seconds: float  # one evaluation at the working size


@dataclass
class _Frame:
    start: float
    first: float | None = None  # when its first evaluation ended, and that evaluation's megapixels
    first_megapixels: float = 0.0
    last: float | None = None  # when its latest evaluation ended
    step: int = 0  # evaluations so far
    end: float | None = None
    seconds: float = 0.0  # its evaluations after its first: their seconds


class Timing:
    """The clock of a run: told when frames (a still's sizes) start and end and after each evaluation; asked for the
    time left.

    Args:
        plans: each frame this run stylises, in order: its stages (evaluations, megapixels), smallest size first.
        clock: seconds, monotonic (``time.perf_counter``; a test's fake).
    """

    # Evaluations of the first frame before an estimate: one LBFGS step. --fast's first 4 run in float32 at another
    # pace than the rest; from 5, a 2,048 px print's was a third short, from 20 an eighth (benchmarks/NOTEBOOK.md).
    READY = 20

    def __init__(self, plans: Sequence[Sequence[Stage]], clock: Callable[[], float] = time.perf_counter) -> None:
        self.plans = [list(plan) for plan in plans]
        self.clock = clock
        self.began = clock()
        self.frames: list[_Frame] = []
        self.work = 0.0  # megapixel-evaluations timed (each frame's after its first)
        self.seconds = 0.0  # and their seconds

    def start_frame(self) -> None:
        self.frames.append(_Frame(self.clock()))

    def evaluated(self, megapixels: float, now: float | None = None) -> None:
        """After an evaluation of the frame under way at ``megapixels`` (its working size); ``now``: the clock's
        reading, where the caller has just taken it."""
        now, frame = self.clock() if now is None else now, self.frames[-1]
        if frame.last is None:
            frame.first, frame.first_megapixels = now, megapixels
        else:
            self.work += megapixels
            self.seconds += now - frame.last
            frame.seconds += now - frame.last
        frame.last, frame.step = now, frame.step + 1

    def end_frame(self) -> None:
        self.frames[-1].end = self.clock()

    def rate(self) -> float | None:
        """Seconds per megapixel-evaluation so far; None before a frame's second evaluation."""
        return self.seconds / self.work if self.work > 0 else None

    def setup(self) -> float:
        """A frame's seconds besides its evaluations: the mean over the frames timed (0 before a rate)."""
        rate = self.rate()
        setups = [_setup(f, rate) for f in self.frames if rate is not None and f.first is not None]
        return max(0.0, sum(setups) / len(setups)) if setups else 0.0

    def measured(self) -> list[tuple[float, int, float, float]]:
        """Each frame's own figures, for those with an evaluation after their first: its megapixels, the
        evaluations timed, seconds per megapixel-evaluation, and its set-up at that rate."""
        figures = []
        for f in self.frames:
            if f.first is not None and f.step > 1:
                rate = f.seconds / (f.first_megapixels * (f.step - 1))
                figures.append((f.first_megapixels, f.step - 1, rate, max(0.0, _setup(f, rate))))
        return figures

    def time_left(self) -> float | None:
        """Seconds the run has left at its rate so far (0 once the last frame ended); None before two evaluations."""
        rate = self.rate()
        if rate is None:
            return None
        done = len(self.frames)
        current = self.frames[-1] if self.frames else None
        left = 0.0
        if current is not None and current.end is None:
            left += rate * work(self.plans[done - 1], skip=current.step)
        setup = self.setup()
        return left + sum(setup + rate * work(plan) for plan in self.plans[done:])

    def estimate(self) -> Estimate | None:
        """The whole run's time, once the first frame has run ``READY`` evaluations (or ended); None before."""
        left = self.time_left()
        first = self.frames[0] if self.frames else None
        if left is None or first is None or (first.step < self.READY and first.end is None):
            return None
        rate = self.rate() or 0.0
        later = self.plans[-1] if len(self.plans) > 1 else self.plans[0]
        return Estimate(self.clock() - self.began + left, len(self.plans), self.setup() + rate * work(later),
                        rate * later[-1][1])


def _setup(frame: _Frame, rate: float) -> float:
    """A frame's seconds besides its evaluations at ``rate``: its first evaluation's beyond the rate, and its end."""
    assert frame.first is not None and frame.last is not None  # it has run an evaluation
    end = frame.end - frame.last if frame.end is not None else 0.0
    return frame.first - frame.start - rate * frame.first_megapixels + end


def work(plan: Sequence[Stage], skip: int = 0) -> float:
    """A frame's planned megapixel-evaluations, less its first ``skip`` evaluations (smallest size first)."""
    total = 0.0
    for evaluations, megapixels in plan:
        run = max(0, evaluations - skip)
        skip = max(0, skip - evaluations)
        total += run * megapixels
    return total


def size_stages(sizes: Sequence[int], evaluations: Sequence[int], final: tuple[int, int], start: int = 0,
                done: int = 0) -> list[Stage]:
    """A still's sizes as ``Timing`` frames: each from ``start`` on (a resumed run's), its evaluations (the first
    less the ``done`` it had run) and its megapixels at the picture's aspect (``final``: its (width, height))."""
    width, height = final
    return [(count - (done if k == start else 0), width * height * (side / max(final)) ** 2 / 1e6)
            for k, (side, count) in enumerate(zip(sizes, evaluations)) if k >= start]


def duration(seconds: float) -> str:
    """A time as a person reads it: ``45 s``, ``12 min``, ``2 h 05 min``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60:02d} min"
