"""Spatial control (issue 26.1, losses/masks.py): guided Gram matrices, masks through the layers, the fill rule,
the masked content loss, one-line errors, and the acceptance test on the real VGG16 (red left, blue right)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn

from style_transfer import StyleConfig
from style_transfer.losses import masks
from style_transfer.losses.tutorial import ContentLoss, gram_matrix
from style_transfer.run.run import Run
from style_transfer.core.style_model import get_style_model_and_losses

from ..conftest import IMAGES, small_image
from ..helpers import FAST, one_error_line, invoke_stylize as invoke

CAT = str(IMAGES / "chelsea.png")  # 451 x 300
STYLE = str(IMAGES / "ihc.png")


def half_masks(width: int, height: int) -> tuple[Image.Image, Image.Image]:
    left, right = Image.new("L", (width, height), 0), Image.new("L", (width, height), 0)
    left.paste(255, (0, 0, width // 2, height))
    right.paste(255, (width // 2, 0, width, height))
    return left, right


def written_out_guided_gram(f: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """G_ij = sum_p m_p^2 f_ip f_jp / (C * sum_p m_p^2), by loops over channels (float64)."""
    c = f.shape[1]
    flat, weights = f[0].reshape(c, -1), m.reshape(-1) ** 2
    gram = torch.empty(c, c, dtype=torch.float64)
    for i in range(c):
        for j in range(c):
            gram[i, j] = (weights * flat[i] * flat[j]).sum()
    return gram / (c * weights.sum())


class TestGuidedGram:
    def test_value_against_a_written_out_sum(self) -> None:
        g = torch.Generator().manual_seed(0)
        f = torch.randn(1, 3, 4, 5, generator=g, dtype=torch.float64)
        m = torch.rand(1, 1, 4, 5, generator=g, dtype=torch.float64)
        assert torch.allclose(masks.guided_gram(f, m), written_out_guided_gram(f, m), rtol=1e-12, atol=1e-14)

    def test_a_white_mask_is_the_tutorials_gram(self) -> None:
        f = torch.randn(1, 4, 3, 6, generator=torch.Generator().manual_seed(1))
        assert torch.equal(masks.guided_gram(f, torch.ones(1, 1, 3, 6)), gram_matrix(f))

    def test_a_region_is_as_strong_as_a_whole_image(self) -> None:
        """Normalised by the mask's weight: a region holding copies of one pixel has that pixel's Gram."""
        f = torch.zeros(1, 2, 4, 4)
        f[0, :, :2, :2] = torch.tensor([1.0, 2.0]).view(2, 1, 1)
        m = torch.zeros(1, 1, 4, 4)
        m[..., :2, :2] = 1
        expected = torch.tensor([[1.0, 2.0], [2.0, 4.0]]) / 2  # f f^T / C
        assert torch.allclose(masks.guided_gram(f, m), expected)

    def test_loss_and_gradient_against_a_plain_computation(self) -> None:
        """GuidedStyleLoss (two styles, blend 3:1, layer weight 0.5) against its written-out value and the
        gradient derived by hand: dL/dF = m * (2/n) * (dL/dG + dL/dG^T) (F m), dL/dG = 2 (G - A) / C^2."""
        g = torch.Generator().manual_seed(2)
        c, h, w = 3, 4, 5
        styles = [torch.randn(1, c, 6, 6, generator=g, dtype=torch.float64) for _ in range(2)]
        region = [torch.rand(1, 1, h, w, generator=g, dtype=torch.float64) for _ in range(2)]
        x = torch.randn(1, c, h, w, generator=g, dtype=torch.float64, requires_grad=True)
        module = masks.GuidedStyleLoss(styles, region, (3.0, 1.0), weight=0.5).double()
        module(x)
        module.loss.backward()

        blend = (1.5, 0.5)  # normalised blend times the number of styles
        value, grad = 0.0, torch.zeros(1, c, h, w, dtype=torch.float64)
        for k in range(2):
            gram, target = written_out_guided_gram(x.detach(), region[k]), written_out_guided_gram(
                styles[k], torch.ones(1, 1, 6, 6, dtype=torch.float64))
            value += 0.5 * blend[k] * ((gram - target) ** 2).sum() / c ** 2
            d_gram = 0.5 * blend[k] * 2 * (gram - target) / c ** 2
            n = c * (region[k] ** 2).sum()
            weighted = (x.detach() * region[k])[0].reshape(c, -1)
            d_weighted = (d_gram + d_gram.T) @ weighted / n
            grad += d_weighted.reshape(1, c, h, w) * region[k]
        assert float(module.loss.detach()) == pytest.approx(float(value), rel=1e-12)
        assert torch.allclose(x.grad, grad, rtol=1e-10, atol=1e-14)

    def test_per_module_backward_gives_the_combined_gradient(self, cnn) -> None:
        """The per-module path (--backward per-module): each loss module's backward(weight, retain_graph=...)."""
        grads = guided_backward_gradients(cnn, 1e3)
        assert grads[0].abs().sum() > 0
        assert torch.allclose(grads[0], grads[1], rtol=1e-5, atol=1e-9)


