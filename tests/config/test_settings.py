"""Each setting is declared once, on its StyleConfig field: the command's options, --help, the manifest's columns
and the web form's limits are made from the declarations, and one parser reads text for all of them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click
import pytest

from style_transfer.config.fields import SECTIONS
from style_transfer.config.style import StyleConfig
from style_transfer.config.fields import KINDS
from style_transfer.config.text import SETTINGS, config_from_text, parse_settings, parse_value, setting_of


def declared(name: str):
    found = setting_of(name)
    assert found is not None, name
    return found


def test_every_field_of_the_config_is_declared_once() -> None:
    fields = [f.name for f in dataclasses.fields(StyleConfig)]
    assert [s.name for s in SETTINGS] == fields
    for s in SETTINGS:
        assert s.kind in KINDS and s.section in SECTIONS and s.short and s.help, s.name
        assert s.default == next(f.default for f in dataclasses.fields(StyleConfig) if f.name == s.name)
    columns = [s.column for s in SETTINGS]
    assert len(set(columns)) == len(columns)


def test_the_commands_options_are_the_declarations() -> None:
    """Each setting's option on stylize (and stylize-batch, stylize-video) has its declared names, help, choices
    and default; --help puts it under its declared heading with its declared line."""
    from style_transfer.batch.cli import main as batch
    from style_transfer.cli.stylize import main as stylize
    from style_transfer.video.cli import main as video

    for command in (stylize, batch, video):
        options = {p.name: p for p in command.params if isinstance(p, click.Option)}
        ctx = click.Context(command, info_name=command.name, **command.context_settings)
        grouped = command.grouped_records(ctx)
        for s in SETTINGS:
            option = options[s.name]
            assert tuple(option.opts) == s.options and option.help == s.help, s.name
            assert option.is_flag == (s.kind == "flag") and option.multiple == (s.kind == "files"), s.name
            if s.kind == "choice":
                assert tuple(option.type.choices) == s.choices
            record = next(r for r in grouped[s.section] if r[0].split(" ")[0].rstrip(",") == s.options[0])
            assert record[1].startswith(s.short), (s.name, record)


def test_one_parser_reads_text_by_each_kind() -> None:
    """Worked out by hand for each kind."""
    assert parse_value(declared("size"), " 64 ") == 64
    assert parse_value(declared("style_weight"), "1e6") == 1e6 and parse_value(declared("style_weight"), 3) == 3.0
    assert [parse_value(declared("fast"), t) for t in ("yes", "On", "1", "false", "off", "0")] == \
        [True, True, True, False, False, False]
    assert parse_value(declared("style_layers"), "conv_1, conv_2,,conv_3") == ("conv_1", "conv_2", "conv_3")
    assert parse_value(declared("style_blend"), "0.7,0.3") == (0.7, 0.3)
    assert parse_value(declared("style_blend"), [1, 2]) == (1.0, 2.0)
    assert parse_value(declared("scale_steps"), "100,60,100") == (100, 60, 100)
    assert parse_value(declared("style_masks"), "a.png; b.png") == ("a.png", "b.png")
    assert parse_value(declared("pooling"), "avg") == "avg"
    for name, text, message in (
            ("size", "big", "size must be an integer, got 'big'"),
            ("size", True, "size must be an integer, got True"),
            ("style_weight", "lots", "style_weight must be a number, got 'lots'"),
            ("fast", "maybe", "fast must be true or false, got 'maybe'"),
            ("style_blend", "1,x", "style_blend must be comma-separated numbers, got '1,x'"),
            ("scale_steps", "1.5", "scale_steps must be comma-separated integers, got '1.5'"),
            ("pooling", "min", "pooling must be one of max, avg, got 'min'")):
        with pytest.raises(ValueError) as raised:
            parse_value(declared(name), text)
        assert str(raised.value) == message
    # Field names and option names (aliases too) name the same setting; empty values are left out.
    assert parse_settings({"--history": "20", "style-weight": "5", "size": "", "seed": None}) == \
        {"history_size": 20, "style_weight": 5.0}
    with pytest.raises(ValueError, match="unknown setting 'colour'"):
        parse_settings({"colour": "red"})


@pytest.mark.parametrize("s", [s for s in SETTINGS if s.kind in ("int", "float") and s.minimum is not None],
                         ids=lambda s: s.name)
def test_the_declared_ranges_are_what_the_config_checks(s) -> None:
    """A value at the declared bound is accepted unless the bounds are exclusive; one past it is refused, naming
    the field. Settings that need a partner get it."""
    partner = {"min_improvement": {"patience": 5}, "patience": {"min_improvement": 0.01}}.get(s.name, {})
    step = 1 if s.kind == "int" else 0.5
    below = s.minimum - step if not s.exclusive else s.minimum
    with pytest.raises(ValueError, match=rf"^{s.name} must be "):
        StyleConfig(**{s.name: below}, **partner)
    if not s.exclusive:
        assert getattr(StyleConfig(**{s.name: s.minimum}, **partner), s.name) == s.minimum
    if s.maximum is not None:
        with pytest.raises(ValueError, match=rf"^{s.name} must be "):
            StyleConfig(**{s.name: s.maximum + (0 if s.exclusive else step)}, **partner)


def test_choices_are_what_the_config_accepts() -> None:
    for s in SETTINGS:
        if s.kind != "choice":
            continue
        for choice in s.choices:
            extra = {"weights": "x.pth"} if s.name == "preprocess" else {}
            assert getattr(config_from_text({s.name: choice, **extra}), s.name) == choice
        with pytest.raises(ValueError, match=rf"^{s.name} must be one of {', '.join(s.choices)}"):
            StyleConfig(**{s.name: "nonsense"})


def test_the_manifest_takes_every_setting_as_a_column(tmp_path: Path) -> None:
    """Every setting's column (and its field name) is read through the same parser, with the row's line in a
    bad value's message."""
    from style_transfer.batch.items import read_manifest

    rows = [{"content": "cat.png", "style": "ink.png", "size": "48", "style-weight": "1e3", "fast": "yes",
             "style_layers": "conv_1,conv_2", "history": "7", "scale-steps": "20"}]
    manifest = tmp_path / "list.jsonl"
    manifest.write_text("\n".join(json.dumps(r) for r in rows))
    (item,) = read_manifest(str(manifest), styles=[], out_dir=str(tmp_path / "out"))
    assert (item.config.size, item.config.style_weight, item.config.fast, item.config.style_layers,
            item.config.history_size, item.config.scale_steps) == (48, 1e3, True, ("conv_1", "conv_2"), 7, (20,))
    manifest.write_text(json.dumps({"content": "cat.png", "style": "ink.png", "steps": "many"}))
    with pytest.raises(ValueError) as raised:
        read_manifest(str(manifest), styles=[], out_dir="out")
    assert str(raised.value) == f"{manifest}:1: steps must be an integer, got 'many'"


