"""Video: the run's time on this machine (``run.timing.Timing``) worked out by hand on a fake clock, and given by the
library (``VideoRun.estimate``, ``time_left``, ``FrameInfo.time_left``) and shown by ``stylize-video`` on stderr."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from style_transfer.run.timing import Timing, work

from ..helpers import run_command


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_work_counts_the_evaluations_left_at_each_size() -> None:
    plan = [(20, 0.25), (40, 1.0)]  # coarse-to-fine: 20 evaluations at a quarter of the megapixels, then 40
    assert work(plan) == 20 * 0.25 + 40 * 1.0
    assert work(plan, skip=5) == 15 * 0.25 + 40
    assert work(plan, skip=30) == 30 * 1.0
    assert work(plan, skip=100) == 0


def test_the_time_left_is_the_planned_work_at_the_measured_rate_plus_each_frame_set_up() -> None:
    """Three frames: the first plans 40 evaluations, the others 20, all at 0.5 megapixels. The first frame's set-up
    (building the model) takes 3 s before its first evaluation ends, then each evaluation 1 s; saving it 0.5 s."""
    clock = FakeClock()
    timing = Timing([[(40, 0.5)], [(20, 0.5)], [(20, 0.5)]], clock=clock)
    assert timing.time_left() is None and timing.estimate() is None  # nothing measured
    clock.now += 2.0  # loading the first frame
    timing.start_frame()
    clock.now += 3.0  # set-up 2 s and the first evaluation 1 s
    timing.evaluated(0.5)
    assert timing.time_left() is None  # one evaluation gives no rate: it also built the model
    for _ in range(3):
        clock.now += 1.0
        timing.evaluated(0.5)
    assert timing.rate() == pytest.approx(2.0)  # 1 s per evaluation of 0.5 megapixels
    assert timing.setup() == pytest.approx(2.0)  # the first evaluation's 3 s less one evaluation
    # 36 evaluations of the first frame left, then two frames of 2 s set-up and 20 evaluations
    assert timing.time_left() == pytest.approx(36 + 2 * (2 + 20))
    assert timing.estimate() is None  # 4 evaluations: not yet READY
    ready = Timing.READY
    assert 4 < ready < 40
    for _ in range(ready - 4):
        assert timing.estimate() is None
        clock.now += 1.0
        timing.evaluated(0.5)
    estimate = timing.estimate()
    assert estimate is not None
    # spent since the start (2 s loading, 3 s set-up and first evaluation, then 1 s each), and left
    assert estimate.seconds == pytest.approx(5.0 + (ready - 1) + (40 - ready) + 2 * 22)
    assert (estimate.frames, estimate.frame_seconds, estimate.evaluation_seconds) == (3, pytest.approx(22),
                                                                                       pytest.approx(1.0))
    for _ in range(40 - ready):
        clock.now += 1.0
        timing.evaluated(0.5)
    clock.now += 0.5  # saving the frame: part of its set-up
    timing.end_frame()
    assert timing.setup() == pytest.approx(2.5)
    assert timing.time_left() == pytest.approx(2 * (2.5 + 20))
    for _ in range(2):
        timing.start_frame()
        for _ in range(20):
            clock.now += 1.0
            timing.evaluated(0.5)
        timing.end_frame()
    assert timing.time_left() == 0


@pytest.mark.slow
@pytest.mark.video
def test_the_library_estimates_the_run_and_the_command_shows_it(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("av", reason="the video extra is not installed")
    pytest.importorskip("cv2", reason="the video extra is not installed")
    from benchmarks.studies.flicker import moving_pattern, style_picture, write_frames
    from style_transfer.config.style import StyleConfig
    from style_transfer.video.cli import main
    from style_transfer.video.runner import VideoRun, VideoSettings

    clip = write_frames(str(tmp_path / "clip"), moving_pattern(32, 24, 3, (2, 1)))
    style = tmp_path / "style.png"
    style_picture(32).save(style)
    video = VideoRun(clip, [style], StyleConfig(size=32, steps=4, weights="random"), VideoSettings())
    assert video.estimate() is None and video.time_left() is None  # before the run
    estimates, frames = [], []
    video.execute(on_frame=frames.append, on_event=lambda index, info: estimates.append((index, video.estimate())))
    given = [(index, e) for index, e in estimates if e is not None]
    assert given and given[0][0] == 0  # during the first frame, before the others ran
    assert given[0][1].frames == 3 and given[0][1].seconds > 0
    lefts = [f.time_left for f in frames]
    assert all(left is not None for left in lefts) and lefts[-1] == 0 and lefts[0] > 0
    assert video.time_left() == 0

    result = run_command(main, [clip, style, "-o", tmp_path / "out.mp4", "--size", "32", "--steps", "4",
                                "--weights", "random", "--threads", "1"])
    said = [line for line in result.stderr.splitlines() if line.startswith("estimate: about ")]
    assert len(said) == 1 and re.search(r"for 3 frames on this machine", said[0]), result.stderr
    progress = [line for line in result.stderr.splitlines() if re.match(r"\d+/3 frames", line)]
    assert progress[-1].startswith("3/3 frames (100%)  0 s left"), result.stderr
    assert all(line.count(" left") <= 1 for line in progress), result.stderr  # the library's time left alone
    quiet = run_command(main, [clip, style, "-o", tmp_path / "quiet.mp4", "--size", "32", "--steps", "4",
                               "--weights", "random", "--threads", "1", "-q"])
    assert quiet.stderr == ""
