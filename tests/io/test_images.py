"""Loading and saving images: RGB conversion, orientation, sizes, atomic writes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from PIL import Image

from style_transfer import ImageError, load_image, save_image
from style_transfer.io.images import working_size


def test_rgba_composited_over_white(tmp_path: Path) -> None:
    image = Image.new("RGBA", (32, 16), (255, 0, 0, 0))  # fully transparent red
    image.putpixel((0, 0), (0, 0, 255, 255))  # one opaque blue pixel
    path = tmp_path / "a.png"
    image.save(path)
    t = load_image(path, 32)
    torch.testing.assert_close(t[0, :, 0, 1], torch.ones(3))  # transparent -> white
    torch.testing.assert_close(t[0, :, 0, 0], torch.tensor([0.0, 0.0, 1.0]))


def test_grayscale_and_16_bit(tmp_path: Path) -> None:
    gray = Image.new("L", (16, 16), 51)
    assert load_image(gray, 16)[0, :, 0, 0].tolist() == pytest.approx([0.2, 0.2, 0.2])
    deep = Image.new("I;16", (16, 16), 32768)  # mid-gray in 16 bits, not clipped to white
    assert load_image(deep, 16)[0, 0, 0, 0].item() == pytest.approx(128 / 255, abs=1 / 255)


def test_long_side_resized_aspect_kept() -> None:
    image = Image.new("RGB", (300, 200), (10, 20, 30))
    assert load_image(image, 60).shape == (1, 3, 40, 60)
    assert working_size(4000, 16, 512) == (512, 16)  # short side floored for the pooling layers


def test_exif_orientation_applied(tmp_path: Path) -> None:
    image = Image.new("RGB", (40, 20), (255, 255, 255))
    exif = image.getexif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    path = tmp_path / "phone.jpg"
    image.save(path, exif=exif)
    assert load_image(path, 40).shape == (1, 3, 40, 20)  # upright: portrait


def test_tensor_input_resized() -> None:
    t = torch.rand(1, 3, 20, 40)
    assert load_image(t, 40) is not t
    torch.testing.assert_close(load_image(t, 40), t)
    assert load_image(t, 36).shape == (1, 3, 18, 36)
    assert load_image(t, 20).shape == (1, 3, 16, 20)  # short side floored at 16
    with pytest.raises(ImageError, match="shape"):
        load_image(torch.rand(2, 3, 4, 4), 4)


def test_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.jpg"
    path.write_bytes(b"<html>not an image</html>")
    with pytest.raises(ImageError, match="bad.jpg: not a readable image"):
        load_image(path, 32)


def test_save_roundtrip_and_format(tmp_path: Path) -> None:
    t = torch.rand(1, 3, 17, 19)
    path = tmp_path / "x.png"
    save_image(t, path)
    loaded = load_image(path, 19)
    assert (loaded - t).abs().max().item() <= 0.5 / 255 + 1e-6  # rounded, not truncated
    assert [p.name for p in tmp_path.iterdir()] == ["x.png"]  # no temp file left


def needs_webp() -> None:
    if "WEBP" not in Image.SAVE:
        pytest.skip("this Pillow was built without WebP")


RED, GREEN, BLUE = (255, 0, 0), (0, 255, 0), (0, 0, 255)


@pytest.mark.parametrize("fmt, ext, options", [
    ("WEBP", ".webp", {"lossless": True}),
    ("BMP", ".bmp", {}),
])
def test_webp_and_bmp_inputs(tmp_path: Path, fmt: str, ext: str, options: dict) -> None:
    """docs/inputs-and-errors.md, Formats: WebP and BMP are read (lossless here, so every pixel comes back exactly)."""
    if fmt == "WEBP":
        needs_webp()
    pixels = torch.arange(3 * 16 * 24, dtype=torch.uint8).reshape(3, 16, 24) * 7  # distinct values, wrapping
    path = tmp_path / f"in{ext}"
    Image.fromarray(pixels.permute(1, 2, 0).numpy(), "RGB").save(path, fmt, **options)
    with Image.open(path) as opened:
        assert opened.format == fmt
    torch.testing.assert_close(load_image(path, 24), pixels.unsqueeze(0).float() / 255, rtol=0, atol=1e-7)


@pytest.mark.parametrize("fmt, ext, options", [
    ("WEBP", ".webp", {"lossless": True, "duration": 50}),  # animated WebP
    ("PNG", ".png", {"duration": 50}),  # APNG
    ("TIFF", ".tiff", {}),  # multi-page TIFF
])
def test_animated_and_multi_page_files_give_frame_zero(tmp_path: Path, fmt: str, ext: str, options: dict) -> None:
    """docs/inputs-and-errors.md, Frame 0: three frames of distinct colours; the first one's colour comes back."""
    if fmt == "WEBP":
        needs_webp()
    frames = [Image.new("RGB", (24, 16), color) for color in (RED, GREEN, BLUE)]
    path = tmp_path / f"anim{ext}"
    frames[0].save(path, fmt, save_all=True, append_images=frames[1:], **options)
    with Image.open(path) as opened:
        assert opened.format == fmt and opened.n_frames == 3  # really a file of several frames
        opened.seek(2)
        assert opened.convert("RGB").getpixel((0, 0)) == BLUE
    loaded = load_image(path, 24)
    assert loaded.shape == (1, 3, 16, 24)
    torch.testing.assert_close(loaded, torch.tensor(RED, dtype=torch.float32).view(1, 3, 1, 1).expand(1, 3, 16, 24)
                               / 255, rtol=0, atol=1e-7)
