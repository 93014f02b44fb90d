"""Colour preservation (luminance, histogram) and the content's alpha channel."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from PIL import Image

from style_transfer import StyleConfig, stylize
from style_transfer.cli.stylize import main
from style_transfer.core.colors import (keep_content_chroma, luminance, match_color_histogram, match_luminance,
                                        rgb_to_yiq)
from style_transfer.io.images import pil_to_tensor
from style_transfer.run.prepare import prepare_colors

from ..conftest import IMAGES

# 8-bit output: each channel off by <= 0.5/255, so I (row |.|-sum 1.192) and Q (1.046) by <= 0.6/255.
CHROMA_TOL = 0.6 / 255 + 1e-6


def yiq_reference(img: torch.Tensor) -> torch.Tensor:
    """YIQ by the textbook formulas, written out (a second computation)."""
    r, g, b = img.double()[0]
    return torch.stack([0.299 * r + 0.587 * g + 0.114 * b,
                        0.596 * r - 0.274 * g - 0.322 * b,
                        0.211 * r - 0.523 * g + 0.312 * b])


def moments(img: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    pixels = img.double().reshape(3, -1)
    return pixels.mean(1), torch.cov(pixels, correction=0)


def test_yiq_matches_the_formulas(content_32) -> None:
    torch.testing.assert_close(rgb_to_yiq(content_32.double())[0], yiq_reference(content_32))


def test_keep_content_chroma_is_exact_and_in_range() -> None:
    torch.manual_seed(0)
    content = torch.rand(1, 3, 9, 7, dtype=torch.float64)
    stylized = torch.rand(1, 3, 9, 7, dtype=torch.float64) * 1.4 - 0.2  # some luminance out of gamut
    out = keep_content_chroma(stylized, content)
    assert out.min() >= 0 and out.max() <= 1
    torch.testing.assert_close(yiq_reference(out[None][0])[1:], yiq_reference(content)[1:], rtol=0, atol=1e-12)
    # Where the stylized luminance fits this chroma's gamut, it is taken exactly.
    y_out, y_style = yiq_reference(out)[0], yiq_reference(stylized)[0]
    low = yiq_reference(content)[0] - content[0].amin(0)
    high = yiq_reference(content)[0] + 1 - content[0].amax(0)
    inside = (y_style >= low) & (y_style <= high)
    assert inside.any() and (~inside).any()
    torch.testing.assert_close(y_out[inside], y_style[inside], rtol=0, atol=1e-12)


@pytest.mark.slow
def test_luminance_mode_keeps_the_contents_chroma(content_32, style_32) -> None:
    chroma_content = yiq_reference(content_32)[1:]

    def effects(channels_last: bool) -> tuple[float, float]:
        """The mode's run: its luminance moved (mean); the plain run: its chroma moved (max)."""
        config = StyleConfig(size=32, steps=1, weights="random", device="cpu", preserve_colors="luminance",
                             style_weight=1e9, content_weight=1e3, channels_last=channels_last)
        out = pil_to_tensor(stylize(content_32, style_32, config))
        # The chroma bound holds by construction (the content's chroma is put back after the run).
        assert (yiq_reference(out)[1:] - chroma_content).abs().max().item() <= CHROMA_TOL
        plain = pil_to_tensor(stylize(content_32, style_32, StyleConfig(
            size=32, steps=1, weights="random", device="cpu", style_weight=1e9, content_weight=1e3,
            channels_last=channels_last)))
        return ((yiq_reference(out)[0] - yiq_reference(content_32)[0]).abs().mean().item(),
                (yiq_reference(plain)[1:] - chroma_content).abs().max().item())

    # The effects come after 20 evaluations: luminance moved 0.040 on average and the plain run's chroma 117x
    # the tolerance, alike on AVX-512, AVX2 and scalar kernels. The control: the same runs in channels_last
    # (another summation order); each bound is widened by 3x the two orders' difference (one pair's difference
    # understates how far rounding can move a figure, as in test_fast.py).
    (moved, chroma), (moved_control, chroma_control) = effects(False), effects(True)
    print(f"luminance moved {moved:.4f} (channels_last {moved_control:.4f}), plain chroma "
          f"{chroma / CHROMA_TOL:.1f}x the tolerance (channels_last {chroma_control / CHROMA_TOL:.1f}x)")
    assert min(moved, moved_control) > 0  # luminance moved, in either order
    assert moved > 0.01 - 3 * abs(moved - moved_control), (moved, moved_control)
    # Without the mode the same run changes the chroma far more than the tolerance.
    assert min(chroma, chroma_control) > CHROMA_TOL
    assert chroma > 10 * CHROMA_TOL - 3 * abs(chroma - chroma_control), (chroma, chroma_control)


