"""The run API through the command: provenance in every output, replay, frames, animation, log, plot,
SIGTERM with a checkpoint and --resume. Tiny images, random weights, few evaluations."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from style_transfer.cli.options import option_reference
from style_transfer.cli.checkpoints import bytes_text
from style_transfer.cli.stylize import main
from style_transfer.io.metadata import read_record
from style_transfer.io.provenance import sha256_file

from ..conftest import IMAGES
from ..helpers import invoker, pixels

invoke = invoker(main)

ROOT = Path(__file__).resolve().parents[2]
CONTENT, STYLE = str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png")
TINY = ["--weights", "random", "--size", "32", "--device", "cpu", "-q"]


def test_every_output_carries_its_record_and_replay_remakes_it(tmp_path: Path) -> None:
    out, again = tmp_path / "out.png", tmp_path / "again.png"
    invoke([CONTENT, STYLE, "-o", str(out), *TINY, "--steps", "20", "--seed", "3", "--style-weight", "1e7"])
    record = read_record(out)
    assert record["settings"]["size"] == 32 and record["settings"]["style_weight"] == 1e7 and record["seed"] == 3
    assert record["inputs"]["content"] == {"name": "chelsea.png", "sha256": sha256_file(CONTENT)}
    assert [s["name"] for s in record["inputs"]["styles"]] == ["ihc.png"]
    assert record["weights"]["kind"] == "random" and record["evaluations"] == 40 and record["stopped"] == "done"
    assert str(tmp_path) not in json.dumps(record)  # no folder of the user's

    invoke([CONTENT, STYLE, "-o", str(again), "--replay", str(out), "-q"])
    assert np.array_equal(pixels(again), pixels(out))  # the same image, bit for bit, on the same machine
    assert read_record(again)["settings"] == record["settings"]

    other = invoke([str(IMAGES / "coffee.png"), STYLE, "-o", str(tmp_path / "x.png"), "--replay", str(out)], 2)
    assert "content image is not the recorded run's" in other.stderr and not (tmp_path / "x.png").exists()
    mixed = invoke([CONTENT, STYLE, "-o", str(tmp_path / "x.png"), "--replay", str(out), "--size", "64"], 2)
    assert "drop --size" in mixed.stderr
    plain = tmp_path / "plain.png"
    invoke([CONTENT, STYLE, "-o", str(plain), *TINY, "--steps", "1", "--no-metadata"])
    assert read_record(plain) is None
    bare = invoke([CONTENT, STYLE, "-o", str(tmp_path / "x.png"), "--replay", str(plain)], 2)
    assert "holds no style_transfer record" in bare.stderr


def test_frames_animation_log_and_plot(tmp_path: Path) -> None:
    out = tmp_path / "out.jpg"
    invoke([CONTENT, STYLE, "-o", str(out), *TINY, "--steps", "30", "--save-every", "15",
            "--animate", str(tmp_path / "run.webp"), "--log", str(tmp_path / "run.jsonl"),
            "--plot", str(tmp_path / "loss.png")])
    frames = sorted(p.name for p in tmp_path.glob("out.*.jpg"))
    assert frames == ["out.0015.jpg", "out.0030.jpg"]  # 40 evaluations run; frames at 15 and 30
    assert read_record(tmp_path / "out.0015.jpg")["stopped"] == "running"
    lines = (tmp_path / "run.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r["step"] for r in rows] == list(range(1, 41))
    assert all(r["loss"] == pytest.approx(r["style"] + r["content"] + r["tv"]) for r in rows)
    with Image.open(tmp_path / "run.webp") as animation:
        assert animation.n_frames == 3  # the frames at 15 and 30, and the final image
    assert read_record(tmp_path / "run.webp")["evaluations"] == 40
    with Image.open(tmp_path / "loss.png") as plot:
        assert plot.format == "PNG" and plot.width > 300


def test_animate_alone_keeps_a_frame_every_ten_evaluations(tmp_path: Path) -> None:
    """--animate without --save-every: a frame every ANIMATION_EVERY (10) evaluations, then the final image.
    (It used to keep the final image only: an Animation with no frames yet is falsy, so no preview was asked.)"""
    invoke([CONTENT, STYLE, "-o", str(tmp_path / "out.png"), *TINY, "--steps", "30", "--animate",
            str(tmp_path / "run.gif")])
    with Image.open(tmp_path / "run.gif") as animation:
        assert animation.n_frames >= 4  # 40 evaluations: frames at 10, 20, 30 (40 may equal the final) and the end


def test_run_options_fail_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = [CONTENT, STYLE, "-o", str(tmp_path / "out.png"), *TINY]
    assert "animation" in invoke([*base, "--animate", str(tmp_path / "a.mp4")], 2).stderr
    assert "does not exist" in invoke([*base, "--checkpoint", str(tmp_path / "no" / "c.ckpt")], 2).stderr
    assert "no such checkpoint" in invoke([*base, "--resume", str(tmp_path / "missing.ckpt")], 2).stderr
    assert "give both or neither" in invoke([*base, "--patience", "5"], 2).stderr
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if the plot extra were not installed: exit 1
    message = invoke([*base, "--plot", str(tmp_path / "p.png")], 1).stderr
    assert "pip install 'style_transfer[plot]'" in message
    assert list(tmp_path.iterdir()) == []


def read_until(stream, pattern: bytes, timeout: float) -> bytes:
    """Read the child's stderr until the regex ``pattern`` matches (a step count on the progress bar)."""
    seen, deadline = b"", time.monotonic() + timeout
    os.set_blocking(stream.fileno(), False)
    while re.search(pattern, seen) is None:
        assert time.monotonic() < deadline, seen[-500:]
        chunk = stream.read()
        seen += chunk or b""
        time.sleep(0.05)
    return seen


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM is POSIX")
@pytest.mark.slow
def test_sigterm_saves_image_and_checkpoint_and_resume_finishes_the_run(tmp_path: Path) -> None:
    out, checkpoint, whole = tmp_path / "out.png", tmp_path / "run.ckpt", tmp_path / "whole.png"
    args = [CONTENT, STYLE, *TINY[:-1], "--steps", "60", "--style-weight", "1e9", "--content-weight", "1e3"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    child = subprocess.Popen([sys.executable, "-m", "style_transfer", *args, "-o", str(out), "--checkpoint",
                              str(checkpoint)], cwd=ROOT, env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        read_until(child.stderr, rb"\b(2[1-9]|[3-7]\d)/80", timeout=120)  # past the first LBFGS step (20)
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=60) == 143
    finally:
        child.kill()
    message = child.stderr.read().decode()
    assert "interrupted at step" in message and out.exists() and checkpoint.exists()
    assert read_record(out)["stopped"] == "terminated"

    invoke([*args, "-o", str(out), "--resume", str(checkpoint)])
    invoke([*args, "-o", str(whole)])
    assert np.array_equal(pixels(out), pixels(whole))  # resumed = uninterrupted
    assert read_record(out)["evaluations"] == read_record(whole)["evaluations"] == 80


def interrupt_at(monkeypatch: pytest.MonkeyPatch, step: int) -> None:
    """Make the command's run stop at ``step`` as a Ctrl-C would (``Run.cancel("interrupted")``), in process."""
    from style_transfer.cli.watch import Watch

    on_event = Watch.on_event

    def stop_there(self: Watch, info) -> None:
        on_event(self, info)
        if info.step == step:
            self.run.cancel("interrupted")

    monkeypatch.setattr(Watch, "on_event", stop_there)


def test_a_bare_resume_continues_with_the_checkpoints_settings(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24.3: `stylize photo.jpg style.jpg -o out.png --resume run.ckpt`, as the README shows it, continues
    the run with the settings the checkpoint holds; an option that differs from them is refused by name."""
    out, whole, checkpoint = tmp_path / "out.png", tmp_path / "whole.png", tmp_path / "run.ckpt"
    args = [*TINY, "--threads", "1", "--steps", "30", "--style-weight", "1e9", "--content-weight", "1e3"]
    with monkeypatch.context() as patch:
        interrupt_at(patch, 25)
        stopped = invoke([CONTENT, STYLE, "-o", str(out), *args, "--checkpoint", str(checkpoint)], 130)
    command = f"stylize {CONTENT} {STYLE} -o {out} --resume {checkpoint}"
    assert re.search(rf"the run's state is in {re.escape(str(checkpoint))} \(\d+ kB\); continue it with: "
                     rf"{re.escape(command)}", stopped.stderr), stopped.stderr
    before = out.read_bytes()
    for option, message in [(["--steps", "60"], "--steps 60 differs from the checkpoint's 30; drop --steps"),
                            (["--weights", "imagenet"], "--weights imagenet differs from the checkpoint's random"),
                            (["--style-weight", "1e6"], "--style-weight 1e+06 differs from the checkpoint's 1e+09"),
                            (["--fast"], "--fast was not given to the run the checkpoint holds")]:
        refused = invoke([CONTENT, STYLE, "-o", str(out), "--resume", str(checkpoint), *option], 2)
        assert message in refused.stderr and f"--resume {checkpoint}" in refused.stderr
    assert out.read_bytes() == before  # nothing written by a refused resume

    invoke([CONTENT, STYLE, "-o", str(out), "--resume", str(checkpoint), "--threads", "1", "--steps", "30", "-q"])
    invoke([CONTENT, STYLE, "-o", str(whole), *args])
    assert read_record(out)["evaluations"] == read_record(whole)["evaluations"] == 40
    assert read_record(out)["settings"] == read_record(whole)["settings"]
    assert np.array_equal(pixels(out), pixels(whole))  # resumed = uninterrupted


def test_resume_with_a_weights_file_needs_it_given_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint names its weights file by name and hash: --weights gives it again, under any name."""
    import torch

    from style_transfer.networks.vgg import random_vgg19_features

    weights, other, copy = tmp_path / "vgg.pth", tmp_path / "other.pth", tmp_path / "moved.pth"
    torch.save(random_vgg19_features(0).state_dict(), weights)
    torch.save(random_vgg19_features(1).state_dict(), other)
    copy.write_bytes(weights.read_bytes())
    out, checkpoint = tmp_path / "out.png", tmp_path / "run.ckpt"
    with monkeypatch.context() as patch:
        interrupt_at(patch, 5)
        stopped = invoke([CONTENT, STYLE, "-o", str(out), *TINY[2:], "--weights", str(weights), "--steps", "10",
                          "--checkpoint", str(checkpoint)], 130)
    assert f"--resume {checkpoint} --weights {weights}" in stopped.stderr
    bare = invoke([CONTENT, STYLE, "-o", str(out), "--resume", str(checkpoint)], 2)
    assert "the run used the weights file 'vgg.pth': give it again with --weights FILE" in bare.stderr
    wrong = invoke([CONTENT, STYLE, "-o", str(out), "--resume", str(checkpoint), "--weights", str(other)], 2)
    assert "is not the weights file the run was made with (vgg.pth, SHA-256 differs)" in wrong.stderr
    invoke([CONTENT, STYLE, "-o", str(out), "--resume", str(checkpoint), "--weights", str(copy), "-q"])
    assert read_record(out)["evaluations"] == 20 and read_record(out)["stopped"] == "done"


def test_the_summary_line_names_every_file_the_run_wrote(tmp_path: Path) -> None:
    """Issue 24.5: the last line lists the animation, the plot, the log, --save-every's frames and folder,
    and the checkpoint, besides the result."""
    out, frames, checkpoint = tmp_path / "out.png", tmp_path / "frames", tmp_path / "run.ckpt"
    frames.mkdir()
    result = invoke([CONTENT, STYLE, "-o", str(out), *TINY[:-1], "--steps", "30", "--save-every", "15",
                     "--save-dir", str(frames), "--animate", str(tmp_path / "run.webp"), "--plot",
                     str(tmp_path / "loss.png"), "--log", str(tmp_path / "run.jsonl"), "--checkpoint",
                     str(checkpoint), "--checkpoint-every", "20"])
    smaller, wrote = result.stderr.strip().splitlines()[-2:]
    assert smaller.startswith("the photo is 451x300; the picture's long side is --size 32")
    assert wrote == (f"wrote {out} (32x21, 40 evaluations: whole LBFGS steps of 20 past --steps 30); also "
                    f"{tmp_path / 'run.webp'}, {tmp_path / 'loss.png'}, "
                    f"{tmp_path / 'run.jsonl'}, 2 frames in {frames}/ (out.0015.png to out.0030.png), "
                    f"checkpoint {checkpoint} ({bytes_text(checkpoint.stat().st_size)})")
    assert sorted(p.name for p in frames.iterdir()) == ["out.0015.png", "out.0030.png"] and checkpoint.exists()
    plain = invoke([CONTENT, STYLE, "-o", str(out), *TINY[:-1], "--steps", "1", "--checkpoint", str(checkpoint)])
    assert plain.stderr.strip().splitlines()[-1] == (  # it wrote no checkpoint
        f"wrote {out} (32x21, 20 evaluations: whole LBFGS steps of 20 past --steps 1)")


def test_each_redraw_of_the_bar_shows_the_losses_of_the_evaluation_it_counts(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch,
                                                                            terminal_stderr: None) -> None:
    """Issue 33.7: the bar's numbers were the evaluation before the one it counted, so its last redraw before the
    close (all a log of stderr keeps) disagreed with the record. Each redraw against --log's row of that step, and
    the last against the record (both the last evaluation's losses). tqdm redraws at every update here
    (mininterval=0, miniters=1): by default it waits 0.1 s between redraws and thins them out by its dynamic
    miniters, and a run of 20 evaluations at 32 px can end before a second one (CI: 20 steps at 219 steps/s, one
    redraw). tqdm's environment overrides (TQDM_MININTERVAL) are read when tqdm is first imported, which an
    earlier test in the same process has done, so the test hands the watcher a tqdm with those defaults."""
    from tqdm import tqdm

    class EveryUpdate(tqdm):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **{**kwargs, "mininterval": 0, "miniters": 1})

    monkeypatch.setattr("tqdm.tqdm", EveryUpdate)
    out, log = tmp_path / "out.png", tmp_path / "run.jsonl"
    result = invoke([CONTENT, STYLE, "-o", str(out), *TINY[:-1], "--steps", "1", "--log", str(log)])
    rows = {row["step"]: row for row in map(json.loads, log.read_text().splitlines())}
    shown_steps = re.findall(r"(\d+)/20 \[[^\]]*style=([^,\]]+), content=([^,\]]+)(?:, left=[^\]]+)?\]", result.stderr)
    # the bar as on a terminal (terminal_stderr), into CliRunner's stderr: each redraw kept (the close draws the last
    # one again)
    assert sorted({int(s) for s, _, _ in shown_steps}) == list(range(1, 21)), result.stderr
    for step, style, content in shown_steps:
        assert (style, content) == (f"{rows[int(step)]['style']:.4g}", f"{rows[int(step)]['content']:.4g}"), step
    losses = read_record(out)["losses"]
    assert shown_steps[-1] == ("20", f"{losses['style']:.4g}", f"{losses['content']:.4g}")


def test_a_checkpoints_size_is_what_the_help_says(tmp_path: Path) -> None:
    """--checkpoint's help gives the size as 12 x W x H x (2 x history + 4) bytes (plans.checkpoint_bytes,
    which adds the few kB of settings and records); a checkpoint with its history full is that within 2 %, and the
    summary line gives its size."""
    import torch

    from style_transfer.run.plans import checkpoint_bytes

    out, checkpoint = tmp_path / "out.png", tmp_path / "run.ckpt"
    result = invoke([CONTENT, STYLE, "-o", str(out), *TINY[:-1], "--steps", "1", "--history-size", "8",
                     "--style-weight", "1e9", "--content-weight", "1e3", "--checkpoint", str(checkpoint),
                     "--checkpoint-every", "20"])
    state = torch.load(checkpoint, weights_only=True)["optimizer"]["state"][0]
    assert len(state["old_dirs"]) == len(state["old_stps"]) == 8  # the history is full: the size the help gives
    written = checkpoint.stat().st_size
    assert written == pytest.approx(checkpoint_bytes(32, 21, 8), rel=0.02)
    assert written == pytest.approx(12 * 32 * 21 * (2 * 8 + 4), rel=0.15)  # the help's formula alone: kB more
    assert result.stderr.strip().splitlines()[-1].endswith(f"checkpoint {checkpoint} ({bytes_text(written)})")
    assert "328 MB at 448 px" in " ".join(invoke(["--help"]).stdout.split())  # 12 x 448 x 299 x 204 bytes and kB
    reference = " ".join(option_reference(main, "stylize").split())
    assert "about 12 x W x H x (2 x history + 4) bytes: 26.7 MB at 128x85 px, 328 MB at 448x299 px" in reference
