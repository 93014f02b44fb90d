"""Video (issue 17) end to end, tiny (48x32 frames, random weights, few evaluations): the consistent mode
flickers less than --independent (the issue's gate, bounded against that control in the same test); a run
stopped after a frame and started again gives the frames of an uninterrupted one; the command writes the
video and its report, and refuses bad input in one line."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image

pytest.importorskip("av", reason="the video extra is not installed")
pytest.importorskip("cv2", reason="the video extra is not installed")

from benchmarks.studies.flicker import moving_pattern, style_picture, write_frames  # noqa: E402
from style_transfer.config.style import StyleConfig  # noqa: E402
from style_transfer.video.cli import main  # noqa: E402
from style_transfer.video.io import probe  # noqa: E402
from style_transfer.video.runner import VideoRun, VideoSettings, flicker  # noqa: E402

from ..helpers import piped_stderr, progress_lines  # noqa: E402

SIZE, FRAMES, STEPS = 48, 4, 10
# Random weights: the tutorial's loss weights scaled by 1000 so that LBFGS keeps curvature pairs (common notes).
CONFIG = StyleConfig(size=SIZE, steps=STEPS, weights="random", style_weight=1e9, content_weight=1e3)


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("video") / "clip"
    write_frames(str(folder), moving_pattern(SIZE, 32, FRAMES, (3, 2)))
    return folder


@pytest.fixture(scope="module")
def style(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("style") / "style.png"
    style_picture(64).save(path)
    return path


@pytest.mark.slow
@pytest.mark.video
def test_consistent_mode_flickers_less_than_independent(clip: Path, style: Path) -> None:
    """The consistent mode's warping error is below the independent frames' (the baseline, measured here). With
    random weights at 48 px LBFGS is chaotic and the ratio depends on the CPU's summation order (0.5 or less on a
    Sapphire Rapids, 0.675 on an AVX2 EPYC), so the margin comes from a control in this test: the same runs again
    in channels_last (another summation order of the same maths). The ratio counts at its worse of the two orders
    plus their difference, and must stay under 1."""
    ratios = []
    for channels_last in (False, True):
        config = dataclasses.replace(CONFIG, channels_last=channels_last)
        independent = VideoRun(clip, [style], config, VideoSettings(independent=True))
        assert independent.execute().stopped == "done"
        consistent = VideoRun(clip, [style], config, VideoSettings(temporal_weight=1e3 * 1e3))  # the default, x1000
        result = consistent.execute()
        assert result.stopped == "done" and result.done == FRAMES
        baseline, ours = flicker(independent, SIZE), flicker(consistent, SIZE)
        print(f"channels_last {channels_last}: warping error consistent {ours:.6f}, independent {baseline:.6f}")
        assert baseline > 1e-3  # the baseline does flicker (the comparison could fail)
        ratios.append(ours / baseline)
    assert max(ratios) + abs(ratios[0] - ratios[1]) < 1, ratios


@pytest.mark.slow
@pytest.mark.video
def test_a_stopped_run_continues_to_the_uninterrupted_frames(clip: Path, style: Path, tmp_path: Path) -> None:
    settings = VideoSettings(temporal_weight=1e6, first_frame_steps=STEPS, work_dir=str(tmp_path / "whole"))
    whole = VideoRun(clip, [style], CONFIG, settings)
    assert whole.execute().stopped == "done"
    parts = VideoSettings(temporal_weight=1e6, first_frame_steps=STEPS, work_dir=str(tmp_path / "parts"))
    first = VideoRun(clip, [style], CONFIG, parts)
    stopped = first.execute(on_frame=lambda info: first.cancel("interrupted") if info.index == 1 else None)
    assert (stopped.stopped, stopped.done) == ("interrupted", 2)
    assert not (tmp_path / "parts" / "frame_000002.png").exists()
    seen = []
    again = VideoRun(clip, [style], CONFIG, parts).execute(on_frame=seen.append)
    assert again.stopped == "done" and [f.resumed for f in seen] == [True, True, False, False]
    for index in range(FRAMES):
        name = f"frame_{index:06d}.png"
        with Image.open(tmp_path / "whole" / name) as a, Image.open(tmp_path / "parts" / name) as b:
            assert a.tobytes() == b.tobytes(), name
    other = VideoSettings(temporal_weight=5.0, work_dir=str(tmp_path / "parts"))  # another run's folder
    with pytest.raises(ValueError, match="holds frames of another run .*video"):
        VideoRun(clip, [style], CONFIG, other).execute()


@pytest.mark.slow
@pytest.mark.video
def test_the_command_writes_the_video_and_the_report(clip: Path, style: Path, tmp_path: Path) -> None:
    out, report = tmp_path / "out.mp4", tmp_path / "report.json"
    result = CliRunner().invoke(main, [str(clip), str(style), "-o", str(out), "--size", "32", "--steps", "4",
                                       "--first-frame-steps", "4", "--weights", "random", "--fps", "10",
                                       "--report", str(report), "-q"])
    assert result.exit_code == 0, result.output
    written = probe(out)
    assert written.count == FRAMES and written.seconds == pytest.approx([0, 0.1, 0.2, 0.3])
    data = json.loads(report.read_text())
    assert data["frames"] == FRAMES and data["mode"] == "consistent" and data["warping_error"] >= 0
    assert 0 <= data["flow_share"] < 1 and data["seconds_per_frame"] > 0
    assert not (tmp_path / "out.mp4.frames").exists()  # the work folder goes once the video is written
    import av

    with av.open(str(out)) as container:
        record = json.loads(container.metadata["comment"])  # the provenance record, in the container
    assert record["video"]["frames"] == FRAMES and record["video"]["independent"] is False
    assert record["settings"]["steps"] == 4 and record["weights"]["kind"] == "random"
    assert record["inputs"]["styles"][0]["name"] == "style.png"


@pytest.mark.slow
@pytest.mark.video
def test_a_pipe_gets_a_few_plain_lines(clip: Path, style: Path, tmp_path: Path) -> None:
    """Issue 47.4: where stderr is no terminal (a pipe here) the frames' evaluations reach no bar that redraws: a line
    per tenth of the frames or 10 s, the last one all of them."""
    root = Path(__file__).resolve().parents[2]
    stderr, seconds = piped_stderr("from style_transfer.video.cli import main; main()",
                                   [clip, style, "-o", tmp_path / "out.mp4", "--size", "32", "--steps", "4",
                                    "--first-frame-steps", "4", "--weights", "random", "--threads", "1"], root)
    progress_lines(stderr, "frames", FRAMES, seconds)
    assert stderr.splitlines()[-1] == f"wrote {tmp_path / 'out.mp4'} ({FRAMES} frames)"


def test_the_command_refuses_bad_input_in_one_line(style: Path, tmp_path: Path) -> None:
    text = tmp_path / "notes.mp4"
    text.write_text("not a video\n" * 20)
    out = tmp_path / "out.mp4"
    runner = CliRunner()
    result = runner.invoke(main, [str(text), str(style), "-o", str(out), "--weights", "random"])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and lines == [f"Error: {text}: not a readable video (Invalid data found when "
                                               f"processing input)"]  # FFmpeg's words, no "[Errno N]"
    assert not out.exists() and not (tmp_path / "out.mp4.frames").exists()
    notes = tmp_path / "notes.txt"
    notes.write_text("a text file given as the video\n")
    result = runner.invoke(main, [str(notes), str(style), "-o", str(out), "--weights", "random"])
    assert result.exit_code == 1 and "Errno" not in result.output, result.output
    assert result.output.strip().splitlines() == [f"Error: {notes}: not a readable video (Invalid data found "
                                                  f"when processing input)"]
    result = runner.invoke(main, [str(text), str(style), "-o", str(tmp_path / "out.png")])
    assert result.exit_code == 2 and "unknown video extension '.png'" in result.output
    assert len(result.output.strip().splitlines()) == 1
    result = runner.invoke(main, [str(text), str(style), "-o", str(out), "--temporal-weight", "-1"])
    assert result.exit_code == 2 and "--temporal-weight must be >= 0" in result.output


def test_the_command_refuses_a_size_that_cannot_fit_before_any_frame_is_read(
        clip: Path, style: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24: from the clip's and the style's sizes (run.fits.check_fits), before a frame is read at the size."""
    from style_transfer import memory
    from style_transfer.video import runner

    monkeypatch.setattr(memory, "available_bytes", lambda device: 380_000_000)  # test_faults.py's hand numbers
    monkeypatch.setattr(runner, "frames", lambda *a, **k: pytest.fail("a frame was read"))
    out = tmp_path / "out.mp4"
    result = CliRunner().invoke(main, [str(clip), str(style), "-o", str(out), "--weights", "random",
                                       "--size", "16384"])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1, result.output
    assert lines[0].startswith("Error: size 16384 px needs about ") and "--tile" in lines[0]
    assert not out.exists() and not (tmp_path / "out.mp4.frames").exists()


