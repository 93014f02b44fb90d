"""Images in and out: load any image as an upright RGB tensor, save a tensor atomically."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Union

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, ImageOps

from .errors import ImageError, OutputError

ImageSource = Union[str, os.PathLike, Image.Image, torch.Tensor]

# The shortest side a working image may have: a few pooling layers must leave >= 1 px.
MIN_SIDE = 16


def output_format(path: str | os.PathLike) -> str:
    """Return Pillow's format name for an output path, from its extension.

    Raises:
        OutputError: if the extension is missing or not one Pillow can write.
    """
    ext = Path(path).suffix.lower()
    if not ext:
        raise OutputError(f"{os.fspath(path)}: output has no extension (use .jpg, .png, ...)")
    Image.init()
    fmt = Image.registered_extensions().get(ext)
    if fmt is None or fmt not in Image.SAVE:
        raise OutputError(f"{os.fspath(path)}: cannot write images with extension {ext!r}")
    return fmt


def check_output(path: str | os.PathLike) -> str:
    """Check, before any work, that an image can be written at ``path``; return its format.

    Raises:
        OutputError: no or unknown extension, a folder as output, a missing or unwritable folder.
    """
    name = os.fspath(path)
    if os.path.isdir(name):
        raise OutputError(f"{name}: is a directory; give an output file name such as out.jpg")
    fmt = output_format(name)
    folder = os.path.dirname(os.path.abspath(name))
    if not os.path.isdir(folder):
        what = "is not a folder" if os.path.exists(folder) else "does not exist"
        raise OutputError(f"{name}: output folder {folder} {what}")
    try:  # the honest test of writability (os.access says yes to root on a read-only mount)
        fd, probe = tempfile.mkstemp(prefix=".stylize-probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OutputError(f"{name}: output folder {folder} is not writable ({exc.strerror})") from None
    return fmt


def working_size(width: int, height: int, size: int) -> tuple[int, int]:
    """Return (width, height) with the long side equal to ``size``, aspect kept.

    The short side is rounded and floored at ``MIN_SIDE`` so the network's pooling
    always has something to pool (only extreme banners lose their exact aspect).
    """
    scale = size / max(width, height)
    return max(MIN_SIDE, round(width * scale)), max(MIN_SIDE, round(height * scale))


def pil_to_rgb(image: Image.Image) -> Image.Image:
    """Convert any Pillow image to 8-bit RGB, compositing transparency over white."""
    # Departure from the tutorial (which assumes RGB files): users feed grayscale, palette, RGBA...
    if image.mode == "P" and "transparency" in image.info:
        image = image.convert("RGBA")
    if image.mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    if image.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        return _high_depth_to_rgb(image)
    return image.convert("RGB")


def _high_depth_to_rgb(image: Image.Image) -> Image.Image:
    """16-bit, 32-bit integer and float grayscale to RGB, scaled (not clipped) to 8 bits."""
    data = torch.from_numpy(np.asarray(image).astype(np.float64))
    data = torch.nan_to_num(data, nan=0.0, posinf=0.0, neginf=0.0)
    if image.mode == "F":
        low, high = float(data.min()), float(data.max())
        data = (data - low) / (high - low) if high > low else torch.zeros_like(data)
    else:
        top = 65535.0 if image.mode.startswith("I;16") or float(data.max()) <= 65535 else 2.0**32 - 1
        data = data.clamp(0, top) / top
    gray = (data * 255).round().to(torch.uint8).reshape(image.height, image.width)
    return Image.fromarray(gray.numpy()).convert("RGB")


def pil_to_tensor(image: Image.Image) -> torch.Tensor:
    """An RGB Pillow image as a float32 tensor of shape (1, 3, H, W) in [0, 1]."""
    data = torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8)
    return data.reshape(image.height, image.width, 3).permute(2, 0, 1).unsqueeze(0).float().div(255).contiguous()


def tensor_to_pil(tensor: torch.Tensor) -> Image.Image:
    """A (1, 3, H, W) or (3, H, W) tensor in [0, 1] as an RGB Pillow image (values rounded)."""
    if tensor.dim() == 4:
        tensor = tensor[0]
    data = tensor.detach().float().clamp(0, 1).mul(255).round().to(torch.uint8).permute(1, 2, 0).cpu()
    return Image.frombytes("RGB", (data.shape[1], data.shape[0]), data.contiguous().numpy().tobytes())


def open_image(path: str | os.PathLike) -> Image.Image:
    """Open an image file fully (``load()`` inside, so a truncated file fails here), upright.

    Raises:
        ImageError: naming the file and what is wrong with it.
    """
    name = os.fspath(path)
    if not os.path.exists(name):
        raise ImageError(f"{name}: no such file")
    if os.path.isdir(name):
        raise ImageError(f"{name}: is a directory, not an image")
    try:
        with Image.open(name) as image:
            image.load()
            # Departure from the tutorial: phone photos carry an EXIF orientation; show them upright.
            return ImageOps.exif_transpose(image)
    except OSError as exc:  # UnidentifiedImageError is an OSError
        raise ImageError(f"{name}: not a readable image ({exc})") from None


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
    if isinstance(source, torch.Tensor):
        tensor = _check_tensor(source)
        height, width = tensor.shape[-2:]
        new_width, new_height = working_size(width, height, size)
        if (new_width, new_height) != (width, height):
            tensor = F.interpolate(tensor, size=(new_height, new_width), mode="bilinear", antialias=True,
                                   align_corners=False).clamp(0, 1)
        return tensor.to(device)
    if isinstance(source, (str, os.PathLike)):
        image = open_image(source)
    elif isinstance(source, Image.Image):
        image = source
    else:
        raise TypeError(f"expected a path, a PIL image or a tensor, got {type(source).__name__}")
    image = pil_to_rgb(image)
    target = working_size(image.width, image.height, size)
    if target != image.size:
        image = image.resize(target, Image.Resampling.LANCZOS)
    return pil_to_tensor(image).to(device)


def _check_tensor(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.dim() == 3:
        tensor = tensor.unsqueeze(0)
    if tensor.dim() != 4 or tensor.shape[0] != 1 or tensor.shape[1] != 3:
        raise ImageError(f"expected an image tensor of shape (1, 3, H, W), got {tuple(tensor.shape)}")
    if not tensor.is_floating_point():
        raise ImageError(f"expected a float image tensor in [0, 1], got dtype {tensor.dtype}")
    return tensor.detach().float().clamp(0, 1)


def save_image(image: Image.Image | torch.Tensor, path: str | os.PathLike) -> None:
    """Save atomically: write a temp file in the output's folder, fsync, then rename over ``path``.

    The format comes from the extension. On any failure the temp file is removed and an
    existing file at ``path`` is left as it was.

    Raises:
        OutputError: if the path cannot be written.
    """
    if isinstance(image, torch.Tensor):
        image = tensor_to_pil(image)
    fmt = check_output(path)
    name = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(name))
    if fmt == "JPEG" and image.mode not in ("RGB", "L"):
        image = image.convert("RGB")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".stylize-", suffix=Path(name).suffix, dir=folder)
    except OSError as exc:
        raise OutputError(f"{name}: cannot write to folder {folder} ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            image.save(handle, format=fmt)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, name)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise OutputError(f"{name}: cannot write ({exc.strerror or exc})") from None
        raise
