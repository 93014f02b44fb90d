"""Helpers the test modules share: a command run in-process with its exit code checked, or in a child process with its
stderr a pipe and the progress lines there checked, an image's pixels, the tutorial's features and Gram written out
plainly (the independent computation numeric tests compare with)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import click
import numpy as np
import torch
import torch.nn.functional as F
from click.testing import CliRunner, Result
from PIL import Image
from torch import nn


def run_command(command: click.Command, args: Sequence[Any], exit_code: int = 0) -> Result:
    """Run ``command`` with ``args`` (paths become strings) through ``CliRunner``; assert its exit code,
    showing the arguments, both streams and the exception when it differs."""
    args = [str(a) for a in args]
    result = CliRunner().invoke(command, args)
    assert result.exit_code == exit_code, (
        f"{command.name} {' '.join(args)} exited {result.exit_code}, expected {exit_code}\n"
        f"stdout: {result.stdout!r}\nstderr: {result.stderr!r}\nexception: {result.exception!r}")
    return result


def invoker(command: click.Command) -> Any:
    """``invoke(args, exit_code=0)`` for one command: ``run_command`` bound to it."""
    return partial(run_command, command)


def pixels(image: Path | str | Image.Image) -> np.ndarray:
    """An image file's (or a Pillow image's) RGB pixels, ``(H, W, 3)`` uint8."""
    if isinstance(image, Image.Image):
        return np.asarray(image.convert("RGB"))
    with Image.open(image) as opened:
        return np.asarray(opened.convert("RGB"))


def one_error_line(result: Result) -> str:
    """The command's only error line, an ``Error: ...`` line with no traceback: the only stderr line but for the
    run's stage lines before it (``loading VGG19 weights from vgg.pth ...``: what it was doing when it failed) and the
    plan said before those."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    while len(lines) > 1 and (lines[0].endswith(" ...") or lines[0].startswith("plan: ")):
        lines.pop(0)  # Watch.on_stage's lines (issue 33.6), the plan said before them
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    assert "Traceback" not in result.output
    return lines[0]


def piped_stderr(code: str, args: Sequence[Any], cwd: Path) -> tuple[str, float]:
    """Run a command in a child process (``code``: Python that calls its main) with stderr a pipe, no terminal; assert
    it exits 0; its stderr and the seconds it took."""
    start = time.monotonic()
    child = subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=cwd, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=600)
    stderr = child.stderr.decode()  # not text=True: its universal newlines would turn a \r into \n
    assert child.returncode == 0, stderr
    return stderr, time.monotonic() - start


def progress_lines(stderr: str, unit: str, total: int, seconds: float) -> list[str]:
    """The progress lines a command wrote to a stderr that is no terminal (``cli.options.ProgressLines``), checked
    against its rule: no ``\r`` redraw; at least 2 lines and at most one per tenth of the total plus the last, and
    one more per 10 s of the ``seconds`` the command took; counts that never go back; the last at ``total`` of
    ``total``; all of stderr under 2 kB (and 150 B more per 10 s)."""
    assert "\r" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if re.match(rf"\d+/\d+ {unit} \(\d+%\)", line)]
    assert 2 <= len(lines) <= 11 + seconds // 10, stderr
    counts = [int(line.split("/")[0]) for line in lines]
    assert counts == sorted(counts), stderr
    assert lines[-1].startswith(f"{total}/{total} {unit} (100%)"), stderr
    assert len(stderr.encode()) < 2048 + 150 * (seconds // 10), stderr
    return lines


# `stylize` at its smallest: random weights, 32 px, 2 steps (one LBFGS step), on the CPU.
FAST = ["--weights", "random", "--size", "32", "--steps", "2", "--device", "cpu"]


def invoke_stylize(args: Sequence[Any], exit_code: int = 0) -> Result:
    """``stylize`` in-process (``run_command``)."""
    from style_transfer.cli.stylize import main

    return run_command(main, args, exit_code)


def transfer(cnn: Any, content: Any, style: Any, image: Any, steps: int = 300, style_weight: float = 1e6,
             content_weight: float = 1, **settings: Any) -> Any:
    """``run_style_transfer`` with the tutorial's normalisation (unused where ``normalization`` is given) and each
    ``TransferSettings`` field as a keyword (``progress=...``, ``tv_weight=...``)."""
    from style_transfer.core.transfer import TransferSettings, run_style_transfer
    from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD

    return run_style_transfer(cnn, IMAGENET_MEAN, IMAGENET_STD, content, style, image, steps, style_weight,
                              content_weight, TransferSettings.of(**settings))


def plain_conv_outputs(features: nn.Sequential, x: torch.Tensor, count: int) -> list[torch.Tensor]:
    """The outputs of the first ``count`` convolutions (before their ReLU), with out-of-place ReLUs."""
    outputs = []
    for module in features:
        x = F.relu(x) if isinstance(module, nn.ReLU) else module(x)
        if isinstance(module, nn.Conv2d):
            outputs.append(x)
            if len(outputs) == count:
                break
    return outputs


def plain_gram(feature: torch.Tensor) -> torch.Tensor:
    """The tutorial's Gram of a (1, C, H, W) feature map: F F^T / (C H W)."""
    _, c, h, w = feature.shape
    flat = feature.reshape(c, h * w)
    return flat @ flat.t() / (c * h * w)
