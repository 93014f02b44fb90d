"""Colour controls (Gatys et al. 2017, "Controlling Perceptual Factors"), and the content's alpha.

``luminance``: transfer style on the luminance channel only and keep the content's chroma.
``histogram``: give the style image the content's colour mean and covariance first.
Luminance and chroma are YIQ's: Y = 0.299 R + 0.587 G + 0.114 B; the I and Q rows sum to
zero, so adding the same amount to R, G and B changes Y by that amount and I, Q not at all.
"""

from __future__ import annotations

import torch
from PIL import Image

from ..io.images import ImageSource, alpha_channel, source_image, working_size

# RGB -> YIQ (NTSC). Rows: Y, I, Q. Each chroma row sums to 0, the luminance row to 1.
YIQ_FROM_RGB = torch.tensor([[0.299, 0.587, 0.114],
                             [0.596, -0.274, -0.322],
                             [0.211, -0.523, 0.312]], dtype=torch.float64)


def rgb_to_yiq(img: torch.Tensor) -> torch.Tensor:
    """``(B, 3, H, W)`` RGB to YIQ, same shape and dtype."""
    matrix = YIQ_FROM_RGB.to(device=img.device, dtype=img.dtype)
    return torch.einsum("ij,bjhw->bihw", matrix, img)


def luminance(img: torch.Tensor) -> torch.Tensor:
    """The Y channel of ``(B, 3, H, W)`` RGB images, ``(B, 1, H, W)``."""
    return rgb_to_yiq(img)[:, :1]


def gray(y: torch.Tensor) -> torch.Tensor:
    """A ``(B, 1, H, W)`` luminance repeated on three channels (a gray RGB image for VGG)."""
    return y.expand(-1, 3, -1, -1).contiguous()


def match_luminance(style: torch.Tensor, content: torch.Tensor, alpha: torch.Tensor | None = None) -> torch.Tensor:
    """The style's luminance, its mean and std matched to the content's (Gatys et al. 2017, 5.1).

    Args:
        style, content: ``(1, 3, H, W)`` RGB images in [0, 1] (sizes may differ).
        alpha: the style's transparency, ``(1, 1, H, W)`` in [0, 1], weighing its pixels in its mean and std
            (transparent ones left out); None: every pixel alike.

    Returns:
        ``(1, 3, Hs, Ws)``: the matched style luminance as a gray image.
    """
    ys, yc = luminance(style), luminance(content)
    if alpha is None:
        mean_s, std_s = ys.mean(), ys.std(unbiased=False)
    else:
        p = alpha / alpha.sum()
        mean_s = (ys * p).sum()
        std_s = ((ys - mean_s).pow(2) * p).sum().sqrt()
    scale = yc.std(unbiased=False) / std_s if std_s > 0 else torch.zeros(())
    return gray((ys - mean_s) * scale + yc.mean())


def keep_content_chroma(stylized: torch.Tensor, content: torch.Tensor) -> torch.Tensor:
    """The stylized image's luminance with the content's chroma, in [0, 1].

    ``content + (Y' - Y_content)`` on every channel: I and Q are the content's exactly. Y' is the
    stylized luminance clamped to the range that keeps every channel in [0, 1] for this chroma
    (the range holds the content's own Y, so it is never empty): no clipping alters the chroma.

    Args:
        stylized, content: ``(1, 3, H, W)`` images of the same size.
    """
    y_new, y_content = luminance(stylized), luminance(content)
    low = y_content - content.amin(dim=1, keepdim=True)
    high = y_content + 1 - content.amax(dim=1, keepdim=True)
    y_new = torch.minimum(torch.maximum(y_new, low), high)
    return (content + (y_new - y_content)).clamp(0, 1)  # the clamp only trims float rounding


def match_color_histogram(source: torch.Tensor, reference: torch.Tensor, eps: float = 1e-10,
                          alpha: torch.Tensor | None = None) -> torch.Tensor:
    """``source`` recoloured so its colour mean and covariance are ``reference``'s.

    The linear map of Gatys et al. 2017 (5.2): x' = A (x - mu_s) + mu_r with
    A = Sigma_r^(1/2) Sigma_s^(-1/2) (symmetric square roots, by eigendecomposition), computed
    in float64. The result is not clamped to [0, 1]: clamping would break the matched
    statistics, and the style image only feeds the network, whose input may lie outside.

    Args:
        source: ``(1, 3, H, W)`` image to recolour (the style).
        reference: ``(1, 3, H', W')`` image giving the colours (the content).
        eps: floor of the eigenvalues (a gray image has a singular covariance).
        alpha: ``source``'s transparency, ``(1, 1, H, W)`` in [0, 1], weighing its pixels in its mean and
            covariance (transparent ones left out); None: every pixel alike.
    """
    def stats(img: torch.Tensor, weights: torch.Tensor | None = None
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        pixels = img.detach().cpu().double().reshape(3, -1)  # on the CPU: MPS has no float64
        if weights is None:
            mean = pixels.mean(dim=1, keepdim=True)
            centred = pixels - mean
            return centred, mean, centred @ centred.T / pixels.shape[1]
        p = weights.detach().cpu().double().reshape(1, -1)
        p = p / p.sum()
        mean = (pixels * p).sum(dim=1, keepdim=True)
        centred = pixels - mean
        return centred, mean, (centred * p) @ centred.T

    def sqrt_m(cov: torch.Tensor, power: float) -> torch.Tensor:
        values, vectors = torch.linalg.eigh(cov)
        return vectors @ torch.diag(values.clamp_min(eps).pow(power)) @ vectors.T

    centred_s, _, cov_s = stats(source, alpha)
    _, mean_r, cov_r = stats(reference)
    transform = sqrt_m(cov_r, 0.5) @ sqrt_m(cov_s, -0.5)
    out = transform @ centred_s + mean_r
    return out.reshape(source.shape).to(device=source.device, dtype=source.dtype)


def content_alpha(source: ImageSource, size: int) -> Image.Image | None:
    """The alpha channel of a content image at the working size, or None when it has none.

    Resized with the same filter as the content (LANCZOS), so at the image's own size it
    comes back unchanged. Tensors carry no alpha (None).
    """
    if isinstance(source, torch.Tensor):
        return None
    image = source_image(source)
    alpha = alpha_channel(image)
    if alpha is None:
        return None
    target = working_size(image.width, image.height, size)
    return alpha if target == alpha.size else alpha.resize(target, Image.Resampling.LANCZOS)


def attach_alpha(image: Image.Image, alpha: Image.Image | None) -> Image.Image:
    """``image`` as RGBA with ``alpha`` as its alpha channel (``image`` unchanged when None)."""
    if alpha is None:
        return image
    rgba = image.convert("RGBA")
    rgba.putalpha(alpha)
    return rgba
