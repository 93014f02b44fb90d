"""Bad input files, odd image modes, geometry and output paths: one-line errors, correct RGB."""

from __future__ import annotations

import io
import os
import signal
import struct
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from style_transfer import ImageError, OutputError, load_image, save_image
from style_transfer.io.images import MAX_PIXELS, open_image

from ..conftest import IMAGES
from ..helpers import FAST, one_error_line, invoke_stylize as invoke

STYLE = str(IMAGES / "ihc.png")


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bytes(width: int, height: int, rows: bytes, *, depth: int = 8, color: int = 0,
              extra: bytes = b"") -> bytes:
    """A PNG written by hand (so headers can lie and 16-bit RGB can be made): gray or RGB."""
    header = struct.pack(">IIBBBBB", width, height, depth, color, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header) + extra
            + png_chunk(b"IDAT", zlib.compress(rows)) + png_chunk(b"IEND", b""))


def encoded(image: Image.Image, fmt: str, **kwargs: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **kwargs)
    return buffer.getvalue()


def noise(width: int, height: int, seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))


def write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def bad_png_crc() -> bytes:
    data = bytearray(encoded(noise(16, 16), "PNG"))
    data[29] ^= 0xFF  # IHDR's CRC
    return bytes(data)


def bad_idat_crc() -> bytes:
    data = bytearray(encoded(noise(16, 16), "PNG"))
    start = data.index(b"IDAT")
    data[start + 4 + int.from_bytes(data[start - 4:start], "big")] ^= 0xFF  # the pixel data is intact
    return bytes(data)


