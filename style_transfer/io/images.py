"""Images in and out: load any image as an upright RGB tensor, save a tensor atomically."""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Union

from PIL import ExifTags, Image, ImageOps

from .metadata import save_options
from ..errors import ImageError, OutputError, first_line
from .files import atomic_output, check_writable, open_regular, shown

if TYPE_CHECKING:
    import torch
    from typing_extensions import TypeIs  # typing's from Python 3.13; only the checker reads it

# torch (and numpy) are imported inside the functions that need them: the command checks its
# inputs and output with this module before it pays for importing torch (a fast start).
ImageSource = Union[str, os.PathLike, Image.Image, "torch.Tensor"]

# The shortest side a working image may have: a few pooling layers must leave >= 1 px.
MIN_SIDE = 16

# Formats read, by content (never by extension): photos and web images. Others are refused,
# so no rarely used decoder ever parses a user's file.
INPUT_FORMATS = ("JPEG", "PNG", "WEBP", "BMP", "TIFF", "GIF")
_FORMAT_ALIASES = {"MPO": "JPEG"}  # Pillow names a JPEG with extra pictures (phones, 3D cameras) MPO
INPUT_FORMATS_TEXT = "JPEG, PNG, WebP, BMP, TIFF, GIF"
# Our own pixel cap, checked on the header before decoding (Pillow warns only above 89 Mpx).
MAX_PIXELS = 80_000_000
# The smallest input accepted, on its shorter side: a 1x1 image holds no picture to repaint;
# small icons are accepted and upscaled to the working size.
MIN_INPUT_SIDE = 8


def output_format(path: str | os.PathLike) -> str:
    """Return Pillow's format name for an output path, from its extension.

    Raises:
        OutputError: if the extension is missing or not one Pillow can write.
    """
    ext = Path(path).suffix.lower()
    if not ext:
        raise OutputError(f"{shown(path)}: output has no extension (use .jpg, .png, ...)")
    Image.init()
    fmt = Image.registered_extensions().get(ext)
    # The same allow-list as for inputs: what Pillow may write in other formats is not our business.
    if fmt is None or fmt not in Image.SAVE or fmt not in INPUT_FORMATS:
        raise OutputError(f"{shown(path)}: cannot write images with extension {shown(ext)!r} "
                          f"(use .jpg, .png, .webp, .bmp, .tif or .gif)")
    return fmt


def check_output(path: str | os.PathLike) -> str:
    """Check, before any work, that an image can be written at ``path``; return its format.

    Raises:
        OutputError: no or unknown extension, a folder as output, a missing or unwritable folder.
    """
    name = os.fspath(path)
    if os.path.isdir(name):
        raise OutputError(f"{shown(name)}: is a directory; give an output file name such as out.jpg")
    fmt = output_format(name)
    check_writable(name, "output folder")
    return fmt


def working_size(width: int, height: int, size: int) -> tuple[int, int]:
    """Return (width, height) with the long side equal to ``size``, aspect kept.

    The short side is rounded and floored at ``MIN_SIDE`` so the network's pooling
    always has something to pool (only extreme banners lose their exact aspect).
    """
    scale = size / max(width, height)
    return max(MIN_SIDE, round(width * scale)), max(MIN_SIDE, round(height * scale))


# Modes with an alpha channel (``alpha_channel``, ``pil_to_rgb``); a palette with a transparent entry becomes RGBA.
ALPHA_MODES = ("RGBA", "LA", "PA", "RGBa", "La")


def pil_to_rgb(image: Image.Image) -> Image.Image:
    """Convert any Pillow image to 8-bit RGB, compositing transparency over white."""
    # Departure from the tutorial (which assumes RGB files): users feed grayscale, palette, RGBA...
    if image.mode == "P" and "transparency" in image.info:
        image = image.convert("RGBA")
    if image.mode in ALPHA_MODES:
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    if image.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        return _high_depth_to_rgb(image)
    return image.convert("RGB")


def alpha_channel(image: Image.Image) -> Image.Image | None:
    """The transparency ``pil_to_rgb`` composites over white, as an 8-bit ``L`` image (255: opaque); None for a
    mode without it."""
    if image.mode == "P" and "transparency" in image.info:
        with _quiet_pillow():  # "Palette images with Transparency expressed in bytes ..." must not reach stderr
            image = image.convert("RGBA")
    if image.mode not in ALPHA_MODES:
        return None
    return image.getchannel("A" if "A" in image.getbands() else "a")


