"""Reading and writing video with PyAV: frames with their timestamps, the display rotation, audio copied.

A clip is read twice: ``probe`` decodes every frame once to check it (one size throughout, at least one
frame) and to note its timestamps, so a bad input fails before any stylising; ``frames`` then yields the
pictures. ``write_video`` encodes the stylised frames with the input's timestamps (a variable frame rate
survives), sets the input's display rotation and copies the audio packets unchanged (remux, no re-encode),
all into a temporary file renamed over the output at the end.

Inputs: any file FFmpeg reads (an animated GIF included), or a folder of image files (sorted by name,
``fps`` frames a second).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from types import ModuleType
from typing import BinaryIO

from PIL import Image

from ..io.files import atomic_output, file_problem, shown
from ..io.images import open_image, pil_to_rgb
from . import VideoError, require
from ..errors import first_line

# Output container and video codec by extension (the format the extension names; H.264 by default).
OUTPUTS = {".mp4": ("mp4", "libx264"), ".m4v": ("mp4", "libx264"), ".mov": ("mov", "libx264"),
           ".mkv": ("matroska", "libx264"), ".webm": ("webm", "libvpx-vp9"), ".gif": ("gif", "gif")}
FRAME_EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff")


@dataclass(frozen=True)
class Clip:
    """What ``probe`` found in an input."""

    path: str
    folder: bool  # a folder of image files
    width: int
    height: int
    count: int  # frames
    pts: tuple[int, ...]  # each frame's timestamp in time_base units, strictly increasing
    time_base: Fraction
    rotation: int  # display rotation in degrees (counter-clockwise, as PyAV reads it); frames are stored unrotated
    audio: int  # audio streams (copied into the output)

    @property
    def seconds(self) -> tuple[float, ...]:
        return tuple(float(p * self.time_base) for p in self.pts)


def output_container(path: str | os.PathLike) -> tuple[str, str]:
    """The (container, codec) an output path's extension names.

    Raises:
        VideoError: an extension we do not write.
    """
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext not in OUTPUTS:
        raise VideoError(f"{shown(path)}: unknown video extension {ext or '(none)'!r}; use one of "
                         f"{', '.join(OUTPUTS)}")
    return OUTPUTS[ext]


def folder_frames(path: str | os.PathLike) -> list[str]:
    """The image files of a folder of frames, sorted by name."""
    names = sorted(n for n in os.listdir(path) if n.lower().endswith(FRAME_EXTENSIONS) and not n.startswith("."))
    return [os.path.join(path, n) for n in names]


def probe(path: str | os.PathLike, fps: float = 25.0) -> Clip:
    """Decode ``path`` once: its size, frame count, timestamps, rotation and audio streams.

    Raises:
        VideoError: not a video, no video stream, zero frames, or a frame size that changes (one line).
        MissingExtra: PyAV is not installed.
    """
    name = os.fspath(path)
    if os.path.isdir(name):
        return _probe_folder(name, fps)
    problem = file_problem(name)
    if problem is not None:
        raise VideoError(f"{shown(name)}: {problem}")
    av = require("av")
    try:
        with av.open(name) as container:
            if not container.streams.video:
                raise VideoError(f"{shown(name)}: has no video stream")
            stream = container.streams.video[0]
            size, pts, rotation = None, [], 0
            for frame in container.decode(stream):
                if size is None:
                    size, rotation = (frame.width, frame.height), int(getattr(frame, "rotation", 0) or 0)
                elif (frame.width, frame.height) != size:
                    raise VideoError(f"{shown(name)}: the frame size changes from {size[0]}x{size[1]} to "
                                     f"{frame.width}x{frame.height} at frame {len(pts)}; not supported")
                pts.append(frame.pts)
            time_base = stream.time_base or Fraction(1, 25)
            rate = stream.average_rate or stream.guessed_rate or Fraction(25)
            audio = len(container.streams.audio)
    except av.FFmpegError as exc:
        raise VideoError(f"{shown(name)}: not a readable video ({_ffmpeg_reason(exc)})") from None
    if size is None:
        raise VideoError(f"{shown(name)}: has no frames")
    if any(p is None for p in pts) or any(b <= a for a, b in zip(pts, pts[1:])):
        step = max(1, round(1 / (rate * time_base)))  # timestamps missing or out of order: a constant rate
        pts = [i * step for i in range(len(pts))]
    return Clip(name, False, size[0], size[1], len(pts), tuple(pts), Fraction(time_base), rotation, audio)


def _probe_folder(name: str, fps: float) -> Clip:
    paths = folder_frames(name)
    if not paths:
        raise VideoError(f"{shown(name)}: a folder with no image files ({', '.join(FRAME_EXTENSIONS)})")
    size = None
    for i, frame_path in enumerate(paths):
        with open_image(frame_path) as image:
            if size is None:
                size = image.size
            elif image.size != size:
                raise VideoError(f"{shown(frame_path)}: {image.width}x{image.height}, the frames before are "
                                 f"{size[0]}x{size[1]}; every frame must have one size")
    if not fps > 0:
        raise VideoError(f"fps must be > 0, got {fps!r}")
    time_base = 1 / Fraction(fps).limit_denominator(1001)  # one tick a frame: 25 -> 1/25, 29.97 -> 100/2997
    assert size is not None  # the first of the frames (there is one at least) gave it
    return Clip(name, True, size[0], size[1], len(paths), tuple(range(len(paths))), time_base, 0, 0)


def frames(clip: Clip) -> Iterator[Image.Image]:
    """The clip's frames as RGB Pillow images, in order (as stored: the rotation is not applied)."""
    if clip.folder:
        for frame_path in folder_frames(clip.path):
            with open_image(frame_path) as image:
                yield pil_to_rgb(image)
        return
    av = require("av")
    with av.open(clip.path) as container:
        for frame in container.decode(container.streams.video[0]):
            yield frame.to_image().convert("RGB")