def test_luminance_mode_feeds_gray_images_with_matched_luminance(content_32, style_32) -> None:
    content, (style,) = prepare_colors(content_32, [style_32], "luminance")
    assert torch.equal(content[:, 0], content[:, 1]) and torch.equal(content[:, 1], content[:, 2])
    torch.testing.assert_close(content[0, 0].double(), yiq_reference(content_32)[0], rtol=0, atol=1e-6)
    y_content = yiq_reference(content_32)[0]
    assert style[0, 0].mean().item() == pytest.approx(y_content.mean().item(), abs=1e-5)
    assert style[0, 0].std(unbiased=False).item() == pytest.approx(y_content.std(unbiased=False).item(), abs=1e-5)
    assert torch.equal(match_luminance(style_32, content_32), style)


def test_histogram_mode_gives_the_style_the_contents_mean_and_covariance(content_32, style_32) -> None:
    matched = match_color_histogram(style_32, content_32)
    mean, cov = moments(matched)
    mean_c, cov_c = moments(content_32)
    torch.testing.assert_close(mean, mean_c, rtol=0, atol=1e-6)
    torch.testing.assert_close(cov, cov_c, rtol=0, atol=1e-6)
    assert not torch.allclose(moments(style_32)[1], cov_c, atol=1e-3)  # it had other colours before
    content, styles = prepare_colors(content_32, [style_32, style_32.flip(-1)], "histogram")
    assert content is content_32
    for style in styles:
        torch.testing.assert_close(moments(style)[1], cov_c, rtol=0, atol=1e-6)


def test_histogram_of_a_gray_style_stays_finite(content_32) -> None:
    gray = torch.full((1, 3, 8, 8), 0.5)
    gray[..., :4, :] = 0.2
    matched = match_color_histogram(gray, content_32)
    assert torch.isfinite(matched).all()
    torch.testing.assert_close(moments(matched)[0], moments(content_32)[0], rtol=0, atol=1e-6)


def rgba_content(path: Path) -> np.ndarray:
    with Image.open(IMAGES / "chelsea.png") as image:
        rgb = np.asarray(image.convert("RGB").resize((32, 21), Image.Resampling.LANCZOS))
    alpha = np.add.outer(np.arange(21) * 12, np.arange(32) * 3).astype(np.uint8)  # a ramp, 0..252
    Image.fromarray(np.dstack([rgb, alpha]), "RGBA").save(path)
    return alpha


@pytest.mark.parametrize("ext", [".png", ".tiff", ".webp"])
def test_keep_alpha_gives_back_the_contents_alpha(tmp_path: Path, ext: str) -> None:
    if ext == ".webp" and "WEBP" not in Image.SAVE:
        pytest.skip("Pillow built without WebP")
    alpha = rgba_content(tmp_path / "content.png")
    out = tmp_path / f"out{ext}"
    args = [str(tmp_path / "content.png"), str(IMAGES / "ihc.png"), "-o", str(out), "--weights", "random",
            "--size", "32", "--steps", "1", "--optimizer", "adam", "--device", "cpu", "-q"]  # 2 evaluations
    result = CliRunner().invoke(main, [*args, "--keep-alpha"])
    assert result.exit_code == 0, result.output
    with Image.open(out) as image:
        assert image.mode == "RGBA"
        assert np.array_equal(np.asarray(image.getchannel("A")), alpha)
    if ext != ".png":
        return
    CliRunner().invoke(main, args)
    with Image.open(out) as image:
        assert "A" not in image.getbands()  # without the flag: composited over white, as before


def test_keep_alpha_refuses_jpeg_before_any_work(tmp_path: Path) -> None:
    rgba_content(tmp_path / "content.png")
    out = tmp_path / "out.jpg"
    result = CliRunner().invoke(main, [str(tmp_path / "content.png"), str(IMAGES / "ihc.png"), "-o", str(out),
                                       "--weights", "random", "--size", "32", "--keep-alpha"])
    assert result.exit_code == 2
    assert "keep-alpha" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_keep_alpha_without_alpha_gives_rgb(content_32, style_32) -> None:
    image = stylize(content_32, style_32, StyleConfig(size=32, steps=1, weights="random", device="cpu",
                                                      keep_alpha=True, optimizer="adam"))
    assert image.mode == "RGB"


@pytest.mark.slow
def test_luminance_keeps_chroma_of_real_file(tmp_path: Path) -> None:
    """Through the CLI and a PNG file: the written image's chroma is the content's."""
    out = tmp_path / "out.png"
    result = CliRunner().invoke(main, [str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", str(out),
                                       "--weights", "random", "--size", "32", "--steps", "1", "--device", "cpu",
                                       "--preserve-colors", "luminance", "-q"])
    assert result.exit_code == 0, result.output
    from style_transfer.io.images import load_image

    content = load_image(IMAGES / "chelsea.png", 32)
    with Image.open(out) as image:
        written = pil_to_tensor(image.convert("RGB"))
    assert (yiq_reference(written)[1:] - yiq_reference(content)[1:]).abs().max().item() <= CHROMA_TOL
    assert luminance(written).shape == (1, 1, 21, 32)