def _high_depth_to_rgb(image: Image.Image) -> Image.Image:
    """16-bit, 32-bit integer and float grayscale to RGB, scaled (not clipped) to 8 bits.

    16-bit data is divided by 65535; 32-bit integers by 2**32 - 1 unless they fit in 16 bits
    (Pillow reads unsigned 32-bit TIFFs as signed: negative values are wrapped back);
    floats already in [0, 1] are kept, other floats are stretched from their min to max.
    NaN becomes the minimum, +inf the maximum, -inf the minimum of the finite values.
    """
    import numpy as np

    data = np.asarray(image).astype(np.float64)
    finite = np.isfinite(data)
    low = float(data[finite].min()) if finite.any() else 0.0
    high = float(data[finite].max()) if finite.any() else 0.0
    data = np.nan_to_num(data, nan=low, posinf=high, neginf=low)
    if image.mode == "F":
        if not (low >= 0 and high <= 1):
            data = (data - low) / (high - low) if high > low else np.zeros_like(data)
    elif image.mode.startswith("I;16") or (low >= 0 and high <= 65535):
        data = np.clip(data, 0, 65535) / 65535
    else:
        data = np.where(data < 0, data + 2.0**32, data) / (2.0**32 - 1)
    gray = np.round(np.clip(data, 0, 1) * 255).astype(np.uint8).reshape(image.height, image.width)
    return Image.fromarray(gray).convert("RGB")


