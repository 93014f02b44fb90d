"""The gpu_check study (benchmarks/studies/gpu_check.py) on the CPU (its smoke run), its two judges, and the
machine block every study writes. Correctness only, never timing."""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from .conftest import load_benchmark

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ["-m", "benchmarks", "gpu_check"]


load = load_benchmark  # a study of benchmarks/ as a module (conftest.load_benchmark)


@pytest.fixture(scope="module")
def gpu_check() -> ModuleType:
    return load("gpu_check")


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *SCRIPT, *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)


@pytest.mark.slow
def test_cpu_smoke_run_writes_a_passing_report(tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    done = run_script("--device", "cpu", "--smoke", "--threads", "1", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("Measured on: ")
    report = json.loads(out.read_text())
    assert report["passed"] is True and report["device"] == "cpu" and report["smoke"] is True
    machine = report["machine"]
    assert machine["torch"] == torch.__version__ and machine["threads"] == 1 and machine["gpu"] is None
    assert machine["cpu_capability"] == torch.backends.cpu.get_cpu_capability()

    first = report["checks"]["first_evaluation"]
    assert first["compared"] == "cpu float32" and first["reference"] == "cpu float64" and first["passed"] is True
    check = first["check"]
    assert math.isfinite(check["loss"]) and check["loss"] > 0
    # float32 against float64 differs by rounding: not zero (the two runs are not the same computation)...
    assert 0 < check["loss_rel_diff"] <= check["loss_tolerance"]
    assert 0 < check["grad_max_abs_rel_diff"] <= check["grad_tolerance"]

    gram = report["checks"]["bf16_gram"]
    assert gram["status"] in ("passed", "skipped")  # skipped: a CPU without native bf16
    if gram["status"] == "passed":
        assert len(gram["cases"]) == 3 and 0 < gram["max_ratio"] <= 1
        assert {case["gram_dtype"] for case in gram["cases"]} == {"torch.float32"}
    else:
        assert "no native bf16" in gram["reason"]

    rows = report["timings"]
    assert [(row["size"], row["path"]) for row in rows] == [(32, "default"), (32, "fast"), (64, "default"),
                                                            (64, "fast")]
    for row in rows:
        assert "error" not in row, row
        run = row["run"]
        # the default runs whole LBFGS steps (20); --fast's Fourier step ends early where the loss jumps (random
        # weights jump at the third evaluation: fast/basis.py), so it may stop at the step it passes
        least = 20 if row["path"] == "default" else 1
        assert run["evaluations"] >= least and run["peak_mib"] is None
        assert 0 < run["start_s"] < run["wall_s"] and 0 < run["interval_s"] < run["wall_s"]
        # timed in the basis the command runs it in: --fast moves the Fourier coefficients (not the pixels)
        assert run["speed"]["parametrization"] == ("pixels" if row["path"] == "default" else "fourier")
    assert rows[0]["run"]["speed"]["precision"] == "fp32"  # the default path is the tutorial's


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is present: the script would run")
def test_without_a_gpu_it_exits_2_in_one_line(tmp_path: Path, gpu_check: ModuleType,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "check.json"
    assert gpu_check.main(["--out", str(out)]) == 2  # the script's exit status (sys.exit(main()))
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: no CUDA GPU")
    assert "--device cpu --smoke" in err and not out.exists()


def test_a_label_that_is_no_file_name_exits_2(tmp_path: Path, gpu_check: ModuleType,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "c.json"
    assert gpu_check.main(["--device", "cpu", "--smoke", "--label", "my machine", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'my machine'" in err and not out.exists()


def test_first_evaluation_judge_fails_past_each_tolerance(gpu_check: ModuleType) -> None:
    grad = torch.linspace(-2.0, 1.0, 100, dtype=torch.float64)
    reference = (1000.0, grad)
    assert gpu_check.judge(gpu_check.differences(reference, (1000.0, grad.clone())))["passed"]
    loss_off = 1000.0 * (1 + 2 * gpu_check.LOSS_TOLERANCE)
    assert not gpu_check.judge(gpu_check.differences(reference, (loss_off, grad)))["passed"]
    moved = grad.clone()
    moved[7] += 2 * gpu_check.GRAD_TOLERANCE * 2.0  # twice the tolerance of the gradient's max-abs, 2
    diff = gpu_check.differences(reference, (1000.0, moved))
    assert diff["grad_max_abs_rel_diff"] == pytest.approx(2 * gpu_check.GRAD_TOLERANCE)
    assert not gpu_check.judge(diff)["passed"]


@pytest.mark.parametrize("rows_last", [False, True])
def test_gram_ratio_against_the_bound_computed_by_hand(gpu_check: ModuleType, rows_last: bool) -> None:
    """The exact Gram scores 0; an entry moved by twice the bound scores 2; a 2-channel case by hand."""
    generator = torch.Generator().manual_seed(0)
    channels = torch.randn(8, 300, generator=generator).to(torch.bfloat16)
    features = channels.t().contiguous() if rows_last else channels
    n = channels.numel()
    wide = channels.double()
    exact = wide @ wide.t() / n
    assert gpu_check.gram_error_ratio(features, exact, rows_last, n)["max_ratio"] == 0.0
    bound = 2.0**-8 * (wide.abs() @ wide.abs().t()) / n
    moved = exact.clone()
    moved[2, 5] += 2 * bound[2, 5]
    assert gpu_check.gram_error_ratio(features, moved, rows_last, n)["max_ratio"] == pytest.approx(2.0)
    # F = [[1, -1], [1, 1]] (channels x pixels), n = 4: G = [[2, 0], [0, 2]] / 4, sum |F F| / n = 2 / 4 everywhere,
    # so the bound is 2^-8 / 2; a Gram off by 2^-10 on the zero entry scores 0.5.
    small = torch.tensor([[1.0, -1.0], [1.0, 1.0]], dtype=torch.bfloat16)
    gram = torch.tensor([[0.5, 2.0**-10], [2.0**-10, 0.5]])
    feats = small.t().contiguous() if rows_last else small
    assert gpu_check.gram_error_ratio(feats, gram, rows_last, 4)["max_ratio"] == pytest.approx(0.5)


def test_machine_block_names_the_machine_without_its_hostname(gpu_check: ModuleType) -> None:
    from benchmarks import machine as machines  # the machine block every study writes
    machine = machines.describe(torch.device("cpu"), "here")
    assert machine["label"] == "here" and machine["gpu"] is None
    assert machine["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert machine["threads"] == torch.get_num_threads() and machine["torch"] == torch.__version__
    if sys.platform.startswith("linux"):  # read from /proc/cpuinfo (all False on arm64)
        assert set(machine["cpu_flags"]) == {"avx2", "avx512f", "avx512_bf16", "amx_bf16"}
    hostname = socket.gethostname()
    if len(hostname) >= 4:
        assert hostname not in json.dumps(machine)
    line = machines.summary(machine)
    assert line.startswith("[here] ") and torch.__version__ in line and machine["cpu_capability"] in line


def test_the_committed_figures_say_which_machine(gpu_check: ModuleType) -> None:
    """Each archived benchmark JSON names its machine in its report's first line (``report.head``): the old AMX
    file with what was not recorded said as unknown, the AMX files (float32 --fast, and bf16 --fast) and the
    (emulated) AVX2 file with torch's capability and the kernel caps they ran under."""
    from benchmarks import report as reports

    def archived(name: str) -> dict:
        return json.loads((ROOT / "benchmarks" / "results" / "archive" / f"benchmark-{name}.json").read_text())

    def first_line(name: str) -> str:
        report = archived(name)
        return reports.head(report, report.get("weights"))[0]

    old = archived("2026-11-30-amx-random-128-512px")
    assert old["machine"]["label"] == "amx" and old["machine"]["cpu_flags"]["amx_bf16"] is True
    first = first_line("2026-11-30-amx-random-128-512px")
    assert first.startswith("Measured on: [amx] 2-core Sapphire Rapids VM")
    assert "torch capability unknown" in first  # not recorded when it ran: said, not guessed
    for name, label, capability, bf16 in (
            ("2026-12-01-amx-random-512px-bf16fast", "amx", "AVX512", "native bf16 yes"),
            ("2026-12-01-amx-random-512px-fp32fast", "amx-fp32-fast", "AVX512", "native bf16 no"),  # bf16 capped off
            ("2026-12-01-avx2-random-512px", "avx2", "AVX2", "native bf16 no")):
        first = first_line(name)
        assert first.startswith(f"Measured on: [{label}] ") and f"torch capability {capability}" in first, first
        assert bf16 in first, first
    assert "ONEDNN_MAX_CPU_ISA=AVX512_CORE" in first_line("2026-12-01-amx-random-512px-fp32fast")
    assert "ONEDNN_MAX_CPU_ISA=AVX2" in first_line("2026-12-01-avx2-random-512px")  # emulated