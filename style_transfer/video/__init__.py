"""Video with temporal consistency (docs/video.md): PyAV reading and writing, OpenCV flow, Ruder et al.'s temporal loss.

Needs the extra: ``pip install 'style_transfer[video]'`` (PyAV and opencv-python-headless). Importing this
package imports neither; the modules that need them say so in one line when they are missing.

    from style_transfer.video.runner import VideoRun, VideoSettings
    from style_transfer.video.io import write_video
    video = VideoRun("clip.mp4", ["style.jpg"], StyleConfig(size=256), VideoSettings(work_dir="clip.frames"))
    result = video.execute()           # video.cancel() from another thread; finished frames stay in work_dir
    write_video("out.mp4", video.stylised_frames(), video.clip, metadata=video.record(result, "cpu"))
"""

from __future__ import annotations

from types import ModuleType

from ..errors import MissingExtra, StyleTransferError

EXTRA = "pip install 'style_transfer[video]'"

# Relative to the frame's start loss (losses/temporal.py), so one weight serves every network, size and loss weight:
# a frame's reliable pixels then stay within a mean squared deviation of 1/DEFAULT_TEMPORAL_WEIGHT of the warped
# previous frame (RMS 0.03 of the [0, 1] range at 1e3). How it was chosen: benchmarks/NOTEBOOK.md, "Video".
DEFAULT_TEMPORAL_WEIGHT = 1e3


def default_temporal_weight(preprocess: str | None = None) -> float:
    """The temporal weight for a network that takes ``preprocess`` input: the same for all (the term is relative)."""
    return DEFAULT_TEMPORAL_WEIGHT


class VideoError(StyleTransferError, ValueError):
    """A video that cannot be read or written (not a video, no video stream, no frames, a size that changes)."""


def require(module: str) -> ModuleType:
    """Import ``av`` or ``cv2``, or raise ``MissingExtra`` naming the extra to install."""
    import importlib

    names = {"av": "PyAV (av)", "cv2": "OpenCV (opencv-python-headless)"}
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtra(f"video needs {names.get(module, module)}, which is not installed: {EXTRA}") from None
