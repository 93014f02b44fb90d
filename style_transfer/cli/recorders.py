"""Recorders: turn a run's per-evaluation events into files (frames, an animation, a loss log, a plot).

Each recorder is a callable taking the run's ``StepInfo`` (the ``StepEvent`` protocol below), so the
command, the web app and batch plug the same objects into a ``Run``::

    frames = FrameSaver("out.png", 40)              # --save-every 40: out.0040.png, out.0080.png, ...
    movie = Animation("run.webp", 10)               # --animate run.webp
    options = RunOptions(preview_every=preview_interval(frames.every, movie.every))
    with LossLog("losses.jsonl") as log:            # --log losses.jsonl
        result = Run("photo.jpg", "style.jpg", config, options).execute(
            lambda info: (frames(info), movie(info), log(info)))
    movie.close(result.image, result.record)
    plot_losses(log.rows, "losses.png")             # --plot losses.png (needs matplotlib)

This module never imports torch (a tensor passed in is converted by ``images``, which imports
it then) and never imports matplotlib at module level: ``plot_losses`` does, and says which
extra to install when it is missing.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TextIO, Union

from PIL import Image, features

from ..io.metadata import RECORD_KEY, json_float, record_text, save_options
from ..errors import MissingExtra, OutputError, StyleTransferError
from ..io.files import atomic_output, check_writable, open_regular, shown
from ..io.images import check_output, is_tensor, save_image, tensor_to_pil

if TYPE_CHECKING:
    import torch
    from matplotlib.figure import Figure


class StepEvent(Protocol):
    """What a recorder reads from the run's ``transfer.StepInfo`` after each closure evaluation."""

    @property
    def step(self) -> int: ...  # evaluations so far in the whole run, from 1
    @property
    def total(self) -> int: ...  # evaluations the run plans (fixed for a run)
    @property
    def style_loss(self) -> float: ...
    @property
    def content_loss(self) -> float: ...
    @property
    def tv_loss(self) -> float: ...
    @property
    def elapsed(self) -> float: ...  # seconds since the run started
    @property
    def size(self) -> tuple[int, int]: ...  # (width, height) of the working image
    @property
    def scale(self) -> int: ...  # 0-based index of that size (coarse-to-fine)
    @property
    def scales(self) -> int: ...
    @property
    def preview(self) -> Image.Image | None: ...  # RGB, final colours, working size; only when asked
    @property
    def loss(self) -> float: ...


# A record to embed in each file, or a function of the step giving one (None: no record).
RecordSource = Union[Mapping[str, Any], Callable[[StepEvent], Union[Mapping[str, Any], None]], None]

# The fewest digits of a frame number: out.0040.png sorts by name up to 9999 evaluations.
MIN_DIGITS = 4

# Animated WebP: lossy, quality 80, method 4. Measured through Animation with 32 frames of 512x341
# (a 300-step run: 320 evaluations planned, a frame every 10, plus the final image), the cat of
# images/ fading into the stain with either fresh Gaussian noise in each frame (sigma 4 to 14: the
# worst case, every pixel changes) or a fixed noise texture plus sigma 2 per frame: 1.3-1.4 MB,
# 2.4 s to encode on 2 busy cores. Quality 75 gives 1.0-1.1 MB, method 6 saves 5 % at twice the
# time, lossless gives 11.6 MB.
WEBP_OPTIONS: dict[str, Any] = {"quality": 80, "method": 4}
# Animated GIF: the first frame (the start: the photo) has a palette of its own, and the others share one of 255
# colours (no flicker between them, 10-35 % smaller than a palette per frame), no dithering; one palette for all
# painted the photo in the painting's few colours. The same 32 frames: 4.3-6.1 MB, 0.5 s.
# GIF is the fallback for old viewers; WebP is 3-4 times smaller at a better quality.
GIF_COLORS = 255
ANIMATION_EXTENSIONS = {".webp": "WEBP", ".gif": "GIF"}

