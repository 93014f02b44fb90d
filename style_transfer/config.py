"""StyleConfig: one frozen dataclass holding every knob of a style transfer run."""

from __future__ import annotations

import re
from dataclasses import dataclass

# The tutorial's layers: content after conv_4, style after conv_1 .. conv_5.
TUTORIAL_CONTENT_LAYERS: tuple[str, ...] = ("conv_4",)
TUTORIAL_STYLE_LAYERS: tuple[str, ...] = ("conv_1", "conv_2", "conv_3", "conv_4", "conv_5")

# Long side of the working image when `size` is None. The tutorial uses 512 on a GPU and
# 128 on a CPU; on a 2-core CPU 448 px runs the default 300 steps in 2.5 to 3.5 minutes.
GPU_DEFAULT_SIZE = 512
CPU_DEFAULT_SIZE = 448

INITS = ("content", "noise")
WEIGHTS_CHOICES = ("imagenet", "random")  # or the path of a local state dict file
_DEVICE_RE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")
_LAYER_RE = re.compile(r"^(conv|relu|pool)_[1-9]\d*$")


@dataclass(frozen=True)
class StyleConfig:
    """Every setting of a run. Defaults reproduce the PyTorch tutorial.

    Raises:
        ValueError: from ``__post_init__``, naming the field and the bad value.
    """

    size: int | None = None  # long side of the working image in px; None: 512 on GPU, 448 on CPU
    steps: int = 300  # closure evaluations; the run ends with the LBFGS step that passes this
    style_weight: float = 1e6  # weight of the summed style losses (tutorial: 1e6)
    content_weight: float = 1.0  # weight of the summed content losses (tutorial: 1)
    init: str = "content"  # start image: a copy of the content image, or uniform noise
    seed: int = 0  # seeds everything random in a run (noise init)
    weights: str = "imagenet"  # "imagenet" (torchvision, cached), "random" (seeded), or a file path
    device: str = "auto"  # auto | cpu | cuda | cuda:N | mps; auto picks a GPU when there is one
    content_layers: tuple[str, ...] = TUTORIAL_CONTENT_LAYERS  # ContentLoss after these layers
    style_layers: tuple[str, ...] = TUTORIAL_STYLE_LAYERS  # StyleLoss after these layers

    def __post_init__(self) -> None:
        # Accept lists for the layer fields but store tuples, so the config stays hashable.
        for name in ("content_layers", "style_layers"):
            value = getattr(self, name)
            if isinstance(value, str):
                value = tuple(v.strip() for v in value.split(",") if v.strip())
            object.__setattr__(self, name, tuple(value))
        if self.size is not None and (not _is_int(self.size) or self.size < 16):
            raise ValueError(f"size must be an integer >= 16 (px), got {self.size!r}")
        if not _is_int(self.steps) or self.steps < 1:
            raise ValueError(f"steps must be a positive integer, got {self.steps!r}")
        for name in ("style_weight", "content_weight"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value >= 0 or value == float("inf"):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.init not in INITS:
            raise ValueError(f"init must be one of {', '.join(INITS)}, got {self.init!r}")
        if not _is_int(self.seed) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {self.seed!r}")
        if not isinstance(self.weights, str) or not self.weights:
            raise ValueError(f"weights must be 'imagenet', 'random' or a file path, got {self.weights!r}")
        if not isinstance(self.device, str) or not _DEVICE_RE.match(self.device):
            raise ValueError(f"device must be auto, cpu, cuda, cuda:N or mps, got {self.device!r}")
        for name in ("content_layers", "style_layers"):
            for layer in getattr(self, name):
                if not isinstance(layer, str) or not _LAYER_RE.match(layer):
                    raise ValueError(f"{name}: unknown layer name {layer!r} (expected conv_N, relu_N or pool_N)")
        if not self.content_layers and not self.style_layers:
            raise ValueError("content_layers and style_layers are both empty: nothing to optimise")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
