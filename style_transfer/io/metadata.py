"""The record inside image files: embedded on save (PNG iTXt, XMP in JPEG/WebP/TIFF, GIF comment) and read back."""

from __future__ import annotations

import json
import math
import os
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any
from xml.sax.saxutils import escape

from PIL import Image, PngImagePlugin

from ..errors import ImageError, OutputError, first_line
from .files import open_regular, shown
# The PNG text keyword, and the first key of every record.
RECORD_KEY = "style_transfer"
# The XML namespace of our XMP element ``st:record`` (JPEG, WebP, TIFF).
XMP_NAMESPACE = "https://github.com/style-transfer/ns/1.0/"
# The output formats that can hold a record (by Pillow's name); BMP cannot.
RECORD_FORMATS = ("PNG", "JPEG", "WEBP", "TIFF", "GIF")

# JPEG: one APP1 segment holds at most 65533 bytes, 29 of them the XMP signature.
_JPEG_XMP_LIMIT = 65533 - 29
_READ_FORMATS = ("PNG", "JPEG", "WEBP", "TIFF", "GIF", "BMP")


def plain_number(value: Any) -> Any:
    if hasattr(value, "item"):  # a 0-d tensor or a NumPy scalar
        value = value.item()
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def json_float(value: float) -> float | str:
    """A float as JSON allows it: NaN and the infinities as the names ``"NaN"``, ``"Infinity"``, ``"-Infinity"``
    (what Python's ``json`` reads back as floats)."""
    value = float(value)
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON values: tuples as lists, paths as strings, non-finite floats as names."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return json_float(value)
    if isinstance(value, os.PathLike):
        return os.fsdecode(os.fspath(value))
    if hasattr(value, "item"):
        return jsonable(value.item())
    return str(value)


def record_text(record: Mapping[str, Any]) -> str:
    """The record as compact, ASCII-only JSON (any other character as a ``\\u`` escape)."""
    return json.dumps(jsonable(record), ensure_ascii=True, separators=(",", ":"), allow_nan=False)


def xmp_packet(record: Mapping[str, Any]) -> bytes:
    """A small XMP packet (UTF-8) holding the record's JSON in the element ``st:record``."""
    return (
        '<?xpacket begin="\ufeff" id="W5M0MpCehiHzreSzNTczkc9d"?>\n'
        '<x:xmpmeta xmlns:x="adobe:ns:meta/">\n'
        ' <rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">\n'
        f'  <rdf:Description rdf:about="" xmlns:st="{XMP_NAMESPACE}">\n'
        f'   <st:record>{escape(record_text(record))}</st:record>\n'
        '  </rdf:Description>\n'
        ' </rdf:RDF>\n'
        '</x:xmpmeta>\n'
        '<?xpacket end="w"?>'
    ).encode("utf-8")


def save_options(record: Mapping[str, Any], fmt: str) -> dict[str, Any]:
    """Keyword arguments for Pillow's ``Image.save`` that embed ``record`` in a ``fmt`` file.

    They also work with ``save_all=True`` (animated WebP and GIF). BMP cannot hold a record:
    its options are ``{}`` (``fmt in RECORD_FORMATS`` tells beforehand).

    Args:
        record: from ``make_record`` (any mapping of JSON-able values).
        fmt: Pillow's format name: PNG, JPEG, WEBP, TIFF, GIF or BMP (any case).

    Raises:
        OutputError: the record is too long for a JPEG's XMP segment (64 KB).
        ValueError: another format.
    """
    fmt = fmt.upper()
    if fmt == "PNG":
        info = PngImagePlugin.PngInfo()
        info.add_itxt(RECORD_KEY, record_text(record))
        return {"pnginfo": info}
    if fmt in ("JPEG", "WEBP"):
        packet = xmp_packet(record)
        if fmt == "JPEG" and len(packet) > _JPEG_XMP_LIMIT:
            raise OutputError(f"the provenance record ({len(packet):,} bytes) is too long for a JPEG "
                              f"(at most {_JPEG_XMP_LIMIT:,}); write a PNG or turn the record off")
        return {"xmp": packet}
    if fmt == "TIFF":
        return {"tiffinfo": {700: xmp_packet(record)}}  # 700: the TIFF tag of XMP
    if fmt == "GIF":
        return {"comment": record_text(record)}
    if fmt == "BMP":
        return {}
    raise ValueError(f"no way to embed a record in format {fmt!r} (known: {', '.join(_READ_FORMATS)})")


