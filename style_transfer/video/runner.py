"""A whole video, frame by frame through the run API, kept in a work folder so that nothing is lost.

    video = VideoRun("clip.mp4", ["style.jpg"], StyleConfig(size=256), VideoSettings(work_dir="clip.frames"))
    result = video.execute(on_frame=..., on_event=...)   # video.cancel() from any thread or signal handler
    video.estimate(), video.time_left()                   # the run's time on this machine (timing.py), from on_event
    write_video("out.mp4", video.stylised_frames(), video.clip)

Frame 0 runs ``first_frame_steps`` evaluations from ``config.init``; frame t > 0 starts from the result of
frame t-1 warped into t (unreliable pixels from the content frame, or, where they make a region, from frame t first
run as a still: ``temporal.painted``) and adds the temporal loss (``losses.temporal``), unless ``independent``: then
every frame runs like a picture of its own (the baseline).
Each finished frame is written to the work folder as a PNG, with ``work.json`` saying which run made them;
a run started again with the same inputs and settings continues after the last finished frame and gives
the same frames as an uninterrupted one (frame t-1 is always taken from its 8-bit PNG).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

from ..io import provenance
from ..config.style import StyleConfig
from ..errors import Interrupted
from ..io.files import atomic_output, shown
from ..io.provenance import base_name
from ..io.images import ImageSource
from . import VideoError, default_temporal_weight
from .io import Clip, folder_frames, frames, probe
from ..run.timing import Estimate, Stage, Timing


WORK_VERSION = 1
CANCEL_REASONS = ("cancelled", "interrupted", "terminated")


@dataclass(frozen=True)
class VideoSettings:
    """What the video run adds to a StyleConfig (which every frame uses)."""

    # Weight of the temporal loss relative to the frame's start loss (temporal.py; 0: warped start only); None: the
    # default (``default_temporal_weight``).
    temporal_weight: float | None = None
    first_frame_steps: int | None = None  # evaluations of frame 0 in the consistent mode; None: 2 x config.steps
    independent: bool = False  # every frame on its own from config.init (the flicker baseline)
    work_dir: str | None = None  # where finished frames are kept; None: none kept (no resume)
    fps: float = 25.0  # frame rate of a folder of frames

    def __post_init__(self) -> None:
        if self.temporal_weight is not None and not self.temporal_weight >= 0:
            raise ValueError(f"temporal_weight must be >= 0, got {self.temporal_weight!r}")
        if self.first_frame_steps is not None and self.first_frame_steps < 1:
            raise ValueError(f"first_frame_steps must be >= 1, got {self.first_frame_steps!r}")
        if not self.fps > 0:
            raise ValueError(f"fps must be > 0, got {self.fps!r}")


@dataclass(frozen=True)
class FrameInfo:
    """After each frame: which, of how many, and how long it took."""

    index: int  # from 0
    count: int
    seconds: float  # this frame's time (flow included); 0 for a frame found in the work folder
    flow_seconds: float
    resumed: bool  # found finished in the work folder
    elapsed: float  # seconds since execute() started
    time_left: float | None = None  # seconds the frames left take at this run's rate so far (timing.py); 0 after the
    # last; None before this run has timed an evaluation (a frame found in the work folder)


@dataclass
class VideoResult:
    stopped: str  # "done" or one of CANCEL_REASONS
    done: int  # frames finished (in the work folder, or in memory without one)
    count: int
    seconds: list[float] = field(default_factory=list)  # per frame stylised by this run
    flow_seconds: list[float] = field(default_factory=list)
    evaluations: int = 0  # closure evaluations of the frames stylised by this run
    losses: dict[str, float] = field(default_factory=dict)  # the last frame's final loss terms
    frame_losses: list[dict[str, float]] = field(default_factory=list)  # each frame stylised by this run, its image's


class VideoRun:
    """Stylise every frame of a clip (``probe``d here: bad input fails before any work)."""

    def __init__(self, source: str | os.PathLike, styles: Sequence[ImageSource], config: StyleConfig,
                 settings: VideoSettings | None = None) -> None:
        settings = settings or VideoSettings()
        if settings.temporal_weight is None:  # resolved here, so work.json and the records show what runs
            settings = dataclasses.replace(settings, temporal_weight=default_temporal_weight(config.preprocess))
        self.settings = settings
        self.clip: Clip = probe(source, self.settings.fps)
        self.styles = list(styles)
        self.config = config
        self._stop = threading.Event()
        self._reason = "cancelled"
        self._run: Any = None
        self._memory: dict[int, Image.Image] = {}
        self._timing: Timing | None = None
        self._made: list[str] = []  # the work folder and work.json, where this run created them
        self.painting = False  # True while the frame under way runs as a still first (``temporal.painted``)
        if config.keep_alpha:
            raise ValueError("keep_alpha: video frames have no transparency")

    def cancel(self, reason: str = "cancelled") -> None:
        """Stop after the evaluation under way; the frame in progress is dropped, finished frames are kept."""
        self._reason = reason
        self._stop.set()
        run = self._run
        if run is not None:
            run.cancel(reason)

    @property
    def cancelled(self) -> bool:
        return self._stop.is_set()

    def time_left(self) -> float | None:
        """Seconds this run has left at its rate so far on this machine (``run.timing.Timing``): the frame under
        way's evaluations left and each later frame's; None before its first frame has run two evaluations."""
        return None if self._timing is None else self._timing.time_left()

    def estimate(self) -> Estimate | None:
        """The whole run's time on this machine, once its first frame has run a few evaluations (``timing``);
        None before. Call it from ``on_event`` to say it early."""
        return None if self._timing is None else self._timing.estimate()

    def frame_path(self, index: int) -> str:
        return os.path.join(self.settings.work_dir or "", f"frame_{index:06d}.png")

    def fingerprint(self) -> dict[str, Any]:
        """What the work folder's frames must have been made with to be reused."""
        settings = provenance.settings_dict(self.config)
        settings.pop("threads", None)
        given = provenance.mask_inputs(settings)
        if given:  # the masks by their bytes, not their paths (no key without masks: older folders stay valid)
            settings.pop("style_masks"), settings.pop("content_mask")
        video = dataclasses.asdict(self.settings)
        video.pop("work_dir")
        source = ([provenance.sha256_file(p) for p in folder_frames(self.clip.path)] if self.clip.folder
                  else provenance.sha256_file(self.clip.path))
        fingerprint = {"format": "style_transfer video frames", "version": WORK_VERSION, "settings": settings,
                       "video": video, "input": source,
                       "styles": [provenance.input_entry(s)["sha256"] for s in self.styles],
                       "weights": provenance.weights_entry(self.config.weights, model=self.config.model),
                       "frames": self.clip.count}
        if given:
            fingerprint["masks"] = {kind: [e["sha256"] for e in entry] if isinstance(entry, list) else entry["sha256"]
                                    for kind, entry in given.items()}
        return fingerprint

    def _open_work(self) -> int:
        """Check or create the work folder; the frames already finished there (consecutive from 0)."""
        folder = self.settings.work_dir
        if folder is None:
            return 0
        if os.path.exists(folder) and not os.path.isdir(folder):
            raise VideoError(f"work folder {shown(folder)}: is a file")
        mine = json.loads(json.dumps(self.fingerprint()))  # as read back (tuples become lists)
        if not os.path.isdir(folder):
            os.makedirs(folder)
            self._made.append(folder)
        manifest = os.path.join(folder, "work.json")
        if os.path.exists(manifest):
            try:
                with open(manifest, encoding="utf-8") as handle:
                    theirs = json.load(handle)
            except (OSError, ValueError):
                raise VideoError(f"work folder {shown(folder)}: work.json is damaged; delete the folder") from None
            if theirs != mine:
                differ = sorted(k for k in mine if mine[k] != theirs.get(k))
                raise VideoError(f"work folder {shown(folder)}: holds frames of another run ({', '.join(differ)}"
                                 f" differ); delete it or give another --work-dir")
        else:
            with atomic_output(manifest, VideoError) as handle:
                handle.write(json.dumps(mine, indent=1).encode())
            self._made.append(manifest)
        done = 0
        while done < self.clip.count and os.path.isfile(self.frame_path(done)):
            done += 1
        return done

    def execute(self, on_frame: Callable[[FrameInfo], None] | None = None,
                on_event: Callable[[int, Any], None] | None = None) -> VideoResult:
        """Stylise the frames not yet finished; ``on_event(frame index, StepInfo)`` after every evaluation.

        A run that fails takes back the work folder and ``work.json`` it created unless the folder holds
        a finished frame (then the same run continues from it); a cancelled run keeps them.

        Raises:
            ResourceError: the size cannot fit (``run.fits.check_fits``, from the clip's and the styles' sizes, before
                any frame is read). VideoError: the work folder holds another run's frames. The run API's
                errors (ImageError, WeightsError, NonFiniteLoss, ...) as they come.
        """
        try:
            return self._execute(on_frame, on_event)
        except Exception as exc:
            if not isinstance(exc, Interrupted):
                self._discard_work()
            raise

    def _discard_work(self) -> None:
        """After a failure: remove the work folder and work.json this run made, unless a frame is finished."""
        if self.settings.work_dir is None or os.path.isfile(self.frame_path(0)):
            return
        for path in reversed(self._made):  # work.json, then the folder (if nothing else is in it)
            try:
                if os.path.isdir(path):
                    os.rmdir(path)
                else:
                    os.remove(path)
            except OSError:  # something else is in the folder now: it stays
                pass
        self._made.clear()

    def _execute(self, on_frame: Callable[[FrameInfo], None] | None,
                 on_event: Callable[[int, Any], None] | None) -> VideoResult:
        from ..io.images import load_image, pil_to_tensor
        from ..losses import masks
        from ..networks.vgg import load_network
        from ..run.fits import check_fits
        from ..run.run import Run
        from ..run.prepare import resolve_device, default_size
        from ..losses.temporal import TemporalLoss
        from .temporal import SETTLE, frame_start, painted

        began = time.perf_counter()
        config, settings = self.config, self.settings
        check_fits((self.clip.width, self.clip.height), self.styles, config)  # before a frame is read at the size
        if config.style_masks or config.content_mask is not None:  # each frame's run takes them; refused now
            masks.load_guides(config.style_masks, config.content_mask, (self.clip.width, self.clip.height), (16, 16),
                              len(self.styles), content_label="the video's frames")
        done = self._open_work()
        device = resolve_device(config.device)
        size = config.size or default_size(device)
        result = VideoResult("done", done, self.clip.count)
        first_steps = settings.first_frame_steps or 2 * config.steps
        timing = self._timing = Timing([self._stages(index, size, first_steps)
                                             for index in range(done, self.clip.count)])
        later = self._stages(1, size, first_steps)  # a frame after the first; painted first, a first frame's run too
        plans = {False: later, True: self._stages(0, size, first_steps) + later}
        cnn = None
        previous_in = previous_out = None
        counts = None  # the evaluations each pixel has had, carried through the flow (temporal.py)
        for index, picture in enumerate(frames(self.clip)):
            content = load_image(picture, size, device)
            if index < done:  # finished by an earlier run: only what the next frame needs
                if not settings.independent:
                    counts = self._counted(index, counts, previous_in, content, first_steps)
                previous_in = content
                if index == done - 1:
                    previous_out = self._finished(index, device)
                if on_frame is not None:
                    on_frame(FrameInfo(index, self.clip.count, 0.0, 0.0, True, time.perf_counter() - began))
                continue
            if self._stop.is_set():
                result.stopped = self._reason
                return result
            if cnn is None:
                cnn = load_network(config.model, config.weights, preprocess=config.preprocess)  # once a video
                cnn.features.to(device)
            started = time.perf_counter()
            timing.start_frame()
            flow_seconds = 0.0
            if index == 0 or settings.independent or previous_out is None or previous_in is None:  # set together
                steps = config.steps if settings.independent else first_steps
                # The consistent mode's first frame, which every later one starts from, hands back its best evaluated
                # image: LBFGS on the pixels can diverge (a 48 px texture did at 600 evaluations), and noise would
                # then be held by the temporal term for the whole clip. --independent frames are the tutorial's runs.
                run = Run(content, self.styles, dataclasses.replace(config, steps=steps), cnn=cnn,
                          keep_best=None if settings.independent else 0.0)
            else:
                start = frame_start(previous_out, previous_in, content, counts, SETTLE * first_steps)
                counts = start.evaluations
                flow_seconds = start.flow_seconds
                # this frame's plan and, as a guess, every later one's: painted first or not (temporal.painted)
                timing.plans[index - done:] = [plans[start.paint is not None]] * (self.clip.count - index)
                if start.paint is not None:  # what entered or was uncovered starts from the frame painted as a still
                    run = Run(content, self.styles, dataclasses.replace(config, steps=first_steps), cnn=cnn,
                              keep_best=0.0)
                    self.painting = True
                    try:
                        painting = self._frame(run, index, on_event)
                    finally:
                        self.painting = False
                    if isinstance(painting, str):
                        result.stopped = painting
                        return result
                    start = painted(start, pil_to_tensor(painting.image.convert("RGB")).to(device))
                warped, begin = start.warped, start.start
                if config.preserve_colors == "luminance":  # the run optimises the luminance (gray) image
                    from ..core.colors import gray, luminance

                    warped, begin = gray(luminance(warped)), gray(luminance(begin))
                losses = [TemporalLoss(warped, start.mask, settings.temporal_weight)] if settings.temporal_weight else []
                # The frame's best evaluated image: its total loss is then at most its start's, which bounds the
                # temporal term (temporal.py); LBFGS's last update may have overshot.
                run = Run(content, self.styles, config, init=begin, image_losses=losses, cnn=cnn, keep_best=0.0)
            frame_result = self._frame(run, index, on_event)
            timing.end_frame()
            if isinstance(frame_result, str):
                result.stopped = frame_result
                return result
            image = frame_result.image.convert("RGB")
            self._keep(index, image)
            if not settings.independent:
                counts = self._counted(index, counts, None, content, first_steps)
            previous_in, previous_out = content, pil_to_tensor(image).to(device)
            seconds = time.perf_counter() - started
            result.done = index + 1
            result.evaluations += frame_result.evaluations
            result.losses = dict(frame_result.losses)
            result.frame_losses.append(dict(frame_result.losses))
            result.seconds.append(seconds)
            result.flow_seconds.append(flow_seconds)
            if on_frame is not None:
                on_frame(FrameInfo(index, self.clip.count, seconds, flow_seconds, False, time.perf_counter() - began,
                                   timing.time_left()))
        return result

    def _frame(self, run: Any, index: int, on_event: Callable[[int, Any], None] | None) -> Any:
        """``run`` executed as frame ``index``'s (cancellable, its evaluations timed and told); its result, or the
        reason it was cancelled."""
        self._run = run
        if self._stop.is_set():
            run.cancel(self._reason)
        outcome = run.execute(functools.partial(self._event, run, index, on_event=on_event))
        self._run = None
        return outcome.stopped if outcome.stopped in CANCEL_REASONS else outcome

    def _counted(self, index: int, counts: Any, previous_in: Any, content: Any, first_steps: int) -> Any:
        """Each pixel's evaluations once frame ``index`` is done: the planned ones (not the run's count, so a resumed
        run, which carries them through the flows of the frames it skips, gets the same), frame 0's as settled.
        ``previous_in`` None: the counts are this frame's already (``FrameStart.evaluations``)."""
        import numpy as np

        from .temporal import SETTLE, carried_evaluations

        if index == 0 or counts is None:  # a still's run: settled (frames 1 and 2 were not held when it counted once)
            return np.full(tuple(content.shape[-2:]), SETTLE * first_steps, np.float32)
        if previous_in is not None:
            counts = carried_evaluations(previous_in, content, counts, SETTLE * first_steps)
        return counts + float(self.config.steps)

    def _stages(self, index: int, size: int, first_steps: int) -> list[Stage]:
        """Frame ``index``'s working sizes with the evaluations each runs (``run.plans``) and its megapixels."""
        from ..run.plans import plan_run

        first = index == 0 and not self.settings.independent
        plan = plan_run(dataclasses.replace(self.config, steps=first_steps) if first else self.config, size)
        shape = self.clip.width * self.clip.height / max(self.clip.width, self.clip.height) ** 2
        return [(evaluations, side * side * shape / 1e6) for side, evaluations in zip(plan.sizes, plan.evaluations)]

    def _event(self, run: Any, index: int, info: Any, on_event: Callable[[int, Any], None] | None) -> None:
        if self._timing is not None:
            self._timing.evaluated(info.size[0] * info.size[1] / 1e6)
        for loss in run.image_losses:  # the frame's first evaluation gives the temporal term its scale
            loss.calibrate(info.loss)
        if on_event is not None:
            on_event(index, info)

    def record(self, result: VideoResult, device: str) -> dict[str, Any]:
        """The provenance record of the video (``provenance.make_record``), with a ``video`` section: this
        command's settings, the frame count and the input's hash (of every frame file for a folder)."""
        content = folder_frames(self.clip.path)[0] if self.clip.folder else self.clip.path
        record = provenance.make_record(self.config, content=content, styles=self.styles, weights=self.config.weights,
                                        device=device, evaluations=result.evaluations, losses=result.losses,
                                        seconds=sum(result.seconds), stopped=result.stopped)
        video = dataclasses.asdict(self.settings)
        video.pop("work_dir")
        fingerprint = self.fingerprint()
        record["video"] = {**video, "frames": self.clip.count, "input": base_name(self.clip.path),
                           "input_sha256": fingerprint["input"]}
        return json.loads(json.dumps(record))

    def _keep(self, index: int, image: Image.Image) -> None:
        if self.settings.work_dir is None:
            self._memory[index] = image
            return
        with atomic_output(self.frame_path(index), VideoError) as handle:
            image.save(handle, format="PNG")

    def _finished(self, index: int, device: Any) -> Any:
        from ..io.images import pil_to_tensor

        return pil_to_tensor(self.stylised_frame(index)).to(device)

    def stylised_frame(self, index: int) -> Image.Image:
        """Finished frame ``index`` (from the work folder, or memory without one)."""
        if self.settings.work_dir is None:
            return self._memory[index]
        with Image.open(self.frame_path(index)) as image:
            return image.convert("RGB")

    def stylised_frames(self) -> Iterator[Image.Image]:
        for index in range(self.clip.count):
            yield self.stylised_frame(index)

    def input_frames(self, size: int) -> Iterator[Any]:
        """The input frames at the working size, ``(1, 3, H, W)`` in [0, 1] on the CPU (for the flicker figure)."""
        from ..io.images import load_image

        for picture in frames(self.clip):
            yield load_image(picture, size)


def flicker(video: VideoRun, size: int) -> float:
    """Lai et al.'s warping error of the finished frames (``flow.warping_error``), pair by pair."""
    from ..io.images import pil_to_tensor
    from .flow import dis_flow, pair_error

    def hwc(t: Any) -> Any:
        return t[0].permute(1, 2, 0).numpy()

    errors, previous = [], None
    for index, content in enumerate(video.input_frames(size)):
        output = hwc(pil_to_tensor(video.stylised_frame(index)))
        current = (hwc(content), output)
        if previous is not None:
            errors.append(pair_error(previous[1], output, dis_flow(previous[0], current[0]),
                                     dis_flow(current[0], previous[0])))
        previous = current
    return float(sum(errors) / len(errors)) if errors else 0.0
