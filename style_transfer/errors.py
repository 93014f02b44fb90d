"""The errors the library raises on bad input, so the CLI can map them to one line."""

from __future__ import annotations


class StyleTransferError(Exception):
    """Base class of the errors this package raises on purpose (never a bug)."""


class ImageError(StyleTransferError, ValueError):
    """An input image that cannot be used (missing, corrupt, unsupported, too small)."""


class OutputError(StyleTransferError, ValueError):
    """An output path that cannot be written (missing folder, unknown extension, ...)."""


class WeightsError(StyleTransferError):
    """VGG19 weights that cannot be had or do not fit the network."""
