"""Tiled evaluation: the untiled loss and image gradient from overlapping crops, so memory stays flat (which
tile each size takes, and its memory: ``tiling.plans``).

After Galerne, Raad, Lezama and Morel, "Scaling Painting Style Transfer" (EGSR 2024). A
style loss depends on the features only through Gram matrices, sums over positions, so they can be
added up crop by crop (pass 1, no gradient). Once the full Grams are known, ``dL/dF`` at every
position is known too, and each crop backpropagates it from its own core positions (pass 2); the
crops' input gradients, added up, are the untiled gradient. The content loss is a sum over positions
and total variation is computed on the whole image. Nothing is blended or feathered: there are no seams.
The W2 loss (``--style-loss wasserstein``) tiles the same way: its means and covariances are sums over
positions too (pass 1 adds up the first and second moments; pass 2 backpropagates the loss linearised in them).
So do the masks (``--style-mask``, ``--content-mask``): followed through the layers at the whole image's size,
each style's guided Gram matrix (or region mean and covariance) is a mask-weighted sum over positions, and the
masked content loss a weighted sum (``Region``); a style's transparency weighs its targets' sums the same way. The
sliced loss does not tile: its sort spans the whole map.

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
from typing import cast, overload
from collections.abc import Iterator, Sequence

import torch
from torch import nn

from ..core.backward import weighted_scores
from ..losses.terms import (PaperContentLoss, TotalVariationLoss, WeightedStyleLoss, normalized_blend, paper_style_loss,
                            region_weight, style_alphas)
from ..losses.tutorial import ContentLoss, StyleLoss
from ..losses.masks import Guides, GuidedStyleLoss, MaskedContentLoss, check_alpha, follow
from ..losses.statistics import GuidedWassersteinLoss, WassersteinStyleLoss, wasserstein_of, wasserstein_target_of
from .plans import needs_tiles
from .crops import Crop, check_tile, layer_spec, network_geometry, plan_crops

STAND_IN_SIDE = 32  # VGG19's deepest layer (after its 5th pool) still has a position at this side


@overload
def stand_ins(images: torch.Tensor) -> torch.Tensor: ...


@overload
def stand_ins(images: Sequence[torch.Tensor]) -> list[torch.Tensor]: ...


def stand_ins(images: torch.Tensor | Sequence[torch.Tensor]) -> torch.Tensor | list[torch.Tensor]:
    """Small black images standing in for ``images`` while a tiled style model is built: the model's
    structure does not depend on the images, and its targets are then computed over crops
    (``TiledStyleModel.set_targets``), so no whole-image feature map is ever held."""
    if isinstance(images, torch.Tensor):
        return images.new_zeros((1, images.shape[1], STAND_IN_SIDE, STAND_IN_SIDE))
    return [stand_ins(image) for image in images]


@dataclass(frozen=True)
class Tiles:
    """``run_style_transfer``'s ``Parts.tiles`` (``core.transfer``): evaluations over crops of at most ``tile`` px."""

    tile: int

    @overload
    def stand_ins(self, images: torch.Tensor) -> torch.Tensor: ...

    @overload
    def stand_ins(self, images: Sequence[torch.Tensor]) -> list[torch.Tensor]: ...

    def stand_ins(self, images: torch.Tensor | Sequence[torch.Tensor]) -> torch.Tensor | list[torch.Tensor]:
        return stand_ins(images)

    def stand_in_guides(self, guides: Guides | None) -> Guides | None:
        """The run's masks at the stand-ins' size, for building the model (``evaluation`` puts the real ones in)."""
        return None if guides is None else guides.resized((STAND_IN_SIDE, STAND_IN_SIDE))

    def evaluation(self, model: nn.Sequential, content_img: torch.Tensor, style_imgs: Sequence[torch.Tensor],
                   style_blend: Sequence[float] | None, guides: Guides | None = None) -> TiledStyleModel:
        """The model built on stand-ins, evaluated over crops, its targets computed over crops of the images and
        its masks (``guides``, at the content's size) followed to each loss's whole map."""
        tiled = TiledStyleModel(model, self.tile)
        tiled.set_targets(content_img, style_imgs, style_blend, guides)
        return tiled


