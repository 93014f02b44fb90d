"""The ``stylize-info`` command: print the provenance record embedded in images.

Imports click, Pillow and the standard library only (never torch), so it answers at once.
"""

from __future__ import annotations

import json
from typing import Any

import click

from .errors import StyleTransferError
from .files import shown
from .options import OneLineCommand
from .provenance import read_record, record_field


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
@click.option("--json", "compact", is_flag=True, help="Print compact JSON, one line per file.")
def main(files: tuple[str, ...], field: str | None, compact: bool) -> None:
    """Print how each image FILE was made: the record stylize embeds in its outputs.

    The record holds the settings, the seed, the SHA-256 of each input image (names without
    folders), the weights, the versions, the device, and the run's evaluations, losses and time.
    With several files, each is named before its record. Exit 1 when a file is missing, is not
    an image, or holds no record (the others are still printed).
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


def _fail(message: str) -> None:
    click.echo(f"Error: {message}", err=True)


if __name__ == "__main__":
    main(prog_name="stylize-info")
