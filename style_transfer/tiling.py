"""Tiled evaluation: the untiled loss and image gradient from overlapping crops, so memory stays flat.

Issue 16, after Galerne, Raad, Lezama and Morel, "Scaling Painting Style Transfer" (EGSR 2024). A
style loss depends on the features only through Gram matrices, sums over positions, so they can be
added up crop by crop (pass 1, no gradient). Once the full Grams are known, ``dL/dF`` at every
position is known too, and each crop backpropagates it from its own core positions (pass 2); the
crops' input gradients, added up, are the untiled gradient. The content loss is a sum over positions
and total variation is computed on the whole image. Nothing is blended or feathered: there are no seams.

Exactness rests on two conditions, both computed from the network (``network_geometry``): a crop
reaches beyond its core by the receptive-field reach of the deepest layer used (its halo), and its
origin is a multiple of that layer's stride (2 to the number of pools before it), so that every pool
sees the windows it sees in the whole image. A crop is cut from the image itself: its halo is real
image, never padding. The convolutions' own zero padding at a crop's interior edge only touches halo
positions, which are discarded; at the image's true border the crop's edge is the image's edge, so the
network pads there exactly as it does untiled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from . import guards
from .backward import weighted_scores
from .config import StyleConfig
from .errors import ResourceError
from .fast import TORCH_LBFGS_HISTORY, Speed
from .layers import resolve_layers
from .loss_terms import PaperContentLoss, TotalVariationLoss, WeightedStyleLoss, normalized_blend, paper_style_loss
from .losses import ContentLoss, StyleLoss
from .models import Normalization, VGG19_LAYOUT

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
    if isinstance(layer, nn.Conv2d):
        spec = (layer.kernel_size, layer.stride, layer.padding)
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


def vgg19_geometry(layer_names: Sequence[str]) -> Geometry:
    """The ``Geometry`` of VGG19 (``models.VGG19_LAYOUT``, after ``Normalization``) read at tutorial names.

    Without building the network: for choosing a tile before the model loads.
    """
    from .layers import VGG19_LAYER_NAMES  # conv_N / relu_N / pool_N, in VGG19's order

    specs: list[Spec] = [(1, 1, 0)]  # Normalization
    for item in VGG19_LAYOUT:
        specs += [(2, 2, 0)] if item == "M" else [(3, 1, 1), (1, 1, 0)]
    index = {name: i + 1 for i, name in enumerate(VGG19_LAYER_NAMES)}
    return network_geometry(specs, [index[name] for name in layer_names])


def vgg19_target_bytes(layer_names: Sequence[str]) -> float:
    """Bytes per image pixel of float32 feature maps at these VGG19 layers (the content targets)."""
    from .layers import VGG19_LAYER_NAMES

    total, pools, channels, names = 0.0, 0, 3, iter(VGG19_LAYER_NAMES)
    per_layer: dict[str, float] = {}
    for item in VGG19_LAYOUT:
        if item == "M":
            pools += 1
            per_layer[next(names)] = channels * 4 / 4 ** pools
            continue
        channels = int(item)
        for _ in range(2):  # conv_N, relu_N
            per_layer[next(names)] = channels * 4 / 4 ** pools
    for name in layer_names:
        total += per_layer[name]
    return total


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


STAND_IN_SIDE = 32  # VGG19's deepest layer (after its 5th pool) still has a position at this side


def stand_ins(images: torch.Tensor | Sequence[torch.Tensor]) -> torch.Tensor | list[torch.Tensor]:
    """Small black images standing in for ``images`` while a tiled style model is built: the model's
    structure does not depend on the images, and its targets are then computed over crops
    (``TiledStyleModel.set_targets``), so no whole-image feature map is ever held."""
    if isinstance(images, (list, tuple)):
        return [stand_ins(image) for image in images]  # type: ignore[misc]
    return images.new_zeros((1, images.shape[1], STAND_IN_SIDE, STAND_IN_SIDE))


def needs_tiles(height: int, width: int, tile: int | None) -> bool:
    """Whether an image of this size is evaluated in crops: a tile is given and the image is larger."""
    return tile is not None and (height > tile or width > tile)


class TiledStyleModel:
    """Evaluates a style model (``get_style_model_and_losses``'s) over crops, with the untiled numbers.

    Args:
        model: the style model: ``Normalization``, VGG layers, and the tutorial's or the paper's loss
            modules after them (a ``TotalVariationLoss`` in it is skipped: ``evaluate`` takes it apart).
        tile: the largest crop side in px (core and halos).

    Raises:
        ValueError: a layer or loss module tiling cannot run (named), or ``tile`` too small for the layers.
    """

    def __init__(self, model: nn.Module, tile: int) -> None:
        if not isinstance(model, nn.Sequential):
            raise ValueError(f"tiling runs a plain nn.Sequential style model, got {type(model).__name__} "
                             "(precision bf16, channels_last and fused_gram cannot be combined with tile)")
        self.layers: list[nn.Module] = []
        self.taps: dict[int, list[nn.Module]] = {}  # layer index -> the loss modules reading its output
        self.style_losses: list[StyleLoss] = []
        self.content_losses: list[ContentLoss] = []
        for module in model.children():
            if isinstance(module, TotalVariationLoss):
                continue  # computed on the whole image (evaluate's extra_losses)
            if isinstance(module, (StyleLoss, ContentLoss)):
                _check_loss_module(module)
                if not self.layers:
                    raise ValueError("a loss module before any layer cannot be tiled")
                self.taps.setdefault(len(self.layers) - 1, []).append(module)
                (self.style_losses if isinstance(module, StyleLoss) else self.content_losses).append(module)
            elif hasattr(module, "loss"):
                raise ValueError(f"tiling cannot split the loss module {type(module).__name__}")
            else:
                self.layers.append(module)
        if not self.taps:
            raise ValueError("the model has no loss module to tile")
        self.layer_of = {id(m): i for i, modules in self.taps.items() for m in modules}
        self.geometry = network_geometry([layer_spec(layer) for layer in self.layers], list(self.taps))
        self.tile = int(tile)
        check_tile(self.tile, self.geometry)
        self.deepest = max(self.taps)
        styled = [self.layer_of[id(m)] for m in self.style_losses]
        self.deepest_style = max(styled) if styled else -1

    def crops(self, height: int, width: int) -> list[Crop]:
        """The crops an image of this size is evaluated in."""
        return plan_crops(height, width, self.tile, self.geometry)

    def _features(self, x: torch.Tensor, last: int) -> Iterator[tuple[int, torch.Tensor]]:
        """Run ``x`` through the layers up to ``last``, yielding ``(index, output)`` where a loss reads."""
        for index, layer in enumerate(self.layers[:last + 1]):
            x = layer(x)
            if index in self.taps:
                yield index, x

    def _slices(self, crop: Crop, index: int, height: int, width: int) -> tuple[tuple[slice, slice], ...]:
        """The core of ``crop`` at layer ``index``: in the crop's map, and in the whole image's map."""
        stride = self.geometry.fields[index].stride
        out = []
        for span, length in ((crop.rows, height), (crop.cols, width)):
            start = span.core[0] // stride
            end = span.core[1] // stride if span.core[1] < length else self.geometry.map_size(length, index)
            offset = span.crop[0] // stride
            out.append((slice(start - offset, end - offset), slice(start, end)))
        (local_rows, full_rows), (local_cols, full_cols) = out
        return (local_rows, local_cols), (full_rows, full_cols)

    def gram_sums(self, image: torch.Tensor) -> dict[int, torch.Tensor]:
        """Pass 1: ``F Fᵀ`` over every crop's core at each style layer (no gradient), not yet normalised."""
        _check_image(image)
        height, width = image.shape[-2:]
        sums: dict[int, torch.Tensor] = {}
        with torch.no_grad():
            for crop in self.crops(height, width):
                x = image[..., slice(*crop.rows.crop), slice(*crop.cols.crop)]
                for index, features in self._features(x, self.deepest_style):
                    if not any(isinstance(m, StyleLoss) for m in self.taps[index]):
                        continue
                    (rows, cols), _ = self._slices(crop, index, height, width)
                    core = features[..., rows, cols]
                    matrix = core.reshape(core.shape[1], -1)
                    gram = torch.mm(matrix, matrix.t())
                    if index in sums:
                        sums[index] += gram
                    else:
                        sums[index] = gram
        return sums

    def grams(self, image: torch.Tensor) -> dict[int, torch.Tensor]:
        """Each style layer's ``gram_matrix`` of ``image``'s features, accumulated over crops."""
        return {index: total.div(self._numel(index, image)) for index, total in self.gram_sums(image).items()}

    def features(self, image: torch.Tensor, indices: Sequence[int]) -> dict[int, torch.Tensor]:
        """Whole feature maps of ``image`` at layers ``indices``, assembled from the crops' cores (no gradient)."""
        _check_image(image)
        height, width = image.shape[-2:]
        out: dict[int, torch.Tensor] = {}
        with torch.no_grad():
            for crop in self.crops(height, width):
                x = image[..., slice(*crop.rows.crop), slice(*crop.cols.crop)]
                for index, features in self._features(x, max(indices)):
                    if index not in indices:
                        continue
                    if index not in out:
                        shape = (1, features.shape[1], self.geometry.map_size(height, index),
                                 self.geometry.map_size(width, index))
                        out[index] = features.new_empty(shape)
                    local, full = self._slices(crop, index, height, width)
                    out[index][(..., *full)] = features[(..., *local)]
        return out

    def set_targets(self, content: torch.Tensor, styles: Sequence[torch.Tensor],
                    blend: Sequence[float] | None = None) -> None:
        """The loss modules' targets from whole images, computed over crops (``get_style_model_and_losses``'s)."""
        if self.content_losses:
            maps = self.features(content, sorted({self.layer_of[id(m)] for m in self.content_losses}))
            for module in self.content_losses:
                module.target = maps[self.layer_of[id(module)]]
        if self.style_losses:
            weights = normalized_blend(blend, len(styles))
            per_style = [self.grams(style) for style in styles]
            for module in self.style_losses:
                grams = [g[self.layer_of[id(module)]] for g in per_style]
                target = grams[0]  # one style: its Gram, as blended_gram gives it
                if len(grams) > 1:  # blended_gram's sum, in its order
                    target = grams[0] * weights[0]
                    for weight, gram in zip(weights[1:], grams[1:]):
                        target = target + gram * weight
                module.target = target

    def evaluate(self, image: torch.Tensor, style_weight: float, content_weight: float,
                 extra_losses: Sequence[nn.Module] = ()) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One evaluation of the closure: the weighted losses, and ``image.grad`` set to the loss's gradient.

        The same numbers as ``model(image)`` then ``(style + content + extras).backward()`` up to rounding;
        every loss module's ``.loss`` holds its value (detached) afterwards, as after the untiled forward.

        Args:
            image: ``(1, 3, H, W)``, requiring grad; its ``.grad`` is replaced (or added to when set).
            extra_losses: modules computed on the whole image (total variation), ``.loss`` weighted.

        Returns:
            ``(style_weight * Σ style losses, content_weight * Σ content losses, Σ extra losses)``, detached.
        """
        _check_image(image)
        height, width = image.shape[-2:]
        crops = self.crops(height, width)
        # The loss as a function of the Grams (pass 1) and of each content loss's value: its derivative in each.
        grams = {index: (total / self._numel(index, image)).requires_grad_(True)
                 for index, total in self.gram_sums(image).items()}
        leaves = list(grams.values())
        with torch.enable_grad():
            for module in self.style_losses:
                module.loss = _style_loss_of_gram(module, grams[self.layer_of[id(module)]])
            for module in self.content_losses:  # the score is linear in each: any value gives its derivative
                module.loss = image.new_zeros((), requires_grad=True)
                leaves.append(module.loss)
            style_score, content_score = weighted_scores(self.style_losses, self.content_losses, style_weight,
                                                         content_weight)
            derivatives = torch.autograd.grad(style_score + content_score, leaves, allow_unused=True)
        d_gram = {index: _symmetric(d, self._numel(index, image), grams[index])
                  for index, d in zip(grams, derivatives)}
        d_content = {id(m): _number(d) for m, d in zip(self.content_losses, derivatives[len(grams):])}

        # Pass 2: each crop's dL/dF on its core positions (zero on the halo), backpropagated to the crop.
        gradient = torch.zeros_like(image)
        content_sums = {id(m): image.new_zeros(()) for m in self.content_losses}
        for crop in crops:
            window = (..., slice(*crop.rows.crop), slice(*crop.cols.crop))
            x = image.detach()[window].requires_grad_(True)
            cores, grads = [], []
            with torch.enable_grad():
                for index, features in self._features(x, self.deepest):
                    local, full = self._slices(crop, index, height, width)
                    core = features[(..., *local)]
                    grad = None
                    for module in self.taps[index]:
                        if isinstance(module, StyleLoss):
                            matrix = core.detach().reshape(core.shape[1], -1)
                            part = torch.mm(d_gram[index], matrix).view_as(core)
                        else:
                            value, d_features = _content_terms(module, core.detach(), module.target[(..., *full)])
                            content_sums[id(module)] += value
                            part = d_features * d_content[id(module)]
                        grad = part if grad is None else grad + part
                    cores.append(core)
                    grads.append(grad)
                torch.autograd.backward(cores, grads)
            gradient[window] += x.grad
        for module in self.style_losses:
            module.loss = module.loss.detach()
        for module in self.content_losses:
            module.loss = content_sums[id(module)]
        style_score, content_score = weighted_scores(self.style_losses, self.content_losses, style_weight,
                                                     content_weight)
        if image.grad is None:
            image.grad = gradient
        else:
            image.grad += gradient
        extra_score = image.new_zeros(())
        if extra_losses:
            with torch.enable_grad():
                total = 0
                for extra in extra_losses:
                    extra(image)
                    total = total + extra.loss
                total.backward()
            extra_score = total.detach()
        return _detached(style_score, image), _detached(content_score, image), extra_score

    def _numel(self, index: int, image: torch.Tensor) -> int:
        """Elements of layer ``index``'s whole map for ``image``: ``gram_matrix``'s ``a*b*c*d``."""
        height, width = image.shape[-2:]
        channels = self._channels(index)
        return channels * self.geometry.map_size(height, index) * self.geometry.map_size(width, index)

    def _channels(self, index: int) -> int:
        for layer in reversed(self.layers[:index + 1]):
            if isinstance(layer, nn.Conv2d):
                return layer.out_channels
        return 3


def _check_image(image: torch.Tensor) -> None:
    if image.dim() != 4 or image.shape[0] != 1:
        raise ValueError(f"tiling evaluates one image of shape (1, C, H, W), got {tuple(image.shape)}")


def _check_loss_module(module: nn.Module) -> None:
    """Only the loss classes whose formulas ``_style_loss_of_gram`` and ``_content_terms`` know."""
    from .fast import FastContentLoss, FusedStyleLoss  # the fast forms of the same formulas

    if type(module) not in (StyleLoss, WeightedStyleLoss, FusedStyleLoss, ContentLoss, PaperContentLoss,
                            FastContentLoss):
        raise ValueError(f"tiling cannot split the loss module {type(module).__name__}")


def _style_loss_of_gram(module: StyleLoss, gram: torch.Tensor) -> torch.Tensor:
    """The module's loss for a Gram matrix computed elsewhere (what its forward computes from its own)."""
    if isinstance(module, WeightedStyleLoss):
        loss = paper_style_loss(gram, module.target) if module.form == "paper" else \
            torch.nn.functional.mse_loss(gram, module.target)
        return loss * module.weight
    return torch.nn.functional.mse_loss(gram, module.target)


def _content_terms(module: ContentLoss, core: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A core's share of a content loss (a sum over positions) and that loss's derivative there.

    ``mse_loss``: ``Σ (F - P)² / N`` over the whole map's N elements, derivative ``2 (F - P) / N``;
    the paper's: ``Σ (F - P)² / 2``, derivative ``F - P``.
    """
    diff = core - target
    squares = diff.pow(2).sum()
    if isinstance(module, PaperContentLoss):
        return squares / 2, diff
    numel = module.target.numel()
    return squares / numel, diff * (2 / numel)


def _symmetric(d_gram: torch.Tensor | None, numel: int, like: torch.Tensor) -> torch.Tensor:
    """``(dL/dG + dL/dGᵀ) / n``: what multiplies ``F`` in the derivative of ``G = F Fᵀ / n``."""
    if d_gram is None:
        return torch.zeros_like(like)
    return (d_gram + d_gram.t()).div(numel)


def _number(value: torch.Tensor | None) -> float:
    return 0.0 if value is None else float(value)


def _detached(score: torch.Tensor | float, like: torch.Tensor) -> torch.Tensor:
    return score.detach() if isinstance(score, torch.Tensor) else like.new_tensor(float(score))


# Image-sized float32 tensors a tiled run holds besides LBFGS's history and the content targets: the image
# and its gradient, the content image (and its transfer copy), the start image, the last good image kept by
# RunStats, and LBFGS's flat gradient, previous gradient, direction and update (benchmarks/tiling.py measures).
TILED_IMAGE_COPIES = 10
TILE_STEP = 64  # automatic tiles are multiples of this (px)


def tiled_estimate_bytes(content_hw: tuple[int, int], style_hw: tuple[int, int], tile: int,
                         speed: Speed | None = None, target_bytes_per_pixel: float = 0.0) -> int:
    """Memory a tiled run needs beyond the process (``guards.estimate_bytes``'s terms, crop-sized activations).

    A fixed part (``guards.BASE_BYTES`` and one crop's activations, ``tile`` x ``tile`` at most) and parts
    proportional to the picture: LBFGS's history, ``TILED_IMAGE_COPIES`` image copies, the content targets
    (``target_bytes_per_pixel``, see ``vgg19_target_bytes``) and the style images (3 floats a pixel).
    """
    speed = speed or Speed()
    content = content_hw[0] * content_hw[1]
    crop = min(tile, content_hw[0]) * min(tile, content_hw[1])
    history = guards.LBFGS_HISTORY_BYTES_PER_PIXEL * speed.history_size // TORCH_LBFGS_HISTORY
    per_pixel = history + TILED_IMAGE_COPIES * 12 + target_bytes_per_pixel
    return int(guards.BASE_BYTES + crop * guards.ACTIVATION_BYTES_PER_PIXEL + content * per_pixel
               + style_hw[0] * style_hw[1] * 12)


def plan_tiles(sizes: Sequence[int], size_fn: guards.SizeFn, config: StyleConfig, speed: Speed,
               device: torch.device, available: int | None = None) -> list[int | None]:
    """The tile of each working size of a run (None: untiled), checked against the free memory.

    With ``config.tile`` every size gets it (a size smaller than the tile runs untiled). Without it, a size
    whose untiled estimate (``guards.estimate_bytes``) does not fit in the free memory gets the largest
    tile, a multiple of ``TILE_STEP``, whose ``tiled_estimate_bytes`` fits; the others run untiled.

    Raises:
        ValueError: ``config.tile`` is too small for the layers used (naming the minimum).
        ResourceError: a size fits neither untiled nor tiled (``guards.check_memory``'s message, saying why
            tiling could not help), or not in the tile given.
    """
    available = guards.available_bytes(device) if available is None else available
    content_layers, style_layers = resolve_layers(config.content_layers), resolve_layers(config.style_layers)
    geometry = vgg19_geometry(tuple(content_layers) + tuple(style_layers))
    targets = vgg19_target_bytes(content_layers)
    tiles: list[int | None] = []
    for size in sizes:
        content_hw, style_hw = size_fn(size)
        if config.tile is not None:
            tiles.append(config.tile)
            if not needs_tiles(*content_hw, config.tile):
                guards.check_memory(content_hw, style_hw, device, size, size_fn, available, speed)
                continue
            check_tile(config.tile, geometry)
            needed = tiled_estimate_bytes(content_hw, style_hw, config.tile, speed, targets)
            if available is not None and needed > available:
                raise ResourceError(f"size {size} px needs about {needed / guards.GIB:.1f} GiB in tiles of "
                                    f"{config.tile} px but only {available / guards.GIB:.1f} GiB is free on "
                                    f"{device}: lower --size or --history-size")
            continue
        if available is None or guards.estimate_bytes(content_hw, style_hw, speed) <= available:
            tiles.append(None)
            continue
        tile = _largest_tile(content_hw, style_hw, available, speed, targets, geometry.minimum_tile)
        why = ("backward per-module" if config.backward != "combined" else
               "precision bf16, channels_last or fused_gram" if speed.changes_model and not config.fast else None)
        if tile is None or why is not None:
            try:
                guards.check_memory(content_hw, style_hw, device, size, size_fn, available, speed)
            except ResourceError as exc:
                if tile is None:
                    raise
                raise ResourceError(f"{exc}; tiles of {tile} px would fit, but tiling cannot run with {why}") \
                    from None
        tiles.append(tile)
    return tiles


def _largest_tile(content_hw: tuple[int, int], style_hw: tuple[int, int], available: int, speed: Speed,
                  targets: float, minimum: int) -> int | None:
    tile = (max(content_hw) - 1) // TILE_STEP * TILE_STEP
    while tile >= minimum:
        if tiled_estimate_bytes(content_hw, style_hw, tile, speed, targets) <= available:
            return tile
        tile -= TILE_STEP
    return None


def tiled_speed(speed: Speed) -> Speed:
    """``--fast``'s settings at a tiled size: its LBFGS history, none of the levers that change the model."""
    return dataclasses.replace(speed, precision="fp32", channels_last=False, fused_gram=False)
