"""The run API (run.Run): events, previews, cancellation, checkpoints and resume, early stop.

VGG19 with seeded random weights, tiny images. Both loss weights x1000 where LBFGS must store
curvature pairs (under random weights and the tutorial's weights it often stores none and the
optimiser state would hold nothing to lose); resumed runs are compared bit for bit with the
uninterrupted run on the same machine, in the same process.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from style_transfer import StyleConfig
from style_transfer.fast.basis import LATE_EXPONENT
from style_transfer.errors import CheckpointError
from style_transfer.io.images import pil_to_tensor
from style_transfer.run.run import Run
from style_transfer.config.run_options import RunOptions
from style_transfer.core.steps import planned_evaluations
from style_transfer.fast.speed import resolve_speed

from ..conftest import small_image
from ..helpers import pixels

SCALED = {"style_weight": 1e9, "content_weight": 1e3}  # LBFGS's normal regime under random weights


@pytest.fixture(scope="module")
def images() -> tuple:
    return small_image("chelsea.png", (32, 21)), small_image("ihc.png", (32, 32))


def config(**fields) -> StyleConfig:
    return StyleConfig(**{"size": 32, "steps": 30, "weights": "random", "device": "cpu", **SCALED, **fields})


@pytest.mark.slow
def test_events_count_up_to_a_fixed_plan(images) -> None:
    events = []
    result = Run(*images, config()).execute(events.append)
    assert [e.step for e in events] == list(range(1, len(events) + 1))
    assert {e.total for e in events} == {planned_evaluations(30)} == {40}
    assert len(events) == result.evaluations <= 40
    assert all(b.elapsed >= a.elapsed >= 0 for a, b in zip(events, events[1:]))
    assert {e.size for e in events} == {(32, 21)} and {e.scale for e in events} == {0}
    assert all(e.preview is None for e in events)  # none asked for
    assert result.stopped in ("done", "converged")
    assert result.losses["loss"] == pytest.approx(events[-1].loss)
    assert result.record["evaluations"] == result.evaluations and result.record["settings"]["size"] == 32


@pytest.mark.slow
def test_coarse_to_fine_events_name_each_size(images) -> None:
    events = []
    Run(*images, config(size=64, scales=3, scale_steps=(20, 20, 20))).execute(events.append)
    sizes = [e.size for e in events if e.step in (1, 21, 41)]
    assert sizes == [(16, 16), (32, 21), (64, 42)]  # long sides 16, 32, 64 of a 32x21 image; short sides floored at 16
    assert [e.scale for e in events if e.step in (1, 21, 41)] == [0, 1, 2]
    assert {e.scales for e in events} == {3} and {e.total for e in events} == {60}


def test_preview_is_the_image_a_cancel_at_that_step_keeps(images) -> None:
    """Two mechanisms, one truth: the preview of evaluation k, and the image a run cancelled at k returns."""
    previews = {}
    Run(*images, config(steps=20), RunOptions(preview_every=7)).execute(
        lambda e: previews.__setitem__(e.step, e.preview))
    assert sorted(k for k, v in previews.items() if v is not None) == [7, 14, 21, 28, 35]

    run = Run(*images, config(steps=20))
    result = run.execute(lambda e: run.cancel() if e.step == 14 else None)
    assert (result.stopped, result.evaluations) == ("cancelled", 14)
    assert np.array_equal(pixels(result.image), pixels(previews[14]))
    assert not np.array_equal(pixels(previews[7]), pixels(previews[14]))  # the previews do change


def test_cancel_from_another_thread_ends_within_one_evaluation(images) -> None:
    run = Run(*images, config(steps=200))
    reached, cancelled = threading.Event(), threading.Event()
    seen = []

    def on_event(event) -> None:
        seen.append(event.step)
        if event.step == 3:
            reached.set()
            assert cancelled.wait(60)  # the other thread has called cancel() by now

    outcome = {}
    worker = threading.Thread(target=lambda: outcome.setdefault("result", run.execute(on_event)))
    worker.start()
    assert reached.wait(120)
    run.cancel()
    cancelled.set()
    worker.join(120)
    assert not worker.is_alive()
    result = outcome["result"]
    assert (result.stopped, result.evaluations, seen[-1]) == ("cancelled", 3, 3)
    assert result.image.size == (32, 21)


@pytest.mark.slow
@pytest.mark.parametrize("fields, stop_at", [({}, 25), ({"fast": True, "scales": 3, "size": 64, "steps": 60}, 27),
                                             ({"parametrization": "fourier"}, 25), ({"margin": 4}, 25)],
                         ids=["single-size", "coarse-to-fine", "fourier", "margin"])
def test_resume_gives_the_uninterrupted_image(images, tmp_path: Path, fields: dict, stop_at: int) -> None:
    """Interrupt after `stop_at` evaluations (mid LBFGS step), resume from the checkpoint: bit for bit."""
    settings = config(**fields)
    whole = Run(*images, settings).execute()

    checkpoint = tmp_path / "run.ckpt"
    first = Run(*images, settings, RunOptions(checkpoint=str(checkpoint)))
    stopped = first.execute(lambda e: first.cancel("interrupted") if e.step == stop_at else None)
    assert (stopped.stopped, stopped.evaluations) == ("interrupted", stop_at)
    assert checkpoint.exists()

    events = []
    resumed = Run(*images, settings, RunOptions(resume=str(checkpoint))).execute(events.append)
    if resolve_speed(settings).parametrization == "fourier":  # random weights jump in its first step: the guard ends it early
        assert 1 < events[0].step <= stop_at  # (and damps the steps after it: the checkpoint keeps that too)
    else:
        assert events[0].step == 21  # the checkpoint is the last whole LBFGS step (20), redone from there
    assert resumed.evaluations == whole.evaluations
    assert np.array_equal(pixels(resumed.image), pixels(whole.image))


@pytest.mark.slow
def test_resume_after_the_fourier_basis_went_flat(images, tmp_path: Path, monkeypatch) -> None:
    """A checkpoint taken after the basis's rebase (fast/basis.py: flat from half the planned evaluations)
    resumes in the flat basis, bit for bit (the best image so far too, which the run may hand back); told the old scale
    instead (a checkpoint without the key), it differs."""
    # Random weights make LBFGS jump at every restart, which would give the basis up for the pixels: no jump guard here.
    monkeypatch.setattr("style_transfer.core.guard.JUMP", float("inf"))
    settings = config(parametrization="fourier")
    trace: list[float] = []
    whole = Run(*images, settings).execute(lambda e: trace.append(e.loss))
    checkpoint = tmp_path / "run.ckpt"
    first = Run(*images, settings, RunOptions(checkpoint=str(checkpoint)))
    first.execute(lambda e: first.cancel("interrupted") if e.step == whole.evaluations - 3 else None)
    saved = torch.load(checkpoint, weights_only=True)
    assert saved["evaluations"] >= 20 and saved["optimizer"]["param_groups"][0]["exponent"] == LATE_EXPONENT
    resumed = Run(*images, settings, RunOptions(resume=str(checkpoint))).execute()
    assert resumed.evaluations == whole.evaluations and resumed.kept == whole.kept
    assert np.array_equal(pixels(resumed.image), pixels(whole.image))
    del saved["optimizer"]["param_groups"][0]["exponent"]
    torch.save(saved, checkpoint)
    wrong: list[float] = []
    Run(*images, settings, RunOptions(resume=str(checkpoint))).execute(lambda e: wrong.append(e.loss))
    assert wrong != trace[saved["evaluations"]:]  # its path after the checkpoint (the kept image may be older)


@pytest.mark.slow
def test_resume_needs_the_optimiser_state(images, tmp_path: Path) -> None:
    """The negative control of the test above: the checkpoint's image alone, with a fresh LBFGS, differs."""
    settings = config()
    whole = Run(*images, settings).execute()
    checkpoint = tmp_path / "run.ckpt"
    first = Run(*images, settings, RunOptions(checkpoint=str(checkpoint)))
    first.execute(lambda e: first.cancel() if e.step == 25 else None)
    saved = torch.load(checkpoint, weights_only=True)
    assert saved["evaluations"] == 20 and saved["optimizer"]["state"][0]["old_dirs"]  # pairs were stored
    saved["optimizer"] = {}
    torch.save(saved, checkpoint)
    resumed = Run(*images, settings, RunOptions(resume=str(checkpoint))).execute()
    assert not np.array_equal(pixels(resumed.image), pixels(whole.image))


