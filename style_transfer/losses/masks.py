"""Spatial control (Gatys et al. 2017): masks over the content, guided Gram matrices, masked content loss.

A mask is a grey-level image over the content (white: the style applies; soft edges allowed), read
like any input (``images.open_image``'s checks), made grey, resized with the content to each working
size and followed through the network layer by layer as the features are (``follow``). Each style's
loss at a layer compares the Gram matrix of the input's features weighted by that style's mask
(``guided_gram``) with the Gram matrix of its whole style image (the tutorial's ``gram_matrix``), as
Gatys et al. do for per-region styles.

A style image's own transparency weighs its positions the same way (``Guides.style_alphas``): followed through
the layers with the style's features, it leaves transparent pixels out of every style target.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ImageError
from ..io.images import ImageSource, header_size, pil_to_rgb, source_image
from .terms import guided_gram, normalized_blend, style_alphas, style_gram
from .tutorial import ContentLoss, StyleLoss
from ..presets import LOSS_FORMS

# A mask's width/height may differ from the content's by this fraction (rounding of a resized file).
ASPECT_TOLERANCE = 0.02
# A mask whose brightest pixel is below this (in [0, 1]) is empty: all black.
EMPTY_LEVEL = 0.5 / 255


def mask_tensor(source: ImageSource, label: str) -> torch.Tensor:
    """A mask source as a ``(1, 1, H, W)`` float32 tensor in [0, 1] at its own size.

    Args:
        source: a file path, a Pillow image (any mode: made grey, transparency over white as for every
            input) or a tensor ``(H, W)``, ``(1, H, W)``, ``(1, 1, H, W)`` or ``(1, 3, H, W)`` (channels averaged).
        label: how messages name it (``"style mask 1 (left.png)"``).

    Raises:
        ImageError: the file is missing or not a readable image (``images.open_image``'s one line; an
            ImageError is a ValueError).
        ValueError: a tensor of another shape, or an empty (all-black) mask.
    """
    if isinstance(source, torch.Tensor):
        mask = source.detach().float()
        while mask.dim() < 4:
            mask = mask.unsqueeze(0)
        if mask.dim() != 4 or mask.shape[0] != 1 or mask.shape[1] not in (1, 3):
            raise ValueError(f"{label}: expected a mask tensor (H, W) or (1, 1, H, W), got {tuple(source.shape)}")
        mask = mask.mean(1, keepdim=True).clamp(0, 1)
    else:
        try:
            image = source_image(source)
        except ImageError as exc:  # a file that is not a usable image (exit 1, as any input), named as the mask
            raise ImageError(f"{label}: {exc}") from None
        grey = pil_to_rgb(image).convert("L")
        data = torch.frombuffer(bytearray(grey.tobytes()), dtype=torch.uint8)
        mask = data.reshape(1, 1, grey.height, grey.width).float().div(255)
    if not float(mask.max()) > EMPTY_LEVEL:
        raise ValueError(f"{label}: the mask is empty (all black); white marks where it applies")
    return mask


def check_aspect(mask: torch.Tensor, content_wh: tuple[int, int], label: str,
                 content_label: str = "the content") -> None:
    """Raise ``ValueError`` unless the mask's width/height is the content's, within ``ASPECT_TOLERANCE``."""
    height, width = mask.shape[-2:]
    ratio, content = width / height, content_wh[0] / content_wh[1]
    if abs(math.log(ratio / content)) > math.log1p(ASPECT_TOLERANCE):
        raise ValueError(f"{label}: {width}x{height} has another aspect ratio than {content_label} "
                         f"({content_wh[0]}x{content_wh[1]}); give a mask of that shape")


def resize_mask(mask: torch.Tensor, hw: tuple[int, int]) -> torch.Tensor:
    """A ``(1, 1, h, w)`` mask resized to ``hw`` (bilinear, antialiased when shrinking), kept in [0, 1]."""
    if tuple(mask.shape[-2:]) == tuple(hw):
        return mask.clone()
    return F.interpolate(mask, size=tuple(hw), mode="bilinear", antialias=True, align_corners=False).clamp(0, 1)


def fill_masks(masks: Sequence[torch.Tensor | None]) -> list[torch.Tensor]:
    """One mask per style: the given ones, and for each style without one what no mask covers.

    The rest is ``clamp(1 - sum of the given masks, 0, 1)``; every unmasked style gets it (they share that
    region: their losses there pull towards their blend, as several styles do without masks).

    Raises:
        ValueError: no mask given, or unmasked styles with nothing left for them (the masks cover everything).
    """
    given = [m for m in masks if m is not None]
    if not given:
        raise ValueError("fill_masks needs at least one mask")
    if len(given) == len(masks):
        return list(given)
    rest = (1 - torch.stack(given).sum(0)).clamp(0, 1)
    if not float(rest.max()) > EMPTY_LEVEL:
        missing = [str(i + 1) for i, m in enumerate(masks) if m is None]
        raise ValueError(f"the style masks cover the whole content: style(s) {', '.join(missing)} without a mask "
                         f"have nowhere to go; give them masks or make the others smaller")
    return [rest if m is None else m for m in masks]


@dataclass
class Guides:
    """A run's masks at one working size: one ``(1, 1, H, W)`` per style (filled), and the content's or None.

    ``style_alphas``: each style image's transparency ``(1, 1, H_k, W_k)`` in [0, 1] at its own working size (None:
    opaque), which weighs the style's own positions in its targets (``io.images.load_style``); None: every style
    opaque.
    """

    styles: list[torch.Tensor] | None
    content: torch.Tensor | None = None
    style_alphas: list[torch.Tensor | None] | None = None

    def follow(self, layer: nn.Module, hw: tuple[int, int],
               style_hws: Sequence[tuple[int, int]] | None = None) -> Guides:
        """The masks at the resolution of ``layer``'s output (``hw``): see ``follow``. ``style_hws``: each style
        image's map there, which its alpha follows; None leaves the alphas out of the result (a caller that
        follows the content's masks alone)."""
        alphas = None
        if self.style_alphas is not None and style_hws is not None:
            alphas = [None if a is None else follow(a, layer, s) for a, s in zip(self.style_alphas, style_hws)]
        return Guides(None if self.styles is None else [follow(m, layer, hw) for m in self.styles],
                      None if self.content is None else follow(self.content, layer, hw), alphas)

    def resized(self, hw: tuple[int, int]) -> Guides:
        """The masks, and the style alphas, resized to ``hw`` (``resize_mask``): a tiled run's model is built on
        small stand-ins of that size."""
        return Guides(None if self.styles is None else [resize_mask(m, hw) for m in self.styles],
                      None if self.content is None else resize_mask(self.content, hw),
                      None if self.style_alphas is None else [None if a is None else resize_mask(a, hw)
                                                              for a in self.style_alphas])


