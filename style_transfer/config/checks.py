"""StyleConfig's checks and the settings it fills in: the preset's, the preprocessing the weights tell.

What each field's ``Setting`` declares (choices, flags, ranges) is checked from the declaration; the rules
between fields (masks and tiles, fast's levers, ...) are written here. Each failure is a ``ValueError``
naming the field and the bad value.
"""

from __future__ import annotations

import functools
import math
import os
import re
from typing import Any, TypeVar

from ..layers import model_layer_names, resolve_layers
from ..presets import STYLE_LOSSES, layer_weights, preset_values
from .choices import COMPOSITION_SIZE, INITS, PRINT_SIZE, TILING_REFUSAL
from .fields import Setting, settings
from .weights import WEIGHTS_WORDS, Unreadable, is_quantised_vgg19, onnx_preprocess, preprocess_by_name

# The functions take the StyleConfig being made (``config.style`` imports this module, so it is not named here).
StyleConfig = Any
_T = TypeVar("_T")

_DEVICE_RE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


def check(config: StyleConfig) -> None:
    """Fill in and check every field of ``config`` (its ``__post_init__``).

    Raises:
        ValueError: the first bad field, named with its value.
    """
    _resolve_preprocess(config)  # before the preset: its loss weights depend on the input's scale
    _apply_preset(config)  # also turns lists (and comma-separated layer strings) into tuples
    _as_tuples(config)
    for declared in _declared(config.__class__):  # type(Any) is not Hashable to mypy; the same class
        _check_declared(declared, getattr(config, declared.name))
    if not isinstance(config.init, str) or (config.init not in INITS and not os.path.isfile(config.init)):
        raise ValueError(f"init must be one of {', '.join(INITS)} or an image file, got {config.init!r}")
    if not isinstance(config.weights, str) or not config.weights:
        raise ValueError(f"weights must be {', '.join(repr(w) for w in WEIGHTS_WORDS)} or a file path, "
                         f"got {config.weights!r}")
    if not isinstance(config.device, str) or not _DEVICE_RE.match(config.device):
        raise ValueError(f"device must be auto, cpu, cuda, cuda:N or mps, got {config.device!r}")
    for name in ("content_layers", "style_layers"):
        try:  # tutorial (conv_4) or paper (conv2_2) names of the network
            resolved = resolve_layers(getattr(config, name), model_layer_names(config.model))
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
        if len(set(resolved)) != len(resolved):
            raise ValueError(f"{name}: a layer is named twice in {','.join(getattr(config, name))}")
    _check_controls(config)
    if not config.content_layers and not config.style_layers:
        raise ValueError("content_layers and style_layers are both empty: nothing to optimise")
    _check_speed(config)
    _check_quality(config)
    if config.fused_gram and config.style_loss != "gram":
        raise ValueError(f"fused_gram applies to style_loss gram only, not {config.style_loss!r} "
                         "(fast=True leaves it off for the other style losses)")
    _check_tile(config)


def filled(value: _T | None) -> _T:
    """A field ``check`` fills in where it was given None (the preset's weights, layers, loss form, pooling, ...),
    read from a made ``StyleConfig``: the same value, typed without None.

    Raises:
        ValueError: the value is None (a StyleConfig changed after it was made, bypassing ``check``).
    """
    if value is None:
        raise ValueError("a setting the preset fills in is None: make the StyleConfig anew (dataclasses.replace)")
    return value


@functools.lru_cache(maxsize=None)
def _declared(cls: type) -> tuple[Setting, ...]:
    return settings(cls)


def _check_declared(declared: Setting, value: Any) -> None:
    """What ``declared`` says of its field: a choice among its choices, a flag True or False, a number in range."""
    name = declared.name
    if value is None and declared.default is None:
        return  # "not given": the preset's, or off
    if declared.kind == "choice" and value not in declared.choices:
        raise ValueError(f"{name} must be one of {', '.join(declared.choices)}, got {value!r}")
    if declared.kind == "flag" and not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    if declared.kind == "int":
        low = declared.minimum
        if not _is_int(value) or (low is not None and value < low):
            what = "a positive integer" if low == 1 else "an integer" if low is None else f"an integer >= {low:g}"
            unit = f" ({declared.unit})" if declared.unit else ""
            raise ValueError(f"{name} must be {what}{unit}, got {value!r}")
    if declared.kind == "float" and not _in_range(declared, value):
        raise ValueError(f"{name} must be {_range_text(declared)}, got {value!r}")


