"""Tiled evaluation with masks (``--style-mask``/``--content-mask`` with ``--tile``): the masks followed through the
layers at the whole image's size, each style's guided Gram matrix (or region mean and covariance) and the masked
content loss added up over crops. Checked against the untiled guided losses in float64, with a negative control
(the masks swapped) showing the comparison sees them; the masks and targets the tiled model computes against the
untiled model's; a run's first evaluations; the command; the memory estimate against the real buffers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from PIL import Image

from style_transfer import StyleConfig
from style_transfer.cli.stylize import main
from style_transfer.losses import masks
from style_transfer.losses.masks import GuidedStyleLoss, MaskedContentLoss
from style_transfer.losses.statistics import GuidedWassersteinLoss
from style_transfer.layers import model_layer_names, resolve_layers
from style_transfer.tiling import crops, tiling

from .test_tiling import build, cnn64, rand, relative, run_images, tiled, untiled  # noqa: F401  (cnn64: a fixture)

EXACT = 1e-9  # float64: the tiled and untiled sums differ only in their order (W2's eigenvalues amplify it a little)
H, W = 49, 64  # an odd height: the first pool drops the last row (a mask only there vanishes at deeper layers)


def ramps() -> tuple[torch.Tensor, torch.Tensor]:
    rows, cols = torch.meshgrid(torch.linspace(0, 1, H, dtype=torch.float64),
                                torch.linspace(0, 1, W, dtype=torch.float64), indexing="ij")
    return rows[None, None], cols[None, None]


def guides_of(case: str) -> masks.Guides:
    """Soft masks: style 1 fading from the left, style 2 the rest (``fill_masks``), the content weighted by height;
    ``vanishing``: style 1 on the last row alone, which the first pool drops."""
    rows, cols = ramps()
    if case == "vanishing":
        first = torch.zeros_like(rows)
        first[..., -1, :] = 1
        return masks.Guides(masks.fill_masks([first, None]))
    return masks.Guides(masks.fill_masks([(1.2 - 1.5 * cols).clamp(0, 1), None]), 0.2 + 0.8 * rows)


def tiled_twin(cnn, content, styles, guides, tile: int = 46, **options):
    """The tiled model as a run builds it: on stand-ins, then targets and masks over crops of the images."""
    model, style_losses, content_losses, extras = build(cnn, tiling.stand_ins(content), tiling.stand_ins(styles),
                                                        guides=guides.resized((32, 32)), **options)
    tiler = tiling.TiledStyleModel(model, tile)
    tiler.set_targets(content, styles, options.get("style_blend"), guides)
    return tiler, style_losses, content_losses, extras


@pytest.mark.parametrize("style_loss,form,case", [
    ("gram", "tutorial", "soft"), ("gram", "paper", "soft"), ("wasserstein", "tutorial", "soft"),
    ("gram", "tutorial", "vanishing"), ("wasserstein", "tutorial", "vanishing")])
def test_tiled_masks_equal_untiled_in_float64(cnn64, style_loss: str, form: str, case: str) -> None:  # noqa: F811
    """The tutorial's layers at 49x64 in 3x3 crops: loss, each module's loss, the image gradient; two styles blended
    1:3, total variation; the masks, each style's target and the content targets the tiled model computed."""
    content, image = rand(1, 3, H, W, seed=2), rand(1, 3, H, W, seed=3)
    styles = [rand(1, 3, 40, 56, seed=4), rand(1, 3, 52, 36, seed=5)]
    guides = guides_of(case)
    options = dict(tv=0.3, style_blend=(1, 3), style_loss=style_loss, loss_form=form)
    model, style_losses, content_losses, extras = build(cnn64, content, styles, guides=guides, **options)
    guided = GuidedStyleLoss if style_loss == "gram" else GuidedWassersteinLoss
    assert all(type(m) is guided for m in style_losses)
    assert all(type(m) is MaskedContentLoss for m in content_losses) == (case == "soft")
    if case == "vanishing":  # style 1 is on the first two layers only
        assert [bool(m.masks[0].sum() > 0) for m in style_losses] == [True, True, False, False, False]
    reference = untiled(model, style_losses, content_losses, extras, image, 100, 1)

    tiler, tiled_style, tiled_content, tiled_extras = tiled_twin(cnn64, content, styles, guides, **options)
    assert len(tiler.crops(H, W)) == 9
    for ours, theirs in zip([*tiled_style, *tiled_content], [*style_losses, *content_losses]):
        for name in ("masks", "mask"):
            if hasattr(theirs, name):  # followed through the same layers at the same size: the same tensor
                assert torch.equal(getattr(ours, name), getattr(theirs, name))
        if isinstance(theirs, GuidedWassersteinLoss):  # per style: the mean, and the root's square
            assert relative(ours.target[:, 0], theirs.target[:, 0]) < EXACT
            squares = [t[1:] @ t[1:] for t in (ours.target[0], theirs.target[0], ours.target[1], theirs.target[1])]
            assert relative(squares[0], squares[1]) < EXACT and relative(squares[2], squares[3]) < EXACT
        else:
            assert relative(ours.target, theirs.target) < EXACT
    result = tiled(tiler, tiled_style, tiled_content, tiled_extras, image, 100, 1)
    assert abs(result[0] - reference[0]) <= EXACT * reference[0]
    assert result[2] == pytest.approx(reference[2], rel=EXACT)
    assert relative(result[1], reference[1]) < EXACT

    # Negative control: the style masks swapped. The comparison above sees the masks, and the regions count.
    swapped = masks.Guides(guides.styles[::-1], guides.content)
    control, control_style, control_content, control_extras = tiled_twin(cnn64, content, styles, swapped, **options)
    wrong = tiled(control, control_style, control_content, control_extras, image, 100, 1)
    moved = [abs(a - b) / b for a, b in zip(wrong[2], reference[2][:len(style_losses)]) if b > 0]
    assert max(moved) > 1e-3


