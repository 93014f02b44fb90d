"""VGG19 feature extractor: pretrained (torchvision weights, cached), a local file, or seeded random."""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path

import torch
from torch import nn
from torchvision.models import VGG19_Weights

from .errors import WeightsError
from .files import open_regular, shown

# ImageNet statistics the VGG weights were trained with (the tutorial's values).
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

# torchvision's VGG19 ("E") feature layout: channels per conv, "M" for a 2x2 max pool.
VGG19_LAYOUT: tuple[int | str, ...] = (64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M",
                                       512, 512, 512, 512, "M", 512, 512, 512, 512, "M")

DOWNLOAD_TIMEOUT_S = 30.0
_HASH_RE = re.compile(r"-([a-f0-9]{6,})\.")

DownloadProgress = Callable[[int, int], None]  # (bytes done, bytes in all or 0 if unknown)


class Normalization(nn.Module):
    """Normalise a (1, 3, H, W) image in [0, 1] with per-channel mean and std (ImageNet's).

    Departure from the tutorial: mean and std are buffers, so they follow ``.to(device)``.
    """

    def __init__(self, mean: torch.Tensor | tuple[float, ...] = IMAGENET_MEAN,
                 std: torch.Tensor | tuple[float, ...] = IMAGENET_STD) -> None:
        super().__init__()
        self.register_buffer("mean", torch.as_tensor(mean, dtype=torch.float32).clone().view(-1, 1, 1))
        self.register_buffer("std", torch.as_tensor(std, dtype=torch.float32).clone().view(-1, 1, 1))

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        return (img - self.mean) / self.std


def vgg19_features() -> nn.Sequential:
    """An untrained VGG19 ``features`` block laid out exactly as torchvision's (same indices).

    Built directly rather than through ``torchvision.models.vgg19()`` so the 400 MB
    classifier is never allocated only to be dropped.
    """
    layers: list[nn.Module] = []
    channels = 3
    for item in VGG19_LAYOUT:
        if item == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
        else:
            assert isinstance(item, int)
            layers += [nn.Conv2d(channels, item, kernel_size=3, padding=1), nn.ReLU(inplace=True)]
            channels = item
    return nn.Sequential(*layers)


def random_vgg19_features(seed: int = 0) -> nn.Sequential:
    """VGG19 features with seeded random weights (torchvision's init: Kaiming normal, zero bias).

    Gives no artistic result; for tests and offline smoke runs. The same seed gives the same
    weights on every machine up to float32 rounding: a CPU generator draws the normal samples,
    and the scaling by Kaiming's std runs in the CPU's own kernels (AVX2, AVX-512 and scalar
    kernels were seen to differ by about 1e-7 relative).
    """
    features = vgg19_features()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in features:
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu", generator=generator)
                nn.init.zeros_(module.bias)
    return features


def freeze(module: nn.Module) -> nn.Module:
    """Put a module in eval mode and stop gradients to its parameters; returns it."""
    module.eval()
    module.requires_grad_(False)
    return module


def imagenet_weights_path() -> Path:
    """Where torchvision's VGG19 ImageNet weights live in the torch hub cache (``TORCH_HOME``)."""
    url = VGG19_Weights.IMAGENET1K_V1.url
    return Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(url)


