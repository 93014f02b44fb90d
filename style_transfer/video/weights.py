"""The temporal loss's default weight (torch-free: ``stylize-video --help`` reads it)."""

from __future__ import annotations

# Relative to the frame's start loss (video/temporal.py), so one weight serves every network, size and loss weight:
# a frame's reliable pixels then stay within a mean squared deviation of 1/DEFAULT_TEMPORAL_WEIGHT of the warped
# previous frame (RMS 0.03 of the [0, 1] range at 1e3). How it was chosen: benchmarks/NOTEBOOK.md, "Video".
DEFAULT_TEMPORAL_WEIGHT = 1e3


def default_temporal_weight(preprocess: str | None = None) -> float:
    """The temporal weight for a network that takes ``preprocess`` input: the same for all (the term is relative)."""
    return DEFAULT_TEMPORAL_WEIGHT