def test_white_masks_tile_to_the_unmasked_numbers(cnn64) -> None:  # noqa: F811
    """An all-white style and content mask: the guided, masked and tiled model gives the plain untiled one's loss
    and gradient (the guided Gram of a white mask is the Gram matrix; the masked content loss the tutorial's)."""
    content, image, style = rand(1, 3, H, W, seed=6), rand(1, 3, H, W, seed=7), rand(1, 3, 44, 44, seed=8)
    white = torch.ones(1, 1, H, W, dtype=torch.float64)
    model, style_losses, content_losses, extras = build(cnn64, content, style)
    reference = untiled(model, style_losses, content_losses, extras, image, 100, 1)
    tiler, tiled_style, tiled_content, tiled_extras = tiled_twin(cnn64, content, [style],
                                                                 masks.Guides([white], white))
    result = tiled(tiler, tiled_style, tiled_content, tiled_extras, image, 100, 1)
    assert abs(result[0] - reference[0]) <= EXACT * reference[0]
    assert relative(result[1], reference[1]) < EXACT


def test_stand_in_masks_are_refused_at_the_image_size(cnn64) -> None:  # noqa: F811
    """A tiled model built with masks whose targets were set without the run's guides says what is missing."""
    content, style = rand(1, 3, H, W, seed=2), rand(1, 3, 40, 40, seed=4)
    guides = guides_of("soft")
    model, *_ = build(cnn64, tiling.stand_ins(content), tiling.stand_ins([style, style]),
                      guides=guides.resized((32, 32)))
    tiler = tiling.TiledStyleModel(model, 46)
    tiler.set_targets(content, [style, style])
    with pytest.raises(ValueError, match="give set_targets the run's guides"):
        tiler.evaluate(rand(1, 3, H, W, seed=3).requires_grad_(True), 1, 1)


