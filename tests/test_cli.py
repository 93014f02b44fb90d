"""The stylize command through click's CliRunner: happy path, exit codes, one-line errors."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from PIL import Image

from style_transfer.cli import main

from .conftest import IMAGES

FAST = ["--weights", "random", "--size", "32", "--steps", "2", "--device", "cpu"]


def invoke(args: list[str], exit_code: int) -> Result:
    """Run the CLI and assert its exit code, showing args and output when it differs."""
    result = CliRunner().invoke(main, args)
    assert result.exit_code == exit_code, (
        f"stylize {' '.join(args)} exited {result.exit_code}, expected {exit_code}\n"
        f"stdout: {result.stdout!r}\nstderr: {result.stderr!r}\nexception: {result.exception!r}")
    return result


def one_error_line(result: Result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    assert "Traceback" not in result.output
    return lines[0]


def test_happy_path_writes_output(tmp_path: Path) -> None:
    out = tmp_path / "out.jpg"
    result = invoke([str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", str(out), *FAST], 0)
    with Image.open(out) as image:
        assert image.format == "JPEG"
        assert image.size == (32, 21)
    assert result.stdout == ""  # progress and summary go to stderr
    assert "wrote" in result.stderr and "step" in result.stderr


def test_quiet_prints_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out.png"
    result = invoke([str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", str(out), "-q", *FAST], 0)
    assert result.output == ""
    assert Image.open(out).format == "PNG"


def test_missing_input(tmp_path: Path) -> None:
    result = invoke([str(tmp_path / "nope.jpg"), str(IMAGES / "ihc.png"), "-o", str(tmp_path / "o.png"), *FAST], 1)
    line = one_error_line(result)
    assert "nope.jpg" in line and "no such file" in line
    assert not (tmp_path / "o.png").exists()


@pytest.mark.parametrize("option, value, needle", [
    ("--steps", "0", "steps"),
    ("--size", "8", "size"),
    ("--steps", "many", "many"),
    ("--init", "zeros", "zeros"),
    ("--device", "tpu", "device"),
    ("--style-layers", "conv_99", "conv_99"),
])
def test_bad_option_value(tmp_path: Path, option: str, value: str, needle: str) -> None:
    out = tmp_path / "o.png"
    args = [str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", str(out), *FAST, option, value]
    line = one_error_line(invoke(args, 2))
    assert needle in line
    assert not out.exists()


@pytest.mark.parametrize("make_output, needle", [
    (lambda tmp: tmp / "missing-folder" / "o.png", "does not exist"),
    (lambda tmp: tmp / "o.unknownext", "extension"),
    (lambda tmp: tmp / "noext", "no extension"),
    (lambda tmp: tmp, "is a directory"),
    pytest.param(lambda tmp: Path("/proc/stylize-o.png"), "not writable",  # root can write almost anywhere else
                 marks=pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")),
])
def test_unwritable_output(tmp_path: Path, make_output, needle: str) -> None:
    out = make_output(tmp_path)
    before = sorted(os.listdir(tmp_path))
    line = one_error_line(invoke([str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", str(out), *FAST], 2))
    assert needle in line
    assert sorted(os.listdir(tmp_path)) == before  # nothing written, no temp file left


def test_existing_output_untouched_on_error(tmp_path: Path) -> None:
    out = tmp_path / "o.png"
    out.write_bytes(b"precious")
    invoke([str(tmp_path / "missing.png"), str(IMAGES / "ihc.png"), "-o", str(out), *FAST], 1)
    assert out.read_bytes() == b"precious"


def test_version() -> None:
    from style_transfer import __version__

    assert __version__ in invoke(["--version"], 0).output


def test_help_mentions_random_weights_and_cpu_default() -> None:
    text = " ".join(invoke(["--help"], 0).output.split())
    assert "no artistic result" in text
    assert "on a CPU" in text
