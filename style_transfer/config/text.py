"""The one parser of settings given as text: the command's options, the web form's fields, manifest cells.

Every front end hands its values here by field name (``style_weight``) or option name (``style-weight``,
``--history``); each is turned into its field's type by the field's ``Setting`` (``config.fields``), then
``StyleConfig`` checks the whole. Values already typed (click's, JSON's) pass through the same rules.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .fields import Setting, settings
from .style import StyleConfig

SETTINGS: tuple[Setting, ...] = settings(StyleConfig)
_BY_SPELLING = {**{s.name: s for s in SETTINGS}, **{o.lstrip("-").replace("-", "_"): s for s in SETTINGS
                                                   for o in s.options}}
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


# A setting as the library's messages name it: ``weights=FILE``, ``model=vgg19`` (the field's name, '=', a value
# up to a space, comma, semicolon or closing bracket).
_NAMED = re.compile(r"\b(" + "|".join(sorted((s.name for s in SETTINGS), key=len, reverse=True))
                    + r")=([^\s,;)]+)")


def as_options(message: str) -> str:
    """A library message with each setting it names (``weights=FILE``) written as the command-line flag
    (``--weights FILE``; a flag turned on, ``fast=True``, as ``--fast``): the library speaks the API's names, a
    command its flags."""
    def flag(match: re.Match[str]) -> str:
        declared, value = _BY_SPELLING[match.group(1)], match.group(2)  # _NAMED matches field names only
        option = declared.options[0]
        return option if declared.kind == "flag" and value.lower() in TRUE else f"{option} {value}"

    return _NAMED.sub(flag, message)


def setting_of(key: str) -> Setting | None:
    """The setting a field or option name names (``style_weight``, ``style-weight``, ``--history``), or None."""
    return _BY_SPELLING.get(str(key).strip().lstrip("-").replace("-", "_").lower())


def parse_value(setting: Setting, value: Any, label: str | None = None) -> Any:
    """``value`` (text, or already its type) as ``setting``'s field takes it.

    Raises:
        ValueError: a value of the wrong form, naming it by ``label`` (default: the field's name), as the
            caller's user wrote it: ``--size must be an integer, got 'big'`` (command), ``size ...`` (form).
    """
    where = label or setting.name
    kind = setting.kind
    if kind == "flag":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in TRUE or text in FALSE:
            return text in TRUE
        raise ValueError(f"{where} must be true or false, got {_shown(value)}")
    if kind in ("int", "float"):
        return _number(where, value, int if kind == "int" else float)
    if kind in ("names", "numbers", "integers"):
        parts = ([str(v).strip() for v in value] if isinstance(value, (list, tuple))
                 else [v.strip() for v in str(value).split(",")])
        parts = [p for p in parts if p]
        if kind == "names":
            return tuple(parts)
        convert = int if kind == "integers" else float
        try:
            return tuple(convert(p) for p in parts)
        except ValueError:
            what = "integers" if kind == "integers" else "numbers"
            raise ValueError(f"{where} must be comma-separated {what}, got {_shown(value)}") from None
    if kind == "files":
        listed = value if isinstance(value, (list, tuple)) else str(value).split(";")
        return tuple(p if not isinstance(p, str) else p.strip() for p in listed if not isinstance(p, str) or p.strip())
    if kind == "choice":
        text = str(value).strip()
        if text not in setting.choices:
            raise ValueError(f"{where} must be one of {', '.join(setting.choices)}, got {_shown(value)}")
        return text
    return value.strip() if isinstance(value, str) else value  # text, file: the field checks it


def parse_settings(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` by field or option name -> field name -> parsed value; None and "" are left out (the field's
    default, or the preset's, applies).

    Raises:
        ValueError: an unknown name, or a value of the wrong form (named as in ``values``).
    """
    parsed: dict[str, Any] = {}
    for key, value in values.items():
        setting = setting_of(key)
        if setting is None:
            raise ValueError(f"unknown setting {key!r}")
        if value is None or (isinstance(value, str) and not value.strip()) or value == [] or (
                value == () and setting.kind != "files"):
            continue
        parsed[setting.name] = parse_value(setting, value, str(key))
    return parsed


def config_from_text(values: Mapping[str, Any]) -> StyleConfig:
    """A ``StyleConfig`` from ``values`` by field or option name (``parse_settings``).

    Raises:
        ValueError: a bad name or value, in one line naming it.
    """
    return StyleConfig(**parse_settings(values))


def _number(where: str, value: Any, kind: type) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"{where} must be {'an integer' if kind is int else 'a number'}, got {value!r}")
    if kind is int and isinstance(value, int):
        return value
    if kind is float and isinstance(value, (int, float)):
        return float(value)
    try:
        return kind(str(value).strip())
    except ValueError:
        raise ValueError(f"{where} must be {'an integer' if kind is int else 'a number'}, "
                         f"got {_shown(value)}") from None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 42 else text[:40] + "...'"
