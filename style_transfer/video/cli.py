"""The ``stylize-video`` command: ``stylize-video IN STYLE... -o OUT``; owns progress, signals and exit codes.

Imports click and the torch-free options only until the work starts, so --help and option errors answer
at once; without the video extra it says so in one line (exit 1).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from types import FrameType
from typing import Any

import click

from .. import __version__
from ..config.choices import INITS
from ..errors import Interrupted, MissingExtra, RunStopped, StyleTransferError
from ..io.files import atomic_output, check_not_an_input, check_writable, shown
from ..cli.options import (OneLineCommand, ProgressLines, UsageFault, check_input_paths, config_from_options, note,
                           one_line_error, own_process, setting_inputs, settings_options, show_traceback)
from ..run.timing import duration
from . import DEFAULT_TEMPORAL_WEIGHT, VideoError

EXIT_CODES = {"interrupted": 130, "cancelled": 130, "terminated": 143}


VIDEO = {name: "Video" for name in ("temporal_weight", "first_frame_steps", "independent", "work_dir", "keep_frames",
                                     "fps", "report")}
SHORT = {
    "output": "The video to write: .mp4, .m4v, .mov, .mkv, .webm or .gif.",
    "temporal_weight": "Weight of the temporal loss (pull to the warped previous frame).",
    "first_frame_steps": "Evaluations of the first frame (default: twice --steps).",
    "independent": "Stylise every frame on its own: the flickering baseline.",
    "work_dir": "Folder of finished frames, to continue a stopped run (default OUT.frames).",
    "keep_frames": "Keep the work folder after the video is written.",
    "fps": "Frame rate of a folder-of-frames input.",
    "report": "Write a JSON report: seconds per frame, flow share, flicker.",
}


@click.command(cls=OneLineCommand, sections=VIDEO, short_help_of=SHORT)
@click.argument("source", metavar="IN", type=click.Path(path_type=str))
@click.argument("styles", metavar="STYLE...", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("-o", "--output", required=True, type=click.Path(path_type=str),
              help="The video to write (atomically, at the end): .mp4 (H.264), .m4v, .mov, .mkv, .webm (VP9) "
                   "or .gif.")
@settings_options
@click.option("--temporal-weight", type=float, default=None,
              help="Weight of the temporal loss: the mean squared difference (images in [0, 1]) to the previous "
                   "result warped by optical flow, where the flow is reliable (Ruder et al. 2016), times the "
                   "frame's loss at its start, so one weight fits every network and size. Each frame keeps its "
                   "reliable pixels within a mean squared difference of 1/W of that warp. 0 keeps the warped start "
                   f"only. Default: {DEFAULT_TEMPORAL_WEIGHT:g} (docs/video.md).")
@click.option("--first-frame-steps", type=int, default=None,
              help="Evaluations of the first frame (later frames start from the previous result and run "
                   "--steps). Default: twice --steps.")
@click.option("--independent", is_flag=True,
              help="Stylise every frame on its own, from --init (no flow, no temporal loss): the flickering "
                   "baseline.")
@click.option("--work-dir", type=click.Path(path_type=str), default=None,
              help="Folder where each finished frame is kept as a PNG. A run stopped (Ctrl-C, a crash) and "
                   "started again with the same command continues after the last finished frame. "
                   "Default: OUT.frames next to the output; removed once the video is written unless "
                   "--keep-frames.")
@click.option("--keep-frames", is_flag=True, help="Keep the work folder after the video is written.")
@click.option("--fps", type=float, default=25.0, show_default=True,
              help="Frame rate of a folder-of-frames input (a video's own timestamps are always kept).")
@click.option("--report", type=click.Path(path_type=str), default=None,
              help="Write a JSON report: seconds per frame, the share spent on flow, and the flicker "
                   "(Lai et al.'s warping error over the video).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or summary on stderr.")
@click.option("--debug", is_flag=True, help="On an error, print the traceback before the one-line message.")
@click.version_option(__version__, "--version", prog_name="stylize-video")
def main(source: str, styles: tuple[str, ...], output: str, temporal_weight: float | None,
         first_frame_steps: int | None, independent: bool, work_dir: str | None, keep_frames: bool, fps: float,
         report: str | None, quiet: bool, debug: bool, **settings: Any) -> None:
    """Stylise the video IN in the style of STYLE (one or more, blended) and write OUT.

    IN: any video FFmpeg reads, an animated GIF, or a folder of image files (sorted by name, --fps).
    Frame timestamps (a variable frame rate too) and the display rotation are kept; audio streams
    are copied unchanged (not into a .gif). Each frame after the first starts from the previous
    result warped by optical flow (OpenCV DIS) and adds a temporal loss, so the video flickers less
    (--independent: without). Every option of `stylize` applies to each frame.

    Ctrl-C stops after the evaluation under way: the finished frames stay in the work folder and the
    same command continues from them; no video is written until every frame is done. Exit codes: 0
    done, 1 failure, 2 bad option or input path, 130 interrupted, 143 terminated. Needs the video extra:
    pip install 'style_transfer[video]'.
    """
    try:
        config = config_from_options(settings)
        if config.keep_alpha:
            raise UsageFault("--keep-alpha: video frames have no transparency")
        if first_frame_steps is not None and first_frame_steps < 1:
            raise UsageFault(f"--first-frame-steps must be >= 1, got {first_frame_steps}")
        if temporal_weight is not None and not temporal_weight >= 0:
            raise UsageFault(f"--temporal-weight must be >= 0, got {temporal_weight}")
        if not fps > 0:
            raise UsageFault(f"--fps must be > 0, got {fps}")
        from .io import output_container

        output_container(output)
        check_writable(output)
        if report is not None:
            check_writable(report)
        if work_dir is None:
            work_dir = output + ".frames"
        if os.path.exists(work_dir) and not os.path.isdir(work_dir):
            raise UsageFault(f"--work-dir {shown(work_dir)}: is a file")
        init = None if config.init in INITS else config.init
        check_not_an_input([("-o", output), ("--report", report)],
                           [("IN", source), *(("STYLE", style) for style in styles), ("--init", init)])
        video_file = [] if os.path.isdir(source) else [("", source)]  # a folder of frames: its reader checks it
        check_input_paths([*video_file, *(("", style) for style in styles), *setting_inputs(config)])
    except (ValueError, StyleTransferError) as exc:
        raise UsageFault(str(exc)) from None
    from ..io.images import open_image

    for style in styles:  # before torch is imported: a bad style image answers at once (exit 1, as stylize)
        try:
            open_image(style).close()
        except StyleTransferError as exc:
            raise click.ClickException(str(exc)) from None
    try:
        from . import require

        require("av"), require("cv2")
        from .runner import VideoRun, VideoSettings
        from ..networks.download import resolve_weights

        # torchvision's VGG19 offline: the original VGG19 where installed (not said with --quiet: the record names it)
        config = resolve_weights(config, on_notice=None if quiet else note)

        video = VideoRun(source, list(styles), config,
                         VideoSettings(temporal_weight=temporal_weight, first_frame_steps=first_frame_steps,
                                       independent=independent, work_dir=work_dir, fps=fps))
    except MissingExtra as exc:
        raise click.ClickException(str(exc)) from None
    except (StyleTransferError, ValueError) as exc:  # not a video, no frames, ...: before any work
        show_traceback(debug)
        raise click.ClickException(str(exc)) from None
    _run(video, output, work_dir, keep_frames, report, quiet, debug)


def _run(video: Any, output: str, work_dir: str, keep_frames: bool, report: str | None, quiet: bool,
         debug: bool) -> None:
    import shutil

    from ..run.prepare import default_size, resolve_device
    from .io import write_video
    from .runner import flicker

    config = video.config
    own_process(config.threads)
    progress = _Progress(video, quiet)
    previous = {n: signal.getsignal(n) for n in (signal.SIGINT, signal.SIGTERM)}

    def stop(number: int, frame: FrameType | None) -> None:
        if number == signal.SIGINT and video.cancelled:
            raise KeyboardInterrupt  # a second Ctrl-C: now
        video.cancel("terminated" if number == signal.SIGTERM else "interrupted")

    for number in previous:
        signal.signal(number, stop)
    try:
        result = video.execute(progress.on_frame, progress.on_event)
        if result.stopped == "done":
            progress.close()
            if not quiet:
                click.echo(f"writing {shown(output)}", err=True)
            device = str(resolve_device(config.device))
            write_video(output, video.stylised_frames(), video.clip, metadata=video.record(result, device))
    except RunStopped as exc:  # a NaN loss, or a second Ctrl-C: the frames before it are kept
        progress.close()
        show_traceback(debug)
        if isinstance(exc, Interrupted):
            click.echo(f"interrupted; {progress.frame} finished frame(s) kept in {shown(work_dir)}, "
                       f"{shown(output)} not written", err=True)
            raise SystemExit(130) from None
        kept = (f"{progress.frame} finished frame(s) kept in {shown(work_dir)}" if progress.frame
                else "no frame finished, nothing kept")
        raise click.ClickException(f"frame {progress.frame}: {exc}; {kept}") from None
    except (StyleTransferError, ValueError) as exc:  # ValueError: a setting only the model can check
        progress.close()
        one_line_error(exc, debug)
    except KeyboardInterrupt:
        progress.close()
        click.echo(f"interrupted; finished frames kept in {shown(work_dir)}, {shown(output)} not written",
                   err=True)
        raise SystemExit(130) from None
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        progress.close()
    if result.stopped != "done":
        click.echo(f"{result.stopped} after {result.done} of {result.count} frames; they are kept in "
                   f"{shown(work_dir)}: run the same command again to continue", err=True)
        raise SystemExit(EXIT_CODES.get(result.stopped, 130))
    if report is not None:
        size = config.size or default_size(resolve_device(config.device))
        stylised = sum(result.seconds)
        data = {"input": os.path.basename(video.clip.path.rstrip("/")), "frames": result.count,
                "mode": "independent" if video.settings.independent else "consistent",
                "temporal_weight": None if video.settings.independent else video.settings.temporal_weight,
                "size": size, "frames_stylised_now": len(result.seconds),
                "seconds_per_frame": stylised / len(result.seconds) if result.seconds else None,
                "flow_share": sum(result.flow_seconds) / stylised if stylised else None,
                "warping_error": flicker(video, size)}
        with atomic_output(report, VideoError) as handle:
            handle.write((json.dumps(data, indent=1) + "\n").encode())
    if not keep_frames:
        shutil.rmtree(work_dir, ignore_errors=True)
    if not quiet:
        click.echo(f"wrote {shown(output)} ({result.count} frames)", err=True)


class _Progress:
    """A bar over frames and, in its postfix, the evaluations of the frame under way and the time the run has left; the
    run's estimate in one line once its first frame has run a few evaluations; where stderr is no terminal, the same as
    plain lines now and then (``ProgressLines``). Every time is the library's (``VideoRun.estimate``, ``time_left``)."""

    def __init__(self, video: Any, quiet: bool) -> None:
        self.video, self.count, self.quiet, self.frame = video, video.clip.count, quiet, 0
        self.bar: Any = None
        # one time left, the library's (a frame count's rate would count the first frame's double share alike)
        self.lines = (ProgressLines(self.count, "frames", counts_left=False)
                      if not quiet and ProgressLines.wanted() else None)
        self.estimated = quiet

    def _bar(self) -> Any:
        if self.bar is None:
            from tqdm import tqdm

            # tqdm's own remaining time would count frames alike (the first runs twice the evaluations): ours only
            self.bar = tqdm(total=self.count, unit="frame", file=sys.stderr, disable=self.quiet,
                            bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]")
        return self.bar

    def _say(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line, file=sys.stderr)
        else:
            click.echo(line, err=True)

    def on_frame(self, info: Any) -> None:
        self.frame = info.index + 1
        detail = "found in the work folder" if info.resumed else _left(info.time_left)
        if self.lines is not None:
            self.lines.update(self.frame, detail)
            return
        bar = self._bar()
        bar.update(1)
        if detail:
            bar.set_postfix_str(detail, refresh=False)

    def on_event(self, index: int, info: Any) -> None:
        if not self.estimated:
            estimate = self.video.estimate()
            if estimate is not None:
                self.estimated = True
                self._say(f"estimate: about {duration(estimate.seconds)} for {estimate.frames} frames on this machine "
                          f"(a frame {duration(estimate.frame_seconds)}, an evaluation "
                          f"{estimate.evaluation_seconds:.2g} s)")
        painting = " (painting what entered)" if self.video.painting else ""
        detail = f"frame {index + 1}{painting}: {info.step}/{info.total} evaluations"
        left = _left(self.video.time_left())
        detail += f", {left}" if left else ""
        if self.lines is not None:
            self.lines.update(self.frame, detail)
            return
        self._bar().set_postfix_str(detail, refresh=True)

    def close(self) -> None:
        if self.lines is not None:
            self.lines.close()
        if self.bar is not None:
            self.bar.close()


def _left(seconds: float | None) -> str:
    return "" if seconds is None else f"{duration(seconds)} left"


__all__ = ["main"]


if __name__ == "__main__":  # python -m style_transfer.video.cli
    main(prog_name="stylize-video")
