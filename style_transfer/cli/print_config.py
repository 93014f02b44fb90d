"""``stylize --print-config``: the resolved settings, one ``name: value`` a line."""

from __future__ import annotations

import os
from typing import Any

import click

from ..config.style import StyleConfig
from ..core.steps import LBFGS_MAX_ITER
from ..fast.cpuinfo import cpu_flags, fast_precision_on_cpu
from ..fast.levers import fast_levers
from ..run.plans import default_size_of, plan_run


def show_config(config: StyleConfig) -> None:
    """The resolved settings, one ``name: value`` per line, on stdout: the preset filled in, the speed
    settings --fast turns on, and the plan (``plans.plan_run``: the sizes and the evaluations that run)."""
    resolved: dict[str, Any] = {**vars(config), **fast_levers(config)}
    if config.fast and config.precision == "fp32":  # speed_from_config's rule (fast.bf16_pays_off), for this machine
        on_cpu = fast_precision_on_cpu(cpu_flags(), os.environ.get("ONEDNN_MAX_CPU_ISA"))
        resolved["precision"] = on_cpu if config.device == "cpu" else f"{on_cpu}; bf16 on a GPU with native bf16"
    devices = ["cpu"] if config.device == "cpu" else ["cuda"] if config.device.startswith("cuda") else ["cpu", "cuda"]
    plans = {device: plan_run(config, config.size or default_size_of(device)) for device in devices}
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