def test_the_web_form_gets_each_fields_declared_limits(tmp_path: Path) -> None:
    pytest.importorskip("httpx", reason="FastAPI's TestClient needs httpx")
    from fastapi.testclient import TestClient

    from style_transfer.web.form import FORM_SETTINGS, Limits
    from style_transfer.web.app import create_app

    with TestClient(create_app(tmp_path, weights="random", limits=Limits(max_size=96))) as client:
        settings = client.get("/api/options").json()["settings"]
    assert list(settings) == list(FORM_SETTINGS)
    for name, shown in settings.items():
        s = declared(name)
        assert (shown["kind"], shown["minimum"], shown["help"]) == (s.kind, s.minimum, s.short)
        assert shown["choices"] == list(s.choices)
    assert settings["size"]["maximum"] == 96 and settings["average"]["maximum"] == 1


def test_library_messages_name_settings_as_the_api_and_the_commands_show_flags(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33.11: a library message names a setting as ``name=value`` (what StyleConfig takes), never as a
    flag; ``as_options`` turns it into the command's flag (a flag turned on, ``fast=True``, into ``--fast``)."""
    import re

    import torch

    from style_transfer.cli.stylize import main
    from style_transfer.config.text import as_options
    from style_transfer.io.provenance import check_replay_inputs, replay_config
    from style_transfer.fast import hardware
    from style_transfer.memory import fitting_advice, out_of_memory

    from ..conftest import IMAGES
    from ..helpers import one_error_line, run_command

    assert as_options("try size=160 tile=64 (fast=True leaves it off); pass weights=FILE") == (
        "try --size 160 --tile 64 (--fast leaves it off); pass --weights FILE")
    assert as_options("style_masks=FILE, history_size=5") == "--style-mask FILE, --history-size 5"
    flag = re.compile(r"(^|[\s(])--[a-z]")
    with pytest.raises(ValueError) as fused:
        StyleConfig(style_loss="wasserstein", fused_gram=True)
    monkeypatch.setattr(hardware, "bf16_supported", lambda device: False)
    with pytest.raises(ValueError) as bf16:
        hardware.check_bf16(torch.device("cpu"))
    with pytest.raises(ValueError) as replayed:
        replay_config({"settings": {"size": 32}, "weights": {"kind": "file", "name": "vgg.pth"}})
    with pytest.raises(ValueError) as masks:
        check_replay_inputs({"inputs": {"style_masks": [{"sha256": "0"}]}}, "c.png", ["s.png"], "random")
    said = {"fused": str(fused.value), "bf16": str(bf16.value), "replay": str(replayed.value),
            "masks": str(masks.value), "memory": str(out_of_memory(MemoryError(), 2048, torch.device("cpu"))),
            "fits": fitting_advice(160, (528, 64))}
    assert "(fast=True leaves it off" in said["fused"] and said["bf16"].endswith("use precision=fp32")
    assert said["replay"].endswith("give it with weights=FILE") and "style_masks=FILE" in said["masks"]
    assert said["memory"].endswith("try tile=512 (the same picture, evaluated in crops) or a smaller size "
                                   "(e.g. size=1424)")
    assert said["fits"] == "the largest size that fits is about 160 px (size=160), or about 528 px in tiles " \
                           "(size=528 tile=64)"
    assert not any(flag.search(text) for text in said.values()), said
    out = tmp_path / "o.png"
    line = one_error_line(run_command(main, [IMAGES / "chelsea.png", IMAGES / "ihc.png", "-o", out, "--weights",
                                             "random", "--style-loss", "wasserstein", "--fused-gram"], 2))
    assert line.endswith("(--fast leaves it off for the other style losses)"), line