def with_style_alphas(guides: Guides | None, alphas: Sequence[torch.Tensor | None]) -> Guides | None:
    """``guides`` (or none) with the style images' alphas (``io.images.load_style``'s, each style at its working
    size); as they were where every style is opaque, so an opaque run's numbers are those of an RGB one."""
    if all(a is None for a in alphas):
        return guides
    if guides is None:
        return Guides(None, None, list(alphas))
    return Guides(guides.styles, guides.content, list(alphas))


def check_alphas(alphas: Sequence[torch.Tensor | None], where: str) -> None:
    """``check_alpha`` for each style in order."""
    for k, alpha in enumerate(alphas):
        check_alpha(alpha, k, where)


def check_alpha(alpha: torch.Tensor | None, style: int, where: str) -> None:
    """Raise ``ValueError`` where style ``style``'s (from 0) visible part has vanished (``where``: the layer), which
    only a style whose opaque pixels all lie in the rows or columns a pool drops can do: it has no statistics there."""
    if alpha is not None and not bool(alpha.sum() > 0):
        raise ValueError(f"style image {style + 1}: its opaque pixels vanish at {where} (a pool drops the rows or "
                         f"columns they lie in); give the style more opaque pixels or a larger style_scale")


def load_guides(style_masks: Sequence[ImageSource], content_mask: ImageSource | None,
                content: ImageSource | tuple[int, int], hw: tuple[int, int], styles: int,
                device: torch.device | str = "cpu", content_label: str = "the content") -> Guides | None:
    """The masks of a run, checked and resized to the working content's ``hw`` (None: no mask given).

    Args:
        style_masks: one per style, in order, for the first ``len(style_masks)`` styles; the others share
            what no mask covers (``fill_masks``).
        content_mask: weights the content loss by region, or None.
        content: the content source (its declared size, upright: the aspect ratio the masks must have), or its
            (width, height).
        content_label: how messages name the content ("the content"; "the video's frames").
        styles: how many style images the run has.

    Raises:
        ValueError: more masks than styles, an unreadable or empty mask, another aspect ratio (one line each).
    """
    if not style_masks and content_mask is None:
        return None
    if len(style_masks) > styles:
        raise ValueError(f"{len(style_masks)} style masks for {styles} style image(s): give at most one per style")
    # the shape the run sees (a phone photo turned upright)
    content_wh = content if isinstance(content, tuple) else header_size(content, upright=True)

    def load(source: ImageSource, label: str) -> torch.Tensor:
        label = f"{label} ({os.path.basename(os.fspath(source))})" if isinstance(source, (str, os.PathLike)) else label
        mask = mask_tensor(source, label)
        check_aspect(mask, content_wh, label, content_label)
        return resize_mask(mask, hw).to(device)

    given = [load(s, f"style mask {i + 1}") for i, s in enumerate(style_masks)]
    filled = fill_masks(given + [None] * (styles - len(given))) if given else None
    return Guides(filled, None if content_mask is None else load(content_mask, "content mask"))


