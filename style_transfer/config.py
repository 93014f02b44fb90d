"""StyleConfig: one frozen dataclass holding every knob of a style transfer run."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass

from .layers import MODELS, POOLINGS, model_layer_names, resolve_layers
from .presets import (LOSS_FORMS, PRESET_NAMES, STYLE_LOSSES, TUTORIAL_CONTENT_LAYERS,  # noqa: F401
                      TUTORIAL_STYLE_LAYERS, layer_weights, preset_values)


# Long side of the working image when `size` is None. The tutorial uses 512 on a GPU and
# 128 on a CPU; on a 2-core CPU 448 px runs the default 300 steps in 2.5 to 3.5 minutes.
GPU_DEFAULT_SIZE = 512
CPU_DEFAULT_SIZE = 448

INITS = ("content", "noise", "style")  # or the path of an image file
PRESERVE_COLORS = ("none", "luminance", "histogram")
OPTIMIZERS = ("lbfgs", "adam")
# How the losses are backpropagated: one backward of their sum (today's tutorial), or one
# backward per loss module with the graph retained (the 2017 tutorial); see docs/retain_graph.md.
BACKWARDS = ("combined", "per-module")
# What the weights expect of an image in [0, 1] (models.make_normalization; named here so config needs no torch).
PREPROCESSINGS = ("torchvision", "caffe", "caffe256")
# neural-style-pt's Caffe-converted files (torchvision's key layout), recognised by name: caffe256 input.
CAFFE256_FILES = ("vgg19-d01eb7cb.pth", "vgg16-00b39a1b.pth")


def preprocess_by_name(weights: str) -> str | None:
    """The preprocessing that ``weights`` tell by their name alone, or None when only an ONNX file's graph can.

    torchvision's ImageNet and random weights, and state dicts: ``torchvision``; neural-style-pt's file names:
    ``caffe256``; an ``.onnx`` file: None (``onnx_weights`` reads it: a Keras export takes ``caffe``).
    """
    name = os.path.basename(str(weights))
    if name in CAFFE256_FILES:
        return "caffe256"
    return None if name.lower().endswith(".onnx") else "torchvision"


_DEVICE_RE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


@dataclass(frozen=True)
class StyleConfig:
    """Every setting of a run. Defaults reproduce the PyTorch tutorial.

    Raises:
        ValueError: from ``__post_init__``, naming the field and the bad value.
    """

    size: int | None = None  # long side of the working image in px; None: 512 on GPU, 448 on CPU
    steps: int = 300  # closure evaluations; the run ends with the LBFGS step that passes this
    style_weight: float | None = None  # weight of the summed style losses (None: the preset's; tutorial 1e6)
    content_weight: float | None = None  # weight of the summed content losses (None: the preset's; tutorial 1)
    init: str = "content"  # start image: content, noise (uniform, seeded), style, or an image file path
    seed: int = 0  # seeds everything random in a run (noise init)
    weights: str = "imagenet"  # "imagenet" (torchvision, cached), "random" (seeded), or a file path (.pth, .onnx)
    model: str = "vgg19"  # vgg19 (the tutorial's) | vgg16: the network whose features the losses compare
    preprocess: str | None = None  # torchvision | caffe | caffe256: what the weights expect (None: what they tell)
    device: str = "auto"  # auto | cpu | cuda | cuda:N | mps; auto picks a GPU when there is one
    content_layers: tuple[str, ...] | None = None  # ContentLoss after these (tutorial or paper names; None: preset's)
    style_layers: tuple[str, ...] | None = None  # StyleLoss after these layers (None: the preset's)
    preset: str = "tutorial"  # fills every setting above and below left None: tutorial | paper
    style_layer_weights: tuple[float, ...] | None = None  # one per style layer (None: tutorial 1 each, paper 1/n)
    style_blend: tuple[float, ...] | None = None  # one weight per style image, normalised (None: equal)
    style_scale: float = 1.0  # long side of the style image(s) = size * style_scale
    preserve_colors: str = "none"  # none | luminance (keep the content's chroma) | histogram (recolour the style)
    tv_weight: float = 0.0  # weight of the total variation (smoothness) term; 0 as in the tutorial
    pooling: str | None = None  # max | avg: VGG's pools (None: the preset's; tutorial max, paper avg)
    loss_form: str | None = None  # tutorial (mse of normalised Grams) | paper (E_l, 1/2 sum) (None: preset's)
    style_loss: str = "gram"  # gram (the tutorial's) | wasserstein (Gaussian W2) | sliced (core/statistics.py)
    optimizer: str = "lbfgs"  # lbfgs (the tutorial's) | adam; every step runs the same closure
    lr: float | None = None  # learning rate (None: 1 for LBFGS, torch's default; 0.02 for Adam)
    keep_alpha: bool = False  # give the result the content's alpha channel (PNG, WebP, TIFF outputs)
    backward: str = "combined"  # "combined": one backward of the summed loss; "per-module": one per loss module
    # Speed (fast.py; README "Speed" states what each trades). The defaults are the tutorial's path.
    precision: str = "fp32"  # fp32 | bf16: VGG layers autocast to bfloat16; losses, image, LBFGS stay float32
    channels_last: bool = False  # NHWC layout for the VGG layers: faster with bf16 on a CPU, same values
    fused_gram: bool = False  # Gram backward as one matmul, fused with the next ReLU (bf16: Gram in bf16 chunks)
    history_size: int = 100  # LBFGS curvature pairs kept (torch's default); each costs 2 image copies
    scales: int | None = None  # coarse-to-fine: this many sizes, each half the next, ending at size (None: 1)
    min_size: int | None = None  # or coarse-to-fine from this size up, sizes at most 2x apart
    scale_steps: tuple[int, ...] = ()  # evaluations per size, smallest first; () splits steps
    threads: int | None = None  # CPU threads, None: physical cores; set by the CLI, never by the library
    # Stop early (off by default: the tutorial runs every step): once the lowest loss seen improved by less
    # than the fraction min_improvement over the last patience evaluations, at the final size (run.Run).
    min_improvement: float | None = None  # e.g. 0.001 (0.1 %); needs patience
    patience: int | None = None  # evaluations, e.g. 20; needs min_improvement
    fast: bool = False  # a share of steps at FAST_SCALES size(s) plus the device's levers (fast.py; docs/speed.md)
    # Print size (tiling.py; docs/print-size.md): a size larger than the tile is evaluated in overlapping crops of
    # at most tile x tile px, with the untiled loss and gradient (up to rounding) and memory that stays flat.
    tile: int | None = None  # crop side in px; None: tiles chosen from the free memory, only where a size does not fit
    # Quality controls (docs/usage.md; core/masks.py, core/averaging.py). Off by default: the tutorial's run.
    style_masks: tuple = ()  # one mask per style, in order (paths, PIL images or tensors); unmasked share the rest
    content_mask: object = None  # a mask weighting the content loss by region (a path, PIL image or tensor), or None
    average: float | None = None  # the output is the bias-corrected moving average of the iterates, this decay

    def __post_init__(self) -> None:
        _resolve_preprocess(self)  # before the preset: its loss weights depend on the input's scale
        _apply_preset(self)  # also turns lists (and comma-separated layer strings) into tuples
        if self.size is not None and (not _is_int(self.size) or self.size < 16):
            raise ValueError(f"size must be an integer >= 16 (px), got {self.size!r}")
        if not _is_int(self.steps) or self.steps < 1:
            raise ValueError(f"steps must be a positive integer, got {self.steps!r}")
        for name in ("style_weight", "content_weight"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value >= 0 or value == float("inf"):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if not isinstance(self.init, str) or (self.init not in INITS and not os.path.isfile(self.init)):
            raise ValueError(f"init must be one of {', '.join(INITS)} or an image file, got {self.init!r}")
        if not _is_int(self.seed) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {self.seed!r}")
        if not isinstance(self.weights, str) or not self.weights:
            raise ValueError(f"weights must be 'imagenet', 'random' or a file path, got {self.weights!r}")
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {', '.join(MODELS)}, got {self.model!r}")
        if self.preprocess is not None and self.preprocess not in PREPROCESSINGS:
            raise ValueError(f"preprocess must be one of {', '.join(PREPROCESSINGS)}, got {self.preprocess!r}")
        if not isinstance(self.device, str) or not _DEVICE_RE.match(self.device):
            raise ValueError(f"device must be auto, cpu, cuda, cuda:N or mps, got {self.device!r}")
        for name in ("content_layers", "style_layers"):
            try:  # tutorial (conv_4) or paper (conv2_2) names of the network
                resolved = resolve_layers(getattr(self, name), model_layer_names(self.model))
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
            if len(set(resolved)) != len(resolved):
                raise ValueError(f"{name}: a layer is named twice in {','.join(getattr(self, name))}")
        _check_controls(self)
        if self.backward not in BACKWARDS:
            raise ValueError(f"backward must be one of {', '.join(BACKWARDS)}, got {self.backward!r}")
        if not self.content_layers and not self.style_layers:
            raise ValueError("content_layers and style_layers are both empty: nothing to optimise")
        _check_speed_fields(self)
        _check_quality(self)
        if self.fused_gram and self.style_loss != "gram":
            raise ValueError(f"fused_gram applies to style_loss gram only, not {self.style_loss!r} "
                             "(--fast leaves it off for the other style losses)")
        _check_tile(self)


PRECISIONS = ("fp32", "bf16")
# --fast's sizes when scales and min_size are not given: one (plans.FAST_STEPS_SHARE of --steps at --size). On the
# real VGG16 at 256 px 3 sizes ended at 3.1x the default's content loss, the cat painted away (fast_pairs.py).
FAST_SCALES = 1


def _check_speed_fields(config: StyleConfig) -> None:
    """Validate the speed fields (docs/speed.md), naming the field and the bad value."""
    object.__setattr__(config, "scale_steps", tuple(config.scale_steps))
    if config.scales is None:  # resolved here, like the preset's fields, so the config shows what runs
        object.__setattr__(config, "scales", FAST_SCALES if config.fast is True and config.min_size is None else 1)
    if config.precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {config.precision!r}")
    for name in ("channels_last", "fused_gram", "fast"):
        if not isinstance(getattr(config, name), bool):
            raise ValueError(f"{name} must be True or False, got {getattr(config, name)!r}")
    for name in ("history_size", "scales"):
        if not _is_int(getattr(config, name)) or getattr(config, name) < 1:
            raise ValueError(f"{name} must be a positive integer, got {getattr(config, name)!r}")
    if config.min_size is not None and (not _is_int(config.min_size) or config.min_size < 16):
        raise ValueError(f"min_size must be an integer >= 16 (px), got {config.min_size!r}")
    if config.min_size is not None and config.scales > 1:
        raise ValueError("give scales or min_size, not both")
    if (config.min_improvement is None) != (config.patience is None):
        raise ValueError("min_improvement and patience go together: give both or neither")
    if config.min_improvement is not None and (not _is_number(config.min_improvement)
                                               or not 0 < config.min_improvement < 1):
        raise ValueError(f"min_improvement must be a fraction between 0 and 1, got {config.min_improvement!r}")
    if config.patience is not None and (not _is_int(config.patience) or config.patience < 1):
        raise ValueError(f"patience must be a positive integer (evaluations), got {config.patience!r}")
    if config.threads is not None and (not _is_int(config.threads) or config.threads < 1):
        raise ValueError(f"threads must be a positive integer, got {config.threads!r}")
    if any(not _is_int(n) or n < 1 for n in config.scale_steps):
        raise ValueError(f"scale_steps must be positive integers, got {config.scale_steps!r}")


def _is_source(value: object) -> bool:
    """A path, a PIL image or a tensor (checked by type name: config imports neither Pillow nor torch)."""
    if isinstance(value, (str, os.PathLike)):
        return bool(os.fspath(value))
    return any(cls.__name__ in ("Image", "Tensor") for cls in type(value).__mro__)


def _check_quality(config: StyleConfig) -> None:
    """Validate the masks and the iterate average (docs/usage.md); the masks' files are read when the run starts."""
    masks = config.style_masks
    if isinstance(masks, (str, os.PathLike)) or not isinstance(masks, (list, tuple)):
        masks = (masks,) if masks else ()
    object.__setattr__(config, "style_masks", tuple(masks))
    for mask in config.style_masks:
        if not _is_source(mask):
            raise ValueError(f"style_masks must hold mask files, PIL images or tensors, got {mask!r}")
    if config.content_mask is not None and not _is_source(config.content_mask):
        raise ValueError(f"content_mask must be a mask file, a PIL image or a tensor, got {config.content_mask!r}")
    if config.average is not None and (not _is_number(config.average) or not 0 < config.average < 1):
        raise ValueError(f"average must be a decay between 0 and 1 (e.g. 0.99), got {config.average!r}")


