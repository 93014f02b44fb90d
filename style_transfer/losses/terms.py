"""Loss terms beyond the tutorial's: weighted, blended and paper-form style/content losses, and TV.

The tutorial's own ``ContentLoss`` and ``StyleLoss`` (``losses.tutorial``) stay the default; these
modules are used only when a setting asks for them, so the default path is unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .tutorial import ContentLoss, StyleLoss, gram_matrix
from ..presets import LOSS_FORMS

# Guards the guided Gram's division where a region vanishes at a deep layer of a tiny image.
_EPS = 1e-8


def blended_gram(features: Sequence[torch.Tensor], blend: Sequence[float] | None = None, *,
                 alphas: Sequence[torch.Tensor | None] | None = None) -> torch.Tensor:
    """The blend of the Gram matrices of several style images' features at one layer.

    ``sum_k w_k gram_matrix(features[k])`` with ``w = blend / sum(blend)`` (equal when None).
    Each Gram matrix is normalised by its own size, so the images may differ in size.
    ``alphas``: each style's transparency at this layer, ``(1, 1, H_k, W_k)`` in [0, 1] or None (opaque); a
    style with one gives ``guided_gram(features[k], alpha)``, the Gram matrix of its visible pixels
    (``style_gram``).

    Raises:
        ValueError: no features, a blend of another length, negative weights or a zero sum.
    """
    if not features:
        raise ValueError("blended_gram needs the features of at least one style image")
    weights = normalized_blend(blend, len(features))
    alphas = style_alphas(alphas, len(features))
    if len(features) == 1:
        return style_gram(features[0], alphas[0])
    grams = [style_gram(f, a) for f, a in zip(features, alphas)]
    out = grams[0] * weights[0]
    for weight, gram in zip(weights[1:], grams[1:]):
        out = out + gram * weight
    return out


def style_gram(features: torch.Tensor, alpha: torch.Tensor | None = None) -> torch.Tensor:
    """A style image's Gram target: ``gram_matrix(features)``, or with its transparency ``alpha`` (``(1, 1, H, W)``
    in [0, 1] at the features' size) ``guided_gram(features, alpha)``: its pixels weighted as a style mask weighs
    the picture's, so that transparent ones (alpha 0) are left out and a padded style gives the unpadded Gram."""
    return gram_matrix(features) if alpha is None else guided_gram(features, alpha)


def style_alphas(alphas: Sequence[torch.Tensor | None] | None, count: int) -> list[torch.Tensor | None]:
    """``alphas`` as a list of one entry per style (None: every style opaque).

    Raises:
        ValueError: another number of entries than styles.
    """
    if alphas is None:
        return [None] * count
    if len(alphas) != count:
        raise ValueError(f"{len(alphas)} style alpha(s) for {count} style image(s)")
    return list(alphas)