# The loss plot: 8 x 4.5 inches at 100 dpi, a PNG of 800 x 450 px.
PLOT_FIGSIZE = (8.0, 4.5)
PLOT_DPI = 100
PLOT_FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
MISSING_MATPLOTLIB = "--plot needs matplotlib: pip install 'style_transfer[plot]'"

# The loss terms of a log row, as named in the file, and the StepEvent fields they come from.
LOSS_TERMS = (("style", "style_loss"), ("content", "content_loss"), ("tv", "tv_loss"))
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class LogError(StyleTransferError, ValueError):
    """A loss log that cannot be read (missing, not JSON Lines)."""


def preview_interval(*every: int | None) -> int | None:
    """How often the run must make a preview so each recorder gets its frames: the GCD of ``every``.

    None entries (a recorder not asked for) are left out; None when none is left.
    """
    wanted = [n for n in every if n is not None]
    return math.gcd(*wanted) if wanted else None


def numbered_path(output: str | os.PathLike, step: int, total: int,
                  save_dir: str | os.PathLike | None = None) -> Path:
    """The file name of the image of evaluation ``step``: ``out.png`` -> ``out.0040.png``.

    The number is zero-padded to ``max(MIN_DIGITS, len(str(total)))`` digits, so the frames of a
    run sort by name. The file lies beside ``output``, or in ``save_dir`` with the same name. It
    never equals ``output`` (its stem gains a part).

    Raises:
        ValueError: a negative ``step`` or a ``total`` below 1.
    """
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if total < 1:
        raise ValueError(f"total must be >= 1, got {total}")
    path = Path(output)
    digits = max(MIN_DIGITS, len(str(total)))
    name = f"{path.stem}.{step:0{digits}d}{path.suffix}"
    return (Path(save_dir) if save_dir is not None else path.parent) / name


def _check_every(every: int) -> int:
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise ValueError(f"every must be an integer >= 1, got {every!r}")
    return every


def _record_for(record: RecordSource, info: StepEvent) -> Mapping[str, Any] | None:
    return record(info) if callable(record) else record


class FrameSaver:
    """Saves the run's image every ``every`` evaluations (``--save-every N``), atomically.

    Called with each ``StepInfo``: when ``info.step % every == 0`` and the step carries a preview,
    the preview is written to ``numbered_path(output, info.step, info.total, save_dir)`` in the
    output's format, with ``record`` embedded (a mapping, or a function of the step giving one).
    Steps without a preview are skipped: the run must be asked for previews at least at those
    steps (``preview_interval``).

    Attributes:
        written: the paths written so far, in order.

    Raises:
        ValueError: ``every`` below 1.
        OutputError: (at construction) an output extension or a folder that cannot be written;
            (when called) a frame that cannot be written.
    """

    def __init__(self, output: str | os.PathLike, every: int, *, save_dir: str | os.PathLike | None = None,
                 record: RecordSource = None) -> None:
        self.output = Path(output)
        self.every = _check_every(every)
        self.save_dir = Path(save_dir) if save_dir is not None else None
        self.record = record
        self.written: list[Path] = []
        if self.save_dir is not None and not self.save_dir.is_dir():
            what = "is not a folder" if self.save_dir.exists() else "does not exist"
            raise OutputError(f"{shown(self.save_dir)}: save folder {what}")
        check_output(numbered_path(self.output, 1, 1, self.save_dir))  # extension, folder, writable

    def __call__(self, info: StepEvent) -> None:
        if info.step % self.every or info.preview is None:
            return
        path = numbered_path(self.output, info.step, info.total, self.save_dir)
        save_image(info.preview, path, metadata=_record_for(self.record, info))
        self.written.append(path)


