"""``--fast`` resolved in one place: ``fast.speed.resolve_speed`` is the only reader of ``StyleConfig.fast``, and
what it resolves is what the loop, the plan and ``--print-config`` take."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from style_transfer.config.style import StyleConfig
from style_transfer.fast.cpuinfo import Bf16
from style_transfer.fast.speed import FAST_STEPS_SHARE, resolve_speed
from style_transfer.run.plans import plan_run
from style_transfer.run.settings import transfer_settings

PACKAGE = Path(__file__).resolve().parents[2] / "style_transfer"


def _readers_of_fast() -> list[str]:
    """Each ``x.fast`` in the package's source (an attribute read; ``getattr(x, "fast")`` too), as ``path:line``."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            named = (isinstance(node, ast.Attribute) and node.attr == "fast") or (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value == "fast")
            if named:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    return found


def test_resolve_speed_is_the_only_reader_of_fast() -> None:
    readers = _readers_of_fast()
    assert readers and all(r.startswith("fast/speed.py:") for r in readers), readers


@pytest.mark.parametrize("bf16, precision", [(Bf16(True, "AMX"), "bf16"), (Bf16(False, "no bf16 instructions"), "fp32"),
                                             (None, "fp32")])
def test_fast_takes_bf16_where_the_device_has_it_and_says_why(bf16: Bf16 | None, precision: str) -> None:
    speed = resolve_speed(StyleConfig(fast=True), "cpu", bf16)
    assert speed.precision == precision and speed.reason.startswith("on this CPU (")
    assert (bf16.why if bf16 else "cannot be read") in speed.reason
    # an explicit precision stands, and the default has no reason to give
    assert resolve_speed(StyleConfig(fast=True, precision="bf16"), "cpu", bf16).precision == "bf16"
    assert resolve_speed(StyleConfig(), "cpu", bf16) == resolve_speed(StyleConfig()) and not resolve_speed(
        StyleConfig(), "cpu", bf16).reason


def test_the_plan_and_the_loop_take_the_speed_whole() -> None:
    """A Speed handed in is what the plan and the loop's settings run, not a second reading of the config."""
    config = StyleConfig(fast=True, steps=300)
    speed = resolve_speed(config)
    assert plan_run(config, 64, speed).budgets == (round(FAST_STEPS_SHARE * 300),)
    unshared = plan_run(config, 64, resolve_speed(StyleConfig(steps=300)))  # the default's speed: every step
    assert unshared.budgets == (300,)
    settings = transfer_settings(config, resolve_speed(StyleConfig()))
    assert (settings.parts.basis.name, settings.maths.history_size, settings.maths.two_loop) == ("pixels", 100, "torch")
    settings = transfer_settings(config, speed)
    assert (settings.parts.basis.name, settings.maths.history_size, settings.maths.two_loop) == (
        "fourier", 50, "stacked")