def is_tensor(value: object) -> TypeIs[torch.Tensor]:
    """Whether ``value`` is a torch tensor (False, without importing torch, when torch is not loaded)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def pil_to_tensor(image: Image.Image) -> torch.Tensor:
    """An RGB Pillow image as a float32 tensor of shape (1, 3, H, W) in [0, 1]."""
    import torch

    data = torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8)
    return data.reshape(image.height, image.width, 3).permute(2, 0, 1).unsqueeze(0).float().div(255).contiguous()


def tensor_to_pil(tensor: torch.Tensor) -> Image.Image:
    """A (1, 3, H, W) or (3, H, W) tensor in [0, 1] as an RGB Pillow image (values rounded)."""
    import torch

    if tensor.dim() == 4:
        tensor = tensor[0]
    data = tensor.detach().float().clamp(0, 1).mul(255).round().to(torch.uint8).permute(1, 2, 0).cpu()
    return Image.frombytes("RGB", (data.shape[1], data.shape[0]), data.contiguous().numpy().tobytes())


def read_bytes(path: str | os.PathLike) -> bytes:
    """An image file's bytes, read once: ``open_image(path, data)`` opens them as it opens the file (a run decodes
    its content at each working size from them, and hashes them for its record).

    Raises:
        ImageError: naming the file: missing, not a regular file, empty, or unreadable.
    """
    name = os.fspath(path)
    with open_regular(name, ImageError) as handle:
        try:
            return handle.read()
        except OSError as exc:
            raise ImageError(f"{shown(name)}: cannot be read ({exc.strerror or exc})") from None


def open_image(path: str | os.PathLike, data: bytes | None = None) -> Image.Image:
    """Open an image file fully (``load()`` inside, so a truncated file fails here), upright.

    The file is opened by content, never by extension, and only in ``INPUT_FORMATS``; frame 0
    of an animated or multi-page file is read. The size declared in the header is checked
    (``MAX_PIXELS``, ``MIN_INPUT_SIDE``) before any pixel is decoded. ``data``: the file's bytes, read before
    (``read_bytes``), opened in place of the file (``path`` then only names it).

    Raises:
        ImageError: naming the file and what is wrong with it.
    """
    name = os.fspath(path)
    source = open_regular(name, ImageError) if data is None else io.BytesIO(data)
    with source as handle, _quiet_pillow() as caught:
        with _open_header(handle, name, caught) as image:
            try:
                if image.format == "PNG":  # Pillow checks PNG CRCs only in verify(), not while decoding
                    _verify_png(handle)
                image.load()
                # Departure from the tutorial: phone photos carry an EXIF orientation; show them upright.
                return ImageOps.exif_transpose(image)
            except Exception as exc:  # OSError (truncated), SyntaxError (bad CRC), ValueError, ...
                reason = first_line(exc, 200)
                raise ImageError(f"{shown(name)}: not a readable image: corrupt or truncated "
                                 f"{image.format} data ({reason})") from None


def header_size(source: ImageSource, upright: bool = False) -> tuple[int, int]:
    """The (width, height) of an image source as declared, without decoding a pixel.

    A file's header is read and checked as ``open_image`` checks it (format, ``MAX_PIXELS``,
    ``MIN_INPUT_SIDE``); a Pillow image or a ``(1, 3, H, W)`` tensor gives its own size. An EXIF
    orientation is applied only with ``upright`` (the shape ``open_image`` gives, which a mask over the
    picture must have): a quarter turn only swaps the sides, which changes neither the working area nor
    the long side (what the memory estimate reads, ``run.fits.check_fits``).

    Raises:
        ImageError: the file cannot be read, or declares too many or too few pixels.
        TypeError: ``source`` is none of these.
    """
    if is_tensor(source):
        if source.dim() not in (3, 4):
            raise ImageError(f"expected an image tensor of shape (1, 3, H, W), got {tuple(source.shape)}")
        return int(source.shape[-1]), int(source.shape[-2])
    if isinstance(source, Image.Image):
        return source.size
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"expected a path, a PIL image or a tensor, got {type(source).__name__}")
    name = os.fspath(source)
    with open_regular(name, ImageError) as handle, _quiet_pillow() as caught:
        with _open_header(handle, name, caught) as image:
            turned = upright and image.getexif().get(ExifTags.Base.Orientation) in (5, 6, 7, 8)
            return (image.height, image.width) if turned else image.size


@contextlib.contextmanager
def _open_header(handle: BinaryIO, name: str, caught: list[warnings.WarningMessage]) -> Iterator[Image.Image]:
    """The image in ``handle`` opened lazily (its header read and checked, ``_check_header``; no pixel decoded)."""
    head = handle.read(512)
    handle.seek(0)
    try:
        image = Image.open(handle, formats=INPUT_FORMATS)
    except Image.DecompressionBombError as exc:  # over twice Pillow's own limit: refused in open()
        pixels = re.search(r"\((\d+) pixels\)", str(exc))
        declared = f"{int(pixels.group(1)):,} pixels" if pixels else "too many pixels"
        raise ImageError(f"{shown(name)}: declares {declared}, over the cap of {MAX_PIXELS:,} "
                         f"(a decompression bomb?)") from None
    except Exception:  # UnidentifiedImageError, or a plugin choking on a broken header
        raise ImageError(f"{shown(name)}: not a readable image: {_what_it_is(head)}") from None
    with image:
        _check_header(image, name, bomb=any(issubclass(w.category, Image.DecompressionBombWarning)
                                            for w in caught))
        yield image


def _verify_png(handle: BinaryIO) -> None:
    """Check every chunk's CRC of the PNG file open in ``handle`` (raises on a bad one)."""
    position = handle.tell()
    handle.seek(0)
    with Image.open(handle, formats=["PNG"]) as check:
        check.verify()
    handle.seek(position)


