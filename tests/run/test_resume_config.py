"""``run.checkpoints.resume_config``: the settings a resume runs with, reconciled with those given (``stylize
--resume`` calls it; tests/cli/test_run_cli.py checks the command's lines and exit codes)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from style_transfer import StyleConfig
from style_transfer.errors import CheckpointError
from style_transfer.run.checkpoints import CHECKPOINT_VERSION, fingerprint, resume_config

SAVED = StyleConfig(size=32, steps=30, weights="random", device="cpu", style_weight=1e9, threads=1)


@pytest.fixture
def checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A checkpoint of a run of ``SAVED`` (its settings only: what a resume reads before the run), as ``run.ckpt``."""
    monkeypatch.chdir(tmp_path)
    entry = {"name": "x.png", "sha256": "0" * 64}
    torch.save({"format": "style_transfer checkpoint", "version": CHECKPOINT_VERSION, "evaluations": 20,
                "fingerprint": fingerprint(SAVED, entry, [entry])}, "run.ckpt")
    return "run.ckpt"


def test_a_resume_takes_the_checkpoints_settings_and_the_threads_given(checkpoint: str) -> None:
    given = StyleConfig(threads=3)
    assert resume_config(given, checkpoint, ["threads"]) == dataclasses.replace(SAVED, threads=3)


def test_a_setting_given_that_agrees_is_accepted(checkpoint: str) -> None:
    given = dataclasses.replace(StyleConfig(), style_weight=1e9, size=32, weights="random")
    assert resume_config(given, checkpoint, ["style_weight", "size", "weights"]) == \
        dataclasses.replace(SAVED, threads=given.threads)


def test_a_setting_given_that_differs_is_refused_naming_both_values(checkpoint: str) -> None:
    with pytest.raises(ValueError, match=r"^--resume run\.ckpt: --size 64 differs from the checkpoint's 32; "
                                         r"drop --size to continue the run as it was$"):
        resume_config(StyleConfig(size=64), checkpoint, ["size"])
    with pytest.raises(ValueError, match=r"^--resume run\.ckpt: --fast was not given to the run the checkpoint "
                                         r"holds; drop --fast"):
        resume_config(StyleConfig(fast=True), checkpoint, ["fast"])
    with pytest.raises(ValueError, match=r"^--resume run\.ckpt: --weights imagenet differs from the checkpoint's "
                                         r"random; drop --weights"):
        resume_config(StyleConfig(), checkpoint, ["weights"])


def test_settings_not_given_are_not_compared(checkpoint: str) -> None:
    assert resume_config(StyleConfig(size=64), checkpoint, []).size == 32


def test_a_file_that_is_no_checkpoint_is_a_checkpoint_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("run.ckpt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match=r"^run\.ckpt: not a readable checkpoint"):
        resume_config(StyleConfig(), "run.ckpt", [])