def load_vgg19_features(weights: str = "imagenet", *, seed: int = 0,
                        download_progress: DownloadProgress | None = None) -> nn.Sequential:
    """Build VGG19 ``features``, load weights, and freeze it (``eval()``, no grads), on the CPU.

    Args:
        weights: ``"imagenet"`` (torchvision's IMAGENET1K_V1, from the hub cache, downloaded
            once), ``"random"`` (seeded random weights), or the path of a state dict file.
        seed: the seed of the random weights.
        download_progress: called with (bytes done, bytes in all) while downloading.

    Raises:
        WeightsError: the weights cannot be downloaded, read, or do not fit VGG19.
    """
    if weights == "random":
        return freeze(random_vgg19_features(seed))
    if weights == "imagenet":
        path = imagenet_weights_path()
        if not os.path.lexists(path):  # anything else there (a folder, a broken link) is named below
            download_imagenet_weights(path, progress=download_progress)
        state = load_state_file(path, hint=f"delete {shown(path)} to download it again, or pass --weights FILE")
    else:
        state = load_state_file(Path(weights), hint="expected a VGG19 state dict (.pth)")
        path = Path(weights)
    features = vgg19_features()
    try:
        features.load_state_dict(features_state(state))
    except (RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise WeightsError(f"{shown(path)}: weights do not fit VGG19 features ({first}); "
                           f"expected a VGG19 state dict") from None
    return freeze(features)


def load_state_file(path: Path, *, hint: str) -> Mapping[str, torch.Tensor]:
    """Load a state dict with ``weights_only=True``: a file holding code is refused, never run.

    Raises:
        WeightsError: one line naming the file, what is wrong (missing, a directory or FIFO,
            empty, an HTML page, truncated, pickled code, not tensors) and ``hint``, the fix.
    """
    try:
        handle = open_regular(path, WeightsError)
    except WeightsError as exc:
        raise WeightsError(f"{exc}; {hint}") from None
    with handle:
        head = handle.read(64)
        handle.seek(0)
        text = head.lstrip().lower()
        if text.startswith((b"<!doctype html", b"<html", b"<?xml", b"<head")):
            raise WeightsError(f"{shown(path)}: is an HTML page (a failed download?), not weights; {hint}")
        if head.startswith(b"PK\x03\x04") and not zipfile.is_zipfile(handle):  # torch.save writes a zip
            raise WeightsError(f"{shown(path)}: cannot load weights (truncated or corrupt: the zip archive is "
                               f"incomplete); {hint}")
        handle.seek(0)
        try:
            state = torch.load(handle, map_location="cpu", weights_only=True)
        except Exception as exc:  # torch raises many types for bad files: pickle, zip, EOF, runtime
            reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            if "central directory" in reason or isinstance(exc, EOFError):
                reason = f"truncated or corrupt: {reason}"
            elif not head.startswith((b"PK\x03\x04", b"\x80")):  # torch.save writes a zip, or else a pickle
                reason = "corrupt: not a PyTorch file"
            raise WeightsError(f"{shown(path)}: cannot load weights ({reason}); {hint}") from None
    if not isinstance(state, Mapping) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise WeightsError(f"{shown(path)}: not a state dict of tensors; {hint}")
    return state


def features_state(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Pick the ``features`` part of a VGG19 state dict: full (``features.N.*``) or bare (``N.*``)."""
    prefixed = {k[len("features."):]: v for k, v in state.items() if k.startswith("features.")}
    return prefixed if prefixed else dict(state)


def download_imagenet_weights(path: Path, *, progress: DownloadProgress | None = None,
                              timeout: float = DOWNLOAD_TIMEOUT_S) -> None:
    """Download torchvision's VGG19 weights to ``path`` atomically, checking the hash prefix.

    Raises:
        WeightsError: offline, timed out, unwritable cache or a corrupt download; the
            message names the cache path and ``--weights FILE`` as the way out.
    """
    url = VGG19_Weights.IMAGENET1K_V1.url
    fix = f"put the file {path.name} in {path.parent} or pass --weights FILE"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".download-", dir=path.parent)
    except OSError as exc:
        raise WeightsError(f"cannot write the weights cache {path.parent} ({exc.strerror}); "
                           f"set TORCH_HOME to a writable folder or pass --weights FILE") from None
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
            raise WeightsError(f"downloaded VGG19 weights from {url} are corrupt (hash mismatch); {fix}")
        os.replace(tmp, path)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise WeightsError(f"cannot download VGG19 weights from {url} ({reason}); {fix}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