@contextlib.contextmanager
def _quiet_pillow() -> Iterator[list[warnings.WarningMessage]]:
    """Record Pillow's warnings instead of printing them (the caller decides what is an error)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def _check_header(image: Image.Image, name: str, bomb: bool) -> None:
    """Refuse, before decoding, a format off the allow-list, a pixel bomb or a too small image."""
    fmt = _FORMAT_ALIASES.get(image.format or "", image.format)
    if fmt not in INPUT_FORMATS:
        raise ImageError(f"{shown(name)}: not a readable image: {image.format} is not supported "
                         f"(supported: {INPUT_FORMATS_TEXT})")
    width, height = image.size
    if bomb or width * height > MAX_PIXELS:
        raise ImageError(f"{shown(name)}: declares {width}x{height} = {width * height:,} pixels, over the cap "
                         f"of {MAX_PIXELS:,} (a decompression bomb?); downscale it first")
    check_min_size(width, height, shown(name))


def check_min_size(width: int, height: int, label: str) -> None:
    """Refuse an input whose shorter side is below ``MIN_INPUT_SIDE`` (a 1x1 image, a 2000x3 line).

    Raises:
        ImageError: naming ``label`` and the size.
    """
    if min(width, height) < MIN_INPUT_SIDE:
        raise ImageError(f"{label}: is {width}x{height} px; the smallest input accepted is "
                         f"{MIN_INPUT_SIDE} px on its shorter side (smaller images are upscaled)")


# Signatures of files users mistake for images we read, to say what they got instead.
_NOT_SUPPORTED = (
    (b"%PDF", "a PDF document"),
    (b"8BPS", "a Photoshop (PSD) file"),
    (b"\x00\x00\x00\x0cjP  ", "a JPEG 2000 image"),
    (b"\xff\x4f\xff\x51", "a JPEG 2000 codestream"),
    (b"\x00\x00\x01\x00", "an ICO icon"),
    (b"PK\x03\x04", "a ZIP archive"),
)
_BROKEN = (
    (b"\x89PNG", "PNG"), (b"\xff\xd8\xff", "JPEG"), (b"GIF8", "GIF"), (b"BM", "BMP"),
    (b"II*\x00", "TIFF"), (b"MM\x00*", "TIFF"),
)


def _what_it_is(head: bytes) -> str:
    """A short description of a file Pillow could not open within the allow-list."""
    if head[4:8] == b"ftyp":
        brand = head[8:12]
        kind = ("an HEIC image" if brand in (b"heic", b"heix", b"mif1", b"msf1", b"hevc", b"heim", b"heis")
                else "an AVIF image" if brand in (b"avif", b"avis") else "a video or HEIF file")
        return f"it is {kind}, which is not supported (supported: {INPUT_FORMATS_TEXT}); convert it to JPEG or PNG"
    for magic, kind in _NOT_SUPPORTED:
        if head.startswith(magic):
            return f"it is {kind}, which is not supported (supported: {INPUT_FORMATS_TEXT})"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "corrupt WEBP header"
    for magic, kind in _BROKEN:
        if head.startswith(magic):
            return f"corrupt {kind} header"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith((b"<svg", b"<?xml")) and b"<svg" in text:
        return f"it is an SVG drawing, which is not supported (supported: {INPUT_FORMATS_TEXT}); export it as PNG"
    if text.startswith((b"<!doctype html", b"<html", b"<head", b"<!--")) or b"<html" in text:
        return "it is an HTML page (a failed download?), not an image"
    try:
        decoded = head.decode("utf-8")
    except UnicodeDecodeError:
        decoded = ""
    if decoded and all(c.isprintable() or c in "\t\r\n" for c in decoded):
        return "it is text, not an image"
    return f"unknown format (supported: {INPUT_FORMATS_TEXT})"


def load_image(source: ImageSource, size: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Load an image as a (1, 3, H, W) float32 tensor in [0, 1], long side ``size``.

    Args:
        source: a file path, a Pillow image, or a (1, 3, H, W) / (3, H, W) tensor in [0, 1].
        size: the long side of the result in px (aspect kept; short side >= ``MIN_SIDE``).
        device: where the tensor goes.

    Raises:
        ImageError: if the source cannot be read or has the wrong shape.
        TypeError: if the source is of another type.
    """
    return _load(source, size, device, alpha=False)[0]


def load_style(source: ImageSource, size: int, device: torch.device | str = "cpu"
               ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A style image as ``load_image`` loads it (transparency over white), and its alpha as a weight.

    The alpha is ``(1, 1, H, W)`` float32 in [0, 1] at the image's working size (resized as a mask is: bilinear,
    antialiased when shrinking, so no transparent pixel gains weight by ringing), or None where the image is
    fully opaque or has no alpha (tensors carry none): then the style counts every pixel, as it always did.

    Raises:
        ImageError: as ``load_image``; and a style that is transparent everywhere (nothing to take a style from).
    """
    return _load(source, size, device, alpha=True)


def _load(source: ImageSource, size: int, device: torch.device | str, alpha: bool
          ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``load_image``'s tensor, and with ``alpha`` the source's alpha as ``load_style`` gives it."""
    import torch
    import torch.nn.functional as F

    if isinstance(source, torch.Tensor):
        tensor = _check_tensor(source)
        height, width = tensor.shape[-2:]
        check_min_size(width, height, "image tensor")
        new_width, new_height = working_size(width, height, size)
        if (new_width, new_height) != (width, height):
            tensor = F.interpolate(tensor, size=(new_height, new_width), mode="bilinear", antialias=True,
                                   align_corners=False).clamp(0, 1)
        return tensor.to(device), None
    image = source_image(source)
    label = shown(source) if isinstance(source, (str, os.PathLike)) else "image"
    check_min_size(image.width, image.height, label)
    transparency = alpha_channel(image) if alpha else None
    with _quiet_pillow():  # e.g. "Palette images with Transparency ..." must not reach stderr
        image = pil_to_rgb(image)
        target = working_size(image.width, image.height, size)
        if target != image.size:  # big photos shrink here, before they become float tensors
            image = image.resize(target, Image.Resampling.LANCZOS)
    weights = None if transparency is None else _alpha_weights(transparency, target, label)
    return pil_to_tensor(image).to(device), None if weights is None else weights.to(device)


