"""A candidate against the default, scored by the default's float32 loss (``Scorer``): the one yardstick, so ratios
compare pictures, not arithmetics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from style_transfer.io.images import load_image

from . import ROOT, network as networks

IMAGES = ROOT / "images"
CONTENT, STYLE = IMAGES / "chelsea.png", IMAGES / "ihc.png"
# Photo and style pairs of images/: 0-3 are the ones --fast's Fourier scale was chosen on, 4 and 5 never tuned on.
PAIRS = (("chelsea.png", "ihc.png"), ("coffee.png", "hubble_deep_field.jpg"), ("astronaut.png", "ihc.png"),
         ("chelsea.png", "brick.png"), ("rocket.jpg", "gravel.png"), ("astronaut.png", "grass.png"))


class Scorer:
    """The default path's float32 loss of a picture at the final size (``size``, ``device``)."""

    def __init__(self, network: Any, size: int, weights: tuple[float, float], device: torch.device | str = "cpu",
                 content: Path | str = CONTENT, style: Path | str = STYLE) -> None:
        self.content = load_image(content, size, device)
        self.model, self.style_losses, self.content_losses = networks.style_model(
            network, load_image(style, size, device), self.content)
        self.style_weight, self.content_weight = weights

    def parts(self, image: torch.Tensor) -> dict[str, float]:
        """The weighted style and content losses of ``image`` and their sum (``loss``)."""
        if image.shape[-2:] != self.content.shape[-2:]:
            raise ValueError(f"picture {tuple(image.shape)} is not the final size {tuple(self.content.shape)}")
        with torch.no_grad():
            self.model(image.to(self.content.device).clamp(0, 1))
        style = self.style_weight * float(sum(s.loss for s in self.style_losses))
        content = self.content_weight * float(sum(c.loss for c in self.content_losses))
        return {"loss": style + content, "style": style, "content": content}
