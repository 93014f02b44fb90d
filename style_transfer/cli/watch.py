"""What the command shows and keeps while a run goes: the progress bar, the files written along the way
(frames, animation, loss log, plot), the result with its provenance record, and Ctrl-C / SIGTERM.

The command's half of the run API (``run.Run``): nothing here computes; it turns events into output.
torch is never imported here: ``Watch`` is built, and its paths checked, before the model loads.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from ..io import metadata
from . import recorders
from .options import ProgressLines, note
from ..run.timing import duration
from ..errors import RunStopped
from ..io.files import shown
from ..io.images import save_image

if TYPE_CHECKING:
    from tqdm import tqdm

    from ..run import RunResult
    from ..run.run import Run
    from ..core.transfer import StepInfo

ANIMATION_EVERY = 10  # --animate's frame interval in evaluations when --save-every is not given
EXIT_CODES = {"interrupted": 130, "cancelled": 130, "terminated": 143}  # a stopped run's exit code


class Watch:
    """The command's view of one run. Its paths are checked when it is made (before any work).

    Raises:
        ValueError, StyleTransferError: a bad interval, or a path that cannot be written (one line).
    """

    def __init__(self, output: str, *, quiet: bool = False, save_every: int = 0, save_dir: str | None = None,
                 animate: str | None = None, log_path: str | None = None, plot: str | None = None,
                 metadata: bool = True) -> None:
        if save_every < 0:
            raise ValueError(f"save-every must be an integer >= 0, got {save_every}")
        if save_dir is not None and not save_every:
            raise ValueError("--save-dir needs --save-every")
        self.output, self.quiet, self.metadata = output, quiet, metadata
        self.run: Run | None = None  # set by the command once the run is made: the records name it
        self.frames = None
        if save_every:
            self.frames = recorders.FrameSaver(output, save_every, save_dir=save_dir, record=self._record_now)
        self.animation = None
        if animate is not None:
            recorders.check_animation_path(animate)
            self.animation = recorders.Animation(animate, save_every or ANIMATION_EVERY)
        if plot is not None:
            recorders.check_plot_path(plot)
            recorders.check_plot_available()
        self.plot = plot
        self.log = recorders.LossLog(log_path) if log_path is not None else None  # opened now: checks the path
        self.rows: list[dict[str, Any]] = []  # the loss curves, for --plot
        self.bars: dict[str, tqdm] = {}  # made on first use, so an early error prints one line only
        self.lines: ProgressLines | None = None  # in place of the steps bar where stderr is no terminal
        self.planned = 0  # the evaluations the run plans (StepInfo.total), known from its first event
        self.estimated = quiet  # the run's estimate said (once its first size has run a few evaluations)
        self.plan: str | None = None  # the run's forecast, said before its first stage (run.fits.forecast)
        self.preview_every = recorders.preview_interval(save_every or None,
                                                        self.animation.every if self.animation is not None else None) or 0

    def on_download(self, done: int, total: int) -> None:
        if self.quiet:
            return
        from tqdm import tqdm

        if "download" not in self.bars:
            self.bars["download"] = tqdm(total=total or None, unit="B", unit_scale=True, file=sys.stderr,
                                         desc="downloading VGG19 weights (once)")
        self.bars["download"].update(done - self.bars["download"].n)

    def on_notice(self, message: str) -> None:
        """A line the run wants a user to read (the weights it took in place of the default's); not with --quiet,
        the picture's record names the weights. The download bar, if any, is closed first."""
        if self.quiet:
            return
        self._close_download()
        note(message)

    def on_stage(self, message: str) -> None:
        """What the run starts before its first evaluation (loading the weights, building the model): one line
        each, so the seconds before the bar are not silent; not with --quiet."""
        if self.quiet:
            return
        self._close_download()
        if self.plan is not None:  # the run's checks passed: what it will take, then what it starts
            click.echo(self.plan, err=True)
            self.plan = None
        click.echo(f"{message} ...", err=True)

    def _close_download(self) -> None:
        """End the download bar, if any, so a line printed next starts on its own."""
        bar = self.bars.pop("download", None)
        if bar is not None:
            bar.close()

    def on_event(self, info: StepInfo) -> None:
        """After each evaluation: the bar (and once, the run's time on this machine), and whatever files the options
        asked for."""
        if not self.estimated and self.run is not None and (estimate := self.run.estimate()) is not None:
            self.estimated = True
            line = (f"estimate: about {duration(estimate.seconds)} on this machine (an evaluation "
                    f"{estimate.evaluation_seconds:.2g} s at the last size)")
            if "steps" in self.bars:
                self.bars["steps"].write(line, file=sys.stderr)
            else:
                click.echo(line, err=True)
        self._bar(info)
        if self.frames is not None:
            self.frames(info)
        if self.animation is not None:
            self.animation(info)
        if self.log is not None:
            self.log(info)
        if self.plot is not None:
            self.rows.append(recorders.loss_row(info))

    def _bar(self, info: StepInfo) -> None:
        if "steps" not in self.bars and self.lines is None:
            self.planned = info.total
            if not self.quiet and ProgressLines.wanted():
                self.lines = ProgressLines(info.total, "evaluations", counts_left=False)
            else:
                from tqdm import tqdm

                # tqdm's own time left would count every size's evaluations alike: the run's only (StepInfo)
                self.bars["steps"] = tqdm(total=info.total, unit="step", file=sys.stderr, disable=self.quiet,
                                          dynamic_ncols=True, bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} "
                                          "[{elapsed}{postfix}]")
        losses = {"style": f"{info.style_loss:.4g}", "content": f"{info.content_loss:.4g}"}
        if info.tv_loss:
            losses["tv"] = f"{info.tv_loss:.4g}"
        if info.scales > 1:
            losses["size"] = f"{info.size[0]}x{info.size[1]}"
        if info.time_left is not None and info.step < info.total:
            losses["left"] = duration(info.time_left)
        if self.lines is not None:
            self.lines.update(info.step, "  ".join(f"{value} left" if name == "left" else f"{name} {value}"
                                                   for name, value in losses.items()))
            return
        bar = self.bars["steps"]
        if info.step > bar.total:
            bar.total = info.step  # rare: an LBFGS step that ended early put one more step in the plan
        # The postfix first, then the count: each redraw shows the losses of the evaluation it counts (set after
        # the update, a redraw showed the one before: the bar's last line and the record disagreed).
        bar.set_postfix(losses, refresh=False)
        bar.update(info.step - bar.n)

    def _record_now(self, info: recorders.StepEvent) -> dict[str, Any] | None:
        """The record of an image written along the way: the settings, and the run so far."""
        if not self.metadata or self.run is None:
            return None
        return self.run.record(info.step, "running", {"style": info.style_loss, "content": info.content_loss,
                                                       "tv": info.tv_loss, "loss": info.loss}, info.elapsed)

    def finish(self, result: RunResult) -> None:
        """Write the result (with its record), then the animation and the plot; close the bar and log."""
        steps = self.bars.get("steps")
        if steps is not None and steps.n < steps.total and result.stopped not in EXIT_CODES:
            steps.total = steps.n  # LBFGS converged or the loss plateaued: the bar ends on what ran
            steps.refresh()
        if self.lines is not None and result.stopped not in EXIT_CODES:
            self.lines.close(total=self.lines.done)  # the last line too
        self.close()
        record = result.record if self.metadata else None
        save_image(result.image, self.output, metadata=record)
        if self.animation is not None:
            self.animation.close(result.image, record=record)
        if self.plot is not None:
            recorders.plot_losses(self.rows, self.plot, record=record)

    def written(self) -> list[str]:
        """The files the run wrote besides the result (after ``finish``), as the summary line names them."""
        files = [shown(path) for path in (self.animation.path if self.animation is not None else None, self.plot,
                                          self.log.path if self.log is not None else None) if path is not None]
        frames = self.frames.written if self.frames is not None else []
        if frames:
            folder = shown(frames[0].parent)
            files.append(f"{len(frames)} frame{'s' if len(frames) > 1 else ''} in {folder}/ ({frames[0].name}"
                         + (f" to {frames[-1].name})" if len(frames) > 1 else ")"))
        return files

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
        self.bars.clear()
        if self.lines is not None:
            self.lines.close()  # a stopped run's last line says where it stopped
        if self.log is not None:
            self.log.close()

    def record(self, run: Run, exc: RunStopped) -> dict[str, Any] | None:
        """The record of the last good image a stopped run carries (None with --no-metadata)."""
        if not self.metadata:
            return None
        stopped = "non-finite" if type(exc).__name__ == "NonFiniteLoss" else "interrupted"
        return run.record(exc.step, stopped, {}, 0.0)