def _alpha_weights(alpha: Image.Image, target: tuple[int, int], label: str) -> torch.Tensor | None:
    """An ``L`` alpha as ``(1, 1, h, w)`` weights in [0, 1] at ``target`` (width, height); None where all opaque.

    Raises:
        ImageError: every pixel transparent.
    """
    import torch
    import torch.nn.functional as F

    low, high = alpha.getextrema()
    if low == 255:
        return None  # opaque: no weights, so the style's numbers are those of an RGB file exactly
    if high == 0:
        raise ImageError(f"{label}: is transparent everywhere (alpha 0): a style needs visible pixels, "
                         "whose statistics it gives; transparent ones are left out")
    data = torch.frombuffer(bytearray(alpha.tobytes()), dtype=torch.uint8)
    weights = data.reshape(1, 1, alpha.height, alpha.width).float().div(255)
    if (alpha.width, alpha.height) == target:
        return weights
    # as masks.resize_mask: a kernel without negative lobes (LANCZOS's would give transparent pixels weight)
    return F.interpolate(weights, size=(target[1], target[0]), mode="bilinear", antialias=True,
                         align_corners=False).clamp(0, 1)


def source_image(source: ImageSource) -> Image.Image:
    """A path opened fully (``open_image``), or a Pillow image as it is.

    Raises:
        ImageError: the file cannot be read. TypeError: ``source`` is neither (a tensor included).
    """
    if isinstance(source, (str, os.PathLike)):
        return open_image(source)
    if isinstance(source, Image.Image):
        return source
    raise TypeError(f"expected a path, a PIL image or a tensor, got {type(source).__name__}")


def _check_tensor(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.dim() == 3:
        tensor = tensor.unsqueeze(0)
    if tensor.dim() != 4 or tensor.shape[0] != 1 or tensor.shape[1] != 3:
        raise ImageError(f"expected an image tensor of shape (1, 3, H, W), got {tuple(tensor.shape)}")
    if not tensor.is_floating_point():
        raise ImageError(f"expected a float image tensor in [0, 1], got dtype {tensor.dtype}")
    return tensor.detach().float().clamp(0, 1)


def save_image(image: Image.Image | torch.Tensor, path: str | os.PathLike, *,
               metadata: Mapping[str, Any] | None = None) -> None:
    """Save atomically: write a temp file in the output's folder, fsync, then rename over ``path``.

    The format comes from the extension. On any failure the temp file is removed and an
    existing file at ``path`` is left as it was.

    Args:
        metadata: a provenance record (``provenance.make_record``) to embed; BMP cannot hold
            one and is written without it (``metadata.RECORD_FORMATS`` lists those that can).

    Raises:
        OutputError: if the path cannot be written (or the record is too long for a JPEG).
    """
    if is_tensor(image):
        image = tensor_to_pil(image)
    fmt = check_output(path)
    options = save_options(metadata, fmt) if metadata is not None else {}
    if image.mode not in (("RGB", "L") if fmt == "JPEG" else ("RGB", "RGBA", "L", "P", "1")):
        with _quiet_pillow():
            image = pil_to_rgb(image)  # RGBA over white, 16-bit scaled: what JPEG and others can hold
    with atomic_output(path, OutputError) as handle:
        image.save(handle, format=fmt, **options)