def read_record(path: str | os.PathLike) -> dict[str, Any] | None:
    """The record embedded in an image file, or None when it holds none.

    Only the file's metadata is read, no pixels. Records of any ``record_version`` are returned
    as they are; the caller decides what it can use.

    Raises:
        ImageError: one line naming the file: missing, not a regular file, not an image in one
            of PNG, JPEG, WebP, TIFF, GIF, BMP, or a damaged record (not a JSON object).
    """
    name = os.fspath(path)
    with open_regular(name, ImageError) as handle, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pillow's warnings (a big image, odd metadata) must not reach stderr
        try:
            with Image.open(handle, formats=_READ_FORMATS) as image:
                text = _embedded_text(image)
        except Image.UnidentifiedImageError:
            raise ImageError(f"{shown(name)}: not an image (expected PNG, JPEG, WebP, TIFF, GIF or BMP)") from None
        except _DamagedRecord as exc:
            raise ImageError(f"{shown(name)}: damaged style_transfer record ({exc})") from None
        except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
            reason = first_line(exc)
            raise ImageError(f"{shown(name)}: cannot be read as an image ({shown(reason)})") from None
    if text is None:
        return None
    try:
        record = json.loads(text)
    except ValueError as exc:
        raise ImageError(f"{shown(name)}: damaged style_transfer record (not JSON: {exc})") from None
    if not isinstance(record, dict) or not isinstance(record.get("record_version"), int):
        raise ImageError(f"{shown(name)}: damaged style_transfer record (not an object with a record_version)")
    return record


class _DamagedRecord(ValueError):
    """A record found but not readable (the caller adds the file name)."""


def _embedded_text(image: Image.Image) -> str | None:
    """The record's JSON text as found in an opened image, or None."""
    if image.format == "PNG":
        # Only a chunk before the pixels (where Pillow writes it) is seen: one after would cost a decode.
        text = image.info.get(RECORD_KEY)
        return None if text is None else str(text)
    if image.format == "GIF":
        comment = image.info.get("comment")
        if not comment:
            return None
        text = comment.decode("utf-8", "replace") if isinstance(comment, bytes) else str(comment)
        # Ours starts with the key of our version; any other comment is someone else's.
        return text if text.lstrip().startswith('{"' + RECORD_KEY + '"') else None
    xmp = image.info.get("xmp")
    if isinstance(xmp, tuple) and len(xmp) == 1:
        xmp = xmp[0]
    if isinstance(xmp, str):
        xmp = xmp.encode("utf-8")
    return _record_from_xmp(xmp) if isinstance(xmp, bytes) and xmp else None


def _record_from_xmp(xmp: bytes) -> str | None:
    """Our ``st:record`` from an XMP packet (element or attribute), or None when there is none.

    Parsed with the standard library (expat >= 2.4 refuses entity expansion attacks), so no
    extra dependency is needed (Pillow's ``getxmp`` needs defusedxml).

    Raises:
        _DamagedRecord: the packet names our namespace but is not well-formed XML.
    """
    if XMP_NAMESPACE.encode("ascii") not in xmp:
        return None
    try:
        root = ET.fromstring(xmp.strip(b"\x00 \t\r\n"))
    except ET.ParseError as exc:
        raise _DamagedRecord(f"XMP is not well-formed: {exc}") from None
    tag = f"{{{XMP_NAMESPACE}}}record"
    for element in root.iter():
        if element.tag == tag:
            return element.text or ""
        if tag in element.attrib:
            return element.attrib[tag]
    return None


def record_field(record: Mapping[str, Any], dotted: str) -> Any:
    """One value of a record by its dotted name: ``"settings.size"``, ``"inputs.styles.0.name"``.

    Raises:
        KeyError: with the part of the name that is not there.
    """
    value: Any = record
    done: list[str] = []
    for part in dotted.split("."):
        done.append(part)
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            raise KeyError(".".join(done))
    return value
