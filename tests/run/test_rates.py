"""The time told before a run (run/rates.py, run.fits.forecast): each run keeps its seconds per megapixel-evaluation
at each of its sizes, and a later run of the same kind is told its time from them before it starts."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from style_transfer import StyleConfig
from style_transfer.cli.stylize import main
from style_transfer.config.run_options import RunOptions
from style_transfer.fast.fast import speed_from_config
from style_transfer.run.fits import forecast
from style_transfer.run.plans import plan_run
from style_transfer.run.rates import MIN_TIMED, Rate, Rates, keep_rate, rate_key
from style_transfer.run.run import Run
from style_transfer.run.timing import Timing

from ..conftest import small_image

CPU = torch.device("cpu")


def test_the_nearest_size_within_reach(tmp_path: Path) -> None:
    book = Rates(tmp_path / "rates.json")
    assert book.get("k", 1.0) is None
    book.put("k", 0.25, Rate(4.0, 1.0))
    book.put("k", 1.0, Rate(3.0, 2.0))
    book.put("other", 1.0, Rate(9.0, 0.0))
    assert book.get("k", 1.2) == Rate(3.0, 2.0) and book.get("k", 0.3) == Rate(4.0, 1.0)
    assert book.get("k", 4.0) == Rate(3.0, 2.0)  # 4x the largest measured: still told
    assert book.get("k", 4.5) is None and book.get("k", 0.05) is None  # beyond reach: a small size's overheads
    book.put("k", 1.05, Rate(2.5, 0.5))  # the same size again (within a factor of sqrt(2)): the latest kept
    assert book.get("k", 1.0) == Rate(2.5, 0.5) and len(json.loads(book.path.read_text())["k"]) == 2


def test_a_damaged_or_unwritable_book_is_no_error(tmp_path: Path) -> None:
    path = tmp_path / "rates.json"
    path.write_text("{not json")
    book = Rates(path)
    assert book.get("k", 1.0) is None
    book.put("k", 1.0, Rate(3.0, 0.0))  # rewritten whole
    assert book.get("k", 1.0) == Rate(3.0, 0.0)
    blocked = Rates(path / "below-a-file" / "rates.json")  # its folder cannot be made
    blocked.put("k", 1.0, Rate(3.0, 0.0))
    assert blocked.get("k", 1.0) is None and list(tmp_path.iterdir()) == [path]


def test_each_size_keeps_its_own_rate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake clock: size 1 (0.5 Mpx) takes 2 s for its first evaluation and 1 s for each after; size 2 (2 Mpx) 5 s,
    then 3 s each, and 4 s to save. Each size's rate is its own: 2 s/Mpx and 1.5 s/Mpx, set-ups 1 s and 6 s; the book
    is written once for both."""
    from style_transfer.run import rates

    written, replace = [], os.replace
    monkeypatch.setattr(rates.os, "replace", lambda *args: written.append(args) or replace(*args))
    now = [0.0]
    timing = Timing([[(MIN_TIMED + 1, 0.5)], [(MIN_TIMED + 1, 2.0)]], clock=lambda: now[0])
    for megapixels, first, each in ((0.5, 2.0, 1.0), (2.0, 5.0, 3.0)):
        timing.start_frame()
        for k in range(MIN_TIMED + 1):
            now[0] += first if k == 0 else each
            timing.evaluated(megapixels)
    now[0] += 4.0
    timing.end_frame()
    config = StyleConfig(weights="random")
    path = tmp_path / "rates.json"
    keep_rate(path, timing, config, speed_from_config(config, CPU), CPU, [None])
    assert len(written) == 1
    key = rate_key(config, speed_from_config(config, CPU), CPU)
    assert Rates(path).get(key, 0.5) == Rate(pytest.approx(2.0), pytest.approx(1.0))
    assert Rates(path).get(key, 2.0) == Rate(pytest.approx(1.5), pytest.approx(6.0))
    few = Timing([[(MIN_TIMED, 0.5)]], clock=lambda: now[0])
    few.start_frame()
    for _ in range(MIN_TIMED):  # MIN_TIMED - 1 timed after the first: too few to keep
        now[0] += 1.0
        few.evaluated(0.5)
    keep_rate(tmp_path / "few.json", few, config, speed_from_config(config, CPU), CPU, [None])
    assert not (tmp_path / "few.json").exists()