@pytest.mark.parametrize("style_loss", ["gram", "wasserstein"])
def test_a_tiled_masked_run_gives_the_untiled_first_evaluations(style_loss: str) -> None:
    """A run at 64 px in tiles of 46 px (float32): two styles with a left mask, and a content mask."""
    rows, cols = torch.meshgrid(torch.linspace(0, 1, 42), torch.linspace(0, 1, 64), indexing="ij")
    base = dict(size=64, steps=1, weights="random", device="cpu", optimizer="adam", style_loss=style_loss,
                style_masks=((1.2 - 1.5 * cols).clamp(0, 1),), content_mask=0.3 + 0.7 * rows)
    content = rand(1, 3, 42, 64, seed=12, dtype=torch.float32)
    styles = [rand(1, 3, 48, 48, seed=13, dtype=torch.float32), rand(1, 3, 40, 56, seed=14, dtype=torch.float32)]
    plain_events, _ = run_images(StyleConfig(**base), content, styles)
    tiled_events, result = run_images(StyleConfig(**base, tile=46), content, styles)
    assert len(tiled_events) == len(plain_events) == 2
    for plain, ours in zip(plain_events, tiled_events):
        for name in ("style_loss", "content_loss"):
            assert getattr(ours, name) == pytest.approx(getattr(plain, name), rel=1e-4, abs=1e-12)
    assert result.record["settings"]["tile"] == 46


def test_the_command_takes_masks_with_tiles_and_refuses_sliced(tmp_path: Path) -> None:
    """Refused before (\"tile cannot be combined with style or content masks\"); the sliced loss still is, in one
    line, with masks or without."""
    images = Path(__file__).resolve().parents[2] / "images"
    mask = tmp_path / "left.png"
    left = Image.new("L", (90, 60), 0)
    left.paste(255, (0, 0, 45, 60))
    left.save(mask)
    content = tmp_path / "content.png"
    Image.open(images / "chelsea.png").convert("RGB").resize((90, 60)).save(content)
    out = tmp_path / "out.png"
    # Adam's one evaluation, not LBFGS's step of 20: the command taking the pair is the point (still tiled: a
    # tiled evaluation that fails fails this test), and 20 tiled evaluations took 14 s on one busy core.
    common = [str(content), str(images / "ihc.png"), "-o", str(out), "--size", "40", "--steps", "1",
              "--optimizer", "adam", "--weights", "random", "--device", "cpu", "--style-mask", str(mask),
              "--tile", "26"]
    result = CliRunner().invoke(main, common)
    assert result.exit_code == 0, result.output
    assert Image.open(out).size == (40, 27)
    sliced = tmp_path / "sliced.png"
    result = CliRunner().invoke(main, [*common[:3], str(sliced), *common[4:], "--style-loss", "sliced"])
    assert result.exit_code == 2
    assert "tile cannot be combined with style_loss 'sliced'" in result.output
    assert not sliced.exists()


def test_the_tiled_estimate_counts_the_masks_buffers(cnn) -> None:
    """``vgg19_mask_bytes`` against the masks a tiled model holds (the run's guides and each loss's whole-map masks)
    for the tutorial's layers, two styles and a content mask, at 96x128 (3 floats of slack a style for rounding)."""
    content, styles = torch.rand(1, 3, 96, 128), [torch.rand(1, 3, 64, 64), torch.rand(1, 3, 64, 64)]
    guides = masks.Guides(masks.fill_masks([torch.rand(1, 1, 96, 128) * 0.5, None]), torch.rand(1, 1, 96, 128))
    model, style_losses, content_losses, _ = build(cnn, tiling.stand_ins(content), tiling.stand_ins(styles),
                                                   guides=guides.resized((32, 32)))
    tiling.TiledStyleModel(model, 64).set_targets(content, styles, None, guides)
    held = sum(m.nbytes for m in [*guides.styles, guides.content])
    held += sum(m.masks.nbytes for m in style_losses) + sum(m.mask.nbytes for m in content_losses)
    names = model_layer_names("vgg19")
    style_layers = resolve_layers(StyleConfig().style_layers, names)
    content_layers = resolve_layers(StyleConfig().content_layers, names)
    estimate = crops.vgg19_mask_bytes(style_layers, content_layers, 2, True) * 96 * 128
    assert held == pytest.approx(estimate, rel=1e-3)
    assert crops.vgg19_mask_bytes(style_layers, content_layers, 0, False) == 0