def _in_range(declared: Setting, value: Any) -> bool:
    if not _is_number(value) or not math.isfinite(value):
        return False
    low, high = declared.minimum, declared.maximum
    if declared.exclusive:
        return (low is None or value > low) and (high is None or value < high)
    return (low is None or value >= low) and (high is None or value <= high)


def _range_text(declared: Setting) -> str:
    low, high = declared.minimum, declared.maximum
    if low is not None and high is not None:
        return (f"{declared.noun or 'a number'} between {low:g} and {high:g}"
                + (" (both excluded)" if declared.exclusive else ""))
    if low is not None:
        return f"a finite number {'>' if declared.exclusive else '>='} {low:g}"
    return "a finite number"


def _as_tuples(config: StyleConfig) -> None:
    """Lists become tuples (the config stays hashable); one mask path alone becomes a tuple of one."""
    masks = config.style_masks
    if isinstance(masks, (str, os.PathLike)) or not isinstance(masks, (list, tuple)):
        masks = (masks,) if masks else ()
    object.__setattr__(config, "style_masks", tuple(masks))
    object.__setattr__(config, "scale_steps", tuple(config.scale_steps))


def _check_speed(config: StyleConfig) -> None:
    """The speed fields' rules between fields (docs/speed.md)."""
    if config.scales is None:  # resolved here, like the preset's fields, so the config shows what runs
        # One size up to a print's size; a print is coarse-to-fine from the size that sets its composition.
        auto = config.min_size is None and not config.scale_steps and (config.size or 0) >= PRINT_SIZE
        object.__setattr__(config, "scales", 1)
        if auto:
            object.__setattr__(config, "min_size", COMPOSITION_SIZE)
    if config.min_size is not None and config.scales > 1:
        raise ValueError("give scales or min_size, not both")
    if (config.min_improvement is None) != (config.patience is None):
        raise ValueError("min_improvement and patience go together: give both or neither")
    if any(not _is_int(n) or n < 1 for n in config.scale_steps):
        raise ValueError(f"scale_steps must be positive integers, got {config.scale_steps!r}")


def _is_source(value: object) -> bool:
    """A path, a PIL image or a tensor (checked by type name: config imports neither Pillow nor torch)."""
    if isinstance(value, (str, os.PathLike)):
        return bool(os.fspath(value))
    return any(cls.__name__ in ("Image", "Tensor") for cls in type(value).__mro__)


def _check_quality(config: StyleConfig) -> None:
    """Validate the masks (docs/usage.md); their files are read when the run starts."""
    for mask in config.style_masks:
        if not _is_source(mask):
            raise ValueError(f"style_masks must hold mask files, PIL images or tensors, got {mask!r}")
    if config.content_mask is not None and not _is_source(config.content_mask):
        raise ValueError(f"content_mask must be a mask file, a PIL image or a tensor, got {config.content_mask!r}")


def _check_tile(config: StyleConfig) -> None:
    """Refuse the settings a tiled evaluation cannot honour (docs/print-size.md)."""
    if config.tile is None:
        return
    if config.style_loss in TILING_REFUSAL:
        raise ValueError(f"tile cannot be combined with style_loss {config.style_loss!r}: "
                         f"{TILING_REFUSAL[config.style_loss]}")
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
    if told == "torchvision" and os.path.isfile(config.weights) and is_quantised_vgg19(config.weights):
        told = "caffe"  # the original VGG19's quantised file by another name: its keys tell
    if told is None and os.path.isfile(config.weights):
        try:
            told = onnx_preprocess(config.weights)
        except Unreadable:
            return  # not ONNX, truncated: the loader names the problem when the run starts
        if told is None:
            raise ValueError(f"{os.path.basename(config.weights)}: cannot tell which preprocessing these weights "
                             f"expect; pass preprocess=torchvision (RGB, ImageNet mean and std) or "
                             f"preprocess=caffe (BGR, 0-255, minus the Caffe mean)")
    object.__setattr__(config, "preprocess", told)


def _apply_preset(config: StyleConfig) -> None:
    """Fill the settings left None from the preset; lists become tuples (the config stays hashable).

    The loss weights are the preset's for the input's scale (``preset_values``): Caffe's 0-255 inputs give
    features about 58x larger than torchvision's normalised ones, and the tutorial's 1e6 would paint the
    content away there.
    """
    name = config.preset if isinstance(config.preset, str) else repr(config.preset)
    values = preset_values(name, config.preprocess or "torchvision",
                           config.style_loss if config.style_loss in STYLE_LOSSES else "gram",
                           config.model if isinstance(config.model, str) else "vgg19")
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


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