def truncated(fmt: str) -> bytes:
    data = encoded(noise(64, 64), fmt)
    return data[: len(data) // 2]


# --- files that are not (supported) images: one line naming the file, exit 1, nothing written; a path that names
# no file to read (missing, a directory, a FIFO, a device, a broken link): the same line, exit 2 (a usage error) ---

CONTENT_CASES = {
    "empty": (lambda tmp: write(tmp / "empty.png", b""), "is empty"),
    "text": (lambda tmp: write(tmp / "notes.jpg", b"shopping list: eggs, milk\n"), "it is text"),
    "html": (lambda tmp: write(tmp / "page.png", b"<!DOCTYPE html><html><body>404</body></html>"),
             "HTML page"),
    "heic": (lambda tmp: write(tmp / "phone.heic", b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic" + bytes(64)),
             "HEIC image, which is not supported"),
    "svg": (lambda tmp: write(tmp / "logo.png", b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"/>'),
            "SVG drawing"),
    "ppm (Pillow reads it; not on our list)": (lambda tmp: write(tmp / "x.png", encoded(noise(16, 16), "PPM")),
                                               "unknown format"),
    "bad png crc": (lambda tmp: write(tmp / "crc.png", bad_png_crc()), "corrupt PNG header"),
    "bad png data crc": (lambda tmp: write(tmp / "idat.png", bad_idat_crc()), "corrupt or truncated PNG data"),
    "truncated png": (lambda tmp: write(tmp / "cut.png", truncated("PNG")), "corrupt or truncated PNG"),
    "truncated jpeg": (lambda tmp: write(tmp / "cut.jpg", truncated("JPEG")), "corrupt or truncated JPEG"),
    "directory": (lambda tmp: (tmp / "folder").mkdir() or str(tmp / "folder"), "is a directory"),
    "missing": (lambda tmp: str(tmp / "nope.png"), "no such file"),
    "dangling symlink": (lambda tmp: os.symlink(tmp / "gone.png", tmp / "link.png") or str(tmp / "link.png"),
                         "dangling symlink"),
    "symlink loop": (lambda tmp: (os.symlink(tmp / "b.png", tmp / "a.png"), os.symlink(tmp / "a.png", tmp / "b.png"))
                     and str(tmp / "a.png"), "symlink loop"),
    "fifo": (lambda tmp: os.mkfifo(tmp / "pipe.png") or str(tmp / "pipe.png"), "FIFO"),
    "device": (lambda tmp: "/dev/null", "is a device"),
    "1x1": (lambda tmp: write(tmp / "dot.png", encoded(Image.new("RGB", (1, 1)), "PNG")), "smallest input"),
    "thin line": (lambda tmp: write(tmp / "line.png", encoded(Image.new("RGB", (300, 3)), "PNG")), "300x3 px"),
}


PATH_CASES = ("directory", "missing", "dangling symlink", "symlink loop", "fifo", "device")


@pytest.mark.parametrize("case", CONTENT_CASES)
def test_bad_content_file_one_line_nothing_written(tmp_path: Path, case: str) -> None:
    make, needle = CONTENT_CASES[case]
    path = make(tmp_path)
    out = tmp_path / "out" / "o.png"
    out.parent.mkdir()
    signal.signal(signal.SIGALRM, signal.default_int_handler)
    signal.alarm(20)  # a FIFO opened for reading would block forever: fail instead of hanging
    try:
        line = one_error_line(invoke([path, STYLE, "-o", str(out), *FAST], 2 if case in PATH_CASES else 1))
    finally:
        signal.alarm(0)
    assert needle in line
    assert os.path.basename(path) in line  # names the file
    assert os.listdir(out.parent) == []  # nothing written, no temp file


def test_a_file_without_read_permission_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33.10 (said by click's own check of the path, or by ours). os.access is patched: the tests may run
    as root, who may read any file."""
    locked = write(tmp_path / "locked.png", encoded(noise(16, 16), "PNG"))
    real = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, *a, **k: False if os.fspath(path) == locked
                        else real(path, mode, *a, **k))
    for args in ([locked, STYLE], [STYLE, locked], [STYLE, STYLE, "--init", locked],
                 [STYLE, STYLE, "--style-mask", locked]):
        line = one_error_line(invoke([*args, "-o", str(tmp_path / "o.png"), *FAST], 2))
        assert "locked.png" in line and ("not readable" in line or "Permission denied" in line), line
    assert os.listdir(tmp_path) == ["locked.png"]


def test_bad_style_file_is_named_too(tmp_path: Path) -> None:
    style = write(tmp_path / "style.gif", b"GIF89a\x01")
    line = one_error_line(invoke([str(IMAGES / "chelsea.png"), style, "-o", str(tmp_path / "o.png"), *FAST], 1))
    assert "style.gif: not a readable image" in line
    assert not (tmp_path / "o.png").exists()


# --- decompression bombs: refused from the header, before decoding, with the declared size ---

@pytest.mark.parametrize("width, height", [
    (9000, 9000),  # 81 Mpx: over our cap only
    (10000, 9000),  # 90 Mpx: Pillow warns (treated as an error)
    (20000, 20000),  # 400 Mpx: Pillow refuses in open()
])
def test_decompression_bomb_refused_with_declared_size(tmp_path: Path, width: int, height: int) -> None:
    path = write(tmp_path / "bomb.png", png_bytes(width, height, b"\x00" * 100))  # tiny file, huge header
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ImageError) as info:
            open_image(path)
    message = str(info.value)
    assert f"{width * height:,} pixels" in message and "bomb" in message
    if width * height < 2 * 89_478_485:  # the header was read: the message has both sides
        assert f"{width}x{height}" in message
    assert width * height > MAX_PIXELS
    assert caught == []  # Pillow's DecompressionBombWarning did not leak


def test_pillow_warnings_do_not_leak(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    rows = b"".join(b"\x00" + bytes([100] * 16) for _ in range(16))
    bad_apng = png_chunk(b"acTL", struct.pack(">II", 0, 0))  # Pillow: "Invalid APNG ..." warning
    path = write(tmp_path / "anim.png", png_bytes(16, 16, rows, extra=bad_apng))
    with pytest.warns(UserWarning, match="APNG"):
        Image.open(path).close()  # proof that this file makes Pillow warn
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tensor = load_image(path, 16)
    assert caught == []
    assert tensor[0, :, 0, 0].tolist() == pytest.approx([100 / 255] * 3)
    assert capfd.readouterr().err == ""


# --- modes: all become correct RGB ---

def rgb_at(image: Image.Image, tmp_path: Path, fmt: str = "PNG", **kwargs: object) -> list[int]:
    """The loaded RGB value (0..255) of pixel (0, 0) after a round trip through a file."""
    path = write(tmp_path / "mode.img", encoded(image, fmt, **kwargs))
    return [round(v * 255) for v in load_image(path, max(image.size))[0, :, 0, 0].tolist()]


def test_palette_with_and_without_transparency(tmp_path: Path) -> None:
    palette = Image.new("P", (16, 16), 1)
    palette.putpalette([0, 0, 0, 10, 200, 30] + [0] * 762)
    assert rgb_at(palette, tmp_path) == [10, 200, 30]
    assert rgb_at(palette, tmp_path, transparency=1) == [255, 255, 255]  # transparent: over white
    assert rgb_at(palette, tmp_path, "GIF", transparency=1) == [255, 255, 255]


@pytest.mark.parametrize("mode, value, expected", [
    ("L", 51, [51, 51, 51]),
    ("1", 1, [255, 255, 255]),
    ("LA", (0, 0), [255, 255, 255]),  # black, fully transparent: white
    ("LA", (0, 255), [0, 0, 0]),
    ("LA", (0, 51), [204, 204, 204]),  # 20 % black over white
    ("RGBA", (255, 0, 0, 102), [255, 153, 153]),  # 40 % red over white: 255 - 0.4 * 255
])
def test_gray_and_alpha_modes(tmp_path: Path, mode: str, value, expected: list[int]) -> None:
    assert rgb_at(Image.new(mode, (16, 16), value), tmp_path) == expected


def test_cmyk_jpeg_and_tiff(tmp_path: Path) -> None:
    cmyk = Image.new("CMYK", (16, 16), (255, 0, 0, 0))  # pure cyan
    assert rgb_at(cmyk, tmp_path, "TIFF") == [0, 255, 255]
    assert rgb_at(cmyk, tmp_path, "JPEG", quality=100) == pytest.approx([0, 255, 255], abs=2)


def test_16_and_32_bit_gray_scaled_not_clipped(tmp_path: Path) -> None:
    assert rgb_at(Image.fromarray(np.full((16, 16), 32768, np.uint16)), tmp_path) == [128] * 3  # 32768/65535
    assert rgb_at(Image.fromarray(np.full((16, 16), 65535, np.uint16)), tmp_path) == [255] * 3
    # 32-bit unsigned (Pillow reads it as signed): 3e9 / (2**32 - 1) * 255 = 178.1
    assert rgb_at(Image.fromarray(np.full((16, 16), 3_000_000_000, np.uint32)), tmp_path, "TIFF") == [178] * 3
    assert rgb_at(Image.fromarray(np.full((16, 16), 1000, np.int32)), tmp_path, "TIFF") == [4] * 3  # 1000/65535


def test_float_image_nan_and_inf_sanitised(tmp_path: Path) -> None:
    data = np.zeros((16, 16), np.float32)
    data[0, :4] = [np.nan, np.inf, -np.inf, 0.5]
    data[1, 0] = 2.0  # outside [0, 1]: stretched from min (0) to max (2)
    path = write(tmp_path / "f.tif", encoded(Image.fromarray(data), "TIFF"))
    row = (load_image(path, 16)[0, 0, 0, :4] * 255).round().tolist()
    assert row == [0, 255, 0, 64]  # NaN -> min, +inf -> max, -inf -> min, 0.5 / 2 -> 63.75
    data[1, 0] = 1.0  # a float image already in [0, 1] is kept as is
    path = write(tmp_path / "g.tif", encoded(Image.fromarray(data), "TIFF"))
    assert (load_image(path, 16)[0, 0, 0, 3] * 255).round().item() == 128


def test_48_bit_rgb_png(tmp_path: Path) -> None:
    pixel = struct.pack(">HHH", 0xFFFF, 0x8000, 0x00FF)
    rows = b"".join(b"\x00" + pixel * 16 for _ in range(16))
    path = write(tmp_path / "deep.png", png_bytes(16, 16, rows, depth=16, color=2))
    assert [round(v * 255) for v in load_image(path, 16)[0, :, 0, 0].tolist()] == [255, 128, 0]


def test_lab_image(tmp_path: Path) -> None:
    # CIELAB for sRGB red (L 53.2, a 80.1, b 67.2) in Pillow's 8-bit coding (L * 2.55, a + 128, b + 128).
    lab = Image.new("LAB", (16, 16), (136, 208, 195))
    assert rgb_at(lab, tmp_path, "TIFF") == pytest.approx([255, 0, 0], abs=12)


# --- EXIF orientation and geometry ---

def test_exif_rotation_applied_and_not_written(tmp_path: Path) -> None:
    image = Image.new("RGB", (24, 16), (255, 255, 255))
    image.paste((255, 0, 0), (0, 0, 4, 4))  # a red top-left corner
    exif = image.getexif()
    exif[0x0112] = 3  # display rotated by 180 degrees
    path = write(tmp_path / "phone.jpg", encoded(image, "JPEG", exif=exif, quality=95))
    tensor = load_image(path, 24)
    assert tensor.shape == (1, 3, 16, 24)
    assert tensor[0, 1, -1, -1] < 0.2 and tensor[0, 1, 0, 0] > 0.8  # red now bottom-right
    out = tmp_path / "out.jpg"
    save_image(tensor, out)
    with Image.open(out) as saved:
        assert 0x0112 not in saved.getexif()


def test_small_icon_upscaled_and_banner_kept_in_bounds(tmp_path: Path) -> None:
    icon = write(tmp_path / "icon.png", encoded(Image.new("RGB", (8, 8), (0, 0, 255)), "PNG"))
    assert load_image(icon, 48).shape == (1, 3, 48, 48)
    banner = write(tmp_path / "banner.png", encoded(Image.new("RGB", (4000, 16)), "PNG"))
    assert load_image(banner, 512).shape == (1, 3, 16, 512)  # long side capped, short side floored
    with pytest.raises(ImageError, match="1x1 px"):
        load_image(Image.new("RGB", (1, 1)), 32)
    with pytest.raises(ImageError, match="smallest input"):
        load_image(torch.rand(1, 3, 1, 1), 32)


def test_big_photo_resized_before_it_becomes_a_tensor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from style_transfer.io import images

    seen = []
    original = images.pil_to_tensor
    monkeypatch.setattr(images, "pil_to_tensor", lambda image: seen.append(image.size) or original(image))
    path = write(tmp_path / "big.png", encoded(Image.new("RGB", (3000, 2000)), "PNG"))
    assert load_image(path, 60).shape == (1, 3, 40, 60)
    assert seen == [(60, 40)]


def test_animated_gif_gives_frame_zero(tmp_path: Path) -> None:
    frames = [Image.new("RGB", (16, 16), color) for color in [(255, 0, 0), (0, 0, 255)]]
    path = tmp_path / "anim.gif"
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=50)
    pixel = load_image(path, 16)[0, :, 0, 0]
    assert pixel[0] > 0.9 and pixel[2] < 0.1  # red, the first frame


# --- names: opened by content, printed safely ---

def test_odd_names_opened_by_content(tmp_path: Path) -> None:
    png = encoded(noise(16, 12), "PNG")
    for name in ["no extension", "wrong.jpg", "ünïcode ☃.png", os.fsdecode(b"caf\xe9.png")]:
        assert load_image(write(tmp_path / name, png), 32).shape == (1, 3, 24, 32)


def test_unprintable_names_printed_safely(tmp_path: Path) -> None:
    name = os.fsdecode(b"bad\xe9\nname.png")  # not UTF-8, and a newline
    line = one_error_line(invoke([str(tmp_path / name), STYLE, "-o", str(tmp_path / "o.png"), *FAST], 2))
    assert "bad\\xe9\\nname.png: no such file" in line


def test_leading_dash_after_double_dash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "-content.png", encoded(noise(32, 20), "PNG"))
    result = invoke(["-o", "out.png", "-q", *FAST, "--", "-content.png", STYLE], 0)
    assert result.output == ""
    with Image.open(tmp_path / "out.png") as image:
        assert image.size == (32, 20)


# --- output ---

def test_output_equal_to_input_is_refused(tmp_path: Path) -> None:
    """Issue 24: it replaced the photo with the result, exit 0; now refused in one line (test_cli.py: by any name)."""
    content = tmp_path / "photo.png"
    content.write_bytes(encoded(noise(40, 30), "PNG"))
    before = content.read_bytes()
    result = invoke([str(content), STYLE, "-o", str(content), "-q", *FAST], 2)
    assert "is the same file as CONTENT" in result.output and len(result.output.strip().splitlines()) == 1
    assert content.read_bytes() == before
    assert os.listdir(tmp_path) == ["photo.png"]


@pytest.mark.parametrize("image, expected", [
    (Image.new("RGBA", (16, 16), (255, 0, 0, 0)), [255, 255, 255]),  # transparent over white
    (Image.new("LA", (16, 16), (0, 255)), [0, 0, 0]),
    (Image.new("L", (16, 16), 51), [51, 51, 51]),
    (Image.fromarray(np.full((16, 16), 65535, np.uint16)), [255, 255, 255]),
])
def test_any_mode_saved_as_jpeg(tmp_path: Path, image: Image.Image, expected: list[int]) -> None:
    path = tmp_path / "out.jpg"
    save_image(image, path)
    with Image.open(path) as saved:
        assert saved.format == "JPEG"
        assert list(saved.convert("RGB").getpixel((0, 0))) == pytest.approx(expected, abs=2)


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_failed_write_leaves_existing_output_and_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        failure: BaseException) -> None:
    out = tmp_path / "o.png"
    out.write_bytes(b"precious")

    def broken_save(self, fp, format=None, **params):  # noqa: A002 - Pillow's signature
        fp.write(b"half an image")
        raise failure

    monkeypatch.setattr(Image.Image, "save", broken_save)
    with pytest.raises(OutputError if isinstance(failure, OSError) else KeyboardInterrupt):
        save_image(torch.rand(1, 3, 8, 8), out)
    assert out.read_bytes() == b"precious"
    assert os.listdir(tmp_path) == ["o.png"]


def test_output_extension_outside_allow_list(tmp_path: Path) -> None:
    line = one_error_line(invoke([str(IMAGES / "chelsea.png"), STYLE, "-o", str(tmp_path / "o.pdf"), *FAST], 2))
    assert "o.pdf" in line and "'.pdf'" in line
    assert os.listdir(tmp_path) == []