# Why tiling (docs/print-size.md) cannot run a style loss (the Gram's and W2's tile; config and tiling.plan_tiles say it).
TILING_REFUSAL = {
    "sliced": "the sliced loss sorts the projections of every position of a feature map at once, which crops "
              "cannot split (use style_loss gram, or a size that fits)",
}
MIN_TILE = 16  # px; the layers used may need more (crops.Geometry.minimum_tile: 26 px for the tutorial's)


def _check_tile(config: StyleConfig) -> None:
    """Validate ``tile`` (docs/print-size.md) and refuse the settings a tiled evaluation cannot honour."""
    if config.tile is None:
        return
    if not _is_int(config.tile) or config.tile < MIN_TILE:
        raise ValueError(f"tile must be an integer >= {MIN_TILE} (px), got {config.tile!r}")
    if config.style_masks or config.content_mask is not None:
        raise ValueError("tile cannot be combined with style or content masks: a crop's Gram matrices would need the "
                         "mask cropped with it, which tiled evaluations do not do (give no --tile, or no masks)")
    if config.style_loss in TILING_REFUSAL:
        raise ValueError(f"tile cannot be combined with style_loss {config.style_loss!r}: {TILING_REFUSAL[config.style_loss]}")
    if config.backward != "combined":
        raise ValueError(f"tile cannot be combined with backward {config.backward!r}: a tiled evaluation "
                         "backpropagates once per crop (use backward 'combined')")
    levers = [name for name, on in (("precision bf16", config.precision == "bf16"),
                                    ("channels_last", config.channels_last), ("fused_gram", config.fused_gram)) if on]
    if levers:
        raise ValueError(f"tile cannot be combined with {' and '.join(levers)}: tiled evaluations run in float32, "
                         "NCHW, with their own one-product Gram backward (fast's levers apply to untiled sizes)")


