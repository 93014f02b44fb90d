"""``stylize --print-config``: the resolved settings, one ``name: value`` a line."""

from __future__ import annotations

import os
from typing import Any

import click

from ..config.style import StyleConfig
from ..core.steps import LBFGS_MAX_ITER
from ..fast.cpuinfo import Bf16, cpu_bf16, cpu_flags
from ..fast.speed import Speed, resolve_speed
from ..run.plans import default_size_of, plan_run


def show_config(config: StyleConfig) -> None:
    """The resolved settings, one ``name: value`` per line, on stdout: the preset filled in, the speed
    settings --fast turns on (``fast.speed.resolve_speed``, with this CPU's flags and the oneDNN cap in force; a GPU
    taken to have native bf16), and the plan (``plans.plan_run``: the sizes and the evaluations that run)."""
    devices = ["cpu"] if config.device == "cpu" else ["cuda"] if config.device.startswith("cuda") else ["cpu", "cuda"]
    bf16 = {"cpu": cpu_bf16(cpu_flags(), os.environ.get("ONEDNN_MAX_CPU_ISA")), "cuda": Bf16(True, "native bf16")}
    speeds = {device: resolve_speed(config, device, bf16[device]) for device in devices}
    speed: Speed = speeds[devices[0]]
    resolved: dict[str, Any] = {**vars(config), "channels_last": speed.channels_last, "fused_gram": speed.fused_gram,
                                "history_size": speed.history_size, "parametrization": speed.parametrization,
                                "two_loop": speed.two_loop}
    if speed.reason:  # --fast chose the precision: which, and why, on each kind of device the run may take
        resolved["precision"] = "; ".join(f"{s.precision} {s.reason}" for s in speeds.values())
    plans = {device: plan_run(config, config.size or default_size_of(device), speeds[device]) for device in devices}
    plan = plans[devices[-1]]
    if len(plan.sizes) > 1 and not config.scale_steps and len({p.budgets for p in plans.values()}) == 1:
        resolved["scale_steps"] = plan.budgets  # the split of --steps each size gets
    for name, value in resolved.items():
        if isinstance(value, tuple):
            value = ",".join(str(v) for v in value)
        if name == "preprocess" and value is None:  # a weights file not found yet: the run names the problem
            value = "auto (from the weights)"
        click.echo(f"{name}: {'auto' if value is None and name in ('size', 'lr') else value}")
    where = {"cpu": " on a CPU", "cuda": " on a GPU"} if config.size is None else {"cpu": "", "cuda": ""}
    sizes = [",".join(map(str, p.sizes)) + where[d] for d, p in plans.items()]
    click.echo(f"sizes: {'; '.join(dict.fromkeys(sizes))}")
    runs = {d: f"{p.total}" + (f" ({','.join(map(str, p.evaluations))})" if len(p.sizes) > 1 else "")
            for d, p in plans.items()}
    counts = [text + (where[d] if len(set(runs.values())) > 1 else "") for d, text in runs.items()]
    steps = f", in whole LBFGS steps of {LBFGS_MAX_ITER}" if config.optimizer == "lbfgs" else ""
    click.echo(f"evaluations: {'; '.join(dict.fromkeys(counts))}{steps}")