def write_video(path: str | os.PathLike, pictures: Iterable[Image.Image], clip: Clip,
                metadata: dict | None = None) -> None:
    """Encode ``pictures`` (one per frame of ``clip``) at the clip's timestamps, with its rotation and audio.

    H.264 (yuv420p: odd sizes are scaled to the even size below) unless the extension names another
    format (``OUTPUTS``). Audio streams are copied packet by packet (not into a GIF). Atomic: an existing
    file is replaced only once the whole video is written.

    ``metadata``: a provenance record, stored as JSON in the container's ``comment`` tag (MP4, MOV, MKV,
    WebM; a GIF has no place for it).

    Raises:
        VideoError: the container cannot take a stream (the message says which); OutputError: the path.
    """
    from ..errors import OutputError

    av = require("av")
    container_name, codec = output_container(path)
    with atomic_output(path, OutputError) as handle:
        try:
            _encode(av, handle, container_name, codec, pictures, clip, metadata)
        except av.FFmpegError as exc:
            raise VideoError(f"{shown(path)}: cannot write it ({_ffmpeg_reason(exc)})") from None


def _encode(av: ModuleType, handle: BinaryIO, container_name: str, codec: str, pictures: Iterable[Image.Image],
            clip: Clip, metadata: dict | None) -> None:
    import json

    gif = codec == "gif"
    with av.open(handle, "w", format=container_name) as out:
        if metadata is not None and not gif:
            out.metadata["comment"] = json.dumps(metadata, ensure_ascii=True, separators=(",", ":"))
        stream = out.add_stream(codec)
        stream.time_base = clip.time_base
        stream.codec_context.time_base = clip.time_base
        width = height = None
        source = av.open(clip.path) if clip.audio and not gif else None
        try:
            copies = {s.index: out.add_stream_from_template(s) for s in source.streams.audio} if source else {}
            for picture, pts in zip(pictures, clip.pts):
                if width is None:
                    width, height = (picture.width, picture.height) if gif else (picture.width // 2 * 2,
                                                                                  picture.height // 2 * 2)
                    stream.width, stream.height = width, height
                    stream.pix_fmt = "rgb8" if gif else "yuv420p"
                    if clip.rotation and hasattr(stream, "set_display_rotation"):
                        stream.set_display_rotation(clip.rotation)
                frame = av.VideoFrame.from_image(picture.convert("RGB"))
                frame = frame.reformat(width=width, height=height, format=stream.pix_fmt)
                frame.pts, frame.time_base = pts, clip.time_base
                for packet in stream.encode(frame):
                    out.mux(packet)
            for packet in stream.encode():
                out.mux(packet)
            if source is not None:
                for packet in source.demux(*source.streams.audio):
                    if packet.dts is None:  # the demuxer's empty packet at the end
                        continue
                    packet.stream = copies[packet.stream.index]
                    out.mux(packet)
        finally:
            if source is not None:
                source.close()


def _ffmpeg_reason(exc: BaseException) -> str:
    """FFmpeg's words for an error, without PyAV's ``[Errno N]`` and the repeated file name."""
    return getattr(exc, "strerror", None) or first_line(exc, 200)


