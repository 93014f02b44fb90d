"""Tiled evaluation: the untiled loss and image gradient from overlapping crops, so memory stays flat (which
tile each size takes, and its memory: ``speed.tile_plans``).

After Galerne, Raad, Lezama and Morel, "Scaling Painting Style Transfer" (EGSR 2024). A
style loss depends on the features only through Gram matrices, sums over positions, so they can be
added up crop by crop (pass 1, no gradient). Once the full Grams are known, ``dL/dF`` at every
position is known too, and each crop backpropagates it from its own core positions (pass 2); the
crops' input gradients, added up, are the untiled gradient. The content loss is a sum over positions
and total variation is computed on the whole image. Nothing is blended or feathered: there are no seams.
The W2 loss (``--style-loss wasserstein``) tiles the same way: its means and covariances are sums over
positions too (pass 1 adds up the first and second moments; pass 2 backpropagates the loss linearised in them).

Exactness rests on two conditions, both computed from the network (``crops.network_geometry``): a crop
reaches beyond its core by the receptive-field reach of the deepest layer used (its halo), and its
origin is a multiple of that layer's stride (2 to the number of pools before it), so that every pool
sees the windows it sees in the whole image. A crop is cut from the image itself: its halo is real
image, never padding. The convolutions' own zero padding at a crop's interior edge only touches halo
positions, which are discarded; at the image's true border the crop's edge is the image's edge, so the
network pads there exactly as it does untiled.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Iterator, Sequence

import torch
from torch import nn

from ..core.backward import weighted_scores
from ..core.loss_terms import (PaperContentLoss, TotalVariationLoss, WeightedStyleLoss, normalized_blend,
                               paper_style_loss)
from ..core.losses import ContentLoss, StyleLoss
from ..core.statistics import WassersteinStyleLoss, wasserstein_of, wasserstein_target_of
# The planning's names were here before it had its own module (docs/api.md, "What moved").
from .tile_plans import (ADVICE_TILE, TILE_STEP, TILED_HISTORY_SIZE, TILED_IMAGE_COPIES, advice_tile,  # noqa: F401
                         largest_tiled_size, needs_tiles, plan_tiles, tiled_estimate_bytes, tiled_speed)
from .crops import Crop, check_tile, layer_spec, network_geometry, plan_crops

STAND_IN_SIDE = 32  # VGG19's deepest layer (after its 5th pool) still has a position at this side


def stand_ins(images: torch.Tensor | Sequence[torch.Tensor]) -> torch.Tensor | list[torch.Tensor]:
    """Small black images standing in for ``images`` while a tiled style model is built: the model's
    structure does not depend on the images, and its targets are then computed over crops
    (``TiledStyleModel.set_targets``), so no whole-image feature map is ever held."""
    if isinstance(images, (list, tuple)):
        return [stand_ins(image) for image in images]  # type: ignore[misc]
    return images.new_zeros((1, images.shape[1], STAND_IN_SIDE, STAND_IN_SIDE))


@dataclass(frozen=True)
class Tiles:
    """``run_style_transfer``'s ``TransferSettings.tiles``: evaluations over crops of at most ``tile`` px."""

    tile: int

    def stand_ins(self, images: torch.Tensor | Sequence[torch.Tensor]) -> torch.Tensor | list[torch.Tensor]:
        return stand_ins(images)

    def evaluation(self, model: nn.Sequential, content_img: torch.Tensor, style_imgs: Sequence[torch.Tensor],
                   style_blend: Sequence[float] | None) -> TiledStyleModel:
        """The model built on stand-ins, evaluated over crops, its targets computed over crops of the images."""
        tiled = TiledStyleModel(model, self.tile)
        tiled.set_targets(content_img, style_imgs, style_blend)
        return tiled


