"""Iterate averaging (issue 26.3, core/averaging.py): the bias-corrected moving average against a hand
computation, in runs with either optimiser, its previews, its restart at each coarse-to-fine size, and resume."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from style_transfer import StyleConfig
from style_transfer.core.averaging import IterateAverage
from style_transfer.core.run_stats import RunStats
from style_transfer.io.images import tensor_to_pil
from style_transfer.run.run import Run
from style_transfer.config.run_options import RunOptions

from ..conftest import IMAGES, small_image
from ..helpers import FAST, one_error_line, invoke_stylize as invoke

SCALED = {"style_weight": 1e9, "content_weight": 1e3}  # LBFGS's normal regime under random weights (test_run.py)


@pytest.fixture(scope="module")
def images() -> tuple:
    return small_image("chelsea.png", (32, 21)), small_image("ihc.png", (32, 32))


def config(**fields) -> StyleConfig:
    return StyleConfig(**{"size": 32, "steps": 20, "weights": "random", "device": "cpu", **SCALED, **fields})


def pixels(image) -> np.ndarray:
    return np.asarray(image.convert("RGB"), dtype=np.int16)


def hand_average(iterates: list[torch.Tensor], decay: float) -> torch.Tensor:
    """avg_n = decay avg_{n-1} + (1 - decay) x_n from 0, over (1 - decay^n), in float64."""
    average = torch.zeros_like(iterates[0], dtype=torch.float64)
    for x in iterates:
        average = decay * average + (1 - decay) * x.double()
    return average / (1 - decay ** len(iterates))


class TestIterateAverage:
    def test_a_toy_sequence_by_hand(self) -> None:
        average = IterateAverage(0.5)
        assert average.value() is None
        seen = []
        for x in (0.2, 0.6, 1.0):
            average.update(torch.tensor([x]))
            seen.append(float(average.value()))
        # avg: 0.1, 0.35, 0.675; corrected by 1 - 0.5^n: 0.5, 0.75, 0.875
        assert seen == pytest.approx([0.2, 0.35 / 0.75, 0.675 / 0.875], rel=1e-6)

    def test_bias_correction_keeps_a_constant_image(self) -> None:
        average = IterateAverage(0.99)
        for _ in range(3):
            average.update(torch.full((1, 3, 2, 2), 0.4))
        assert torch.allclose(average.value(), torch.full((1, 3, 2, 2), 0.4))  # without it: 0.4 * 0.0297

    def test_state_round_trip_and_reset(self) -> None:
        average = IterateAverage(0.9)
        average.update(torch.tensor([0.5]))
        other = IterateAverage(0.9)
        other.load_state_dict(average.state_dict())
        assert other.count == 1 and torch.equal(other.value(), average.value())
        with pytest.raises(ValueError, match="decay 0.9, this run 0.8"):
            IterateAverage(0.8).load_state_dict(average.state_dict())
        average.reset()
        assert average.value() is None

    @pytest.mark.parametrize("decay", [0, 1, 1.5, -0.1, True])
    def test_a_decay_outside_0_1_is_refused(self, decay) -> None:
        with pytest.raises(ValueError, match="between 0 and 1"):
            IterateAverage(decay)
        with pytest.raises(ValueError, match="average must be a decay between 0 and 1"):
            StyleConfig(average=decay)

    def test_the_command_refuses_it_in_one_line(self, tmp_path: Path) -> None:
        out = tmp_path / "o.png"
        line = one_error_line(invoke([str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", str(out), *FAST,
                                      "--average", "1.5"], 2))
        assert "average must be a decay between 0 and 1" in line and not out.exists()


def watched_run(images, settings: StyleConfig, options: RunOptions | None = None):
    """Run, keeping every evaluation's image (what the loop evaluated) and each event."""
    stats, iterates, events = RunStats(), [], []

    def on_event(event) -> None:
        iterates.append(stats.last_image().clone())
        events.append(event)

    return Run(*images, settings, options).execute(on_event, stats=stats), iterates, events


@pytest.mark.parametrize("optimizer", ["lbfgs", "adam"])
def test_the_output_is_the_average_of_every_evaluation(images, optimizer: str) -> None:
    """Per closure evaluation for both optimisers; the same iterates as the run without averaging (it changes no
    gradient), and its previews show the average too."""
    plain, plain_iterates, _ = watched_run(images, config(optimizer=optimizer))
    averaged, iterates, events = watched_run(images, config(optimizer=optimizer, average=0.9),
                                             RunOptions(preview_every=7))
    assert len(iterates) == averaged.evaluations == plain.evaluations
    assert all(torch.equal(a, b) for a, b in zip(iterates, plain_iterates))
    assert np.abs(pixels(averaged.image) - pixels(tensor_to_pil(hand_average(iterates, 0.9)))).max() <= 1
    assert np.abs(pixels(averaged.image) - pixels(plain.image)).max() > 2  # it is not the last image
    preview = events[13].preview  # the 14th evaluation's
    assert np.abs(pixels(preview) - pixels(tensor_to_pil(hand_average(iterates[:14], 0.9)))).max() <= 1


@pytest.mark.slow
def test_coarse_to_fine_restarts_the_average_at_each_size(images) -> None:
    result, iterates, events = watched_run(images, config(size=64, scales=2, scale_steps=(20, 20), average=0.9))
    final = [x for x, e in zip(iterates, events) if e.scale == 1]
    assert 0 < len(final) < len(iterates)
    assert np.abs(pixels(result.image) - pixels(tensor_to_pil(hand_average(final, 0.9)))).max() <= 1


@pytest.mark.slow
@pytest.mark.parametrize("fields, stop_at", [({}, 25), ({"size": 64, "scales": 2, "scale_steps": (20, 40)}, 47)],
                         ids=["single-size", "coarse-to-fine"])
def test_resume_with_averaging_is_the_uninterrupted_run(images, tmp_path: Path, fields: dict, stop_at: int) -> None:
    """Interrupted mid LBFGS step, resumed from the checkpoint: the averaged image bit for bit (the average and
    its count travel in the checkpoint; restarting it would give another image)."""
    settings = config(steps=30, average=0.95, **fields)
    whole = Run(*images, settings).execute()
    checkpoint = tmp_path / "run.ckpt"
    first = Run(*images, settings, RunOptions(checkpoint=str(checkpoint)))
    stopped = first.execute(lambda e: first.cancel("interrupted") if e.step == stop_at else None)
    assert (stopped.stopped, stopped.evaluations) == ("interrupted", stop_at)
    saved = torch.load(checkpoint, weights_only=True)
    assert saved["average"]["count"] == saved["evaluations_in_scale"] > 0
    resumed = Run(*images, settings, RunOptions(resume=str(checkpoint))).execute()
    assert resumed.evaluations == whole.evaluations
    assert np.array_equal(pixels(resumed.image), pixels(whole.image))
