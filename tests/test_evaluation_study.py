"""The evaluation study (benchmarks/studies/evaluation.py): how it sorts profiled ops, its refusals, and its smoke run
end to end. Correctness only, never timing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
import torch

from .conftest import load_benchmark

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def evaluation() -> ModuleType:
    return load_benchmark("evaluation")


def test_ops_sorted_by_kind(evaluation: ModuleType) -> None:
    expected = {"aten::mkldnn_convolution": "convolutions", "aten::convolution_backward": "convolutions",
                "autograd::engine::evaluate_function: ConvolutionBackward0": "convolutions",
                "aten::threshold_backward": "activations", "aten::clamp_min": "activations",
                "aten::max_pool2d_with_indices_backward": "pools", "aten::addmm_": "grams", "aten::bmm": "grams",
                "_ReluGram": "activations", "aten::mse_loss_backward": "losses", "aten::_to_copy": "casts and layout",
                "aten::copy_": "casts and layout", "aten::fill_": "fills and adds", "aten::add_": "fills and adds",
                "aten::_fft_r2c": "optimiser", "aten::dot": "other"}
    assert {name: evaluation.bucket(name) for name in expected} == expected


def _event(name: str, start: float, end: float, cpu_us: float, device_us: float = 0.0) -> SimpleNamespace:
    return SimpleNamespace(name=name, time_range=SimpleNamespace(start=start, end=end), self_cpu_time_total=cpu_us,
                           self_device_time_total=device_us, device_type=torch.autograd.DeviceType.CPU)


def test_split_puts_what_runs_between_evaluations_on_the_optimiser(evaluation: ModuleType) -> None:
    """Ops that start inside an "evaluation" range go by kind, the rest is the optimiser's; a GPU's kernels are
    counted through their ops' device time (CUDA), never twice."""
    events = [_event("evaluation", 0, 100, 10), _event("aten::mkldnn_convolution", 5, 50, 60, 6),
              _event("aten::mm", 50, 90, 20, 2), _event("aten::dot", 120, 130, 10, 2),
              _event("evaluation", 200, 300, 0), _event("aten::relu", 210, 220, 100),
              SimpleNamespace(name="a_kernel", device_type=torch.autograd.DeviceType.CUDA)]
    cpu = evaluation.split(events, device_time=False, evaluations=2)
    assert cpu["s"]["convolutions"] == pytest.approx(30e-6) and cpu["s"]["grams"] == pytest.approx(10e-6)
    assert cpu["s"]["optimiser"] == pytest.approx(5e-6) and cpu["s"]["other"] == pytest.approx(5e-6)  # the scope's own
    assert cpu["s"]["activations"] == pytest.approx(50e-6)
    assert sum(cpu["share"].values()) == pytest.approx(1.0) and cpu["total_s"] == pytest.approx(100e-6)
    device = evaluation.split(events, device_time=True, evaluations=1)
    assert device["s"]["convolutions"] == pytest.approx(6e-6) and device["s"]["optimiser"] == pytest.approx(2e-6)
    assert device["time"] == "device self time" and device["total_s"] == pytest.approx(10e-6)


