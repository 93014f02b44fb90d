"""Progress where stderr is no terminal (issue 47.4): ``ProgressLines`` on a fake clock, and ``stylize`` with its
stderr a pipe. The batch and video commands' lines are tested in tests/batch/ and tests/video/."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest

from style_transfer.cli.options import ProgressLines
from style_transfer.io.metadata import read_record
from style_transfer.run.timing import Timing

from ..conftest import IMAGES
from ..helpers import piped_stderr, progress_lines

ROOT = Path(__file__).resolve().parents[2]


class Clock:
    """A clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def made(total: int, unit: str = "evaluations") -> tuple[ProgressLines, list[str], Clock]:
    clock, written = Clock(), []
    return ProgressLines(total, unit, clock=clock, write=written.append), written, clock


def counts(lines: list[str]) -> list[int]:
    return [int(line.split("/")[0]) for line in lines]


def test_a_line_each_tenth_of_the_total() -> None:
    lines, written, clock = made(40)
    for step in range(1, 41):
        clock.now += 0.01
        lines.update(step, f"style {step}")
    lines.close()
    assert counts(written) == [4, 8, 12, 16, 20, 24, 28, 32, 36, 40]  # the last was due: close adds none
    assert written[0] == "4/40 evaluations (10%)  style 4  0.0 s, 0.4 s left"  # 0.04 s for 4: 0.36 s for 36
    assert written[-1] == "40/40 evaluations (100%)  style 40  0.4 s"


@pytest.mark.parametrize("total", [1, 2, 3, 7, 19, 40, 99, 320, 1001])
def test_at_most_eleven_lines_for_any_total_within_10_s(total: int) -> None:
    lines, written, _ = made(total)
    for step in range(1, total + 1):
        lines.update(step)
    lines.close()
    assert 1 <= len(written) <= 11 and written[-1].startswith(f"{total}/{total} evaluations (100%)")


def test_a_line_each_10_s_when_the_count_moves_slowly() -> None:
    lines, written, clock = made(1000)
    for step in range(1, 22):  # 3 s an evaluation: far from a tenth of 1000
        clock.now += 3
        lines.update(step)
    assert counts(written) == [4, 8, 12, 16, 20]  # at 12, 24, 36, 48 and 60 s
    assert written[0] == "4/1000 evaluations (0%)  12.0 s, 2988.0 s left"  # 3 s each for 996 more
    lines.update(21, "under way")  # news with no new count (an item's evaluations in a batch) is news too
    clock.now += 10
    lines.update(21, "still under way")
    assert written[-1] == "21/1000 evaluations (2%)  still under way  73.0 s, 3403.2 s left"  # 73 / 21 x 979


def test_the_last_news_is_the_last_line() -> None:
    lines, written, clock = made(40)
    for step in range(1, 6):
        lines.update(step, f"style {step}")
    clock.now += 1
    lines.close()  # a run stopped at 5: its last line says so
    assert written == ["4/40 evaluations (10%)  style 4  0.0 s", "5/40 evaluations (12%)  style 5  1.0 s, 7.0 s left"]
    lines.close()
    assert len(written) == 2  # closed twice (the command's error paths do), written once


def test_a_run_that_ends_short_of_its_plan_or_past_it() -> None:
    lines, written, _ = made(40)
    for step in range(1, 38):
        lines.update(step)
    lines.close(total=37)  # LBFGS converged: the last line ends on what ran, as the bar does
    assert written[-2:] == ["36/40 evaluations (90%)  0.0 s", "37/37 evaluations (100%)  0.0 s"]
    longer, written, _ = made(20)
    for step in range(1, 22):  # an LBFGS step that ended early put one more in the plan
        longer.update(step)
    longer.close()
    assert written[-1] == "21/21 evaluations (100%)  0.0 s"


def test_lines_are_wanted_where_stderr_is_no_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert ProgressLines.wanted()
    monkeypatch.setattr(sys, "stderr", Terminal())
    assert not ProgressLines.wanted()


@pytest.mark.slow
def test_stylize_writes_a_few_plain_lines_into_a_pipe(tmp_path: Path) -> None:
    """120 evaluations, which the bar redrew as one line of \\r-separated updates: at most eleven plain lines, the
    last one the run's last evaluation with the record's losses, the others one time left each (the run's,
    StepInfo.time_left); the run's estimate once, at its READY-th evaluation; -q writes none."""
    out = tmp_path / "out.png"
    args = [IMAGES / "chelsea.png", IMAGES / "ihc.png", "-o", out, "--weights", "random", "--size", "32",
            "--steps", "100", "--device", "cpu", "--threads", "1"]
    code = "from style_transfer.cli.stylize import main; main()"
    stderr, seconds = piped_stderr(code, args, ROOT)
    lines = progress_lines(stderr, "evaluations", 120, seconds)
    losses = read_record(out)["losses"]
    assert lines[-1].startswith(f"120/120 evaluations (100%)  style {losses['style']:.4g}  "
                                f"content {losses['content']:.4g}  ")
    assert all(re.search(r"  \d+ s left  [\d.]+ s$", line) for line in lines[:-1]), stderr
    assert "left" not in lines[-1]
    estimates = [line for line in stderr.splitlines() if line.startswith("estimate: about ")]
    assert len(estimates) == 1 and re.fullmatch(r"estimate: about \d+ s on this machine \(an evaluation [\d.e-]+ s "
                                                r"at the last size\)", estimates[0]), stderr
    # said at the first size's READY-th evaluation, before that evaluation's line and after the ones before it
    for line in lines:
        before = int(line.split("/")[0]) < Timing.READY
        assert (stderr.index(line) < stderr.index(estimates[0])) == before, (line, stderr)
    quiet, _ = piped_stderr(code, [*args, "-q"], ROOT)
    assert quiet == ""


def test_no_time_left_of_its_own_where_the_detail_says_the_library_s() -> None:
    clock, written = Clock(), []
    lines = ProgressLines(20, "frames", clock=clock, write=written.append, counts_left=False)
    for frame in range(1, 4):
        clock.now += 5
        lines.update(frame, f"frame {frame + 1}: 8/60 evaluations, {(20 - frame) * 5} s left")
    assert written[0] == "2/20 frames (10%)  frame 3: 8/60 evaluations, 90 s left  10.0 s"  # one time left, not two
    assert made(20)[0].counts_left  # the other commands' lines count their own
