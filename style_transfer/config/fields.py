"""Each setting declared once: a ``StyleConfig`` field carries how it is given and shown (``Setting``).

From these the command's options and ``--help`` sections (``cli.options``), docs/options.md, the web form's
choices and limits (``/api/options``) and the batch manifest's columns are made, and ``config.text`` turns
text (a form field, a manifest cell) into the field's value. Torch- and click-free.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

# How a setting's value is written as text (``config.text.parse_value``):
KINDS = (
    "int", "float", "text", "choice",  # one value
    "flag",  # true/false (a command-line flag)
    "names", "numbers", "integers",  # comma-separated: layer names, floats, integers
    "file", "files",  # a path; paths (the option given once per file; ';' or a JSON list in a manifest)
)
SECTIONS = ("Basics", "Style", "Output and run control", "Speed", "Advanced")  # --help's headings, in order


@dataclass(frozen=True)
class Setting:
    """How one field of ``StyleConfig`` is given and shown.

    Attributes:
        name: the field's name (filled in by ``settings``).
        default: the field's default (filled in by ``settings``).
        kind: one of ``KINDS``.
        section: its heading in ``--help`` (``SECTIONS``).
        short: one line for ``--help``.
        help: the whole text (``--help`` in full, docs/options.md).
        choices: the values a ``choice`` takes.
        minimum, maximum: the range of an ``int`` or ``float`` (None: open), checked by ``StyleConfig`` and
            given to the web form; ``exclusive``: the bounds themselves are out; ``unit`` and ``noun``: for
            messages ("an integer >= 16 (px)", "a decay between 0 and 1").
        option: its command-line names, the first the main one (default: ``--`` and the name with dashes).
        metavar: the placeholder in usage lines (default: click's).
        shown_default: what ``--help`` shows as the default where the field's own would mislead ("auto").
        replayed: ``--replay`` takes it from the record (weights, device and threads may be given anew).
    """

    kind: str
    section: str
    short: str
    help: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    exclusive: bool = False
    unit: str = ""
    noun: str = ""
    option: tuple[str, ...] = ()
    metavar: str | None = None
    shown_default: str | None = None
    replayed: bool = True
    name: str = ""
    default: Any = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"setting kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.section not in SECTIONS:
            raise ValueError(f"setting section must be one of {', '.join(SECTIONS)}, got {self.section!r}")
        if (self.kind == "choice") != bool(self.choices):
            raise ValueError("a choice setting needs its choices, and only a choice has them")

    @property
    def options(self) -> tuple[str, ...]:
        """Its command-line names: ``--history-size``, ``--history``."""
        return self.option or (f"--{self.name.replace('_', '-')}",)

    @property
    def column(self) -> str:
        """Its name in a batch manifest and a form: the main option without dashes (``style-weight``)."""
        return self.options[0].lstrip("-")

    @property
    def is_input(self) -> bool:
        """A file given like CONTENT and STYLE: given again to --replay and --resume, checked by hash."""
        return self.kind in ("file", "files")


def setting(default: Any, kind: str, section: str, *, short: str, help: str, **details: Any) -> Any:
    """A ``StyleConfig`` field with its ``Setting`` (``dataclasses.field`` with metadata)."""
    return dataclasses.field(default=default,
                             metadata={"setting": Setting(kind, section, short, help, **details)})


def settings(cls: type) -> tuple[Setting, ...]:
    """The ``Setting`` of each field of the dataclass ``cls`` that has one, in declaration order, named."""
    found = []
    for field in dataclasses.fields(cls):
        declared = field.metadata.get("setting")
        if declared is not None:
            found.append(dataclasses.replace(declared, name=field.name, default=field.default))
    return tuple(found)