def guided_backward_gradients(cnn, style_weight: float, style_loss: str = "gram") -> list[torch.Tensor]:
    """The image gradient of a model with two styles masked left and right halves, combined backward, then each
    loss module's own backward(weight, retain_graph=...) (--backward per-module); random 24x32 images."""
    content, style = torch.rand(1, 3, 24, 32), torch.rand(1, 3, 32, 32)
    left, right = (to_mask(m, (24, 32)) for m in half_masks(32, 24))
    grads = []
    for per_module in (False, True):
        model, style_losses, content_losses = get_style_model_and_losses(
            cnn, [0.5] * 3, [0.2] * 3, [style, style.flip(-1)], content, guides=masks.Guides([left, right]),
            style_loss=style_loss)
        x = content.clone().requires_grad_(True)
        model(x)
        losses = [*style_losses, *content_losses]
        if per_module:
            for i, module in enumerate(losses):
                module.backward(style_weight if i < len(style_losses) else 1.0, retain_graph=i < len(losses) - 1)
        else:
            (style_weight * sum(s.loss for s in style_losses) + sum(c.loss for c in content_losses)).backward()
        grads.append(x.grad.clone())
    return grads


def to_mask(image: Image.Image, hw: tuple[int, int]) -> torch.Tensor:
    return masks.resize_mask(masks.mask_tensor(image, "mask"), hw)


class TestMasksThroughTheLayers:
    def test_pooling_averages_the_mask_over_its_windows(self) -> None:
        mask = torch.tensor([[1.0, 0.0, 0.5, 0.5],
                             [1.0, 1.0, 0.0, 0.0],
                             [0.0, 0.0, 0.2, 0.2],
                             [0.0, 0.0, 0.2, 0.2]]).view(1, 1, 4, 4)
        by_hand = torch.tensor([[0.75, 0.25], [0.0, 0.2]]).view(1, 1, 2, 2)
        assert torch.allclose(masks.follow(mask, nn.MaxPool2d(2, 2), (2, 2)), by_hand)

    def test_an_odd_size_drops_the_last_row_as_the_pool_does(self) -> None:
        mask = torch.arange(25.0).view(1, 1, 5, 5) / 24
        pooled = masks.follow(mask, nn.MaxPool2d(2, 2), (2, 2))
        by_hand = torch.tensor([[0 + 1 + 5 + 6, 2 + 3 + 7 + 8], [10 + 11 + 15 + 16, 12 + 13 + 17 + 18]]) / 4 / 24
        assert torch.allclose(pooled, by_hand.view(1, 1, 2, 2))

    def test_layers_that_keep_the_size_keep_the_mask(self) -> None:
        mask = torch.rand(1, 1, 6, 6)
        assert masks.follow(mask, nn.Conv2d(3, 3, 3, padding=1), (6, 6)) is mask

    def test_the_model_holds_each_layers_mask(self, cnn) -> None:
        """get_style_model_and_losses' hook: the tutorial's conv_3, conv_4 come after one pool, conv_5 after two."""
        content, style = torch.rand(1, 3, 24, 32), torch.rand(1, 3, 32, 32)
        left, right = (to_mask(m, (24, 32)) for m in half_masks(32, 24))
        _, style_losses, _ = get_style_model_and_losses(cnn, [0.5] * 3, [0.2] * 3, [style, style], content,
                                                        guides=masks.Guides([left, right]))
        assert [type(s) for s in style_losses] == [masks.GuidedStyleLoss] * 5
        assert [tuple(s.masks.shape[-2:]) for s in style_losses] == [(24, 32)] * 2 + [(12, 16)] * 2 + [(6, 8)]
        assert torch.allclose(style_losses[3].masks[0], F.avg_pool2d(left, 2)[0])
        assert torch.allclose(style_losses[4].masks[1], F.avg_pool2d(right, 4)[0])


class TestFillRule:
    def test_unmasked_styles_share_what_no_mask_covers(self) -> None:
        first = torch.tensor([1.0, 0.5, 0.0, 0.25]).view(1, 1, 1, 4)
        filled = masks.fill_masks([first, None, None])
        rest = torch.tensor([0.0, 0.5, 1.0, 0.75]).view(1, 1, 1, 4)
        assert torch.equal(filled[0], first)
        assert torch.equal(filled[1], rest) and torch.equal(filled[2], rest)

    def test_overlapping_masks_leave_nothing_negative(self) -> None:
        a, b = torch.tensor([0.8, 0.0]).view(1, 1, 1, 2), torch.tensor([0.7, 0.5]).view(1, 1, 1, 2)
        assert torch.equal(masks.fill_masks([a, b, None])[2], torch.tensor([0.0, 0.5]).view(1, 1, 1, 2))

    def test_nothing_left_for_an_unmasked_style_is_refused(self) -> None:
        with pytest.raises(ValueError, match="style.s. 2 without a mask have nowhere to go"):
            masks.fill_masks([torch.ones(1, 1, 2, 2), None])


