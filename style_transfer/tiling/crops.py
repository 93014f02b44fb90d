"""Where the crops of a tiled evaluation go: the network's receptive fields, halos and alignment.

Exactness of a tiled evaluation (``tiling``) rests on two conditions, both computed here from the
network's layers, not written down: a crop reaches beyond its core by the receptive-field reach of the
deepest layer used (its halo), and its origin is a multiple of that layer's stride (2 to the number of
pools before it), so that every pool sees the windows it sees in the whole image. ``plan_crops`` cuts
an image into crops whose cores cover every pixel exactly once, none longer than the tile.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torch import nn

from ..layers import VGG_LAYOUTS
from ..networks.vgg import Normalization

# (kernel, stride, padding) of a layer along one axis.
Spec = tuple[int, int, int]


@dataclass(frozen=True)
class Field:
    """Where a layer's map sits in the input: position ``i`` covers input rows ``[i*stride + offset,
    i*stride + offset + size)`` (its receptive field) and owns rows ``[i*stride, (i+1)*stride)``."""

    stride: int  # input pixels per position: 2 ** pools so far
    offset: int  # first input row of position 0's receptive field (negative: it reaches into the padding)
    size: int  # receptive field size in input pixels

    @property
    def before(self) -> int:
        """How far the receptive field reaches before the rows a position owns."""
        return -self.offset

    @property
    def after(self) -> int:
        """How far it reaches after them."""
        return self.offset + self.size - self.stride


@dataclass(frozen=True)
class Geometry:
    """What crops of a network must satisfy: halos and alignment for every layer a loss reads.

    ``fields[i]`` is layer ``i``'s receptive field; ``used`` are the layers losses read.
    """

    specs: tuple[Spec, ...]
    fields: tuple[Field, ...]
    used: tuple[int, ...]

    @property
    def align(self) -> int:
        """Crop origins are multiples of this: the stride of the deepest layer used."""
        return max(self.fields[i].stride for i in self.used)

    @property
    def before(self) -> int:
        """The halo a crop needs before its core (the largest reach of the layers used)."""
        return max(self.fields[i].before for i in self.used)

    @property
    def after(self) -> int:
        """The halo a crop needs after its core."""
        return max(self.fields[i].after for i in self.used)

    @property
    def minimum_tile(self) -> int:
        """The smallest crop side with a core: the halos (the one before rounded up to ``align``) plus ``align``."""
        return _round_up(self.before, self.align) + self.after + self.align

    def map_size(self, length: int, layer: int) -> int:
        """The length of layer ``layer``'s map for an input of ``length`` pixels."""
        for kernel, stride, padding in self.specs[:layer + 1]:
            length = (length + 2 * padding - kernel) // stride + 1
        return length


def receptive_fields(specs: Sequence[Spec]) -> tuple[Field, ...]:
    """The receptive field after each layer of a chain of ``(kernel, stride, padding)`` layers."""
    fields, stride, offset, size = [], 1, 0, 1
    for kernel, step, padding in specs:
        offset -= padding * stride
        size += (kernel - 1) * stride
        stride *= step
        fields.append(Field(stride, offset, size))
    return tuple(fields)


def network_geometry(specs: Sequence[Spec], used: Sequence[int]) -> Geometry:
    """The ``Geometry`` of layers ``specs`` whose outputs at indices ``used`` feed losses.

    Raises:
        ValueError: no layer used, or an index outside the network.
    """
    if not used or min(used) < 0 or max(used) >= len(specs):
        raise ValueError(f"layers used {tuple(used)} do not fit a network of {len(specs)} layers")
    return Geometry(tuple(specs), receptive_fields(specs), tuple(sorted(set(used))))


def layer_spec(layer: nn.Module) -> Spec:
    """``(kernel, stride, padding)`` of a VGG layer; pointwise layers are ``(1, 1, 0)``.

    Raises:
        ValueError: a layer tiling cannot account for (named), or one whose geometry differs by axis.
    """
    if isinstance(layer, (nn.ReLU, Normalization)):
        return (1, 1, 0)
    spec: tuple[int | tuple[int, ...], ...]
    if isinstance(layer, nn.Conv2d):
        padding = 0 if isinstance(layer.padding, str) else layer.padding  # "same"/"valid" fail ok below
        spec = (layer.kernel_size, layer.stride, padding)
        ok = layer.dilation == (1, 1) and layer.padding_mode == "zeros" and not isinstance(layer.padding, str)
    elif isinstance(layer, (nn.MaxPool2d, nn.AvgPool2d)):
        spec = (layer.kernel_size, layer.stride, layer.padding)
        ok = not layer.ceil_mode and getattr(layer, "dilation", 1) in (1, (1, 1))
    else:
        raise ValueError(f"tiling cannot run the layer {type(layer).__name__}")
    pairs = [value if isinstance(value, tuple) else (value, value) for value in spec]
    if not ok or any(a != b for a, b in pairs):
        raise ValueError(f"tiling needs square, undilated, zero-padded, floor-mode layers, got {layer}")
    return pairs[0][0], pairs[1][0], pairs[2][0]


