"""The run's inputs made ready: the device and long side (resolved once), the working sizes (also from the headers
alone), the start image, the colours."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from ..config.style import StyleConfig
from ..core import colors
from ..memory import SizeFn
from ..io.images import MIN_SIDE, ImageSource, header_size, load_image, working_size
from .plans import default_size_of


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` picks CUDA, then MPS, then the CPU; other names are checked to exist.

    Raises:
        ValueError: the device is not available on this machine.
    """
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {name!r} is not available: this machine has no usable CUDA GPU")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"device {name!r} is not available: only {torch.cuda.device_count()} CUDA GPU(s)")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {name!r} is not available on this machine")
    return device


def default_size(device: torch.device) -> int:
    """The working size when none is given: 512 px on a GPU, ``CPU_DEFAULT_SIZE`` on a CPU."""
    return default_size_of(device.type)


def device_and_size(config: StyleConfig) -> tuple[torch.device, int]:
    """The device a run of ``config`` takes (``resolve_device``) and its long side (``size``, else the device's
    ``default_size``): what a run resolves once, before it plans.

    Raises:
        ValueError: the device is not available on this machine.
    """
    device = resolve_device(config.device)
    return device, config.size or default_size(device)


def initial_image(content_img: torch.Tensor, init: str, seed: int, *,
                  style_img: torch.Tensor | None = None) -> torch.Tensor:
    """The start image: a copy of the content, or uniform noise in [0, 1] drawn on the CPU.

    Also ``"style"``: ``style_img`` stretched to the content's size; or the path of an image
    file, loaded and stretched to the content's size.

    Raises:
        ImageError: the init file cannot be read. ValueError: ``"style"`` without ``style_img``.
    """
    if init == "content":
        return content_img.clone()
    if init != "noise":
        if init != "style":
            start = load_image(init, max(content_img.shape[-2:]))
        elif style_img is None:
            raise ValueError("init 'style' needs a style image")
        else:
            start = style_img
        return fit_to(start, content_img).to(content_img.device)
    # Departure from the tutorial: its commented-out randn noise lies mostly outside [0, 1]
    # and is clamped to black and white at once; uniform noise from a seeded CPU generator
    # is repeatable on every device.
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(content_img.shape, generator=generator).to(content_img.device)


def style_size(size: int, style_scale: float) -> int:
    """The long side of the style image(s): ``size * style_scale``, at least ``MIN_SIDE``."""
    return max(MIN_SIDE, round(size * style_scale))


def prepare_colors(content_img: torch.Tensor, style_imgs: Sequence[torch.Tensor],
                   preserve_colors: str = "none", style_alphas: Sequence[torch.Tensor | None] | None = None
                   ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The content and style images the transfer sees under a colour preservation mode.

    ``none``: as they are. ``histogram``: each style recoloured to the content's colour mean
    and covariance. ``luminance``: gray images of the luminance, the styles' matched to the
    content's mean and std (the result gets the content's chroma back, ``keep_content_chroma``).
    ``style_alphas``: each style's transparency or None (``io.images.load_style``), weighing its pixels
    in its own colour statistics.
    """
    alphas = list(style_alphas) if style_alphas is not None else [None] * len(style_imgs)
    if preserve_colors == "histogram":
        return content_img, [colors.match_color_histogram(s, content_img, alpha=a) for s, a in zip(style_imgs, alphas)]
    if preserve_colors == "luminance":
        return colors.gray(colors.luminance(content_img)), [colors.match_luminance(s, content_img, a)
                                                             for s, a in zip(style_imgs, alphas)]
    if preserve_colors != "none":
        raise ValueError(f"preserve_colors must be none, luminance or histogram, got {preserve_colors!r}")
    return content_img, list(style_imgs)


def fit_to(image: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``image`` resized (stretched) to the height and width of ``like``."""
    if image.shape[-2:] == like.shape[-2:]:
        return image.clone()
    return F.interpolate(image, size=tuple(like.shape[-2:]), mode="bilinear", antialias=True,
                         align_corners=False).clamp(0, 1)


def sizes_from(content_w: int, content_h: int, styles_wh: Sequence[tuple[int, int]], style_scale: float) -> SizeFn:
    """For ``check_memory``, from the inputs' own (width, height) (``header_size``: nothing decoded): the
    (height, width) of the working content and of the largest working style at a long side, by arithmetic."""
    def sizes(size: int) -> tuple[tuple[int, int], tuple[int, int]]:
        styles = [working_size(w, h, style_size(size, style_scale))[::-1] for w, h in styles_wh]
        return working_size(content_w, content_h, size)[::-1], max(styles, key=lambda hw: hw[0] * hw[1])

    return sizes


def header_sizes(content: ImageSource | tuple[int, int], styles: Sequence[ImageSource],
                 config: StyleConfig) -> SizeFn:
    """The working sizes of a run's images at any long side, by arithmetic on their declared sizes."""
    content_wh = content if isinstance(content, tuple) else header_size(content)
    return sizes_from(*content_wh, [header_size(s) for s in styles], config.style_scale)
