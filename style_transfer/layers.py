"""Layer names: the tutorial's (``conv_N``) and the paper's (``conv4_2``), and the pooling swap.

The tutorial names VGG layers by a running conv counter: ``conv_N`` is the N-th conv,
``relu_N`` the ReLU after it and ``pool_N`` a pool that follows it. The paper (Gatys et al.)
names them by block: ``convB_K`` is the K-th conv of block B (blocks end at a pool),
``reluB_K`` its ReLU and ``poolB`` the pool that ends block B. In VGG19 the tutorial's
``conv_1 .. conv_5`` are the paper's ``conv1_1, conv1_2, conv2_1, conv2_2, conv3_1``; its
``conv_4`` (the default content layer) is the paper's ``conv2_2``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported where a module is built: StyleConfig validates names without it
    from torch import nn

# torchvision's VGG feature layouts, the tutorial's network first (StyleConfig.model): channels per conv, "M" for
# a 2x2 max pool (``networks.vgg`` builds them; ``networks.onnx`` matches a graph's convolutions against them).
VGG_LAYOUTS: dict[str, tuple[int | str, ...]] = {
    "vgg19": (64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"),
    "vgg16": (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"),
}
MODELS: tuple[str, ...] = tuple(VGG_LAYOUTS)


def _blocks(layout: Sequence[int | str]) -> tuple[int, ...]:
    counts, convs = [], 0
    for item in layout:
        if item == "M":
            counts.append(convs)
            convs = 0
        else:
            convs += 1
    return tuple(counts)


# Convs per block, each block ended by a pool: VGG19 ("E") 2, 2, 4, 4, 4; VGG16 ("D") 2, 2, 3, 3, 3.
MODEL_BLOCKS: dict[str, tuple[int, ...]] = {name: _blocks(layout) for name, layout in VGG_LAYOUTS.items()}
VGG19_BLOCKS, VGG16_BLOCKS = MODEL_BLOCKS["vgg19"], MODEL_BLOCKS["vgg16"]

def tutorial_names_of(blocks: Sequence[int]) -> tuple[str, ...]:
    """The tutorial's names of a VGG ``features`` block with these convs per block, in order."""
    names, i = [], 0
    for convs in blocks:
        for _ in range(convs):
            i += 1
            names += [f"conv_{i}", f"relu_{i}"]
        names.append(f"pool_{i}")
    return tuple(names)


def conv_indices(layout: Sequence[int | str]) -> list[int]:
    """torchvision's ``features`` index of each conv of a layout (a conv and its ReLU take two places, a pool one)."""
    indices, i = [], 0
    for item in layout:
        if item != "M":
            indices.append(i)
        i += 1 if item == "M" else 2
    return indices


# The tutorial's names of VGG19's ``features``, in order (the same list ``layer_names`` gives).
VGG19_LAYER_NAMES: tuple[str, ...] = tutorial_names_of(VGG19_BLOCKS)
VGG16_LAYER_NAMES: tuple[str, ...] = tutorial_names_of(VGG16_BLOCKS)


def model_layer_names(model: str) -> tuple[str, ...]:
    """The tutorial's layer names of a network of ``MODELS``.

    Raises:
        ValueError: an unknown network.
    """
    if model not in MODEL_BLOCKS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}, got {model!r}")
    return tutorial_names_of(MODEL_BLOCKS[model])


def paper_names(tutorial_names: Sequence[str]) -> dict[str, str]:
    """Map each paper name to a tutorial name, for a network given by its tutorial names.

    A block ends at each pool: ``conv_1, relu_1, conv_2, relu_2, pool_2, conv_3`` gives
    ``conv1_1 -> conv_1``, ``relu1_2 -> relu_2``, ``pool1 -> pool_2``, ``conv2_1 -> conv_3``.
    """
    mapping: dict[str, str] = {}
    block, k = 1, 0
    for name in tutorial_names:
        kind = name.split("_")[0]
        if kind == "conv":
            k += 1
            mapping[f"conv{block}_{k}"] = name
        elif kind == "relu":
            mapping[f"relu{block}_{k}"] = name
        elif kind == "pool":
            mapping[f"pool{block}"] = name
            block, k = block + 1, 0
    return mapping


VGG19_PAPER_NAMES: dict[str, str] = paper_names(VGG19_LAYER_NAMES)


def valid_names_line(tutorial_names: Sequence[str] = VGG19_LAYER_NAMES) -> str:
    """The valid names in one line: every tutorial name, then the paper's as ranges (``conv1_1..conv5_4``)."""
    paper = list(paper_names(tutorial_names))

    def ranges(names: Sequence[str], kinds: Sequence[str]) -> list[str]:
        out = []
        for kind in kinds:
            group = [n for n in names if n.startswith(kind)]
            if len(group) > 2:
                out.append(f"{group[0]}..{group[-1]}")
            else:
                out += group
        return out

    return (f"{', '.join(tutorial_names)} (tutorial names) or "
            f"{', '.join(ranges(paper, ('conv', 'relu')) + [n for n in paper if n.startswith('pool')])} "
            f"(paper names)")


def resolve_layer(name: str, tutorial_names: Sequence[str] = VGG19_LAYER_NAMES) -> str:
    """The tutorial name of a layer given by its tutorial or paper name.

    Raises:
        ValueError: an unknown name; the one-line message lists the valid ones.
    """
    if name in tutorial_names:
        return name
    mapped = paper_names(tutorial_names).get(name) if isinstance(name, str) else None
    if mapped is None:
        raise ValueError(f"unknown layer {name!r}; valid layers: {valid_names_line(tutorial_names)}")
    return mapped


def resolve_layers(names: Sequence[str], tutorial_names: Sequence[str] = VGG19_LAYER_NAMES) -> tuple[str, ...]:
    """``resolve_layer`` for each name, in order."""
    return tuple(resolve_layer(name, tutorial_names) for name in names)


POOLINGS = ("max", "avg")


def swap_pooling(layer: nn.Module, pooling: str) -> nn.Module:
    """With ``pooling="avg"``, an ``nn.AvgPool2d`` of the same geometry for an ``nn.MaxPool2d``.

    Any other layer, or ``pooling="max"``, comes back as it is.
    """
    from torch import nn

    if pooling == "avg" and isinstance(layer, nn.MaxPool2d):
        # Departure from the tutorial (option): the paper found average pooling gives smoother images.
        return nn.AvgPool2d(layer.kernel_size, layer.stride, layer.padding, ceil_mode=layer.ceil_mode)
    return layer
