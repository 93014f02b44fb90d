"""The reference pages stay true: docs/options.md is made from the commands, and --help is grouped, one line each."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from style_transfer.config.fields import SECTIONS
from style_transfer.cli.options import OneLineCommand

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("make_options", ROOT / "docs" / "make_options.py")
make_options = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_options)
COMMANDS = make_options.commands()
SHORT_HELP_MAX = 80  # characters of one option's help in --help, before its "[default: ...]"


def command(target: str) -> click.Command:
    module, function = target.split(":")
    return getattr(importlib.import_module(module), function)


def test_the_options_page_is_current() -> None:
    """Fails when an option changed and docs/options.md was not made again (python docs/make_options.py)."""
    assert (ROOT / "docs" / "options.md").read_text() == make_options.render()


def test_every_command_is_on_the_page() -> None:
    text = (ROOT / "docs" / "options.md").read_text()
    assert len(COMMANDS) >= 3
    for name, target in COMMANDS:
        assert f"## `{name}`" in text
        for param in command(target).params:
            if isinstance(param, click.Option) and not param.hidden:
                assert f"`{param.opts[-1]}" in text or f" {param.opts[-1]}" in text, (name, param.opts)


@pytest.mark.parametrize("name, target", COMMANDS)
def test_help_groups_options_one_line_each(name: str, target: str) -> None:
    cmd = command(target)
    assert isinstance(cmd, OneLineCommand), f"{name} does not use the shared OneLineCommand"
    result = CliRunner().invoke(cmd, ["--help"], terminal_width=240, prog_name=name)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    headings = [line[:-1] for line in lines if line and not line.startswith(" ") and line.endswith(":")]
    assert "Advanced" in headings and set(headings) - {"Options", "Usage"} <= set(SECTIONS) | set(
        cmd.sections.values()), headings
    ctx = click.Context(cmd, info_name=name, **cmd.context_settings)
    for heading, records in cmd.grouped_records(ctx).items():
        for names, text in records:
            assert "\n" not in text and len(text.split("  [default:")[0]) <= SHORT_HELP_MAX, (name, names, text)
            assert any(line.strip().startswith(names) for line in lines), (name, names)
    if name == "stylize":  # the long form is in the page, not in --help
        assert "Basics" in headings and "Speed" in headings
        assert "downloaded once to the torch hub cache" not in result.output


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", page.read_text(), flags=re.S), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_every_relative_link_resolves() -> None:
    """Each link of the README and docs/ to a file of the project names a file that exists, and an anchor
    names a heading of that page."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    checked = 0
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r'src="([^"]+)"', text):
            if re.match(r"[a-z]+:", target):
                continue  # another site
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            assert file.exists(), f"{page.name}: {target}"
            if anchor and file.suffix == ".md":
                assert anchor in _anchors(file), f"{page.name}: {target}"
            checked += 1
    assert checked > 30


PICTURE = re.compile(r"\.(png|jpe?g|gif|webp)$", re.I)


def shown_pictures() -> set[Path]:
    """Every picture of the project the README and docs/*.md show or link to, but the inputs in images/."""
    found = set()
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s#]+)\)", text) + re.findall(r'src="([^"#]+)"', text):
            path = (page.parent / target).resolve()
            if not re.match(r"[a-z]+:", target) and PICTURE.search(target) and (ROOT / "images") not in path.parents:
                found.add(path)
    return found


def test_every_picture_shown_is_made_by_make_pictures() -> None:
    """Each picture a page shows is a file of a job of docs/make_pictures.py (the one command that makes them
    again), and each picture a job makes is shown somewhere."""
    spec = importlib.util.spec_from_file_location("make_pictures", ROOT / "docs" / "make_pictures.py")
    make_pictures = importlib.util.module_from_spec(spec)
    sys.modules["make_pictures"] = make_pictures  # its dataclass looks its module up there
    spec.loader.exec_module(make_pictures)
    made = {path.resolve() for job in make_pictures.jobs() for path in job.outputs}
    shown = shown_pictures()
    assert len(shown) > 20
    assert not shown - made, f"shown but made by no job of docs/make_pictures.py: {sorted(shown - made)}"
    orphans = {path for path in made - shown if PICTURE.search(path.name)}
    assert not orphans, f"made but shown on no page: {sorted(orphans)}"


def test_the_api_page_names_every_field_of_run_options_and_run_result() -> None:
    """docs/api.md showed neither ``RunOptions(resume=...)`` nor where ``RunResult`` imports from or what it holds:
    each field of both is named there, and the import it shows works."""
    import dataclasses

    import style_transfer

    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    for name in (field.name for field in dataclasses.fields(style_transfer.RunOptions)):
        assert f"`{name}=" in page, name
    assert "RunOptions(resume=" in page
    for name in (field.name for field in dataclasses.fields(style_transfer.RunResult)):
        assert f"| `{name}` |" in page, name
    assert "from style_transfer import RunResult" in page
    assert "RunResult" in style_transfer.__all__
