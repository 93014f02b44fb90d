"""docs/speed.md agrees with the code: the share of --steps --fast runs, the bf16 rule, the float32 start and finish,
and every results file it cites exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from style_transfer.config.style import StyleConfig
from style_transfer.core import guard
from style_transfer.fast import basis
from style_transfer.run import plans
from style_transfer.fast import fast, hardware, speed
from style_transfer.fast.cpuinfo import BF16_FLAGS

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "speed.md"


@pytest.fixture(scope="module")
def page() -> str:
    return " ".join(PAGE.read_text().split())  # one line: a sentence may wrap anywhere


def test_the_page_is_short() -> None:
    assert len(PAGE.read_text().splitlines()) < 150


def test_the_share_of_steps_is_the_plans(page: str) -> None:
    share = round(speed.FAST_STEPS_SHARE * 100)
    planned = plans.plan_run(StyleConfig(fast=True, steps=300), 448).total
    assert f"**{share} % of `--steps`**" in page
    assert f"300 steps plan {planned} evaluations" in page
    others = re.findall(r"(\d+) % of (?:`--steps`|the steps)", page)
    assert others and set(others) == {str(share)}, "the page names another share of the steps"


def test_the_bf16_rule_is_the_hardwares(page: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each CPU flag that turns bf16 on is named where the page states the rule, and the rule is the code's: either
    flag alone turns it on, a CPU with neither (AVX2 only) runs float32."""
    rule = re.search(r"\*\*bf16\*\* on a CPU with (.+?); float32 elsewhere", page)
    assert rule, "the page states when --fast takes bf16"
    assert "AMX" in rule.group(1) and "AVX512-BF16" in rule.group(1) and "GPU with native bf16" in rule.group(1)
    for flag in BF16_FLAGS:
        assert f"`{flag}`" in rule.group(1)
    monkeypatch.setattr(hardware, "bf16_supported", lambda device: True)
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    cpu = torch.device("cpu")
    for flag in BF16_FLAGS:
        monkeypatch.setattr(hardware, "_cpu_flags", lambda flag=flag: {"avx2", "avx512f", flag})
        assert hardware.device_bf16(cpu).native, flag
    monkeypatch.setattr(hardware, "_cpu_flags", lambda: {"avx2", "fma"})
    assert not hardware.device_bf16(cpu).native


def test_the_float32_start_finish_and_guard_are_the_codes(page: str) -> None:
    assert (f"the first {fast.BF16_EXACT_START_FOURIER} evaluations and the last {fast.BF16_FINISH_EVALUATIONS} run "
            f"in float32 (in the Fourier basis; on the pixels the first {fast.BF16_EXACT_START})") in page
    assert basis.LATE_SHARE == 0.5 and basis.LATE_EXPONENT == 0  # "half", "the flat scale"
    assert "from half its planned evaluations on the flat scale" in page
    assert f"jumps to {guard.JUMP:g}x the lowest of its LBFGS step" in page
    assert f"after {guard.RESTARTS_IN_A_ROW} restarts in a row" in page
    assert f"within {round(basis.KEEP_WITHIN * 100)} % of it" in page
    assert "at a quarter of the learning rate" in page and guard.DAMPING == 4


def test_every_results_file_cited_exists() -> None:
    cited = set(re.findall(r"benchmarks/[\w./-]+\.jsonl?", PAGE.read_text()))
    assert len(cited) >= 5
    assert not [path for path in cited if not (ROOT / path).is_file()]