@pytest.mark.slow
def test_checkpoint_every_writes_as_the_run_goes(images, tmp_path: Path) -> None:
    checkpoint = tmp_path / "run.ckpt"
    written = []
    Run(*images, config(steps=50), RunOptions(checkpoint=str(checkpoint), checkpoint_every=20)).execute(
        lambda e: written.append((e.step, torch.load(checkpoint, weights_only=True)["evaluations"]
                                  if checkpoint.exists() else None)))
    by_step = dict(written)
    assert by_step[20] is None and by_step[21] == 20 and by_step[41] == 40  # written after each LBFGS step
    assert torch.load(checkpoint, weights_only=True)["evaluations"] == 60  # and at the end
    assert list(tmp_path.iterdir()) == [checkpoint]  # no temp files left


def test_the_content_file_is_read_once_and_its_header_once_more(images, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Over a whole run (two sizes, its alpha kept, a checkpoint's fingerprint, the record): the header for the
    memory plan, then the bytes once, each size's image decoded and the record's hash made from them."""
    import os

    content = tmp_path / "content.png"
    images[0].save(content)
    opened: list[str] = []
    real_open = os.open

    def spy(path, *args, **kwargs):
        if os.fspath(path) == str(content):
            opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    result = Run(str(content), images[1], config(size=40, scales=2, steps=2, keep_alpha=True),
                 RunOptions(checkpoint=str(tmp_path / "run.ckpt"))).execute()
    assert len(opened) == 2
    monkeypatch.undo()
    from style_transfer.io.provenance import sha256_file

    assert result.record["inputs"]["content"] == {"name": "content.png", "sha256": sha256_file(content)}


def test_a_checkpoint_from_another_run_is_refused(images, tmp_path: Path) -> None:
    checkpoint = tmp_path / "run.ckpt"
    first = Run(*images, config(), RunOptions(checkpoint=str(checkpoint)))
    first.execute(lambda e: first.cancel() if e.step == 21 else None)
    with pytest.raises(CheckpointError, match=r"other settings \(style_weight: 1e\+09 in the checkpoint, 1e\+08 here\)"):
        Run(*images, config(style_weight=1e8), RunOptions(resume=str(checkpoint))).execute()
    with pytest.raises(CheckpointError, match="another content image"):
        Run(small_image("coffee.png", (32, 21)), images[1], config(), RunOptions(resume=str(checkpoint))).execute()
    damaged = tmp_path / "damaged.ckpt"
    damaged.write_bytes(checkpoint.read_bytes()[:200])
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        Run(*images, config(), RunOptions(resume=str(damaged))).execute()
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        Run(*images, config(), RunOptions(resume=str(tmp_path / "missing.ckpt"))).execute()


def test_plateau_stops_where_the_rule_says(images) -> None:
    events = []
    rate, patience = 0.05, 5
    result = Run(*images, config(steps=200, min_improvement=rate, patience=patience)).execute(events.append)
    assert result.stopped == "plateau" and result.evaluations < planned_evaluations(200)
    best = np.minimum.accumulate([e.loss for e in events])  # the rule, worked out again from the events
    stalled = [n for n in range(patience, len(best)) if best[n - patience] - best[n] < rate * best[n - patience]]
    assert stalled and stalled[0] == len(events) - 1  # stopped at the first evaluation the rule names


@pytest.mark.slow
def test_resume_keeps_the_early_stop_window(images, tmp_path: Path) -> None:
    """--min-improvement's window travels in the checkpoint: a run resumed late in its window stops at the
    evaluation the uninterrupted run stopped at, with its image. The negative control: with the window
    emptied in the checkpoint, the resumed run cannot stop before `patience` more evaluations."""
    settings = config(steps=200, min_improvement=0.01, patience=25)  # longer than an LBFGS step (20): see below
    whole = Run(*images, settings).execute()
    assert whole.stopped == "plateau" and whole.evaluations > 21
    checkpoint = tmp_path / "run.ckpt"
    first = Run(*images, settings, RunOptions(checkpoint=str(checkpoint)))
    first.execute(lambda e: first.cancel("interrupted") if e.step == whole.evaluations - 1 else None)
    saved = torch.load(checkpoint, weights_only=True)
    assert len(saved["plateau"]) == saved["evaluations"] > 0  # one running minimum per evaluation so far
    # The checkpoint is at most one LBFGS step (20 evaluations) behind, so within the window: else the control
    # below would prove nothing.
    assert whole.evaluations - saved["evaluations"] <= settings.patience
    resumed = Run(*images, settings, RunOptions(resume=str(checkpoint))).execute()
    assert (resumed.stopped, resumed.evaluations) == ("plateau", whole.evaluations)
    assert np.array_equal(pixels(resumed.image), pixels(whole.image))

    saved["plateau"] = []
    torch.save(saved, checkpoint)
    forgetful = Run(*images, settings, RunOptions(resume=str(checkpoint))).execute()
    assert forgetful.evaluations > whole.evaluations


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="preview_every"):
        RunOptions(preview_every=-1)
    with pytest.raises(ValueError, match="checkpoint_every needs a checkpoint"):
        RunOptions(checkpoint_every=20)
    with pytest.raises(ValueError, match="give both or neither"):
        StyleConfig(min_improvement=0.01)
    with pytest.raises(ValueError, match="min_improvement must be a fraction"):
        StyleConfig(min_improvement=2.0, patience=3)


@pytest.mark.slow
def test_the_default_run_is_stylize(images) -> None:
    from style_transfer import stylize

    settings = config(steps=20)
    assert np.array_equal(pixels(Run(*images, settings).execute().image), pixels(stylize(*images, settings)))
    assert pil_to_tensor(stylize(*images, settings)).shape == (1, 3, 21, 32)


def test_stages_are_told_before_the_first_evaluation(images) -> None:
    """Issue 33.6: on_stage hears the loading of the weights (not when the network is given), then the first size's
    model, each once, before the first event; a run cancelled at its first evaluation is enough to see them."""
    from style_transfer.networks.vgg import load_network

    told: list[str] = []
    for cnn in (None, load_network("vgg19", "random")):
        run = Run(*images, config(size=64, scales=2, scale_steps=(20, 20)), cnn=cnn, on_stage=told.append)
        run.execute(lambda event: told.append(f"evaluation {event.step}") or run.cancel())
    assert told == ["making VGG19 with seeded random weights", "building the model at 32x21 (size 1 of 2)",
                    "evaluation 1",
                    "building the model at 32x21 (size 1 of 2)", "evaluation 1"]


def test_each_event_tells_the_time_left_at_the_rate_so_far(images) -> None:
    """StepInfo.time_left: the planned work left at the run's seconds per megapixel-evaluation so far (run.timing; by
    hand below from the events' clock and sizes, each size's first evaluation left out of the rate, as it also builds
    the model); in a run of two sizes the larger size's evaluations count at their own size. Without the run's figure
    (the tutorial's loop, a size's first evaluation), the seconds per evaluation so far; None where no time was
    measured; 0 at the last evaluation."""
    from style_transfer.core.transfer import StepInfo

    assert StepInfo(5, 20, 1.0, 1.0, elapsed=10.0).time_left == pytest.approx(30.0)
    assert StepInfo(5, 20, 1.0, 1.0).time_left is None and StepInfo(25, 20, 1.0, 1.0, elapsed=1.0).time_left == 0
    assert StepInfo(5, 20, 1.0, 1.0, elapsed=10.0, planned_left=7.0).time_left == 7.0
    for scales in (1, 2):
        events: list = []
        Run(*images, config(size=64, scales=scales)).execute(events.append)
        assert events[0].planned_left is None and events[-1].time_left == 0
        seconds = work = 0.0
        for before, event in zip(events, events[1:]):
            if event.scale != before.scale:
                continue  # a size's first evaluation: no rate from it
            megapixels = event.size[0] * event.size[1] / 1e6
            seconds, work = seconds + event.elapsed - before.elapsed, work + megapixels
            if event.scale == scales - 1:  # no later size, so no set-up: the figure by hand
                assert event.time_left == pytest.approx(seconds / work * megapixels * (event.total - event.step),
                                                        rel=1e-9, abs=1e-12), (event.step, scales)
        if scales == 2:
            assert events[0].size != events[-1].size