def test_the_forecast_adds_each_size_at_its_rate(tmp_path: Path) -> None:
    """A print's sizes each at the rate measured nearest them, set-ups included, worked out here by hand."""
    content, style = tmp_path / "photo.png", tmp_path / "style.png"
    small_image("chelsea.png", (451, 300)).save(content)
    small_image("ihc.png", (64, 64)).save(style)
    config = StyleConfig(size=1280, weights="random", device="cpu")
    book = Rates(tmp_path / "rates.json")
    told = forecast(str(content), str(style), config, rates=book)
    plan = plan_run(config, 1280)
    assert told.seconds is None and "told after the first evaluations" in told.text()
    assert told.sizes == ((512, 341), (810, 539), (1280, 851)) and told.evaluations == plan.evaluations
    key = rate_key(config, speed_from_config(config, CPU), CPU)
    book.put(key, 0.17, Rate(4.0, 1.0))
    book.put(key, 1.0, Rate(3.0, 2.0))
    expected = sum(setup + rate * count * w * h / 1e6 for (w, h), count, (rate, setup)
                   in zip(told.sizes, plan.evaluations, [(4.0, 1.0), (3.0, 2.0), (3.0, 2.0)]))
    again = forecast(str(content), str(style), config, rates=book)
    assert again.seconds == pytest.approx(expected, rel=1e-12)
    assert again.text().endswith(f"about {round(expected / 60)} min on this machine")
    assert again.memory > 0 and again.memory == told.memory


def test_a_run_keeps_its_rate_and_the_command_tells_it_next_time(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("STYLE_TRANSFER_CACHE", str(tmp_path / "cache"))
    content, style = tmp_path / "photo.png", tmp_path / "style.png"
    small_image("chelsea.png", (48, 32)).save(content)
    small_image("ihc.png", (32, 32)).save(style)
    args = [str(content), str(style), "-o", str(tmp_path / "out.png"), "--size", "48", "--steps", "20",
            "--weights", "random", "--device", "cpu"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    planned = plan_run(StyleConfig(steps=20), 48).total  # whole LBFGS steps past --steps
    assert f"plan: 48x32 px, {planned} evaluations; about" in first.output and "told after the first" in first.output
    book = json.loads((tmp_path / "cache" / "rates.json").read_text())
    (key, sizes), = book.items()
    (entry,), = [sizes.values()]
    assert entry["megapixels"] == 48 * 32 / 1e6 and entry["seconds_per_megapixel"] > 0
    second = CliRunner().invoke(main, args)
    assert second.exit_code == 0, second.output
    seconds = entry["setup"] + entry["seconds_per_megapixel"] * planned * 48 * 32 / 1e6
    assert f"about {seconds:.0f} s on this machine" in second.output
    quiet = CliRunner().invoke(main, args + ["-q"])
    assert quiet.exit_code == 0 and "plan:" not in quiet.output
    # The library keeps a rate only where asked (RunOptions.rates): stylize() and a bare Run write nothing.
    Run(str(content), str(style), StyleConfig(size=48, steps=20, weights="random", device="cpu")).execute()
    options = RunOptions(rates=str(tmp_path / "lib.json"))
    Run(str(content), str(style), StyleConfig(size=48, steps=20, weights="random", device="cpu"), options).execute()
    assert sorted(p.name for p in tmp_path.rglob("*.json")) == ["lib.json", "rates.json"]
    assert math.isfinite(next(iter(next(iter(json.loads((tmp_path / "lib.json").read_text()).values())).values()))[
        "seconds_per_megapixel"])