def vgg19_geometry(layer_names: Sequence[str], model: str = "vgg19") -> Geometry:
    """The ``Geometry`` of a VGG (``layers.VGG_LAYOUTS[model]``, after ``Normalization``) read at tutorial names.

    Without building the network: for choosing a tile before the model loads.
    """
    from ..layers import model_layer_names  # conv_N / relu_N / pool_N, in the network's order

    specs: list[Spec] = [(1, 1, 0)]  # Normalization
    for item in VGG_LAYOUTS[model]:
        specs += [(2, 2, 0)] if item == "M" else [(3, 1, 1), (1, 1, 0)]
    index = {name: i + 1 for i, name in enumerate(model_layer_names(model))}
    return network_geometry(specs, [index[name] for name in layer_names])


def vgg19_target_bytes(layer_names: Sequence[str], model: str = "vgg19", channels: int | None = None) -> float:
    """Bytes per image pixel of float32 feature maps at these layers of a VGG (the content targets); with
    ``channels``, of maps of that many channels at those layers' resolutions (``channels=1``: the masks)."""
    from ..layers import model_layer_names

    total, pools, width, names = 0.0, 0, 3, iter(model_layer_names(model))
    per_layer: dict[str, float] = {}
    for item in VGG_LAYOUTS[model]:
        if item == "M":
            pools += 1
            per_layer[next(names)] = (channels or width) * 4 / 4 ** pools
            continue
        width = int(item)
        for _ in range(2):  # conv_N, relu_N
            per_layer[next(names)] = (channels or width) * 4 / 4 ** pools
    for name in layer_names:
        total += per_layer[name]
    return total


def vgg19_mask_bytes(style_layers: Sequence[str], content_layers: Sequence[str], style_masks: int,
                     content_mask: bool, model: str = "vgg19") -> float:
    """Bytes per image pixel of a tiled run's masks (float32): each style's mask at the working size and at each
    style layer's whole map, the content mask at the working size and at each content layer's (0 without masks)."""
    style = (4 + vgg19_target_bytes(style_layers, model, channels=1)) * style_masks
    return style + (4 + vgg19_target_bytes(content_layers, model, channels=1) if content_mask else 0.0)


@dataclass(frozen=True)
class Span:
    """One axis of a crop: the core it is responsible for and the pixels it reads, ``[start, end)``."""

    core: tuple[int, int]
    crop: tuple[int, int]


def plan_spans(length: int, tile: int, geometry: Geometry) -> list[Span]:
    """Split ``[0, length)`` into cores of at most the same size, each read with its halo.

    Core boundaries are multiples of ``geometry.align`` (the last core ends at ``length``); a crop starts
    ``geometry.before`` or more before its core, rounded down to the alignment (never before 0), and
    ends ``geometry.after`` after it (never after ``length``), so no crop is longer than ``tile``.

    Raises:
        ValueError: ``tile`` is below ``geometry.minimum_tile`` (the message names it).
    """
    align = geometry.align
    check_tile(tile, geometry)
    if length <= tile:
        return [Span((0, length), (0, length))]
    blocks_per_core = (tile - _round_up(geometry.before, align) - geometry.after) // align
    blocks = -(-length // align)  # the last block may be partial
    count = -(-blocks // blocks_per_core)
    # Cores of nearly equal size (no thin last core paying a whole halo): count cores of q or q + 1 blocks.
    q, r = divmod(blocks, count)
    bounds = [0]
    for k in range(count):
        bounds.append(min(length, bounds[-1] + (q + (k < r)) * align))
    return [Span((a, b), (max(0, (a - geometry.before) // align * align), min(length, b + geometry.after)))
            for a, b in zip(bounds, bounds[1:])]


def check_tile(tile: int, geometry: Geometry) -> None:
    """Raise ``ValueError`` naming the minimum unless ``tile`` leaves a core inside its halos."""
    if tile < geometry.minimum_tile:
        raise ValueError(f"tile {tile} px is too small for the layers used (halo {geometry.before} px before and "
                         f"{geometry.after} px after each core, origins on multiples of {geometry.align} px): "
                         f"give at least {geometry.minimum_tile} px")


@dataclass(frozen=True)
class Crop:
    """A crop of the image: its rows and columns."""

    rows: Span
    cols: Span


def plan_crops(height: int, width: int, tile: int, geometry: Geometry) -> list[Crop]:
    """The crops of an image, row by row: every pixel in exactly one core (``plan_spans`` on each axis)."""
    return [Crop(rows, cols) for rows in plan_spans(height, tile, geometry)
            for cols in plan_spans(width, tile, geometry)]


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple
