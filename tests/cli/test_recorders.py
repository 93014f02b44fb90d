"""Recorders: numbered frames, the animation, the loss log and the plot, fed with hand-made steps."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from style_transfer.cli import recorders
from style_transfer.core import transfer
from style_transfer.errors import MissingExtra, OutputError, StyleTransferError
from style_transfer.io.metadata import read_record
from style_transfer.cli.recorders import (Animation, FrameSaver, LogError, LossLog, check_animation_path,
                                          check_plot_available, check_plot_path, loss_figure, loss_row, numbered_path,
                                          plot_losses, preview_interval, read_log, size_changes)

from ..conftest import IMAGES

FIELDS = ("step", "total", "style_loss", "content_loss", "tv_loss", "elapsed", "size", "scale", "scales", "preview")
REAL_HAS_FIELDS = all(name in {f.name for f in dataclasses.fields(transfer.StepInfo)} for name in FIELDS)


@dataclasses.dataclass(frozen=True)
class StandInStepInfo:
    """transfer.StepInfo as the run API defines it (used until transfer.py has these fields)."""

    step: int
    total: int
    style_loss: float
    content_loss: float
    tv_loss: float
    elapsed: float
    size: tuple[int, int]
    scale: int
    scales: int
    preview: Image.Image | None

    @property
    def loss(self) -> float:
        return self.style_loss + self.content_loss + self.tv_loss


StepInfo: Any = transfer.StepInfo if REAL_HAS_FIELDS else StandInStepInfo


def step_info(step: int, *, total: int = 20, preview: Image.Image | None = None, size: tuple[int, int] = (32, 21),
              scale: int = 0, scales: int = 1, tv: float = 0.0) -> Any:
    return StepInfo(step=step, total=total, style_loss=100.0 / step, content_loss=2.0 + 1.0 / step, tv_loss=tv,
                    elapsed=0.25 * step, size=size, scale=scale, scales=scales, preview=preview)


def noise_image(seed: int, size: tuple[int, int] = (32, 21)) -> Image.Image:
    data = np.random.default_rng(seed).integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
    return Image.fromarray(data)


PHOTOS = ("chelsea.png", "coffee.png", "brick.png", "ihc.png", "hubble_deep_field.jpg")


def photo(index: int, size: tuple[int, int] = (48, 32)) -> Image.Image:
    """Distinct real pictures (lossy WebP keeps them close to themselves and far from each other)."""
    with Image.open(IMAGES / PHOTOS[index]) as image:
        return image.convert("RGB").resize(size, Image.Resampling.LANCZOS)


def frames_of(path: Path) -> tuple[list[np.ndarray], list[int], dict[str, Any]]:
    """Every frame of an animation as RGB arrays, each frame's duration, and the file's info."""
    pixels, durations = [], []
    with Image.open(path) as image:
        info = dict(image.info)
        for index in range(image.n_frames):
            image.seek(index)
            pixels.append(np.asarray(image.convert("RGB"), dtype=np.int16))
            durations.append(image.info["duration"])
    return pixels, durations, info


def mean_error(a: np.ndarray, b: Image.Image) -> float:
    return float(np.abs(a - np.asarray(b, dtype=np.int16)).mean())


# Mean absolute error (0-255) a frame may have against its own picture: measured 1.4-6.1 on these
# 48x32 photos (WebP at quality 80, GIF's shared palette), while other pictures are 35-140 away.
LOSSY = 12

RECORD = {"style_transfer": "0.1.0", "record_version": 1, "settings": {"steps": 300, "init": "é \"<&>\""}}


class TestStepInfo:
    @pytest.mark.skipif(not REAL_HAS_FIELDS, reason="transfer.StepInfo lacks the run API's fields yet")
    def test_real_step_info_has_what_recorders_read(self) -> None:
        info = step_info(3, preview=noise_image(0))
        assert info.loss == pytest.approx(100.0 / 3 + 2.0 + 1.0 / 3)
        assert loss_row(info)["size"] == [32, 21]


class TestNumberedPath:
    @pytest.mark.parametrize(("output", "step", "total", "expected"), [
        ("out.png", 40, 320, "out.0040.png"),
        ("out.png", 1, 9999, "out.0001.png"),
        ("out.png", 7, 12345, "out.00007.png"),
        ("out.png", 12345, 320, "out.12345.png"),  # a run that goes past its plan: more digits, never cut
        ("my.photo.jpg", 320, 320, "my.photo.0320.jpg"),
        ("a/b/out.webp", 0, 1, "a/b/out.0000.webp"),
        ("out.0040.png", 40, 320, "out.0040.0040.png"),  # never the output itself
    ])
    def test_beside_the_output(self, output: str, step: int, total: int, expected: str) -> None:
        assert numbered_path(output, step, total) == Path(expected)

    def test_in_save_dir(self, tmp_path: Path) -> None:
        assert numbered_path("a/b/out.png", 40, 320, save_dir=tmp_path / "frames") == tmp_path / "frames/out.0040.png"

    def test_names_sort_as_steps(self) -> None:
        names = [numbered_path("out.png", s, 320).name for s in (5, 40, 100, 320)]
        assert names == sorted(names)

    @pytest.mark.parametrize(("step", "total"), [(-1, 10), (1, 0)])
    def test_bad_numbers(self, step: int, total: int) -> None:
        with pytest.raises(ValueError, match="must be >="):
            numbered_path("out.png", step, total)

    def test_preview_interval(self) -> None:
        assert preview_interval(40, 10) == 10
        assert preview_interval(6, None, 4) == 2
        assert preview_interval(None, 15) == 15
        assert preview_interval(None, None) is None
        assert preview_interval() is None


class TestFrameSaver:
    def test_writes_exactly_the_frames_asked_for(self, tmp_path: Path) -> None:
        saver = FrameSaver(tmp_path / "out.png", 3)
        previews = {step: noise_image(step) for step in range(1, 11)}
        for step in range(1, 11):
            saver(step_info(step, preview=previews[step]))
        expected = [tmp_path / f"out.{s:04d}.png" for s in (3, 6, 9)]
        assert saver.written == expected
        assert sorted(tmp_path.iterdir()) == expected  # nothing else: no temp files, no other steps
        for step, path in zip((3, 6, 9), expected):  # each frame is the image of its step
            with Image.open(path) as image:
                np.testing.assert_array_equal(np.asarray(image), np.asarray(previews[step]))

    def test_steps_without_a_preview_are_skipped(self, tmp_path: Path) -> None:
        saver = FrameSaver(tmp_path / "out.png", 2)
        saver(step_info(2, preview=None))
        saver(step_info(4, preview=noise_image(4)))
        assert [p.name for p in saver.written] == ["out.0004.png"]

    def test_save_dir_and_record(self, tmp_path: Path) -> None:
        folder = tmp_path / "frames"
        folder.mkdir()
        saver = FrameSaver(tmp_path / "out.webp", 5, save_dir=folder,
                           record=lambda info: {**RECORD, "evaluations": info.step})
        for step in (5, 10):
            saver(step_info(step, total=320, preview=noise_image(step)))
        assert saver.written == [folder / "out.0005.webp", folder / "out.0010.webp"]
        assert read_record(saver.written[1]) == {**RECORD, "evaluations": 10}

    def test_static_record(self, tmp_path: Path) -> None:
        saver = FrameSaver(tmp_path / "out.png", 1, record=RECORD)
        saver(step_info(1, preview=noise_image(1)))
        assert read_record(saver.written[0]) == RECORD

    @pytest.mark.parametrize("every", [0, -1, 1.5, True])
    def test_bad_every(self, every: Any, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match="every must be an integer >= 1"):
            FrameSaver(tmp_path / "out.png", every)

    @pytest.mark.parametrize(("output", "save_dir", "said"), [
        ("missing/out.png", None, "does not exist"),
        ("out.xyz", None, "extension"),
        ("out.png", "missing", "save folder does not exist"),
    ])
    def test_bad_paths_fail_at_construction(self, output: str, save_dir: str | None, said: str,
                                            tmp_path: Path) -> None:
        with pytest.raises(OutputError, match=said):
            FrameSaver(tmp_path / output, 10, save_dir=None if save_dir is None else tmp_path / save_dir)
        assert list(tmp_path.iterdir()) == []


def run_animation(path: Path, previews: dict[int, Image.Image], every: int, **options: Any) -> Animation:
    animation = Animation(path, every, **options)
    for step in range(1, max(previews) + 1):
        animation(step_info(step, preview=previews.get(step)))
    return animation


class TestAnimation:
    @pytest.mark.parametrize("ext", [".webp", ".gif"])
    def test_frames_durations_and_record(self, ext: str, tmp_path: Path) -> None:
        path = tmp_path / f"run{ext}"
        previews = {step: photo(step // 2 - 1) for step in (2, 4, 6, 8)}  # steps 2..8: four photos
        previews[3] = photo(4)  # not a multiple of every: never a frame
        animation = run_animation(path, previews, 2, frame_ms=120, last_ms=2000)
        assert animation.steps == [2, 4, 6, 8] and len(animation) == 4
        final = photo(4)
        assert animation.close(final, RECORD) == path
        pixels, durations, info = frames_of(path)
        assert len(pixels) == 5
        assert durations == [120, 120, 120, 120, 2000]
        assert info.get("loop") == 0
        sources = [previews[s] for s in (2, 4, 6, 8)] + [final]
        for frame, own in zip(pixels, sources):  # each frame is its own picture, not another one
            errors = [mean_error(frame, source) for source in sources]
            assert errors.index(min(errors)) == sources.index(own)
            assert min(errors) < LOSSY, errors
        assert read_record(path) == RECORD
        assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temp file left

    def test_first_and_last_frames_match(self, tmp_path: Path) -> None:
        path = tmp_path / "run.webp"
        previews = {1: photo(0), 2: photo(1)}
        final = photo(2)
        run_animation(path, previews, 1).close(final)
        pixels, _, _ = frames_of(path)
        assert mean_error(pixels[0], previews[1]) < LOSSY
        assert mean_error(pixels[-1], final) < LOSSY
        assert mean_error(pixels[0], final) > 20  # the tolerance tells pictures apart
        assert read_record(path) is None

    def test_the_gifs_first_frame_keeps_its_own_colours(self, tmp_path: Path) -> None:
        # The start (the photo) beside twelve frames of other pictures: with one palette for all it came out in their
        # few colours (the control, made here with that one palette); with its own it stays near its own picture.
        from style_transfer.cli.recorders import _shared_palette

        path = tmp_path / "run.gif"
        previews = {step: photo(step % 3 + 2) for step in range(2, 14)}
        animation = run_animation(path, {1: photo(0), **previews}, 1)
        animation.close(photo(4))
        pixels, _, _ = frames_of(path)
        control = _shared_palette([photo(0), *previews.values(), photo(4)])[0].convert("RGB")
        own, one_palette = mean_error(pixels[0], photo(0)), mean_error(np.asarray(control, dtype=np.int16), photo(0))
        assert own < 0.6 * one_palette, (own, one_palette)
        assert all(mean_error(frame, previews[step]) < LOSSY for frame, step in zip(pixels[1:], previews))

    def test_frames_take_the_final_size_capped(self, tmp_path: Path) -> None:
        # Coarse to fine: previews at 24x16 then 48x32; the final image 96x64 capped to 60x40.
        path = tmp_path / "run.gif"
        previews = {1: photo(0, (24, 16)), 2: photo(1, (48, 32)), 3: photo(3, (96, 64))}
        animation = run_animation(path, previews, 1, max_side=60)
        animation.close(photo(2, (96, 64)))
        with Image.open(path) as image:
            assert image.size == (60, 40) and image.n_frames == 4

    def test_a_last_frame_equal_to_the_final_image_is_dropped(self, tmp_path: Path) -> None:
        path = tmp_path / "run.webp"
        final = photo(1)
        run_animation(path, {1: photo(0), 2: final.copy()}, 1, frame_ms=100, last_ms=1500).close(final)
        _, durations, _ = frames_of(path)
        assert durations == [100, 1500]

    def test_previews_are_copied(self, tmp_path: Path) -> None:
        path = tmp_path / "run.webp"
        preview = photo(0)
        animation = run_animation(path, {1: preview}, 1)
        preview.paste((0, 0, 0), (0, 0, *preview.size))  # the caller reuses its image
        animation.close(photo(1))
        pixels, _, _ = frames_of(path)
        assert mean_error(pixels[0], photo(0)) < LOSSY

    def test_a_tensor_final_image(self, tmp_path: Path) -> None:
        import torch

        path = tmp_path / "run.webp"
        final = photo(2)
        tensor = torch.from_numpy(np.asarray(final, dtype=np.float32) / 255).permute(2, 0, 1).unsqueeze(0)
        run_animation(path, {1: photo(0)}, 1).close(tensor)
        pixels, _, _ = frames_of(path)
        assert mean_error(pixels[-1], final) < LOSSY

    def test_close_twice(self, tmp_path: Path) -> None:
        animation = run_animation(tmp_path / "run.gif", {1: photo(0)}, 1)
        animation.close(photo(1))
        with pytest.raises(ValueError, match="written already"):
            animation.close(photo(1))

    def test_a_failed_write_leaves_the_old_file_and_no_temp(self, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
        path = tmp_path / "run.webp"
        path.write_bytes(b"old")
        animation = run_animation(path, {1: photo(0)}, 1)

        def disk_full(*args: Any, **kwargs: Any) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(Image.Image, "save", disk_full)
        with pytest.raises(OutputError, match="run.webp: cannot write .No space left on device"):
            animation.close(photo(1))
        assert path.read_bytes() == b"old"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["run.webp"]
        monkeypatch.undo()
        animation.close(photo(1))  # the frames were kept: a second try writes the file
        assert len(frames_of(path)[0]) == 2

    @pytest.mark.parametrize(("name", "said"), [
        ("run.mp4", r"run\.mp4: cannot write an animation with extension '\.mp4' \(use \.webp or \.gif\)"),
        ("run.png", "extension '.png'"),
        ("run", "no extension"),
        ("missing/run.webp", "does not exist"),
        (".", "is a directory"),
    ])
    def test_bad_paths_before_any_work(self, name: str, said: str, tmp_path: Path) -> None:
        with pytest.raises(OutputError, match=said):
            check_animation_path(tmp_path / name)
        with pytest.raises(OutputError, match=said):
            Animation(tmp_path / name, 10)
        assert list(tmp_path.iterdir()) == []

    def test_formats(self, tmp_path: Path) -> None:
        assert check_animation_path(tmp_path / "a.WEBP") == "WEBP"
        assert check_animation_path(tmp_path / "a.gif") == "GIF"

    @pytest.mark.parametrize("option", ["max_side", "frame_ms", "last_ms"])
    def test_bad_options(self, option: str, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match=f"{option} must be an integer >= 1, got 0"):
            Animation(tmp_path / "run.webp", 1, **{option: 0})


def log_steps(log: LossLog, steps: range, **kwargs: Any) -> list[Any]:
    infos = [step_info(s, **kwargs) for s in steps]
    for info in infos:
        log(info)
    return infos


class TestLossLog:
    def test_round_trip(self, tmp_path: Path) -> None:
        path = tmp_path / "losses.jsonl"
        with LossLog(path) as log:
            infos = log_steps(log, range(1, 6), tv=0.5)
        rows = read_log(path)
        assert rows == log.rows
        assert [set(r) for r in rows] == [{"step", "seconds", "style", "content", "tv", "loss", "size", "scale"}] * 5
        for row, info in zip(rows, infos):  # the values the steps carried, exactly (JSON keeps floats)
            assert row == {"step": info.step, "seconds": info.elapsed, "style": info.style_loss,
                           "content": info.content_loss, "tv": 0.5, "loss": info.style_loss + info.content_loss + 0.5,
                           "size": [32, 21], "scale": 0}

    def test_each_line_is_on_disk_as_it_is_written(self, tmp_path: Path) -> None:
        path = tmp_path / "losses.jsonl"
        log = LossLog(path)
        log_steps(log, range(1, 4))
        lines = path.read_text().splitlines()  # the log still open
        assert [json.loads(line)["step"] for line in lines] == [1, 2, 3]
        log.close()
        log.close()  # twice: nothing
        with pytest.raises(ValueError, match="closed"):
            log(step_info(4))

    def test_survives_an_exception_mid_run(self, tmp_path: Path) -> None:
        path = tmp_path / "losses.jsonl"
        with pytest.raises(KeyboardInterrupt), LossLog(path) as log:
            for step in range(1, 10):
                log(step_info(step))
                if step == 3:
                    raise KeyboardInterrupt
        assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1, 2, 3]

    def test_non_finite_losses(self, tmp_path: Path) -> None:
        path = tmp_path / "losses.jsonl"
        info = StepInfo(step=1, total=2, style_loss=math.nan, content_loss=math.inf, tv_loss=-math.inf, elapsed=0.1,
                        size=(32, 21), scale=0, scales=1, preview=None)
        with LossLog(path) as log:
            log(info)
        json.loads(path.read_text(), parse_constant=lambda name: pytest.fail(f"not JSON: {name}"))
        row = read_log(path)[0]
        assert math.isnan(row["style"]) and row["content"] == math.inf and row["tv"] == -math.inf
        assert math.isnan(row["loss"])

    def test_a_line_cut_short_at_the_end_is_skipped(self, tmp_path: Path) -> None:
        path = tmp_path / "losses.jsonl"
        with LossLog(path) as log:
            log_steps(log, range(1, 3))
        with open(path, "a") as handle:
            handle.write('{"step": 3, "sec')
        assert [row["step"] for row in read_log(path)] == [1, 2]

    @pytest.mark.parametrize(("text", "said"), [
        ('{"step": 1}\nnot json\n{"step": 3}\n', "line 2 is not JSON"),
        ('{"step": 1}\n[1, 2]\n', "line 2 is not a JSON object"),
    ])
    def test_bad_logs(self, text: str, said: str, tmp_path: Path) -> None:
        path = tmp_path / "losses.jsonl"
        path.write_text(text)
        with pytest.raises(LogError, match=f"losses.jsonl: {said}"):
            read_log(path)

    def test_missing_log(self, tmp_path: Path) -> None:
        with pytest.raises(LogError, match="no such file"):
            read_log(tmp_path / "none.jsonl")

    @pytest.mark.parametrize(("name", "said"), [("missing/l.jsonl", "does not exist"), (".", "is a directory")])
    def test_bad_log_paths(self, name: str, said: str, tmp_path: Path) -> None:
        with pytest.raises(OutputError, match=said):
            LossLog(tmp_path / name)


def two_scale_rows() -> list[dict[str, Any]]:
    infos = [step_info(s, size=(16, 11), scale=0, scales=2, tv=0.1) for s in range(1, 6)]
    infos += [step_info(s, size=(32, 21), scale=1, scales=2, tv=0.1) for s in range(6, 12)]
    return [loss_row(info) for info in infos]


class TestPlot:
    def test_png_of_the_right_size_with_the_record(self, tmp_path: Path) -> None:
        path = tmp_path / "losses.png"
        assert plot_losses(two_scale_rows(), path, title="a run", record=RECORD) == path
        with Image.open(path) as image:
            assert image.format == "PNG"
            assert image.size == (round(recorders.PLOT_FIGSIZE[0] * recorders.PLOT_DPI),
                                  round(recorders.PLOT_FIGSIZE[1] * recorders.PLOT_DPI))
        assert read_record(path) == RECORD
        assert sorted(p.name for p in tmp_path.iterdir()) == ["losses.png"]

    @pytest.mark.parametrize(("ext", "magic"), [(".svg", b"<?xml"), (".pdf", b"%PDF")])
    def test_other_formats(self, ext: str, magic: bytes, tmp_path: Path) -> None:
        path = tmp_path / f"losses{ext}"
        plot_losses(two_scale_rows(), path)
        assert path.read_bytes().startswith(magic)

    def test_curves_are_the_rows(self) -> None:
        rows = two_scale_rows()
        figure = loss_figure(rows)
        (axes,) = figure.axes
        assert axes.get_yscale() == "log"
        curves = {line.get_label(): line for line in axes.get_lines() if not line.get_label().startswith("_")}
        assert set(curves) == {"total", "style", "content", "tv"}
        for label, key in (("total", "loss"), ("style", "style"), ("content", "content"), ("tv", "tv")):
            np.testing.assert_array_equal(curves[label].get_xdata(), [r["step"] for r in rows])
            np.testing.assert_array_equal(curves[label].get_ydata(), [r[key] for r in rows])
        vertical = [line for line in axes.get_lines() if line.get_label().startswith("_")]
        assert [list(line.get_xdata()) for line in vertical] == [[6, 6]]  # where the size changes
        assert {text.get_text() for text in axes.texts} == {"16x11", "32x21"}

    def test_no_tv_curve_without_tv(self) -> None:
        rows = [loss_row(step_info(s)) for s in range(1, 4)]
        labels = {line.get_label() for line in loss_figure(rows).axes[0].get_lines()}
        assert "tv" not in labels and "total" in labels

    def test_size_changes(self) -> None:
        assert size_changes(two_scale_rows()) == [(6, (32, 21))]
        assert size_changes([]) == []

    def test_no_rows(self, tmp_path: Path) -> None:
        plot_losses([], tmp_path / "empty.png")
        assert (tmp_path / "empty.png").stat().st_size > 0

    def test_missing_matplotlib(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
            monkeypatch.delitem(sys.modules, name)
        monkeypatch.setitem(sys.modules, "matplotlib", None)
        for call in (check_plot_available, lambda: plot_losses(two_scale_rows(), tmp_path / "l.png")):
            with pytest.raises(MissingExtra) as caught:
                call()
            assert str(caught.value) == "--plot needs matplotlib: pip install 'style_transfer[plot]'"
            assert isinstance(caught.value, ImportError) and isinstance(caught.value, StyleTransferError)
        assert list(tmp_path.iterdir()) == []

    @pytest.mark.parametrize(("name", "said"), [
        ("losses.jpg", r"losses\.jpg: cannot write a plot with extension '\.jpg' \(use \.png, \.svg or \.pdf\)"),
        ("losses", "no extension"),
        ("missing/losses.png", "does not exist"),
        (".", "is a directory"),
    ])
    def test_bad_paths_before_any_work(self, name: str, said: str, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
        with pytest.raises(OutputError, match=said):
            check_plot_path(tmp_path / name)
        monkeypatch.setitem(sys.modules, "matplotlib", None)  # the path is checked before matplotlib
        with pytest.raises(OutputError, match=said):
            plot_losses(two_scale_rows(), tmp_path / name)
        assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_imports_neither_torch_nor_matplotlib() -> None:
    code = ("import sys, style_transfer.cli.recorders; "
            "print(sorted(m for m in ('torch', 'matplotlib', 'numpy') if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
def test_files_get_the_mode_of_a_new_file(tmp_path: Path) -> None:
    mask = os.umask(0o022)
    try:
        animation = run_animation(tmp_path / "run.webp", {1: photo(0)}, 1)
        animation.close(photo(1))
        plot_losses(two_scale_rows(), tmp_path / "losses.svg")
        with LossLog(tmp_path / "losses.jsonl") as log:
            log(step_info(1))
    finally:
        os.umask(mask)
    assert {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()} == {
        "run.webp": 0o644, "losses.svg": 0o644, "losses.jsonl": 0o644}