def tiles_for(image: torch.Tensor, tile: int | None) -> Tiles | None:
    """``Tiles`` where an image of ``image``'s size is evaluated in crops (``needs_tiles``), else None."""
    return Tiles(tile) if tile is not None and needs_tiles(image.shape[-2], image.shape[-1], tile) else None


@dataclass(frozen=True, eq=False)
class Region:
    """What one style statistic of a loss is summed over at one layer: the whole map, or a mask's region of it.

    A Gram region gives ``G = (F m)(F m)ᵀ / (C Σ m²)`` (``masks.guided_gram``; unmasked, ``gram_matrix``), a
    moments region (the W2 loss's) ``mu = Σ m f / Σ m`` and ``Cov = Σ m f fᵀ / Σ m - mu muᵀ`` in float64
    (``statistics.gaussian_statistics``; unmasked, m = 1). Both are sums over positions, added up crop by crop
    (``sums``); pass 2 backpropagates the loss linearised in them (``gradient``):
    ``dL/df = m (dL/dG + dL/dGᵀ)(m f) / (C Σ m²)`` and ``dL/df = m (dL/dmu + (dL/dCov + dL/dCovᵀ)(f - mu)) / Σ m``.
    """

    index: int  # the layer
    mask: torch.Tensor | None  # (1, 1, h, w) over the layer's whole map; None: every position counts 1
    moments: bool  # mean and covariance (W2) rather than a Gram matrix
    channels: int
    total: torch.Tensor | int  # a Gram region's Σ m² (``masks.region_weight``), a moments region's Σ m

    def _weights(self, full: tuple[slice, slice], like: torch.Tensor) -> torch.Tensor | None:
        return None if self.mask is None else self.mask[(..., *full)].reshape(1, -1).to(like.dtype)

    def sums(self, matrix: torch.Tensor, full: tuple[slice, slice]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """A crop core's share: ``(Σ w f fᵀ, Σ m f)`` over its positions (``matrix``, ``(C, n)``; ``full``: where they
        are in the whole map). A Gram region's are ``((F m)(F m)ᵀ, None)``; a moments region's are in float64 (the
        covariance is a difference of them, which float32 sums would round where the mean is large)."""
        if self.moments:
            matrix = matrix.double()
        weights = self._weights(full, matrix)
        weighted = matrix if weights is None else matrix * weights
        if self.moments:
            return torch.mm(weighted, matrix.t()), weighted.sum(1)
        return torch.mm(weighted, weighted.t()), None

    def statistics(self, second: torch.Tensor, first: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
        """``(G,)`` or ``(mu, Cov)`` from the sums over every crop."""
        if not self.moments:
            return (second / (self.channels * self.total),)
        assert first is not None  # a moments region's sums carry Σ m f (``sums``)
        mean = first / self.total
        return mean, second / self.total - torch.outer(mean, mean)

    def factors(self, statistics: tuple[torch.Tensor, ...], derivatives: Sequence[torch.Tensor | None],
                dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        """What ``gradient`` needs from the loss's derivatives in ``statistics`` (None: the loss does not use one)."""
        d = [torch.zeros_like(t) if g is None else g for t, g in zip(statistics, derivatives)]
        if not self.moments:
            return ((d[0] + d[0].t()).div(self.channels * self.total).to(dtype),)
        return (statistics[0].detach().to(dtype), (d[0] / self.total).to(dtype),
                ((d[1] + d[1].t()) / self.total).to(dtype))

    def gradient(self, matrix: torch.Tensor, full: tuple[slice, slice], factors: tuple[torch.Tensor, ...]
                 ) -> torch.Tensor:
        """``dL/dF`` at a crop core's positions (``matrix``, ``(C, n)``) through this region's statistic."""
        weights = self._weights(full, matrix)
        if self.moments:
            mean, d_mean, d_cov = factors
            part = d_mean[:, None] + torch.mm(d_cov, matrix - mean[:, None])
        else:
            part = torch.mm(factors[0], matrix if weights is None else matrix * weights)
        return part if weights is None else part * weights


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
        self.taps: dict[int, list[StyleLoss | ContentLoss]] = {}  # layer index -> the loss modules reading its output
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
                if isinstance(module, StyleLoss):
                    self.style_losses.append(module)
                else:
                    self.content_losses.append(module)
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
        # Layers of the W2 loss (--style-loss wasserstein): means and covariances add up over crops as Grams do.
        self.moment_layers = {self.layer_of[id(m)] for m in self.style_losses
                              if isinstance(m, (WassersteinStyleLoss, GuidedWassersteinLoss))}

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

    def _plain_regions(self, image: torch.Tensor, moments: bool = False, alpha: torch.Tensor | None = None,
                       style: int = 0) -> dict[int, Region]:
        """One region per style layer (at the W2 layers with ``moments``): a whole image's statistics, its positions
        weighted by ``alpha`` (``(1, 1, H, W)`` at the image's size: a style's transparency, ``terms.style_gram``;
        None: unweighted). ``style``: which style image it is, for the message where its alpha vanishes."""
        layers = sorted({self.layer_of[id(m)] for m in self.style_losses})
        maps = {} if alpha is None else self._followed(alpha, (image.shape[-2], image.shape[-1]), style)
        regions = {}
        for index in layers:
            weighs_moments = moments and index in self.moment_layers
            mask = maps.get(index)
            total = (self._positions(index, image) if mask is None
                     else mask.double().sum() if weighs_moments else region_weight(mask))
            regions[index] = Region(index, mask, weighs_moments, self._channels(index), total)
        return regions

    def _followed(self, alpha: torch.Tensor, hw: tuple[int, int], style: int) -> dict[int, torch.Tensor]:
        """A style's alpha at each style layer's whole map (``masks.follow``, layer by layer, as the untiled model)."""
        if tuple(alpha.shape[-2:]) != hw:
            raise ValueError(f"style image {style + 1} is {hw}, its alpha {tuple(alpha.shape[-2:])}")
        maps, at = {}, alpha
        for index, layer in enumerate(self.layers[:self.deepest + 1]):
            at = follow(at, layer, (self.geometry.map_size(hw[0], index), self.geometry.map_size(hw[1], index)))
            if any(isinstance(m, StyleLoss) for m in self.taps.get(index, ())):
                check_alpha(at, style, f"layer {index} of the model")
                maps[index] = at
        return maps

    def grams(self, image: torch.Tensor, alpha: torch.Tensor | None = None, style: int = 0
              ) -> dict[int, torch.Tensor]:
        """Each style layer's ``gram_matrix`` of ``image``'s features (with ``alpha``: ``guided_gram``, the style's
        visible pixels), accumulated over crops."""
        regions = self._plain_regions(image, alpha=alpha, style=style)
        sums = self.region_sums(image, list(regions.values()))
        return {index: region.statistics(*sums[id(region)])[0] for index, region in regions.items()}

    def moments(self, image: torch.Tensor, alpha: torch.Tensor | None = None, style: int = 0
                ) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
        """Each W2 layer's mean and covariance (population, float64) of ``image``'s features (with ``alpha``: its
        positions weighted by it), over crops."""
        regions = {i: r for i, r in self._plain_regions(image, moments=True, alpha=alpha, style=style).items()
                   if r.moments}
        sums = self.region_sums(image, list(regions.values()))
        return {index: region.statistics(*sums[id(region)]) for index, region in regions.items()}  # type: ignore[misc]

    def region_sums(self, image: torch.Tensor, regions: Sequence[Region]
                    ) -> dict[int, tuple[torch.Tensor, torch.Tensor | None]]:
        """Pass 1: each region's sums (``Region.sums``) over every crop's core, no gradient; keyed by ``id(region)``."""
        sums: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = {}
        if not regions:
            return sums
        height, width = image.shape[-2:]
        at: dict[int, list[Region]] = {}
        for region in regions:
            at.setdefault(region.index, []).append(region)
        with torch.no_grad():
            for crop, index, features in self._crop_features(image, max(at)):
                if index not in at:
                    continue
                (rows, cols), full = self._slices(crop, index, height, width)
                core = features[..., rows, cols]
                matrix = core.reshape(core.shape[1], -1)
                for region in at[index]:
                    second, first = region.sums(matrix, full)
                    if id(region) in sums:
                        total_second, total_first = sums[id(region)]
                        second = total_second + second
                        first = None if first is None else total_first + first  # type: ignore[operator]
                    sums[id(region)] = (second, first)
        return sums

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
                    blend: Sequence[float] | None = None, guides: Guides | None = None) -> None:
        """The loss modules' targets from whole images, computed over crops (``get_style_model_and_losses``'s).

        ``guides``: the run's masks at the content's size (``masks.load_guides``), which the model was built with
        (at the stand-ins' size): followed through the layers to each loss's whole map, as the untiled model
        follows them, and given to the guided and masked loss modules in place of the stand-ins' masks; and its
        ``style_alphas`` (each at its style's size), which weigh the styles' positions in their targets.
        """
        if guides is not None:
            self._set_masks(guides, (content.shape[-2], content.shape[-1]))
        if self.content_losses:
            maps = self.features(content, sorted({self.layer_of[id(m)] for m in self.content_losses}))
            for content_module in self.content_losses:
                content_module.target = maps[self.layer_of[id(content_module)]]
        if self.style_losses:
            weights = normalized_blend(blend, len(styles))
            grams_used = any(self.layer_of[id(m)] not in self.moment_layers for m in self.style_losses)
            alphas = style_alphas(None if guides is None else guides.style_alphas, len(styles))
            per_style = [self.grams(style, alpha, k) if grams_used else {}
                         for k, (style, alpha) in enumerate(zip(styles, alphas))]
            if self.moment_layers:  # wasserstein_target's blend of the styles' Gaussian fits, from their sums
                moments = [self.moments(style, alpha, k) for k, (style, alpha) in enumerate(zip(styles, alphas))]
            for module in self.style_losses:
                index = self.layer_of[id(module)]
                if isinstance(module, GuidedWassersteinLoss):  # one target per style (its whole image)
                    module.target = torch.stack([wasserstein_target_of([m[index]]) for m in moments]).to(module.target)
                elif isinstance(module, WassersteinStyleLoss):
                    module.target = wasserstein_target_of([m[index] for m in moments], blend).to(module.target)
                elif isinstance(module, GuidedStyleLoss):
                    module.target = torch.stack([g[index] for g in per_style])
                else:
                    grams = [g[index] for g in per_style]
                    target = grams[0]  # one style: its Gram, as blended_gram gives it
                    if len(grams) > 1:  # blended_gram's sum, in its order
                        target = grams[0] * weights[0]
                        for weight, gram in zip(weights[1:], grams[1:]):
                            target = target + gram * weight
                    module.target = target

    def _set_masks(self, guides: Guides, hw: tuple[int, int]) -> None:
        """The guided and masked loss modules' masks at each loss's whole map (``Guides.follow``, layer by layer)."""
        at = guides
        for index, layer in enumerate(self.layers[:self.deepest + 1]):
            at = at.follow(layer, (self.geometry.map_size(hw[0], index), self.geometry.map_size(hw[1], index)))
            for module in self.taps.get(index, ()):
                if isinstance(module, (GuidedStyleLoss, GuidedWassersteinLoss)):
                    if at.styles is None or len(at.styles) != module.masks.shape[0]:
                        raise ValueError(f"the model has {module.masks.shape[0]} style mask(s), the guides "
                                         f"{0 if at.styles is None else len(at.styles)}")
                    module.masks = torch.cat(at.styles).to(module.masks)
                elif isinstance(module, MaskedContentLoss):
                    if at.content is None:
                        raise ValueError("the model has a content mask, the guides none")
                    module.mask = at.content.to(module.mask)

    def _regions(self, module: StyleLoss, image: torch.Tensor) -> list[Region | None]:
        """The regions a style loss module's statistics come from: one per style for the guided losses (None: a
        style whose region is empty at this layer, which the guided W2 loss leaves out), one unweighted else."""
        index = self.layer_of[id(module)]
        channels, moments = self._channels(index), isinstance(module, WassersteinStyleLoss)
        if not isinstance(module, (GuidedStyleLoss, GuidedWassersteinLoss)):
            return [Region(index, None, moments, channels, self._positions(index, image))]
        hw = tuple(self.geometry.map_size(n, index) for n in image.shape[-2:])
        if tuple(module.masks.shape[-2:]) != hw:
            raise ValueError(f"the style masks are {tuple(module.masks.shape[-2:])} at this layer, the image's map "
                             f"{hw}: give set_targets the run's guides")
        out: list[Region | None] = []
        for k in range(module.masks.shape[0]):
            mask = module.masks[k:k + 1]
            if isinstance(module, GuidedStyleLoss):  # guided_gram's normaliser: C * sum(m^2)
                out.append(Region(index, mask, False, channels, region_weight(mask)))
            else:
                total = mask.double().sum()
                out.append(Region(index, mask, True, channels, total) if bool(total > 0) else None)
        return out

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
        # Pass 1: each region's sums; its statistics (Gram, or mean and covariance) are leaves the loss is a
        # function of, as is each content loss's value (the score is linear in it: any value gives its derivative).
        regions = {id(m): self._regions(m, image) for m in self.style_losses}
        used = [r for rs in regions.values() for r in rs if r is not None]
        sums = self.region_sums(image, used)
        statistics = {id(r): tuple(t.requires_grad_(True) for t in r.statistics(*sums[id(r)])) for r in used}
        leaves = [leaf for r in used for leaf in statistics[id(r)]]
        with torch.enable_grad():
            for module in self.style_losses:
                of = [None if r is None else statistics[id(r)] for r in regions[id(module)]]
                module.loss = _style_loss_of(module, of, image)
            for content_module in self.content_losses:
                content_module.loss = image.new_zeros((), requires_grad=True)
                leaves.append(content_module.loss)
            style_score, content_score = weighted_scores(self.style_losses, self.content_losses, style_weight,
                                                         content_weight)
            # A tensor: the model has loss modules (TiledStyleModel refuses one without), so weighted_scores sums some.
            total_score = cast(torch.Tensor, style_score + content_score)
            derivatives = iter(torch.autograd.grad(total_score, leaves, allow_unused=True))
        factors = {id(r): r.factors(statistics[id(r)], [next(derivatives) for _ in statistics[id(r)]], image.dtype)
                   for r in used}
        d_content = {id(m): _number(d) for m, d in zip(self.content_losses, derivatives)}

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
                    matrix = core.detach().reshape(core.shape[1], -1)
                    grad = None
                    for tap in self.taps[index]:
                        if isinstance(tap, StyleLoss):
                            # sum() starts at 0: a style loss tapping this layer has a region here (a tensor).
                            part = cast(torch.Tensor, sum(r.gradient(matrix, full, factors[id(r)])
                                                          for r in regions[id(tap)] if r is not None)).view_as(core)
                        else:
                            value, d_features = _content_terms(tap, core.detach(), tap.target[(..., *full)], full)
                            content_sums[id(tap)] += value
                            part = d_features * d_content[id(tap)]
                        grad = part if grad is None else grad + part
                    cores.append(core)
                    grads.append(grad)
                torch.autograd.backward(cores, grads)
            assert x.grad is not None  # the backward above reached x: every crop feeds the deepest tapped layer
            gradient[window] += x.grad
        for module in self.style_losses:
            module.loss = module.loss.detach()
        for content_module in self.content_losses:
            content_module.loss = content_sums[id(content_module)]
        style_score, content_score = weighted_scores(self.style_losses, self.content_losses, style_weight,
                                                     content_weight)
        if image.grad is None:
            image.grad = gradient
        else:
            image.grad += gradient
        extra_score = image.new_zeros(())
        if extra_losses:
            with torch.enable_grad():
                terms = []
                for extra in extra_losses:
                    extra(image)
                    terms.append(extra.loss)
                # sum() is 0 + each term in turn, as the loop this was; extra_losses is not empty, so a tensor.
                total = cast(torch.Tensor, sum(terms))
                total.backward()
            extra_score = total.detach()
        return _detached(style_score, image), _detached(content_score, image), extra_score

    def _positions(self, index: int, image: torch.Tensor) -> int:
        """Positions of layer ``index``'s whole map for ``image``."""
        return self._numel(index, image) // self._channels(index)

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
    from ..fast.kernels import FastContentLoss, FusedStyleLoss  # the fast forms of the same formulas

    if type(module) not in (StyleLoss, WeightedStyleLoss, FusedStyleLoss, WassersteinStyleLoss, GuidedStyleLoss,
                            GuidedWassersteinLoss, ContentLoss, PaperContentLoss, FastContentLoss, MaskedContentLoss):
        raise ValueError(f"tiling cannot split the loss module {type(module).__name__}")


def _style_loss_of_gram(module: StyleLoss, gram: torch.Tensor) -> torch.Tensor:
    """The module's loss for a Gram matrix computed elsewhere (what its forward computes from its own)."""
    if isinstance(module, WeightedStyleLoss):
        loss = paper_style_loss(gram, module.target) if module.form == "paper" else \
            torch.nn.functional.mse_loss(gram, module.target)
        return loss * module.weight
    return torch.nn.functional.mse_loss(gram, module.target)


def _style_loss_of(module: StyleLoss, statistics: Sequence[tuple[torch.Tensor, ...] | None], like: torch.Tensor
                   ) -> torch.Tensor:
    """The module's loss given its regions' statistics (``TiledStyleModel._regions``), as its forward computes it."""
    if isinstance(module, GuidedStyleLoss):
        return module.loss_of_grams([s[0] for s in statistics if s is not None])
    if isinstance(module, GuidedWassersteinLoss):
        return module.loss_of_moments(statistics, like)  # type: ignore[arg-type]
    (first,) = statistics
    if isinstance(module, WassersteinStyleLoss):
        mean, cov = first  # type: ignore[misc]
        return (wasserstein_of(mean, cov, module.target[0], module.target[1:]) * module.weight).to(like.dtype)
    return _style_loss_of_gram(module, first[0])  # type: ignore[index]


def _content_terms(module: ContentLoss, core: torch.Tensor, target: torch.Tensor, full: tuple[slice, slice]
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """A core's share of a content loss (a sum over positions) and that loss's derivative there.

    ``mse_loss``: ``Σ (F - P)² / N`` over the whole map's N elements, derivative ``2 (F - P) / N``;
    the paper's: ``Σ (F - P)² / 2``, derivative ``F - P``; a mask ``m`` (``MaskedContentLoss``) weighs each term and
    its derivative (``full``: where the core is in the whole map, and so in the mask).
    """
    diff = core - target
    mask = module.mask[(..., *full)] if isinstance(module, MaskedContentLoss) else None
    squares = (diff.pow(2) if mask is None else diff.pow(2) * mask).sum()
    d_features = diff if mask is None else diff * mask
    if isinstance(module, PaperContentLoss) or (mask is not None and module.form == "paper"):
        return squares / 2, d_features
    numel = module.target.numel()
    return squares / numel, d_features * (2 / numel)


def _number(value: torch.Tensor | None) -> float:
    return 0.0 if value is None else float(value)


def _detached(score: torch.Tensor | float, like: torch.Tensor) -> torch.Tensor:
    return score.detach() if isinstance(score, torch.Tensor) else like.new_tensor(float(score))
