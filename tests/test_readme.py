"""The README's set-up commands are what CI runs, and its CLI examples parse."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def setup_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section)


def test_two_setup_commands_and_ci_runs_the_test_one() -> None:
    commands = setup_commands()
    assert len(commands) == 2
    install_and_run, install_and_test = commands
    assert "stylize images/" in install_and_run and "pip install ." in install_and_run
    assert "pytest" in install_and_test
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert install_and_test in ci_lines


def test_sample_images_exist() -> None:
    for command in setup_commands():
        for name in re.findall(r"images/[\w.]+", command):
            assert (ROOT / name).is_file(), name
