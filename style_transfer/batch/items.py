"""Batch items: contents from files, folders and globs, or a manifest (CSV, JSONL); their output names.

An item is one output: a content image, its style image(s) (several are blended, as with
``stylize CONTENT STYLE1 STYLE2``), the settings and where the result goes. Names follow
``{content}__{style}.{ext}``; inputs whose names would collide get their parent folders' names
in front (``a-cat``, ``b-cat``), then their extension (``cat-jpg``), so a name depends only on
the set of inputs, never on the order they were given in.

Imports the torch-free config only (``stylize-batch --help`` answers at once); manifest values are parsed by
``config.text``, the parser the command and the web app use.
"""

from __future__ import annotations

import csv
import glob
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..config.choices import INITS
from ..config.style import StyleConfig
from ..config.text import SETTINGS, config_from_text, setting_of
from ..io.files import file_identity, shown

# Files a folder or a glob contributes (by extension; the loader checks what they really are).
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp", ".tif", ".tiff", ".bmp", ".gif")
# Output formats a batch writes: each holds the provenance record the resume check reads.
OUTPUT_EXTENSIONS = ("png", "jpg", "webp", "tiff")
# A manifest's columns: the item's files, then every setting by its option name (style-weight, style-mask, ...).
ITEM_COLUMNS = ("content", "style", "styles", "output")
SETTINGS_FIELDS = tuple(s.name for s in SETTINGS)


@dataclass(frozen=True)
class Item:
    """One output of a batch."""

    content: str  # the content image's path
    styles: tuple[str, ...]  # the style image paths (several: blended by config.style_blend)
    output: str  # where the result goes
    config: StyleConfig  # every setting of its run
    origin: str = ""  # where it was asked for, for messages: "" (the command line) or "list.csv:3"

    @property
    def name(self) -> str:
        return os.path.basename(self.output)


def expand_contents(arguments: Sequence[str]) -> list[str]:
    """Files, folders (their images, not recursive) and globs (``**`` recursive) -> image paths.

    The result is sorted within each argument and keeps the arguments' order; a file named twice
    counts once. Hidden files (``.name``) in folders and globs are left out.

    Raises:
        ValueError: an argument that is no file or folder and matches nothing (one line naming it).
    """
    found: list[str] = []
    for argument in arguments:
        if os.path.isdir(argument):
            names = sorted(n for n in os.listdir(argument) if _is_image_name(n))
            paths = [os.path.join(argument, n) for n in names if os.path.isfile(os.path.join(argument, n))]
            if not paths:
                raise ValueError(f"{shown(argument)}: folder holds no images ({', '.join(IMAGE_EXTENSIONS)})")
        elif os.path.lexists(argument):
            paths = [argument]  # a file given by name is taken whatever its extension (the loader judges it)
        elif glob.has_magic(argument):
            paths = sorted(p for p in glob.glob(argument, recursive=True)
                           if os.path.isfile(p) and _is_image_name(os.path.basename(p)))
            if not paths:
                raise ValueError(f"{shown(argument)}: no image matches this pattern")
        else:
            raise ValueError(f"{shown(argument)}: no such file or folder")
        found.extend(paths)
    return _unique_paths(found)


def _is_image_name(name: str) -> bool:
    return not name.startswith(".") and name.lower().endswith(IMAGE_EXTENSIONS)