def test_the_command_refuses_an_output_that_is_an_input(style: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24: -o naming IN (here by a relative path) or a STYLE (a hard link): one line, exit 2, IN kept."""
    source = tmp_path / "clip.mp4"
    source.write_bytes(b"a video of the user's" * 10)
    os.link(style, tmp_path / "style.gif")
    monkeypatch.chdir(tmp_path)
    for args, named in ((["clip.mp4", str(style), "-o", "./clip.mp4"], "-o ./clip.mp4: is the same file as IN"),
                        (["clip.mp4", str(style), "-o", "style.gif"], "-o style.gif: is the same file as STYLE")):
        result = CliRunner().invoke(main, [*args, "--weights", "random"])
        lines = result.output.strip().splitlines()
        assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith(f"Error: {named}"), result.output
    assert source.read_bytes() == b"a video of the user's" * 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.mp4", "style.gif"]


def test_a_failed_run_takes_back_its_work_folder_unless_it_holds_finished_frames(clip: Path, style: Path,
                                                                                   tmp_path: Path) -> None:
    weights = tmp_path / "vgg.pth"
    weights.write_bytes(b"not a checkpoint\n" * 8)
    out = tmp_path / "out.mp4"
    result = CliRunner().invoke(main, [str(clip), str(style), "-o", str(out), "--size", "32", "--steps", "4",
                                       "--weights", str(weights), "-q"])
    assert result.exit_code == 1 and result.output.strip().splitlines() == [
        f"Error: {weights}: cannot load weights (corrupt: not a PyTorch file); expected a VGG19 state dict (.pth) or an ONNX file"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vgg.pth"]  # no out.mp4.frames, no work.json

    def failing(error: Exception, after_frame: int | None = None):  # a callback that raises, as a failure would
        def callback(*args: object) -> None:
            if after_frame is None or args[0].index == after_frame:
                raise error
        return callback

    config = StyleConfig(size=32, steps=4, weights="random")
    work = tmp_path / "work"
    settings = VideoSettings(first_frame_steps=4, work_dir=str(work))
    with pytest.raises(MemoryError):  # a failure in the first frame: nothing to continue from
        VideoRun(clip, [style], config, settings).execute(on_event=failing(MemoryError()))
    assert not work.exists()
    with pytest.raises(RuntimeError):  # a failure after the first frame: it and work.json stay
        VideoRun(clip, [style], config, settings).execute(on_frame=failing(RuntimeError("disk"), 1))
    assert sorted(p.name for p in work.iterdir()) == ["frame_000000.png", "frame_000001.png", "work.json"]
    seen = []
    assert VideoRun(clip, [style], config, settings).execute(on_frame=seen.append).stopped == "done"
    assert [f.resumed for f in seen] == [True, True, False, False]  # the same run continued from them
    mine = tmp_path / "mine"
    mine.mkdir()  # a folder the user made: a failed run leaves it (empty, as it was)
    with pytest.raises(RuntimeError):
        VideoRun(clip, [style], config, VideoSettings(work_dir=str(mine))).execute(
            on_event=failing(RuntimeError("boom")))
    assert mine.is_dir() and list(mine.iterdir()) == []


def test_the_command_default_is_the_library_default() -> None:
    from style_transfer.video import DEFAULT_TEMPORAL_WEIGHT, default_temporal_weight

    assert default_temporal_weight("torchvision") == default_temporal_weight("caffe") == DEFAULT_TEMPORAL_WEIGHT
    assert VideoSettings().temporal_weight is None  # the network's, resolved by VideoRun (tests/video/)


@pytest.mark.slow
@pytest.mark.video
def test_ctrl_c_keeps_the_finished_frames_and_the_same_command_continues(clip: Path, style: Path,
                                                                          tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    out, work = tmp_path / "out.mp4", tmp_path / "work"
    args = [sys.executable, "-c", "from style_transfer.video.cli import main; main()", str(clip), str(style),
            "-o", str(out), "--size", "32", "--steps", "40", "--first-frame-steps", "4", "--weights", "random",
            "--work-dir", str(work), "-q"]
    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen(args, cwd=root, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600  # a bound on a hung process, not a timing: we wait for a file
        while not (work / "frame_000000.png").exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process.poll() is None, process.stderr.read()
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=600)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    assert "kept in" in stderr and "run the same command again to continue" in stderr
    assert len(stderr.strip().splitlines()) == 1
    assert not out.exists() and (work / "frame_000000.png").exists()
    kept = sorted(p.name for p in work.glob("frame_*.png"))
    done = subprocess.run(args, cwd=root, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert probe(out).count == FRAMES and not work.exists()
    assert kept and len(kept) < FRAMES  # it did stop part-way


@pytest.mark.slow
@pytest.mark.video
@pytest.mark.parametrize("fields", [{"preserve_colors": "luminance"}, {"scales": 2}])
def test_luminance_and_coarse_to_fine_frames_take_the_warp(clip: Path, style: Path, fields: dict) -> None:
    # luminance: the run optimises a gray image, so the warp and target become gray; coarse-to-fine: the
    # temporal target is resized to each working size. Both must run, and keep the warp's steadiness. The scaled loss
    # weights (CONFIG's): at the tutorial's, coarse-to-fine flickered more than independent frames in one process.
    config = dataclasses.replace(CONFIG, size=32, steps=4, **fields)
    video = VideoRun(clip, [style], config, VideoSettings())
    assert video.execute().stopped == "done"
    independent = VideoRun(clip, [style], config, VideoSettings(independent=True))
    independent.execute()
    assert flicker(video, 32) < flicker(independent, 32)