def _resolve_preprocess(config: StyleConfig) -> None:
    """``preprocess`` left None becomes what the weights tell (``preprocess_by_name``, or an ONNX file's graph).

    Left None only where the weights cannot be read yet (a missing file: the loader names the problem).

    Raises:
        ValueError: a readable ONNX file that does not tell its preprocessing, with no ``preprocess`` given.
    """
    if config.preprocess is not None or not isinstance(config.weights, str) or not config.weights:
        return
    told = preprocess_by_name(config.weights)
    if told is None and os.path.isfile(config.weights):
        from .errors import WeightsError
        from .core.onnx import preprocess_of  # torch-free: reads the graph only

        try:
            told = preprocess_of(config.weights)
        except WeightsError:
            return  # unreadable (not ONNX, no onnx package): the loader names the problem when the run starts
        if told is None:
            raise ValueError(f"{os.path.basename(config.weights)}: cannot tell which preprocessing these weights "
                             f"expect; pass preprocess (--preprocess) torchvision (RGB, ImageNet mean and std) or "
                             f"caffe (BGR, 0-255, minus the Caffe mean)")
    object.__setattr__(config, "preprocess", told)


def _apply_preset(config: StyleConfig) -> None:
    """Fill the settings left None from the preset; lists become tuples (the config stays hashable).

    The loss weights are the preset's for the input's scale (``preset_values``): Caffe's 0-255 inputs give
    features about 58x larger than torchvision's normalised ones, and the tutorial's 1e6 would paint the
    content away there.
    """
    name = config.preset if isinstance(config.preset, str) else repr(config.preset)
    values = preset_values(name, config.preprocess or "torchvision",
                           config.style_loss if config.style_loss in STYLE_LOSSES else "gram")
    for name, value in values.items():
        if getattr(config, name) is None and name != "style_layer_weights":
            object.__setattr__(config, name, value)
    for name in ("content_layers", "style_layers", "style_layer_weights", "style_blend"):
        value = getattr(config, name)
        if isinstance(value, str) and name in ("content_layers", "style_layers"):
            value = tuple(v.strip() for v in value.split(",") if v.strip())
        if value is not None:
            object.__setattr__(config, name, tuple(value))
    if config.style_layer_weights is None:
        rule = values["style_layer_weights"]
        object.__setattr__(config, "style_layer_weights", layer_weights(rule, len(config.style_layers)))