def _unique_paths(paths: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for path in paths:
        key = os.path.realpath(path)
        if key not in seen:
            seen.add(key)
            out.append(path)
    return out


def unique_names(paths: Sequence[str]) -> dict[str, str]:
    """Each path's short name for output files: its stem, made unique among ``paths``.

    Stems shared by several files get their parent folders' names in front, as many as it takes
    (``a/cat.jpg``, ``b/cat.jpg`` -> ``a-cat``, ``b-cat``); files in one folder that differ only by
    extension get it appended (``cat-jpg``, ``cat-png``). The rule looks only at the set of paths.
    """
    absolute = {p: os.path.abspath(p) for p in paths}
    by_stem: dict[str, list[str]] = {}
    for path in paths:
        by_stem.setdefault(_stem(path), []).append(path)
    names: dict[str, str] = {}
    for stem, group in by_stem.items():
        if len(group) == 1:
            names[group[0]] = stem
            continue
        parts = {p: [f for f in absolute[p].split(os.sep)[:-1] if f] for p in group}
        deepest = max(len(f) for f in parts.values())
        for depth in range(1, deepest + 1):  # the fewest folders that tell files of different folders apart
            trial = {p: "-".join(parts[p][-depth:] + [stem]) for p in group}
            if all(trial[p] != trial[q] for p in group for q in group if parts[p] != parts[q]):
                break
        trial = {p: (n if list(trial.values()).count(n) == 1
                     else f"{n}-{os.path.splitext(p)[1].lstrip('.').lower()}") for p, n in trial.items()}
        names.update(trial)
    return names


def _stem(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def output_name(content: str, styles: Sequence[str], names: Mapping[str, str], ext: str) -> str:
    """``{content}__{style}.{ext}``; several blended styles are joined by ``+``."""
    return f"{names[content]}__{'+'.join(names[s] for s in styles)}.{ext}"


def cross_items(contents: Sequence[str], styles: Sequence[str], out_dir: str, config: StyleConfig,
                ext: str = "png") -> list[Item]:
    """Every content in every style: ``len(contents) * len(styles)`` items, contents first."""
    names = unique_names(list(dict.fromkeys([*contents, *styles])))
    return [Item(c, (s,), os.path.join(out_dir, output_name(c, (s,), names, ext)), config)
            for c in contents for s in styles]


def default_options() -> dict[str, Any]:
    """Every setting's default by field name (``read_manifest``'s ``options`` when the command gives none)."""
    return {s.name: s.default for s in SETTINGS}


def read_manifest(path: str, *, styles: Sequence[str], out_dir: str, options: Mapping[str, Any] | None = None,
                  ext: str = "png") -> list[Item]:
    """The items of a manifest: CSV with a header row, or JSON Lines (``.jsonl``, one object a line).

    Columns/keys: ``content`` (required); ``style`` (one file, or several separated by ``;`` in CSV or
    a list in JSON: blended into one output); ``output`` (a file name, relative to ``out_dir``);
    ``style-mask`` (one mask per style, in the styles' order, separated by ``;`` in CSV or a list in JSON) and
    ``content-mask`` (docs/usage.md); and any setting of ``stylize`` by its option name (``size``, ``style-weight``
    or ``style_weight``), which overrides ``options`` for that row. Relative input paths (contents, styles, masks, a
    start image) are relative to the manifest's folder. A row without a style gives one item per file of ``styles``.

    Args:
        options: the settings by field name, typed or as text (``config.text.parse_settings``); defaults if None.

    Raises:
        ValueError: an unreadable manifest, an unknown column, a bad value or a row without a content
            or style: one line naming the manifest's line.
    """
    base = dict(options) if options is not None else default_options()
    rows = _manifest_rows(path)
    folder = os.path.dirname(os.path.abspath(path))
    planned: list[tuple[str, str, tuple[str, ...], str | None, StyleConfig]] = []
    for where, row in rows:
        values = dict(base)
        content, output = None, None
        row_styles: tuple[str, ...] = ()
        for key, value in row.items():
            field = str(key).strip().replace("-", "_").lower()
            if value is None or value == "" or value == []:
                continue
            if field == "content":
                content = _relative(str(value), folder)
            elif field in ("style", "styles"):
                listed = value if isinstance(value, list) else str(value).split(";")
                row_styles = tuple(_relative(str(s).strip(), folder) for s in listed if str(s).strip())
            elif field == "output":
                output = str(value)
            elif (declared := setting_of(field)) is not None:
                values[declared.name] = _relative_inputs(declared.kind, value, folder)
            else:
                raise ValueError(f"{where}: unknown column {key!r} (expected {', '.join(ITEM_COLUMNS[:2])}, "
                                 f"output or a setting such as size, steps, style-weight)")
        if content is None:
            raise ValueError(f"{where}: no content")
        if not row_styles and not styles:
            raise ValueError(f"{where}: no style (give a style column or --style)")
        try:
            config = config_from_text(values)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        style_sets: list[tuple[str, ...]] = [row_styles] if row_styles else [(s,) for s in styles]
        for style_set in style_sets:
            planned.append((where, content, style_set, output if row_styles else None, config))
    names = unique_names(list(dict.fromkeys(p for _, c, s, _, _ in planned for p in (c, *s))))
    items = []
    for where, content, style_set, output, config in planned:
        name = output if output is not None else output_name(content, style_set, names, ext)
        items.append(Item(content, style_set, os.path.join(out_dir, name), config, where))
    return items


def _manifest_rows(path: str) -> list[tuple[str, Mapping[str, Any]]]:
    name = shown(path)
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            if path.lower().endswith((".jsonl", ".ndjson")):
                rows: list[tuple[str, Mapping[str, Any]]] = []
                for number, line in enumerate(handle, 1):
                    if not line.strip():
                        continue
                    try:
                        row = json.loads(line)
                    except ValueError as exc:
                        raise ValueError(f"{name}:{number}: not JSON ({exc})") from None
                    if not isinstance(row, dict):
                        raise ValueError(f"{name}:{number}: expected a JSON object")
                    rows.append((f"{name}:{number}", row))
                return rows
            reader = csv.DictReader(handle)
            if not reader.fieldnames or "content" not in [f.strip().lower() for f in reader.fieldnames]:
                raise ValueError(f"{name}: a CSV manifest needs a header row with a 'content' column")
            out: list[tuple[str, Mapping[str, Any]]] = []
            for row in reader:
                if None in row:
                    raise ValueError(f"{name}:{reader.line_num}: more fields than the header has")
                out.append((f"{name}:{reader.line_num}", row))
            return out
    except OSError as exc:
        raise ValueError(f"{name}: cannot read the manifest ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ValueError(f"{name}: the manifest is not UTF-8 text") from None


def _relative(path: str, folder: str) -> str:
    path = os.path.expanduser(path)
    return path if os.path.isabs(path) else os.path.join(folder, path)


def _relative_inputs(kind: str, value: Any, folder: str) -> Any:
    """A file setting's path(s) relative to the manifest's folder (one per style, ';'-separated, in CSV)."""
    if kind == "file":
        return _relative(str(value).strip(), folder)
    if kind == "files":
        listed = value if isinstance(value, list) else str(value).split(";")
        return tuple(_relative(str(p).strip(), folder) for p in listed if str(p).strip())
    return value


def check_outputs(items: Sequence[Item]) -> None:
    """Raise ``ValueError`` when two items would write the same file, an output has no record format, or an
    output is one of the batch's inputs by any name (``files.file_identity``: path, symlink, hard link)."""
    inputs = _input_files(items)
    seen: dict[str, Item] = {}
    for item in items:
        identity = file_identity(item.output)
        if identity is not None and identity in inputs:
            raise ValueError(f"{shown(item.output)}: is the same file as {inputs[identity]}, an input of the batch "
                             f"({_describe(item)} would destroy it); give the output another name or folder")
        key = os.path.normcase(os.path.abspath(item.output))
        if key in seen:
            raise ValueError(f"two items write {shown(item.output)} ({_describe(seen[key])} and {_describe(item)})")
        seen[key] = item
        ext = os.path.splitext(item.output)[1].lstrip(".").lower()
        if ext not in OUTPUT_EXTENSIONS + ("jpeg", "tif"):
            raise ValueError(f"{shown(item.output)}: a batch writes {', '.join(OUTPUT_EXTENSIONS)} "
                             f"(formats that hold the record resuming needs)")


def _input_files(items: Sequence[Item]) -> dict[tuple[int, int], str]:
    """Every existing input file of the items (contents, styles, start images) by (device, inode): its name."""
    found: dict[tuple[int, int], str] = {}
    for item in items:
        init = () if item.config.init in INITS else (item.config.init,)
        masks = [m for m in (*item.config.style_masks, item.config.content_mask) if isinstance(m, (str, os.PathLike))]
        for path in (item.content, *item.styles, *init, *masks):
            identity = file_identity(path)
            if identity is not None:
                found.setdefault(identity, shown(path))
    return found


def _describe(item: Item) -> str:
    where = f" at {item.origin}" if item.origin else ""
    return f"{shown(os.path.basename(item.content))} in {'+'.join(shown(os.path.basename(s)) for s in item.styles)}{where}"


__all__ = ["Item", "IMAGE_EXTENSIONS", "OUTPUT_EXTENSIONS", "SETTINGS_FIELDS", "check_outputs", "cross_items",
           "default_options", "expand_contents", "output_name", "read_manifest", "unique_names"]