class TestContentMask:
    def test_white_is_the_tutorials_loss_and_black_frees_the_region(self) -> None:
        target, x = torch.rand(1, 4, 3, 5), torch.rand(1, 4, 3, 5, requires_grad=True)
        plain = ContentLoss(target)
        plain(x)
        white = masks.MaskedContentLoss(target, torch.ones(1, 1, 3, 5))
        white(x)
        assert torch.allclose(white.loss, plain.loss)
        mask = torch.ones(1, 1, 3, 5)
        mask[..., :, :2] = 0
        masked = masks.MaskedContentLoss(target, mask)
        masked(x)
        masked.loss.backward()
        assert torch.all(x.grad[..., :, :2] == 0) and torch.all(x.grad[..., :, 2:] != 0)


class TestErrors:
    """Each refused in one line, exit 2 (a corrupt file: 1), nothing written (the command), ValueError (the library)."""

    @pytest.fixture()
    def files(self, tmp_path: Path) -> dict[str, str]:
        left, right = half_masks(451, 300)
        paths = {"left": tmp_path / "left.png", "right": tmp_path / "right.png", "square": tmp_path / "square.png",
                 "black": tmp_path / "black.png", "corrupt": tmp_path / "corrupt.png"}
        left.save(paths["left"])
        right.save(paths["right"])
        Image.new("L", (300, 300), 255).save(paths["square"])
        Image.new("L", (451, 300), 0).save(paths["black"])
        paths["corrupt"].write_bytes(b"\x89PNG\r\n\x1a\n not really")
        return {k: str(v) for k, v in paths.items()} | {"missing": str(tmp_path / "missing.png")}

    @pytest.mark.parametrize("given, needle", [
        ("--style-mask square",
         "style mask 1 (square.png): 300x300 has another aspect ratio than the content (451x300)"),
        ("--style-mask black", "style mask 1 (black.png): the mask is empty (all black)"),
        ("--style-mask left --style-mask right --style-mask left", "3 style masks for 2 style image(s)"),
        ("--style-mask left --style-mask missing", "--style-mask {missing}: no such file"),
        ("--style-mask left --content-mask black", "content mask (black.png): the mask is empty"),
    ], ids=["aspect", "empty", "too-many", "missing", "empty-content-mask"])
    def test_one_line_exit_2_nothing_written(self, files, tmp_path: Path, given: str, needle: str) -> None:
        args = [files.get(word, word) for word in given.split()]
        out = tmp_path / "out" / "o.png"
        out.parent.mkdir()
        line = one_error_line(invoke([CAT, STYLE, str(IMAGES / "brick.png"), "-o", str(out), *FAST, *args], 2))
        assert needle.format(**files) in line
        assert os.listdir(out.parent) == []

    def test_a_mask_file_that_is_no_image_exits_1_as_any_input(self, files, tmp_path: Path) -> None:
        """Issue 33.10: the file is there but unusable, a fault of the input (exit 1), not of the command line."""
        out = tmp_path / "out" / "o.png"
        out.parent.mkdir()
        line = one_error_line(invoke([CAT, STYLE, "-o", str(out), *FAST, "--style-mask", files["corrupt"]], 1))
        assert "style mask 1 (corrupt.png): " in line and "not a readable image" in line
        assert os.listdir(out.parent) == []

    @pytest.mark.parametrize("loss", ["wasserstein", "sliced"])
    def test_masks_take_the_other_style_losses_too(self, files, tmp_path: Path, loss: str) -> None:
        """Refused before the guided W2 and sliced losses (tests/losses/test_guided_statistics.py) were built."""
        out = tmp_path / "o.png"
        invoke([CAT, STYLE, str(IMAGES / "brick.png"), "-o", str(out), *FAST, "--style-mask", files["left"],
                "--style-loss", loss], 0)
        assert Image.open(out).size == (32, 21)

    def test_the_library_raises_value_error(self, files) -> None:
        config = StyleConfig(size=32, steps=1, weights="random", device="cpu", style_masks=(files["square"],))
        with pytest.raises(ValueError, match="another aspect ratio"):
            Run(CAT, STYLE, config).execute()