def follow(mask: torch.Tensor, layer: nn.Module, hw: tuple[int, int]) -> torch.Tensor:
    """A mask at the resolution of ``layer``'s output, ``hw``, as the network pools its features.

    A pooling layer (max or average) averages the mask over the same windows (its kernel, stride,
    padding and rounding): the fraction of each window the region covers. Layers that keep the size
    (VGG's 3x3 convolutions with padding 1, ReLUs) leave it as it is; any other change of size is an
    area resampling.
    """
    if tuple(mask.shape[-2:]) == tuple(hw):
        return mask
    if isinstance(layer, (nn.MaxPool2d, nn.AvgPool2d)):
        pooled = F.avg_pool2d(mask, layer.kernel_size, layer.stride, layer.padding, ceil_mode=layer.ceil_mode,
                              count_include_pad=False)
        if tuple(pooled.shape[-2:]) == tuple(hw):
            return pooled
    return F.interpolate(mask, size=tuple(hw), mode="area")


class GuidedStyleLoss(StyleLoss):
    """The style loss of a layer with one masked region per style (a transparent module, like ``StyleLoss``).

    ``self.loss = weight * sum_k w_k * mse_loss(guided_gram(input, m_k), A_k)`` (``form="paper"``: E_l of
    each region), with ``A_k`` the Gram matrix of style ``k``'s whole image and ``w_k`` its blend weight
    times the number of styles (equal blends: 1 each, so each region is styled as strongly as one style
    alone would style the whole picture).

    Args:
        target_features: each style image's features at this layer, ``(1, C, H_k, W_k)``.
        masks: each style's mask at this layer's resolution, ``(1, 1, H, W)``.
        blend: the styles' weights (normalised; equal when None).
        weight: the layer's weight. form: ``"tutorial"`` or ``"paper"``.
        alphas: each style's transparency at this layer, or None (``terms.style_gram``: its visible pixels).

    Buffers: ``target`` ``(K, C, C)``, ``masks`` ``(K, 1, H, W)``, ``blend`` ``(K,)``.
    """

    masks: torch.Tensor
    blend: torch.Tensor

    def __init__(self, target_features: Sequence[torch.Tensor], masks: Sequence[torch.Tensor],
                 blend: Sequence[float] | None = None, *, weight: float = 1.0, form: str = "tutorial",
                 alphas: Sequence[torch.Tensor | None] | None = None) -> None:
        if form not in LOSS_FORMS:
            raise ValueError(f"loss form must be one of {', '.join(LOSS_FORMS)}, got {form!r}")
        if len(masks) != len(target_features):
            raise ValueError(f"{len(masks)} mask(s) for {len(target_features)} style image(s)")
        super().__init__(target_features[0])
        alphas = style_alphas(alphas, len(target_features))
        self.target = torch.stack([style_gram(f, a) for f, a in zip(target_features, alphas)]).detach().clone()
        self.register_buffer("masks", torch.cat(list(masks)).detach().clone())
        weights = normalized_blend(blend, len(target_features))
        self.register_buffer("blend", torch.tensor([w * len(weights) for w in weights], device=self.target.device))
        self.weight, self.form = float(weight), form

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        x = _full(input)  # bf16 features (--precision bf16): the loss in float32, as the other loss modules
        self.loss = self.loss_of_grams([guided_gram(x, self.masks[k:k + 1]) for k in range(self.target.shape[0])])
        return input

    def loss_of_grams(self, grams: Sequence[torch.Tensor]) -> torch.Tensor:
        """The loss given each style's guided Gram matrix (``forward``'s, or one added up over crops:
        ``tiling/tiling.py``)."""
        loss = grams[0].new_zeros(())
        for k, gram in enumerate(grams):
            target = self.target[k].to(gram.dtype)
            term = (gram - target).pow(2).sum() / 4 if self.form == "paper" else F.mse_loss(gram, target)
            loss = loss + self.blend[k].to(gram.dtype) * term
        return loss * self.weight


class MaskedContentLoss(ContentLoss):
    """The content loss weighted by a mask: ``mean(m * (F - P)^2)`` (``form="paper"``: ``1/2 sum(m (F-P)^2)``).

    Not renormalised: a white mask gives the tutorial's ``ContentLoss`` exactly, and black regions are free of
    the content (the style alone shapes them).

    Buffers: ``target`` ``(1, C, H, W)``, ``mask`` ``(1, 1, H, W)``.
    """

    mask: torch.Tensor

    def __init__(self, target: torch.Tensor, mask: torch.Tensor, *, form: str = "tutorial") -> None:
        if form not in LOSS_FORMS:
            raise ValueError(f"loss form must be one of {', '.join(LOSS_FORMS)}, got {form!r}")
        super().__init__(target)
        self.register_buffer("mask", mask.detach().clone())
        self.form = form

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        squared = (_full(input) - self.target).pow(2) * self.mask
        self.loss = squared.sum() / 2 if self.form == "paper" else squared.mean()
        return input


def _full(x: torch.Tensor) -> torch.Tensor:
    """Features in float32 unless already float32 or float64."""
    return x if x.dtype in (torch.float32, torch.float64) else x.float()

