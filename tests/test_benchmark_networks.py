"""The benchmarks' network (issue 23, point 4): every script that builds one takes --model, --weights and
--preprocess as the command does, and its report names the network beside the machine. Correctness only."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from .conftest import load_benchmark

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ("flicker", "tiling", "batch", "memory", "gpu_check", "time_to_quality", "edges",
           "style_losses")


load = load_benchmark  # a study of benchmarks/ as a module (conftest.load_benchmark)


@pytest.fixture(scope="module")
def networks() -> ModuleType:
    load("gpu_check")
    return sys.modules["benchmarks.network"]


@pytest.mark.parametrize("script", SCRIPTS)
def test_each_script_takes_the_commands_network_options(script: str, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    module = load(script)
    monkeypatch.setattr(sys, "argv", [f"{script}.py", "--help"])
    with pytest.raises(SystemExit) as exited:
        module.main(["--help"])
    assert exited.value.code == 0
    shown = capsys.readouterr().out
    for option in ("--model {vgg19,vgg16}", "--weights", "--preprocess {torchvision,caffe,caffe256}"):
        assert option in shown, (script, shown)


def test_loss_weights_scaled_for_random_weights_only(networks: ModuleType) -> None:
    """x1000 stays for random weights; real ones get the preset's for their input scale (Caffe's: 300)."""
    random = argparse.Namespace(model="vgg19", weights="random", preprocess=None)
    real = argparse.Namespace(model="vgg16", weights="/somewhere/vgg16-caffe.pth", preprocess="caffe")
    assert networks.loss_scale(random, None) == 1000.0 and networks.loss_scale(real, None) == 1.0
    assert networks.loss_scale(random, 3.0) == 3.0 == networks.loss_scale(real, 3.0)  # given: kept
    assert networks.preset_weights(random) == (1e6, 1.0)
    assert networks.preset_weights(real) == (300.0, 1.0)
    block = networks.block(real.model, real.weights, real.preprocess)
    assert block == {"model": "vgg16", "weights": "vgg16-caffe.pth", "preprocess": "caffe"}  # no folder
    assert networks.summary(block) == "Network: VGG16, weights vgg16-caffe.pth, caffe preprocessing"
    assert "random weights" in networks.summary(networks.block("vgg19", "random", None))


def test_a_report_from_before_the_network_block_says_so(networks: ModuleType) -> None:
    from benchmarks import report as reports

    archived = ROOT / "benchmarks" / "results" / "archive" / "benchmark-2026-12-01-amx-random-512px-fp32fast.json"
    report = json.loads(archived.read_text())
    lines = reports.head(report)
    assert lines[0].startswith("Measured on: ")
    assert lines[1] == ("Network: VGG19, seeded random weights (no artistic result), torchvision preprocessing "
                        "(no network block in this report)")


@pytest.mark.slow
def test_gpu_check_smoke_on_the_real_vgg16(tmp_path: Path, vgg16_onnx: Path) -> None:
    """The real VGG16 through load_network: its Caffe preprocessing, the preset's loss weights (not x1000), the
    network named in the report, the printout and the Markdown, the checks passing."""
    out = tmp_path / "check.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks", "gpu_check", "--device", "cpu", "--smoke",
                           "--threads", "1", "--model", "vgg16", "--weights", str(vgg16_onnx), "--out", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["network"] == {"model": "vgg16", "weights": vgg16_onnx.name, "preprocess": "caffe"}
    assert report["settings"]["style_weight"] == 300.0 and report["settings"]["content_weight"] == 1.0
    assert report["passed"] is True and str(vgg16_onnx.parent) not in out.read_text()
    line = f"Network: VGG16, weights {vgg16_onnx.name}, caffe preprocessing"
    assert done.stdout.splitlines()[1] == line
    assert load("gpu_check").markdown(report).splitlines()[1] == line