def test_refusals_in_one_line(evaluation: ModuleType, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    """No CUDA GPU for --device cuda, and a real network that is not installed: exit 2 before any measurement."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert evaluation.main(["--device", "cuda", "--out", "never.json"]) == 2
    monkeypatch.setattr(sys.modules["benchmarks.network"], "installed", lambda: [])
    assert evaluation.main(["--network", "vgg16", "--out", "never.json"]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert errors == ["error: --device cuda but no CUDA GPU is available",
                      "error: --network vgg16: its weights are not installed"]
    assert not Path("never.json").exists()


def test_every_committed_report_renders(evaluation: ModuleType) -> None:
    """``--markdown`` reads the reports in benchmarks/results/evaluation, those from before the real loop too (their
    truncated loop's interval, the rest "-"): a row per size and path, and the interval table only where measured."""
    for path in sorted((ROOT / "benchmarks" / "results" / "evaluation").glob("*.json")):
        report = json.loads(path.read_text())
        text = evaluation.markdown(report)
        rows = [(entry["shape"], name) for entry in report["sizes"] for name in entry["paths"]]
        for (h, w), name in rows:
            assert f"| {w}x{h} | {name} | " in text, path.name
        real = all("split_s" in row for entry in report["sizes"] for row in entry["paths"].values())
        assert ("Where the interval goes" in text) == real, path.name


def test_timing_waits_for_cuda_only_where_there_is_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import timing

    synced: list = []
    monkeypatch.setattr(torch.cuda, "synchronize", synced.append)
    timing.sync(torch.device("cpu"))
    timing.sync(None)
    timing.sync(torch.device("cuda", 1))
    assert synced == [torch.device("cuda", 1)]


@pytest.mark.slow
def test_evaluation_smoke(tmp_path: Path) -> None:
    """The study end to end at 32 px (it replaces the retired benchmark's smoke run): both paths timed, split and
    floored, the report naming its machine."""
    out = tmp_path / "evaluation.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks", "evaluation", "--smoke", "--threads", "1",
                           "--out", str(out)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["machine"]["threads"] == 1 and report["machine"]["torch"] == torch.__version__
    assert done.stdout.startswith("Measured on: ") and report["network"]["weights"] == "random"
    (entry,) = report["sizes"]
    assert entry["size"] == 32 and entry["shape"] == [21, 32]
    default, fast = entry["paths"]["default"], entry["paths"]["fast"]
    assert default["speed"]["precision"] == "fp32" and fast["speed"]["parametrization"] == "fourier"
    for row in (default, fast):
        assert row["steady"] > 0 and 0 < row["evaluation_s"] < row["interval_s"] and 0 < row["start_s"] < row["wall_s"]
        assert row["interval_outside_floor_s"] == pytest.approx(row["interval_s"] - row["floor"]["s"])
        assert sum(row["profile"]["share"].values()) == pytest.approx(1.0) and row["profile"]["steady"] == 2
        assert row["profile"]["s"]["convolutions"] > 0 and row["profile"]["s"]["grams"] > 0
        assert len(row["floor"]["items"]) == 10  # conv_1..conv_5 and a Gram at each
        assert row["ratio"] == pytest.approx(row["evaluation_s"] / row["floor"]["s"])
    assert default["floor"]["dtype"] == "float32" and default["evaluations"] == 60  # 40 steps: three LBFGS steps
    assert fast["split_s"]["basis"] > 0 and default["split_s"]["basis"] > 0  # decode and clamp; the clamp
    assert f"| 32x21 | default | 60 | {default['interval_s'] * 1e3:.1f} (" in done.stdout


def test_the_real_loop_splits_each_interval_and_puts_the_package_back(tmp_path: Path) -> None:
    """A --fast run at 24 px: each interval is the sum of its parts (what ran in no wrapped call is the rest, never
    below 0), the evaluation and the basis and LBFGS's direction are seen, the window's evaluations (5 to 7) alone
    are profiled, and every wrapped method is the package's own again after the run, also after one that failed."""
    from benchmarks import loop
    from style_transfer import StyleConfig
    from style_transfer.errors import ImageError

    from .conftest import IMAGES

    originals = {(cls, name): vars(cls)[name] for methods in loop.PARTS.values() for cls, name in methods}
    config = StyleConfig(size=24, steps=20, weights="random", fast=True, device="cpu")
    real = loop.real_run(config, IMAGES / "chelsea.png", IMAGES / "ihc.png", torch.device("cpu"), tmp_path, (5, 3))
    assert real["evaluations"] == len(real["intervals"]) + 1 and (tmp_path / "out.png").is_file()
    assert [i for i, interval in enumerate(real["intervals"], 2) if interval["profiled"]] == [5, 6, 7]
    assert sum(event.name == "evaluation" for event in real["events"]) == 6  # each one's forward and backward
    assert real["events_device_time"] is False  # the CPU's times
    for interval in real["intervals"]:
        assert sum(interval[k] for k in loop.KINDS) == pytest.approx(interval["total"], abs=1e-5)
        assert min(interval[k] for k in loop.KINDS) >= -1e-5
    assert all(real["split_s"][k] > 0 for k in ("evaluation", "basis", "LBFGS direction", "progress"))
    with pytest.raises(ImageError):
        loop.real_run(config, IMAGES / "missing.png", IMAGES / "ihc.png", torch.device("cpu"), tmp_path)
    assert all(vars(cls)[name] is method for (cls, name), method in originals.items())
