"""The content as a run reads it, once (``Content``); the images of one working size made from a run's inputs
(``Inputs``: content, styles, masks, a mirrored border); what a style's Gram targets depend on
(``style_targets_key``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from PIL import Image

from ..config.checks import filled
from ..config.choices import INITS
from ..config.style import StyleConfig
from ..core import colors
from ..errors import ImageError
from ..io import provenance
from ..io.images import ImageSource, load_image, load_style, open_image, read_bytes, tensor_to_pil
from ..losses import masks
from .prepare import fit_to, initial_image, prepare_colors, style_size


class Content:
    """The content image as a run reads it: a file's bytes read once (its images decoded from them at each working
    size, its record entry hashed from them), or a Pillow image or a tensor as given (its entry made once)."""

    def __init__(self, source: ImageSource) -> None:
        self.source = source
        self.data: bytes | None = None
        self.entry: dict[str, Any]  # provenance.input_entry's, for the checkpoint's fingerprint and the record
        if isinstance(source, (str, os.PathLike)):
            self.data = read_bytes(source)
            self.entry = provenance.file_entry(source, self.data)
        else:
            self.entry = provenance.input_entry(source)

    def image(self) -> ImageSource:
        """What a size's images are made from: the file opened (upright) from its bytes, or the source as given."""
        source = self.source
        if self.data is None or not isinstance(source, (str, os.PathLike)):
            return source
        return open_image(source, self.data)


class Inputs:
    """The images one working size needs, and how an optimised image becomes the picture a user gets.

    With ``config.margin`` the optimised image is the picture inside a mirrored border (``pad``): the content,
    the start image and the masks are padded, the picture is cut out of it (``crop``) at the end and in
    previews; ``picture`` is the content the transfer sees, unpadded.
    """

    def __init__(self, content: ImageSource, styles: Sequence[ImageSource], config: StyleConfig, size: int,
                 device: torch.device, final_size: int | None = None) -> None:
        self.config = config
        self.content = load_image(content, size, device)
        loaded = [load_style(s, style_size(size, config.style_scale), device) for s in styles]  # with their alpha
        styles_at, alphas = [image for image, _ in loaded], [alpha for _, alpha in loaded]
        self.picture, self.styles = prepare_colors(self.content, styles_at, config.preserve_colors, alphas)
        self.size = (self.content.shape[-1], self.content.shape[-2])
        self.margin = round(config.margin * size / (final_size or size))  # scaled at a coarser size
        if self.margin >= min(self.size):
            raise ImageError(f"margin {config.margin} px: the picture is {self.size[0]}x{self.size[1]} px at this "
                             "size; a mirrored border must be narrower than its short side")
        self.transfer_content = self.pad(self.picture)
        # the masks at this size (checked: count, files, emptiness, aspect), or None.
        guides = masks.load_guides(config.style_masks, config.content_mask, content,
                                   (self.content.shape[-2], self.content.shape[-1]), len(styles), device)
        self.guides = guides if guides is None or not self.margin else masks.Guides(
            None if guides.styles is None else [self.pad(m) for m in guides.styles],
            None if guides.content is None else self.pad(guides.content))
        self.guides = masks.with_style_alphas(self.guides, alphas)  # the styles' transparency, left out of targets

    def pad(self, image: torch.Tensor) -> torch.Tensor:
        """``image`` (the picture's size) inside its mirrored border."""
        if not self.margin:
            return image
        return F.pad(image, (self.margin,) * 4, mode="reflect")

    def crop(self, image: torch.Tensor) -> torch.Tensor:
        """The picture out of an optimised image."""
        if not self.margin:
            return image
        return image[..., self.margin:-self.margin, self.margin:-self.margin]

    def moved_to(self, image: torch.Tensor, other: Inputs) -> torch.Tensor:
        """An optimised image of this size as ``other``'s start: its picture resized, in ``other``'s border."""
        return other.pad(fit_to(self.crop(image), other.picture))

    def start_image(self) -> torch.Tensor:
        image = initial_image(self.transfer_content, self.config.init, self.config.seed, style_img=self.styles[0])
        if self.config.preserve_colors == "luminance" and self.config.init not in INITS:
            image = colors.gray(colors.luminance(image))  # a start file's luminance
        return image

    def finish_tensor(self, image: torch.Tensor) -> torch.Tensor:
        """The picture out of an optimised image, the content's chroma back under ``preserve_colors="luminance"``."""
        image = self.crop(image)
        if self.config.preserve_colors == "luminance":
            return colors.keep_content_chroma(image.clamp(0, 1), self.content)
        return image

    def finish(self, image: torch.Tensor, alpha: Image.Image | None = None) -> Image.Image:
        return colors.attach_alpha(tensor_to_pil(self.finish_tensor(image)), alpha)


def style_targets_key(config: StyleConfig, content: ImageSource | Mapping[str, Any], styles: Sequence[ImageSource],
                      style_images: Sequence[torch.Tensor], device: torch.device) -> tuple:
    """What a style's Gram targets depend on: the style files' hashes, the working size they were read at
    (with the style scale), the layers, the network (model, weights, preprocessing, pooling), the blend, the device and
    the style statistics (``style_loss``: each keeps its own kind of target); and the
    content's hash when the colours are matched to it (``preserve_colors``; ``content``: a source, or its
    ``provenance.input_entry`` made before)."""
    return (tuple(provenance.input_entry(s)["sha256"] for s in styles),
            tuple(tuple(image.shape[-2:]) for image in style_images), config.style_scale,
            tuple(filled(config.style_layers)), config.pooling, config.model, config.weights, config.preprocess,
            config.style_blend, str(device), config.style_loss,
            config.preserve_colors,
            provenance.input_entry(content)["sha256"] if config.preserve_colors != "none" else None)
