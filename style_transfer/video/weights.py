"""The temporal loss's default weight for a network's input scale (torch-free: ``stylize-video --help`` reads it)."""

from __future__ import annotations

# For images in [0, 1] and torchvision's normalised input (Ruder et al.'s 1e3 was for 0..255): docs/video.md.
DEFAULT_TEMPORAL_WEIGHT = 1e3
# For weights on Caffe's 0-255 input (preprocess caffe, caffe256): their features are about 58x larger (255 x
# ImageNet's std), the content and style terms about 58^2 = 3400x, while the temporal term, on the pixels, is not;
# 1e3 x 3400 keeps the balance (as presets.CAFFE_WEIGHTS does for the style weight). Real VGG16, 48 px clip of
# benchmarks/flicker.py, 2026-12-01: warping error 0.33 of frame by frame against 0.43 at 1e3 (docs/video.md).
CAFFE_TEMPORAL_WEIGHT = 3.4e6


def default_temporal_weight(preprocess: str | None) -> float:
    """The temporal weight for a network that takes ``preprocess`` input (None: not known yet, torchvision's)."""
    return CAFFE_TEMPORAL_WEIGHT if preprocess is not None and preprocess.startswith("caffe") else DEFAULT_TEMPORAL_WEIGHT