class Signals:
    """Ctrl-C and SIGTERM while a run is under way: the run ends after the evaluation in progress,
    keeping its image (``Run.cancel``); before the first evaluation, and on a second Ctrl-C, they
    stop at once (Ctrl-C: ``KeyboardInterrupt``; SIGTERM: exit 143).

    Python raises ``KeyboardInterrupt`` wherever the main thread is when the signal is handled; in a
    destructor or a weakref callback it only prints "Exception ignored" and the run goes on. So once
    the loop runs, a signal only asks the run to stop, and the loop stops between evaluations.
    """

    def __init__(self, run: Run) -> None:
        self.run = run
        self.looping = False
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> Signals:
        for number in (signal.SIGINT, signal.SIGTERM):
            self.previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)

    def watching(self, callback: Callable[[StepInfo], None]) -> Callable[[StepInfo], None]:
        """``callback`` for ``Run.execute``, noting that the loop runs."""

        def on_event(info: StepInfo) -> None:
            self.looping = True
            callback(info)

        return on_event

    def _handle(self, number: int, frame: FrameType | None) -> None:
        terminate = number == signal.SIGTERM
        if not self.looping or (self.run.cancelled and not terminate):
            if terminate:
                raise SystemExit(EXIT_CODES["terminated"])
            raise KeyboardInterrupt
        self.run.cancel("terminated" if terminate else "interrupted")


def read_record(path: str) -> dict[str, Any]:
    """The provenance record of an earlier output, for --replay.

    Raises:
        ValueError: the file holds no record.
    """
    record = metadata.read_record(path)
    if record is None:
        raise ValueError(f"{shown(path)} holds no style_transfer record (written with --no-metadata, or by "
                         f"another program)")
    return record
