"""Tiled targets with a style's transparency (``--tile`` with an RGBA style): the alpha followed to each style layer's
whole map weighs the sums added up over crops, as the untiled model weighs its targets. Checked in float64 against
the untiled targets (the same sums in another order), with a negative control (the alpha left out), and a run's
first evaluations in float32."""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from style_transfer import StyleConfig
from style_transfer.losses import masks
from style_transfer.losses.masks import GuidedStyleLoss
from style_transfer.losses.statistics import GuidedWassersteinLoss, WassersteinStyleLoss
from style_transfer.tiling import tiling

from .test_tiling import build, cnn64, rand, relative, run_images, tiled, untiled  # noqa: F401  (cnn64: a fixture)

EXACT = 1e-9  # float64: the tiled and untiled sums differ only in their order (W2's eigenvalues amplify it a little)
H, W = 49, 64


def cut_out_alpha(height: int, width: int) -> torch.Tensor:
    """Transparent on a band round the edge, a soft ramp across the rest (soft weights at every layer)."""
    cols = torch.linspace(0, 1, width, dtype=torch.float64).expand(height, width)
    alpha = (0.3 + 0.7 * cols).clone()
    alpha[:6], alpha[-5:], alpha[:, :7] = 0, 0, 0
    return alpha[None, None]


def target_error(ours, theirs) -> float:
    if isinstance(theirs, (WassersteinStyleLoss, GuidedWassersteinLoss)):  # the mean, and the root's square
        packed = [t.target if t.target.dim() == 3 else t.target[None] for t in (ours, theirs)]
        return max(max(relative(a[0], b[0]), relative(a[1:] @ a[1:], b[1:] @ b[1:])) for a, b in zip(*packed))
    return relative(ours.target, theirs.target)


@pytest.mark.parametrize("style_loss,guided", [("gram", False), ("wasserstein", False), ("gram", True),
                                               ("wasserstein", True)])
def test_tiled_targets_with_alpha_equal_untiled_in_float64(cnn64, style_loss: str, guided: bool) -> None:  # noqa: F811
    """The tutorial's layers, two styles blended 1:3, the first cut out (soft alpha), with or without style masks; the
    tiled model built on stand-ins then given the run's guides. A negative control: the same without the alpha."""
    content, image = rand(1, 3, H, W, seed=2), rand(1, 3, H, W, seed=3)
    styles = [rand(1, 3, 52, 60, seed=4), rand(1, 3, 40, 56, seed=5)]
    cols = torch.linspace(0, 1, W, dtype=torch.float64).expand(H, W)[None, None]
    regions = masks.fill_masks([(1.2 - 1.5 * cols).clamp(0, 1), None]) if guided else None
    guides = masks.Guides(regions, None, [cut_out_alpha(52, 60), None])
    options = dict(style_blend=(1, 3), style_loss=style_loss)
    model, style_losses, content_losses, extras = build(cnn64, content, styles, guides=guides, **options)
    assert all(isinstance(m, (GuidedStyleLoss, GuidedWassersteinLoss)) == guided for m in style_losses)
    reference = untiled(model, style_losses, content_losses, extras, image, 100, 1)

    def tiled_twin(run_guides: masks.Guides):
        built = build(cnn64, tiling.stand_ins(content), tiling.stand_ins(styles), guides=guides.resized((32, 32)),
                      **options)
        tiler = tiling.TiledStyleModel(built[0], 46)
        tiler.set_targets(content, styles, options["style_blend"], run_guides)
        return tiler, *built[1:]

    tiler, tiled_style, tiled_content, tiled_extras = tiled_twin(guides)
    assert len(tiler.crops(H, W)) == 9 and len(tiler.crops(52, 60)) > 1  # the styles' sums come from crops too
    for ours, theirs in zip(tiled_style, style_losses):
        assert target_error(ours, theirs) < EXACT
    result = tiled(tiler, tiled_style, tiled_content, tiled_extras, image, 100, 1)
    assert abs(result[0] - reference[0]) <= EXACT * reference[0]
    assert relative(result[1], reference[1]) < EXACT

    control = tiled_twin(masks.Guides(regions, None, None))[1]  # the alpha left out: the white block counts
    assert max(target_error(ours, theirs) for ours, theirs in zip(control, style_losses)) > 1e-2


@pytest.mark.slow
def test_a_tiled_run_with_a_cut_out_style_gives_the_untiled_first_evaluations() -> None:
    """A run at 64 px in tiles of 46 px (float32) with an RGBA style whose border is transparent and whose alpha
    fades: the same first evaluations as untiled (``rel=1e-4``: float32 sums in another order, as for masks)."""
    content = rand(1, 3, 42, 64, seed=12, dtype=torch.float32)
    pixels = (rand(48, 48, 3, seed=13, dtype=torch.float32) * 255).round().to(torch.uint8).numpy()
    style = Image.fromarray(pixels, "RGB").convert("RGBA")
    alpha = (cut_out_alpha(48, 48)[0, 0] * 255).round().to(torch.uint8).numpy()
    style.putalpha(Image.fromarray(alpha, "L"))
    base = dict(size=64, steps=1, weights="random", device="cpu", optimizer="adam")
    plain_events, _ = run_images(StyleConfig(**base), content, style)
    tiled_events, _ = run_images(StyleConfig(**base, tile=46), content, style)
    opaque_events, _ = run_images(StyleConfig(**base), content, style.convert("RGB"))
    assert len(tiled_events) == len(plain_events) == 2
    for plain, ours in zip(plain_events, tiled_events):
        for name in ("style_loss", "content_loss"):
            assert getattr(ours, name) == pytest.approx(getattr(plain, name), rel=1e-4, abs=1e-12)
    assert opaque_events[0].style_loss != pytest.approx(plain_events[0].style_loss, rel=1e-2)  # the alpha counted