def test_a_phone_photo_takes_a_mask_of_its_upright_shape(tmp_path: Path) -> None:
    """A JPEG stored 48x32 with EXIF orientation 6 (a quarter turn) is shown and run upright, 32x48: its mask is
    checked against that shape (what a browser paints over), not the stored one."""
    photo = tmp_path / "phone.jpg"
    exif = Image.Exif()
    exif[0x0112] = 6
    small_image("chelsea.png", (48, 32)).save(photo, exif=exif)
    upright, stored = tmp_path / "upright.png", tmp_path / "stored.png"
    half_masks(32, 48)[0].save(upright)
    half_masks(48, 32)[0].save(stored)
    guides = masks.load_guides([str(upright)], None, str(photo), (48, 32), 1)
    assert guides is not None and tuple(guides.styles[0].shape[-2:]) == (48, 32)
    with pytest.raises(ValueError, match=r"stored.png\): 48x32 has another aspect ratio than the content \(32x48\)"):
        masks.load_guides([str(stored)], None, str(photo), (48, 32), 1)


def test_a_masked_run_records_its_masks(tmp_path: Path) -> None:
    """The provenance record names each mask and hashes it, as it does the inputs."""
    left, right = half_masks(32, 21)
    left_path = tmp_path / "left.png"
    left.save(left_path)
    config = StyleConfig(size=32, steps=1, weights="random", device="cpu", style_masks=(str(left_path),))
    result = Run(small_image("chelsea.png", (32, 21)), [STYLE, str(IMAGES / "brick.png")], config).execute()
    assert result.record["settings"]["style_masks"] == ["left.png"]
    from style_transfer.io.provenance import sha256_file

    assert result.record["inputs"]["style_masks"] == [{"name": "left.png", "sha256": sha256_file(left_path)}]


def textured(colour: tuple[int, int, int], seed: int) -> Image.Image:
    noise = np.random.default_rng(seed).normal(0, 25, (64, 64, 3))
    return Image.fromarray(np.clip(np.array(colour) + noise, 0, 255).astype(np.uint8))


def assert_red_and_blue_halves(vgg16_onnx: Path, blue_margin: float, **fields) -> None:
    """A red and a blue style with left and right masks (and swapped) give a red and a blue half, at 64 px on the
    real VGG16: red leads blue by 60 in the red half, blue leads red by ``blue_margin`` in the blue half, each margin
    widened by 3x the difference a second summation order (channels_last, the control) makes. ``fields``: the
    run's settings beyond these (steps, style_loss)."""
    content = small_image("chelsea.png", (96, 64))
    left, right = half_masks(96, 64)
    styles = [textured((200, 40, 40), 0), textured((40, 40, 200), 1)]
    for red_mask, blue_mask, red_side in ((left, right, "left"), (right, left, "right")):
        leads = []  # per summation order: how far red leads blue in the red half, and blue red in the blue half
        for channels_last in (False, True):  # the control: the same run in channels_last (another summation order)
            config = StyleConfig(size=64, model="vgg16", weights=str(vgg16_onnx), device="cpu",
                                 style_masks=(red_mask, blue_mask), channels_last=channels_last, **fields)
            pixels = np.asarray(Run(content, styles, config).execute().image.convert("RGB"), dtype=np.float64)
            half = pixels.shape[1] // 2
            halves = {"left": pixels[:, :half].mean((0, 1)), "right": pixels[:, half:].mean((0, 1))}
            red, blue = halves[red_side], halves["right" if red_side == "left" else "left"]
            assert red[0] > red[2] and blue[2] > blue[0], (red_side, channels_last, halves)  # in either order
            leads.append((red[0] - red[2], blue[2] - blue[0]))
        (red_lead, blue_lead), (red_control, blue_control) = leads
        print(f"red {red_side}: red leads by {red_lead:.0f} (channels_last {red_control:.0f}), "
              f"blue by {blue_lead:.0f} (channels_last {blue_control:.0f})")
        # The margins were measured on one machine after many evaluations: each is widened by 3x the two orders'
        # difference (one pair's difference understates how far rounding can move a figure, as in test_fast.py).
        assert red_lead > 60 - 3 * abs(red_lead - red_control), (red_side, leads)
        assert blue_lead > blue_margin - 3 * abs(blue_lead - blue_control), (red_side, leads)


@pytest.mark.real_features
@pytest.mark.slow
def test_red_left_and_blue_right_on_real_features(vgg16_onnx: Path) -> None:
    """The issue's acceptance test: a red and a blue style with left and right masks give a red left half and a
    blue right half, and with the masks swapped a blue left half and a red right half. Both ways, because
    without masks the blend of the two happens to put red left and blue right on this photo too (measured,
    unmasked: (185, 45, 85) left, (55, 61, 206) right); masked: about (195, 48, 60) and (62, 57, 216)."""
    assert_red_and_blue_halves(vgg16_onnx, 60, steps=40)