def tiles_for(image: torch.Tensor, tile: int | None) -> Tiles | None:
    """``Tiles`` where an image of ``image``'s size is evaluated in crops (``needs_tiles``), else None."""
    return Tiles(tile) if tile is not None and needs_tiles(*image.shape[-2:], tile) else None


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
        # Layers of the W2 loss (--style-loss wasserstein): means and covariances add up over crops as Grams do.
        self.moment_layers = {self.layer_of[id(m)] for m in self.style_losses if isinstance(m, WassersteinStyleLoss)}

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

    def _crop_features(self, image: torch.Tensor, last: int) -> Iterator[tuple[Crop, int, torch.Tensor]]:
        """Every crop of ``image`` through the layers up to ``last``: ``(crop, index, output)`` where a loss reads."""
        _check_image(image)
        for crop in self.crops(*image.shape[-2:]):
            x = image[..., slice(*crop.rows.crop), slice(*crop.cols.crop)]
            for index, features in self._features(x, last):
                yield crop, index, features

    def gram_sums(self, image: torch.Tensor) -> dict[int, torch.Tensor]:
        """Pass 1: ``F Fᵀ`` over every crop's core at each style layer (no gradient), not yet normalised."""
        return self.moment_sums(image)[0]

    def moment_sums(self, image: torch.Tensor) -> tuple[dict[int, torch.Tensor], dict[int, torch.Tensor]]:
        """Pass 1: ``F Fᵀ`` at each style layer and, at the W2 loss's layers, ``F 1`` (the sum over positions),
        over every crop's core (no gradient, not normalised). At the W2 layers both in float64: the covariance
        is their difference ``F Fᵀ / P - mu muᵀ``, which float32 sums would round where the mean is large."""
        height, width = image.shape[-2:]
        sums: dict[int, torch.Tensor] = {}
        firsts: dict[int, torch.Tensor] = {}
        with torch.no_grad():
            for crop, index, features in self._crop_features(image, self.deepest_style):
                if not any(isinstance(m, StyleLoss) for m in self.taps[index]):
                    continue
                (rows, cols), _ = self._slices(crop, index, height, width)
                core = features[..., rows, cols]
                matrix = core.reshape(core.shape[1], -1)
                if index in self.moment_layers:
                    matrix = matrix.double()
                    firsts[index] = firsts[index] + matrix.sum(1) if index in firsts else matrix.sum(1)
                gram = torch.mm(matrix, matrix.t())
                if index in sums:
                    sums[index] += gram
                else:
                    sums[index] = gram
        return sums, firsts

    def _moments(self, sums: dict[int, torch.Tensor], firsts: dict[int, torch.Tensor], image: torch.Tensor
                 ) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
        """Each W2 layer's mean and covariance (population, float64) from ``moment_sums``."""
        out = {}
        for index, first in firsts.items():
            positions = self._numel(index, image) // self._channels(index)
            mean = first / positions
            out[index] = (mean, sums[index] / positions - torch.outer(mean, mean))
        return out

    def grams(self, image: torch.Tensor) -> dict[int, torch.Tensor]:
        """Each style layer's ``gram_matrix`` of ``image``'s features, accumulated over crops."""
        return {index: total.div(self._numel(index, image)) for index, total in self.gram_sums(image).items()}

    def features(self, image: torch.Tensor, indices: Sequence[int]) -> dict[int, torch.Tensor]:
        """Whole feature maps of ``image`` at layers ``indices``, assembled from the crops' cores (no gradient)."""
        height, width = image.shape[-2:]
        out: dict[int, torch.Tensor] = {}
        with torch.no_grad():
            for crop, index, features in self._crop_features(image, max(indices)):
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
            if self.moment_layers:  # wasserstein_target's blend of the styles' Gaussian fits, from their sums
                moments = [self._moments(*self.moment_sums(style), style) for style in styles]
            for module in self.style_losses:
                if isinstance(module, WassersteinStyleLoss):
                    index = self.layer_of[id(module)]
                    module.target = wasserstein_target_of([m[index] for m in moments], blend).to(module.target)
                    continue
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
        sums, firsts = self.moment_sums(image)
        # W2 layers: the loss as a function of the mean and covariance, leaves too (the Gram layers' way).
        moments = {index: (mean.requires_grad_(True), cov.requires_grad_(True))
                   for index, (mean, cov) in self._moments(sums, firsts, image).items()}
        grams = {index: (total / self._numel(index, image)).requires_grad_(True)
                 for index, total in sums.items() if index not in moments}
        leaves = list(grams.values()) + [leaf for pair in moments.values() for leaf in pair]
        with torch.enable_grad():
            for module in self.style_losses:
                index = self.layer_of[id(module)]
                if isinstance(module, WassersteinStyleLoss):
                    mean, cov = moments[index]
                    module.loss = (wasserstein_of(mean, cov, module.target[0], module.target[1:]) * module.weight
                                   ).to(image.dtype)
                else:
                    module.loss = _style_loss_of_gram(module, grams[index])
            for module in self.content_losses:  # the score is linear in each: any value gives its derivative
                module.loss = image.new_zeros((), requires_grad=True)
                leaves.append(module.loss)
            style_score, content_score = weighted_scores(self.style_losses, self.content_losses, style_weight,
                                                         content_weight)
            derivatives = torch.autograd.grad(style_score + content_score, leaves, allow_unused=True)
        d_gram = {index: _symmetric(d, self._numel(index, image), grams[index])
                  for index, d in zip(grams, derivatives)}
        # dL/df_q of L(mu, C), mu = sum f / P, C = sum (f - mu)(f - mu)^T / P: (dL/dmu + (dL/dC + dL/dC^T)(f_q - mu)) / P.
        d_moments = {}
        for k, index in enumerate(moments):
            d_mean, d_cov = derivatives[len(grams) + 2 * k], derivatives[len(grams) + 2 * k + 1]
            mean, cov = moments[index]
            positions = self._numel(index, image) // self._channels(index)
            d_mean = torch.zeros_like(mean) if d_mean is None else d_mean
            d_cov = torch.zeros_like(cov) if d_cov is None else d_cov
            d_moments[index] = (mean.detach().to(image.dtype), (d_mean / positions).to(image.dtype),
                                ((d_cov + d_cov.t()) / positions).to(image.dtype))
        d_content = {id(m): _number(d) for m, d in zip(self.content_losses, derivatives[len(grams) + 2 * len(moments):])}

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
                        if isinstance(module, WassersteinStyleLoss):
                            mean, d_mean, d_cov = d_moments[index]
                            matrix = core.detach().reshape(core.shape[1], -1)
                            part = (d_mean[:, None] + torch.mm(d_cov, matrix - mean[:, None])).view_as(core)
                        elif isinstance(module, StyleLoss):
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

    if type(module) not in (StyleLoss, WeightedStyleLoss, FusedStyleLoss, WassersteinStyleLoss, ContentLoss,
                            PaperContentLoss, FastContentLoss):
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