def check_animation_path(path: str | os.PathLike) -> str:
    """Check, before any work, that an animation can be written at ``path``; return its format.

    Raises:
        OutputError: naming the path: a folder, an extension other than ``.webp`` or ``.gif``,
            a missing or unwritable folder, or a Pillow built without WebP.
    """
    name = os.fspath(path)
    if os.path.isdir(name):
        raise OutputError(f"{shown(name)}: is a directory; give an animation file name such as run.webp")
    ext = Path(name).suffix.lower()
    fmt = ANIMATION_EXTENSIONS.get(ext)
    if fmt is None:
        said = f"extension {shown(ext)!r}" if ext else "no extension"
        raise OutputError(f"{shown(name)}: cannot write an animation with {said} (use .webp or .gif)")
    if fmt == "WEBP" and not features.check("webp"):
        raise OutputError(f"{shown(name)}: this Pillow cannot write WebP; use .gif")
    check_output(name)
    return fmt


def _capped(size: tuple[int, int], max_side: int) -> tuple[int, int]:
    """``size`` scaled down (aspect kept, rounded) so its long side is at most ``max_side``."""
    width, height = size
    if max(width, height) <= max_side:
        return width, height
    scale = max_side / max(width, height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def _as_rgb(image: Image.Image | torch.Tensor) -> Image.Image:
    if is_tensor(image):
        return tensor_to_pil(image)
    if not isinstance(image, Image.Image):
        raise TypeError(f"expected a PIL image or a tensor, got {type(image).__name__}")
    return image if image.mode == "RGB" else image.convert("RGB")


class Animation:
    """The run as an animated WebP or GIF (``--animate FILE``): a frame every ``every`` evaluations.

    Called with each ``StepInfo``, it keeps a copy of the preview of each step divisible by
    ``every``, scaled down so its long side is at most ``max_side`` (about 0.5 MB a frame at
    512x341; 32 frames for a 300-step run with ``every=10``). ``close`` adds the final image
    and writes the file. Steps without a preview are skipped (see ``preview_interval``).

    Args:
        path: ``.webp`` (recommended: lossy, ``WEBP_OPTIONS``) or ``.gif`` (the start its own palette, the rest one shared).
        every: evaluations between frames.
        max_side: the long side of the animation in px at most.
        frame_ms: how long each frame shows; GIF keeps hundredths of a second.
        last_ms: how long the final image shows before the animation loops.

    Raises:
        ValueError: ``every``, ``max_side``, ``frame_ms`` or ``last_ms`` below 1.
        OutputError: (at construction, ``check_animation_path``) a path that cannot be written.
    """

    def __init__(self, path: str | os.PathLike, every: int, *, max_side: int = 512, frame_ms: int = 100,
                 last_ms: int = 1500) -> None:
        self.every = _check_every(every)
        for field, value in (("max_side", max_side), ("frame_ms", frame_ms), ("last_ms", last_ms)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{field} must be an integer >= 1, got {value!r}")
        self.format = check_animation_path(path)
        self.path = Path(path)
        self.max_side = max_side
        self.frame_ms = frame_ms
        self.last_ms = last_ms
        self.steps: list[int] = []  # the evaluation of each frame kept, in order
        self._frames: list[Image.Image] = []
        self.closed = False

    def __len__(self) -> int:
        """The frames kept so far (the final image not counted)."""
        return len(self._frames)

    def __call__(self, info: StepEvent) -> None:
        if info.step % self.every or info.preview is None or self.closed:
            return
        preview = _as_rgb(info.preview)
        size = _capped(preview.size, self.max_side)
        # A copy either way: the caller may reuse or change its preview after the call.
        frame = preview.resize(size, Image.Resampling.LANCZOS) if size != preview.size else preview.copy()
        self._frames.append(frame)
        self.steps.append(info.step)

    def close(self, final_image: Image.Image | torch.Tensor, record: Mapping[str, Any] | None = None) -> Path:
        """Write the animation: the frames kept, then ``final_image``; return its path.

        All frames are resized to the final image's size, capped at ``max_side``. Each shows
        ``frame_ms``, the final one ``last_ms``; the animation loops forever. A last kept frame
        equal to the final image is dropped, and the encoders merge any other run of equal
        frames into one (their durations add). The file is written to a temporary file in the
        same folder and renamed over ``path``; on any failure the temporary file is removed
        and the frames are kept, so ``close`` may be called again.

        Args:
            final_image: an RGB Pillow image, or a ``(1, 3, H, W)`` tensor in [0, 1].
            record: a provenance record to embed (``provenance.make_record``).

        Raises:
            OutputError: the file cannot be written. ValueError: already closed.
        """
        if self.closed:
            raise ValueError(f"{shown(self.path)}: the animation was written already")
        final = _as_rgb(final_image)
        size = _capped(final.size, self.max_side)
        final = final.resize(size, Image.Resampling.LANCZOS) if size != final.size else final
        frames = [f if f.size == size else f.resize(size, Image.Resampling.LANCZOS) for f in self._frames]
        if frames and frames[-1].tobytes() == final.tobytes():
            frames.pop()
        frames.append(final)
        durations = [self.frame_ms] * (len(frames) - 1) + [self.last_ms]
        options: dict[str, Any] = {"save_all": True, "append_images": frames[1:], "duration": durations, "loop": 0}
        if self.format == "GIF":
            frames = _gif_frames(frames)
            options["append_images"] = frames[1:]
        else:
            options.update(WEBP_OPTIONS)
        if record is not None:
            options.update(save_options(record, self.format))
        with atomic_output(self.path, OutputError) as handle:
            frames[0].save(handle, format=self.format, **options)
        self.closed = True
        self._frames = []
        return self.path


def _gif_frames(frames: Sequence[Image.Image]) -> list[Image.Image]:
    """The frames as "P" images: the first with its own palette (Pillow writes it as the frame's local colour
    table), the rest mapped to one palette made from them all (median cut, no dither)."""
    first = frames[0].quantize(GIF_COLORS, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    return [first, *_shared_palette(frames[1:])] if len(frames) > 1 else [first]


def _shared_palette(frames: Sequence[Image.Image]) -> list[Image.Image]:
    """The frames as "P" images mapped to one palette made from all of them (median cut, no dither)."""
    thumb = 64  # each frame's colours sampled at this long side, in one strip
    samples = [f.resize(_capped(f.size, thumb), Image.Resampling.BILINEAR) for f in frames]
    strip = Image.new("RGB", (sum(s.width for s in samples), max(s.height for s in samples)))
    x = 0
    for sample in samples:
        strip.paste(sample, (x, 0))
        x += sample.width
    palette = strip.quantize(GIF_COLORS, method=Image.Quantize.MEDIANCUT)
    return [f.quantize(palette=palette, dither=Image.Dither.NONE) for f in frames]


def loss_row(info: StepEvent) -> dict[str, Any]:
    """One evaluation as a log row: step, seconds, each loss term, total loss, size [w, h], scale.

    Non-finite losses are the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (``read_log``
    turns them back into floats).
    """
    row: dict[str, Any] = {"step": int(info.step), "seconds": float(info.elapsed)}
    for key, field in LOSS_TERMS:
        row[key] = json_float(getattr(info, field))
    row["loss"] = json_float(info.loss)
    row["size"] = [int(info.size[0]), int(info.size[1])]
    row["scale"] = int(info.scale)
    return row


class LossLog:
    """A JSON Lines log of the losses (``--log FILE.jsonl``): one ``loss_row`` per evaluation.

    Each line is flushed as it is written, so a run that is interrupted or crashes leaves a
    file of whole lines up to that evaluation. The file is fsynced on ``close``. A context
    manager; ``close`` may be called more than once.

    Attributes:
        rows: the rows written, as dicts (for ``plot_losses``).

    Raises:
        OutputError: (at construction) the file cannot be created; (when called) a write fails.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.rows: list[dict[str, Any]] = []
        name = os.fspath(path)
        if os.path.isdir(name):
            raise OutputError(f"{shown(name)}: is a directory; give a log file name such as losses.jsonl")
        check_writable(name, "output folder")
        try:
            self._handle: TextIO | None = open(name, "w", encoding="utf-8", newline="\n")
        except OSError as exc:
            raise OutputError(f"{shown(name)}: cannot write ({exc.strerror or exc})") from None

    def __call__(self, info: StepEvent) -> None:
        self.write(loss_row(info))

    def write(self, row: Mapping[str, Any]) -> None:
        """Append one row (a ``loss_row``) as a line, and flush it."""
        if self._handle is None:
            raise ValueError(f"{shown(self.path)}: the log is closed")
        line = json.dumps(dict(row), ensure_ascii=True, separators=(",", ":"), allow_nan=False)
        try:
            self._handle.write(line + "\n")
            self._handle.flush()
        except OSError as exc:
            raise OutputError(f"{shown(self.path)}: cannot write ({exc.strerror or exc})") from None
        self.rows.append(dict(row))

    def close(self) -> None:
        """Flush, fsync and close the file (nothing when closed already)."""
        handle, self._handle = self._handle, None
        if handle is None:
            return
        try:
            handle.flush()
            os.fsync(handle.fileno())
        except OSError as exc:
            raise OutputError(f"{shown(self.path)}: cannot write ({exc.strerror or exc})") from None
        finally:
            handle.close()

    def __enter__(self) -> LossLog:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


def read_log(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of a loss log, in order, with non-finite losses as floats again.

    Blank lines are skipped, and so is a last line cut short (no newline, not JSON: a run
    killed while writing it).

    Raises:
        LogError: one line naming the file (and the line): missing, unreadable, or a line
            that is not a JSON object.
    """
    name = os.fspath(path)
    with open_regular(name, LogError) as handle:
        try:
            data = handle.read()
        except OSError as exc:
            raise LogError(f"{shown(name)}: cannot be read ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise LogError(f"{shown(name)}: not a loss log (not UTF-8 text)") from None
    lines = text.split("\n")
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            if number == len(lines):  # the last line, without its newline: cut short
                break
            raise LogError(f"{shown(name)}: line {number} is not JSON") from None
        if not isinstance(row, dict):
            raise LogError(f"{shown(name)}: line {number} is not a JSON object")
        for key in ("style", "content", "tv", "loss"):
            if isinstance(row.get(key), str) and row[key] in _NON_FINITE:
                row[key] = _NON_FINITE[row[key]]
        rows.append(row)
    return rows


def check_plot_available() -> None:
    """Check that matplotlib can be imported (call before a run that ends with ``plot_losses``).

    Raises:
        MissingExtra: with ``MISSING_MATPLOTLIB`` as its message.
    """
    try:
        import matplotlib  # noqa: F401  (first: a submodule already loaded would be found on its own)
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
        from matplotlib.figure import Figure  # noqa: F401
    except ImportError:
        raise MissingExtra(MISSING_MATPLOTLIB) from None


def check_plot_path(path: str | os.PathLike) -> str:
    """Check, before any work, that a plot can be written at ``path``; return its format.

    Raises:
        OutputError: naming the path: an extension other than .png, .svg, .pdf, a folder,
            a missing or unwritable folder.
    """
    name = os.fspath(path)
    if os.path.isdir(name):
        raise OutputError(f"{shown(name)}: is a directory; give a plot file name such as losses.png")
    ext = Path(name).suffix.lower()
    fmt = PLOT_FORMATS.get(ext)
    if fmt is None:
        said = f"extension {shown(ext)!r}" if ext else "no extension"
        raise OutputError(f"{shown(name)}: cannot write a plot with {said} (use .png, .svg or .pdf)")
    check_writable(name, "output folder")
    return fmt


def _values(rows: Sequence[Mapping[str, Any]], key: str) -> list[float]:
    out = []
    for row in rows:
        value = row.get(key, math.nan)
        out.append(_NON_FINITE[value] if isinstance(value, str) and value in _NON_FINITE else float(value))
    return out


def size_changes(rows: Sequence[Mapping[str, Any]]) -> list[tuple[int, tuple[int, int]]]:
    """The (step, (width, height)) of each row whose working size differs from the row before."""
    changes = []
    for before, row in zip(rows, rows[1:]):
        if (tuple(row["size"]), row.get("scale")) != (tuple(before["size"]), before.get("scale")):
            changes.append((int(row["step"]), (int(row["size"][0]), int(row["size"][1]))))
    return changes


def loss_figure(rows: Sequence[Mapping[str, Any]], *, title: str | None = None) -> Figure:
    """The loss curves of a run as a matplotlib ``Figure`` (no global backend is touched).

    Total, style, content and (when any is nonzero) TV loss against the evaluation, on a log
    scale; a dashed vertical line labelled with the new size where the working size changes.

    Args:
        rows: ``loss_row`` dicts (``LossLog.rows`` or ``read_log``), in step order.

    Raises:
        MissingExtra: matplotlib is not installed.
    """
    check_plot_available()
    from matplotlib.figure import Figure

    figure = Figure(figsize=PLOT_FIGSIZE, dpi=PLOT_DPI, layout="constrained")
    axes = figure.add_subplot()
    steps = [int(row["step"]) for row in rows]
    curves = [("loss", "total", 2.0), ("style", "style", 1.2), ("content", "content", 1.2)]
    if any(v != 0 for v in _values(rows, "tv")):
        curves.append(("tv", "tv", 1.2))
    for key, label, width in curves:
        axes.plot(steps, _values(rows, key), label=label, linewidth=width)
    if rows and any(v > 0 for key, _, _ in curves for v in _values(rows, key)):
        axes.set_yscale("log")
    for step, (width, height) in size_changes(rows):
        axes.axvline(step, color="0.5", linestyle="--", linewidth=1)
        axes.annotate(f"{width}x{height}", xy=(step, 1), xycoords=("data", "axes fraction"),
                      xytext=(3, -3), textcoords="offset points", va="top", fontsize=8, color="0.3")
    if rows:
        first = rows[0]["size"]
        axes.annotate(f"{first[0]}x{first[1]}", xy=(0, 1), xycoords="axes fraction", xytext=(3, -3),
                      textcoords="offset points", va="top", fontsize=8, color="0.3")
        axes.legend(loc="upper right")
    else:
        axes.text(0.5, 0.5, "no evaluations", ha="center", va="center", transform=axes.transAxes)
    axes.set_xlabel("evaluation")
    axes.set_ylabel("loss")
    if title:
        axes.set_title(title)
    axes.grid(True, which="major", alpha=0.3)
    return figure


def plot_losses(rows: Iterable[Mapping[str, Any]], path: str | os.PathLike, *, title: str | None = None,
                record: Mapping[str, Any] | None = None) -> Path:
    """Write the loss curves (``loss_figure``) as PNG, SVG or PDF, by extension, atomically.

    Args:
        rows: ``loss_row`` dicts, in step order.
        record: a provenance record, embedded in a PNG the way ``images.save_image`` does
            (ignored for SVG and PDF).

    Raises:
        OutputError: (first, before any work) a path that cannot be written.
        MissingExtra: matplotlib is not installed.
    """
    fmt = check_plot_path(path)
    check_plot_available()
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    figure = loss_figure(list(rows), title=title)
    FigureCanvasAgg(figure)  # attaches itself: Agg renders without a global backend (svg/pdf switch)
    options: dict[str, Any] = {}
    if fmt == "png" and record is not None:
        # A tEXt chunk of the record's ASCII JSON under provenance's keyword: read_record finds it.
        options["metadata"] = {RECORD_KEY: record_text(record)}
    with atomic_output(path, OutputError) as handle:
        figure.savefig(handle, format=fmt, dpi=PLOT_DPI, **options)
    return Path(path)
