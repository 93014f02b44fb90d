"""--fast keeps the content on the real VGG16: its content loss within reach of the default's.

On the real features coarse-to-fine painted the photo away (256 px: 3.1x the default's content loss, the cat gone;
docs/speed.md), so --fast now runs a share of the steps at one size. Judged as the retired fast_pairs study judged it (benchmarks/NOTEBOOK.md):
every picture scored by the default path's float32 losses at the final size.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from style_transfer.config.style import StyleConfig
from style_transfer.io.images import pil_to_tensor
from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD
from style_transfer.run.run import Run
from style_transfer.core.style_model import get_style_model_and_losses

from ..conftest import small_image
from ..rounding import one_step_up

pytestmark = [pytest.mark.real_features, pytest.mark.slow]


def test_fast_keeps_the_content_of_the_default(vgg16_onnx: Path, vgg16) -> None:
    """64 px, the default's 60 evaluations against --fast's share (40): --fast's content loss at most 1.25x the
    default's (--fast's time-to-quality bar), widened by 3x the spread of controls measured in the same test (the
    default in channels_last and from the content one float32 step up, --fast from the content one step up: each
    path's own rounding). Measured on Sapphire Rapids: --fast 0.97x, the control 0.99x; --fast as it was (3 sizes:
    16, 32, 64 px) 13x, which fails."""
    content = pil_to_tensor(small_image("chelsea.png", (64, 42)))
    style = pil_to_tensor(small_image("ihc.png", (64, 64)))
    base = {"size": 64, "steps": 59, "model": "vgg16", "weights": str(vgg16_onnx), "device": "cpu"}
    weight = StyleConfig(**base).style_weight  # the preset's at Caffe's scale
    model, style_losses, content_losses = get_style_model_and_losses(
        vgg16.features, IMAGENET_MEAN, IMAGENET_STD, style, content, normalization=vgg16.normalization())

    def scored(config: StyleConfig, start: torch.Tensor = content) -> tuple[float, float]:
        """(style, content) losses of the run's picture from ``start`` as the content, by the default path's float32
        model (whose content target is the photo itself)."""
        picture = pil_to_tensor(Run(start, style, config, cnn=vgg16).execute().image)
        with torch.no_grad():
            model(picture)
        return weight * float(sum(s.loss for s in style_losses)), float(sum(c.loss for c in content_losses))

    with torch.no_grad():
        model(content)
    start_style = weight * float(sum(s.loss for s in style_losses))
    default, fast = scored(StyleConfig(**base)), scored(StyleConfig(**base, fast=True))
    default_controls = [scored(StyleConfig(**base, channels_last=True)),
                        scored(StyleConfig(**base), one_step_up(content))]
    fast_controls = [scored(StyleConfig(**base, fast=True), one_step_up(content))]
    spread = (max(abs(c[1] / default[1] - 1) for c in default_controls)
              + max(abs(c[1] / fast[1] - 1) for c in fast_controls))
    assert fast[0] < 0.1 * start_style  # --fast did paint: its style loss fell to a small fraction of the photo's
    assert fast[1] <= default[1] * (1.25 + 3 * spread), (fast, default, default_controls, fast_controls)