def guided_gram(input: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Gram matrix of feature maps weighted by a mask (Gatys et al. 2017), normalised by the mask's weight.

    With ``F`` the features ``(C, H*W)`` and ``m`` the mask ``(H*W,)``::

        G = (F m) (F m)^T / (C * sum(m^2))

    The features are multiplied by the mask, as in the paper, so each pixel counts with weight ``m^2``;
    dividing by ``C * sum(m^2)`` (for a binary mask: C times the region's pixel count) makes ``G`` the
    region's own normalised Gram matrix, as strong for a small region as for a large one. An all-ones
    mask gives ``gram_matrix(input)`` exactly.

    Args:
        input: ``(1, C, H, W)`` features. mask: ``(1, 1, H, W)`` in [0, 1].

    Returns:
        ``(C, C)`` tensor.
    """
    a, b, c, d = input.size()
    weighted = (input * mask).reshape(a * b, c * d)
    gram = torch.mm(weighted, weighted.t())
    return gram.div(a * b * region_weight(mask))


def region_weight(mask: torch.Tensor) -> torch.Tensor:
    """``sum(m^2)``, the weight of a mask's region in ``guided_gram``'s normaliser (kept above zero where the
    region vanishes at a deep layer of a tiny image)."""
    return mask.pow(2).sum().clamp_min(_EPS)


def normalized_blend(blend: Sequence[float] | None, count: int) -> tuple[float, ...]:
    """``blend`` divided by its sum; ``count`` equal weights when None.

    Raises:
        ValueError: ``blend`` has not ``count`` entries, has a negative entry or sums to 0.
    """
    if blend is None:
        return (1.0 / count,) * count
    if len(blend) != count:
        raise ValueError(f"style_blend has {len(blend)} weight(s) for {count} style image(s)")
    total = float(sum(blend))
    if any(not w >= 0 for w in blend) or not total > 0:
        raise ValueError(f"style_blend must be weights >= 0 with a positive sum, got {tuple(blend)}")
    return tuple(float(w) / total for w in blend)


def paper_style_loss(gram: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Gatys et al.'s E_l = sum (G - A)^2 / (4 N^2 M^2), from Grams normalised by N*M.

    With ``gram_matrix`` dividing the raw Gram by N*M (N channels, M = H*W pixels),
    ``(G - A) / (N M)`` is the difference of the normalised Grams, so
    E_l = sum((gram - target)^2) / 4.
    """
    return (gram - target).pow(2).sum() / 4


def paper_content_loss(input: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Gatys et al.'s content loss: 1/2 sum (F - P)^2 over every element."""
    return (input - target).pow(2).sum() / 2


class WeightedStyleLoss(StyleLoss):
    """A ``StyleLoss`` with a per-layer weight, a blended target and the tutorial or paper form.

    ``self.loss = weight * (mse_loss(G, A) if form == "tutorial" else E_l)``.

    Args:
        target_features: each style image's features at this layer, ``(1, C, H, W)``.
        blend: weights of the style images (normalised; equal when None).
        weight: the layer's weight w_l.
        form: ``"tutorial"`` (mean squared error of normalised Grams) or ``"paper"`` (E_l).
        alphas: each style's transparency at this layer, or None (``blended_gram``).
    """

    def __init__(self, target_features: Sequence[torch.Tensor], blend: Sequence[float] | None = None, *,
                 weight: float = 1.0, form: str = "tutorial",
                 alphas: Sequence[torch.Tensor | None] | None = None) -> None:
        if form not in LOSS_FORMS:
            raise ValueError(f"loss form must be one of {', '.join(LOSS_FORMS)}, got {form!r}")
        super().__init__(target_features[0])
        if len(target_features) > 1 or any(a is not None for a in style_alphas(alphas, len(target_features))):
            self.target = blended_gram(target_features, blend, alphas=alphas).detach().clone()
        self.weight = float(weight)
        self.form = form

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        G = gram_matrix(input)
        loss = paper_style_loss(G, self.target) if self.form == "paper" else F.mse_loss(G, self.target)
        self.loss = loss * self.weight
        return input


class PaperContentLoss(ContentLoss):
    """A ``ContentLoss`` in the paper's form: ``self.loss = 1/2 sum (F - P)^2``."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        self.loss = paper_content_loss(input, self.target)
        return input


def make_style_loss(target_features: Sequence[torch.Tensor], blend: Sequence[float] | None = None, *,
                    weight: float = 1.0, form: str = "tutorial",
                    alphas: Sequence[torch.Tensor | None] | None = None) -> StyleLoss:
    """The tutorial's ``StyleLoss`` for one style, weight 1 and its form; else a ``WeightedStyleLoss``.

    ``alphas``: each style's transparency at this layer (``blended_gram``), or None (every style opaque).
    """
    if len(target_features) == 1 and weight == 1 and form == "tutorial":
        loss = StyleLoss(target_features[0])
        alpha = style_alphas(alphas, 1)[0]
        if alpha is not None:  # the tutorial's module (so --fast fuses it), its target the visible pixels' Gram
            loss.target = style_gram(target_features[0], alpha).detach().clone()
        return loss
    return WeightedStyleLoss(target_features, blend, weight=weight, form=form, alphas=alphas)


def make_content_loss(target: torch.Tensor, *, form: str = "tutorial") -> ContentLoss:
    """The tutorial's ``ContentLoss``, or ``PaperContentLoss`` for ``form="paper"``."""
    if form not in LOSS_FORMS:
        raise ValueError(f"loss form must be one of {', '.join(LOSS_FORMS)}, got {form!r}")
    return PaperContentLoss(target) if form == "paper" else ContentLoss(target)


def total_variation(img: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Anisotropic total variation: absolute differences between neighbouring pixels.

    Args:
        img: ``(B, C, H, W)`` or ``(C, H, W)`` images.
        reduction: ``"mean"`` (the default; size-independent, so a weight means the same at
            every ``--size``): the vertical and horizontal differences' means, added;
            ``"sum"``: all absolute differences added (as kornia's ``total_variation``).

    Returns:
        ``(B,)`` per image for a batch, a scalar for a ``(C, H, W)`` image.

    Raises:
        TypeError: ``img`` is not a tensor. ValueError: a wrong shape or reduction.
    """
    if not isinstance(img, torch.Tensor):
        raise TypeError(f"total_variation expects a tensor, got {type(img).__name__}")
    if img.dim() not in (3, 4):
        raise ValueError(f"total_variation expects (C, H, W) or (B, C, H, W), got shape {tuple(img.shape)}")
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    dy = (img[..., 1:, :] - img[..., :-1, :]).abs()
    dx = (img[..., :, 1:] - img[..., :, :-1]).abs()
    dims = (-3, -2, -1)
    if reduction == "sum":
        return dy.sum(dims) + dx.sum(dims)
    # An image 1 px high or wide has no differences along that axis: count 0, not NaN.
    mean_dy = dy.mean(dims) if dy.numel() else dy.sum(dims)
    mean_dx = dx.mean(dims) if dx.numel() else dx.sum(dims)
    return mean_dy + mean_dx


class TotalVariationLoss(nn.Module):
    """Transparent module: stores ``weight * total_variation(input)`` in ``self.loss``, returns ``input``.

    Placed first in the model (before ``Normalization``) it sees the image being optimised.
    """

    def __init__(self, weight: float, reduction: str = "mean") -> None:
        super().__init__()
        self.weight = float(weight)
        self.reduction = reduction
        self.loss = torch.zeros(())

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        self.loss = self.weight * total_variation(input, self.reduction).sum()
        return input
