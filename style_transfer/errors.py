"""The errors the library raises on bad input, so the CLI can map them to one line."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch



def first_line(exc: BaseException, limit: int | None = None) -> str:
    """The first non-empty line of ``exc``'s message (at most ``limit`` characters), or its type's name: what a
    one-line error shows of an exception from another library."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    return text if limit is None else text[:limit]

class StyleTransferError(Exception):
    """Base class of the errors this package raises on purpose (never a bug)."""


class ImageError(StyleTransferError, ValueError):
    """An input image that cannot be used (missing, corrupt, unsupported, too small)."""


class OutputError(StyleTransferError, ValueError):
    """An output path that cannot be written (missing folder, unknown extension, ...)."""


class WeightsError(StyleTransferError):
    """VGG19 weights that cannot be had or do not fit the network."""


class CheckpointError(StyleTransferError, ValueError):
    """A checkpoint that cannot be written, read, or resumed by this run (other inputs or settings)."""


class MissingExtra(StyleTransferError, ImportError):
    """An optional dependency is not installed (matplotlib for plots, PyAV or OpenCV for video); the message names the
    extra to install."""


class ResourceError(StyleTransferError, MemoryError):
    """Not enough memory for the asked size (refused beforehand, or the allocator gave up)."""


class RunStopped(StyleTransferError):
    """The run stopped before the end; ``image`` is the last good (finite, clamped) image, or None.

    Attributes:
        image: a ``(1, 3, H, W)`` tensor in [0, 1] on the CPU, or None when there is none.
        step: closure evaluations run so far.
    """

    def __init__(self, message: str, image: torch.Tensor | None, step: int) -> None:
        super().__init__(message)
        self.image = image
        self.step = step


class Interrupted(RunStopped):
    """The run was interrupted (Ctrl-C, SIGINT); ``image`` is the image at that moment."""


class NonFiniteLoss(RunStopped):
    """The loss became NaN or infinite; ``image`` is the last image whose loss was finite."""