def _check_controls(config: StyleConfig) -> None:
    """Validate the style controls (docs/style-controls.md) beyond the tutorial's settings."""
    weights = config.style_layer_weights
    if len(weights) != len(config.style_layers):
        raise ValueError(f"style_layer_weights: {len(weights)} weight(s) for {len(config.style_layers)} "
                         f"style layer(s) {','.join(config.style_layers)}")
    for name in ("style_layer_weights", "style_blend"):
        for value in getattr(config, name) or ():
            if not _is_number(value) or not 0 <= value < math.inf:
                raise ValueError(f"{name} must hold finite numbers >= 0, got {value!r}")
    if config.style_blend is not None and not sum(config.style_blend) > 0:
        raise ValueError(f"style_blend must have a positive sum, got {config.style_blend!r}")
    if not _is_number(config.style_scale) or not 0 < config.style_scale < math.inf:
        raise ValueError(f"style_scale must be a finite number > 0, got {config.style_scale!r}")
    if not _is_number(config.tv_weight) or not 0 <= config.tv_weight < math.inf:
        raise ValueError(f"tv_weight must be a finite number >= 0, got {config.tv_weight!r}")
    if config.lr is not None and (not _is_number(config.lr) or not 0 < config.lr < math.inf):
        raise ValueError(f"lr must be a finite number > 0, got {config.lr!r}")
    for name, choices in (("preserve_colors", PRESERVE_COLORS), ("pooling", POOLINGS),
                          ("loss_form", LOSS_FORMS), ("optimizer", OPTIMIZERS), ("style_loss", STYLE_LOSSES)):
        if getattr(config, name) not in choices:
            raise ValueError(f"{name} must be one of {', '.join(choices)}, got {getattr(config, name)!r}")
    if not isinstance(config.keep_alpha, bool):
        raise ValueError(f"keep_alpha must be True or False, got {config.keep_alpha!r}")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class RunOptions:
    """How a run is watched and kept. None of these changes the image a run makes.

    Raises:
        ValueError: from ``__post_init__``, naming the field and the bad value.
    """

    preview_every: int = 0  # attach the current image to every N-th event (StepInfo.preview); 0: never
    checkpoint: str | None = None  # write the run's state to this file (atomically) to resume it later
    checkpoint_every: int = 0  # also every N evaluations (at the LBFGS step that passes them); 0: only on a stop
    resume: str | None = None  # continue the run saved in this checkpoint file (same inputs and settings)

    def __post_init__(self) -> None:
        for name in ("preview_every", "checkpoint_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        for name in ("checkpoint", "resume"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, (str, os.PathLike)):
                raise ValueError(f"{name} must be a file path, got {value!r}")
        if self.checkpoint_every and self.checkpoint is None:
            raise ValueError("checkpoint_every needs a checkpoint file")
