"""Benchmark of the default path against the fast paths, in one process, on the same inputs.

Run from the repository root::

    python benchmarks/benchmark.py                    # 128, 256 and 512 px on the CPU, ~50 min on 2 cores
    python benchmarks/benchmark.py --seeds 1          # one network seed: ~15 min
    python benchmarks/benchmark.py --device cuda      # the same on a GPU
    python benchmarks/benchmark.py --smoke            # one 32 px size, two evaluations per path (CI)
    python benchmarks/benchmark.py --label avx2       # writes benchmarks/results-cpu-avx2.json

The JSON's ``machine`` block names the machine (CPU model and flags, torch's CPU capability, native
bf16, threads, versions, the GPU on CUDA; no hostname), and the printout and ``--markdown`` open with
it ("Measured on: ..."). Commit one JSON per machine measured: ``benchmarks/measured-DEVICE-LABEL.json``.

What it measures, per size (VGG19 with seeded random weights, the sample cat and stain):

* seconds per closure evaluation (clamp, forward, loss sum, backward, as in the loop), the median
  of evaluations interleaved across the paths after a warm-up, so every path sees the same load;
* FLOPs per evaluation (``torch.utils.flop_counter.FlopCounterMode``) and achieved FLOP/s;
* peak memory: on a CPU the peak RSS of a fresh child process while it builds the model and runs
  the product's loop for two LBFGS steps, 40 evaluations (a bf16 run's first step is float32, its
  second bf16; counted from after the images are decoded, Linux's
  VmHWM reset; it holds torch, the weights, activations, LBFGS history); on CUDA
  ``torch.cuda.max_memory_allocated`` in this process;
* the fp32-evaluated loss after the same evaluation budget (the product's loop from the content
  image, both loss weights times ``--loss-scale``), for the default path and ``--fast``, over
  ``--seeds`` networks (seeded random weights), of the final image and of the run's best image,
  with their mean absolute pixel differences; a control path (channels_last fp32: the default's
  numbers in another summation order) shows how far apart chaos alone puts two runs; and a
  coarse-to-fine run's wall time and loss at the largest size against the default;
* how the cost grows with pixels: the exponent ``log(t2/t1) / log(pixels2/pixels1)``.

It prints a table with each path's ratio to the default path and writes the same as JSON.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing the package
sys.path.insert(0, str(ROOT / "benchmarks"))  # machines.py, also when this file is imported

import torch  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from style_transfer.config import StyleConfig  # noqa: E402
from style_transfer.fast import (  # noqa: E402
    LBFGS_MAX_ITER,
    Speed,
    accelerate,
    bf16_supported,
    physical_cores,
    scale_sizes,
    speed_from_config,
)
from style_transfer.images import load_image, save_image  # noqa: E402
from style_transfer.models import (  # noqa: E402
    IMAGENET_MEAN,
    IMAGENET_STD,
    freeze,
    load_vgg19_features,
    random_vgg19_features,
)
from style_transfer.errors import NonFiniteLoss, StyleTransferError  # noqa: E402
from style_transfer.guards import RunStats  # noqa: E402
from style_transfer.images import pil_to_tensor, tensor_to_pil  # noqa: E402
from style_transfer.transfer import get_style_model_and_losses, run_style_transfer, stylize  # noqa: E402
from machines import describe as describe_machine, summary as machine_summary  # noqa: E402

CONTENT = ROOT / "images" / "chelsea.png"
STYLE = ROOT / "images" / "ihc.png"
STYLE_WEIGHT, CONTENT_WEIGHT = 1e6, 1.0  # the tutorial's, times --loss-scale

# Each path as StyleConfig speed fields; "default" is the tutorial's computation.
PATHS: dict[str, dict[str, Any]] = {
    "default": {},
    "bf16": {"precision": "bf16"},
    "channels_last": {"channels_last": True},
    "bf16+channels_last": {"precision": "bf16", "channels_last": True},
    "fused_gram": {"fused_gram": True},
    "fast": {"fast": True},
}
BF16_PATHS = ("bf16", "bf16+channels_last")
LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N] (default: cpu)")
    parser.add_argument("--sizes", default="128,256,512", help="long sides in px, comma-separated")
    parser.add_argument("--evals", type=int, default=300,
                        help="evaluation budget of the quality runs (the loop's --steps; 300 runs 320)")
    parser.add_argument("--seeds", type=int, default=5,
                        help="network seeds of the quality runs (each runs the default path and --fast)")
    parser.add_argument("--images", metavar="DIR", default=None,
                        help="write the seed-0 best images of the quality runs there as PNGs")
    parser.add_argument("--control-seeds", type=int, default=5,
                        help="how many of the seeds also run the channels_last fp32 control (default: all 5; "
                             "0: none)")
    parser.add_argument("--rounds", type=int, default=5, help="timed evaluations per path and size")
    parser.add_argument("--warmup", type=int, default=2, help="untimed evaluations per path first")
    parser.add_argument("--scales", type=int, default=3, help="coarse-to-fine sizes at the largest size")
    parser.add_argument("--scale-steps", default="100,60,100",
                        help="coarse-to-fine evaluations per size, smallest first")
    parser.add_argument("--probe-steps", type=int, default=20,
                        help="the loop's --steps in each CPU memory probe (20 runs 40 evaluations, two LBFGS steps)")
    parser.add_argument("--budget-s", type=float, default=5400.0,
                        help="skip the quality runs of a size whose estimated time would pass this (s)")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: physical cores)")
    parser.add_argument("--weights", default="random",
                        help="random (seeded, default), imagenet (the pretrained weights, from the torch hub "
                             "cache or downloaded) or a state dict FILE; with pretrained weights the quality "
                             "runs use that one network (one seed)")
    parser.add_argument("--loss-scale", type=float, default=None,
                        help="both loss weights times this (default 1000 with random weights: LBFGS then "
                             "stores curvature pairs as with pretrained ones; 1, the tutorial's weights, otherwise)")
    parser.add_argument("--label", metavar="NAME", default=None,
                        help="a name for this machine (letters, digits, . _ -), kept in the JSON's machine block; "
                             "the default output becomes benchmarks/results-DEVICE-NAME.json")
    parser.add_argument("--out", default=None,
                        help="JSON output (default: benchmarks/results-DEVICE.json, or -DEVICE-LABEL.json)")
    parser.add_argument("--smoke", action="store_true",
                        help="CI smoke mode: one 32 px size, two evaluations per path, tiny runs")
    parser.add_argument("--markdown", metavar="JSON", default=None,
                        help="print the tables of an earlier run's JSON as Markdown (for the README) and exit")
    parser.add_argument("--probe", nargs=3, metavar=("SIZE", "PATH", "STEPS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.rounds, args.warmup, args.evals, args.seeds = "32", 2, 1, 1, 2
        args.scales, args.scale_steps, args.probe_steps = 2, "1,1", 1
    args.sizes = [int(s) for s in str(args.sizes).split(",")]
    args.scale_steps = [int(s) for s in str(args.scale_steps).split(",")]
    return args


class Inputs:
    """The content and style images at one size, and the start image, on the device."""

    def __init__(self, size: int, device: torch.device) -> None:
        self.size = size
        self.content = load_image(CONTENT, size, device)
        self.style = load_image(STYLE, size, device)
        self.pixels = self.content.shape[-1] * self.content.shape[-2]


def path_speed(name: str, device: torch.device) -> Speed:
    return speed_from_config(StyleConfig(**PATHS[name]), device)


def build(cnn: torch.nn.Sequential, inputs: Inputs, speed: Speed) -> tuple[Any, list, list]:
    """A path's model for timing: a bf16 model runs in bf16 from its first evaluation (the steady
    state; a run's first LBFGS step is float32, see fast.FastStyleModel, and the quality runs'
    wall times include them)."""
    model, style_losses, content_losses = get_style_model_and_losses(
        cnn, IMAGENET_MEAN, IMAGENET_STD, inputs.style, inputs.content)
    if speed.changes_model:
        model, style_losses, content_losses = accelerate(model, style_losses, content_losses, speed)
        model.exact_left = 0
    return model, style_losses, content_losses


def evaluate(built: tuple[Any, list, list], image: torch.Tensor) -> float:
    """One closure evaluation as the loop runs it: clamp, zero grad, forward, loss sum, backward."""
    model, style_losses, content_losses = built
    with torch.no_grad():
        image.clamp_(0, 1)
    image.grad = None
    model(image)
    loss = STYLE_WEIGHT * sum(sl.loss for sl in style_losses) + CONTENT_WEIGHT * sum(cl.loss for cl in content_losses)
    loss.backward()
    return float(loss.detach())


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def fp32_loss(cnn: torch.nn.Sequential, inputs: Inputs, image: torch.Tensor) -> float:
    """The tutorial's loss (fp32, default path) of ``image`` at this size."""
    model, style_losses, content_losses = get_style_model_and_losses(
        cnn, IMAGENET_MEAN, IMAGENET_STD, inputs.style, inputs.content)
    with torch.no_grad():
        model(image)
        return float(STYLE_WEIGHT * sum(sl.loss for sl in style_losses)
                     + CONTENT_WEIGHT * sum(cl.loss for cl in content_losses))


def time_paths(cnn: torch.nn.Sequential, inputs: Inputs, names: list[str], device: torch.device,
               rounds: int, warmup: int) -> dict[str, dict[str, float]]:
    """Median s/evaluation (interleaved), FLOPs and FLOP/s of each path at one size."""
    built = {name: build(cnn, inputs, path_speed(name, device)) for name in names}
    image = inputs.content.clone().requires_grad_(True)
    result: dict[str, dict[str, float]] = {}
    for name in names:
        with FlopCounterMode(display=False) as counter:
            first_loss = evaluate(built[name], image)
        result[name] = {"flops": float(counter.get_total_flops()), "first_loss": first_loss}
        for _ in range(warmup):
            evaluate(built[name], image)
    times: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(rounds):
        for name in names:  # interleaved: every path sees the same machine load
            sync(device)
            start = time.perf_counter()
            evaluate(built[name], image)
            sync(device)
            times[name].append(time.perf_counter() - start)
    for name in names:
        seconds = statistics.median(times[name])
        result[name].update(s_per_eval=seconds, gflops_per_s=result[name]["flops"] / seconds / 1e9)
    return result


def probe_memory(size: int, name: str, steps: int, device: torch.device, seed: int) -> dict[str, float]:
    """Peak memory of one path: a child process's peak RSS (CPU) or max_memory_allocated (CUDA)."""
    if device.type == "cuda":
        return _probe(size, name, steps, device, seed)
    command = [sys.executable, str(Path(__file__).resolve()), "--probe", str(size), name, str(steps),
               "--threads", str(torch.get_num_threads()),
               "--loss-scale", str(CONTENT_WEIGHT)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"memory probe {size} px {name} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _status_mib(key: str) -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def _reset_peak_rss() -> float:
    """Return freed heap to the OS and restart the peak RSS count here (Linux), so the peak measures
    the run itself, not the image decoding before it; returns the RSS now (MiB)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
    except OSError:
        pass
    return _status_mib("VmRSS:")


def _probe(size: int, name: str, steps: int, device: torch.device, seed: int) -> dict[str, float]:
    """Build the path's model at ``size`` and run the product's loop for ``steps`` evaluations."""
    cnn = freeze(random_vgg19_features(seed)).to(device)
    inputs = Inputs(size, device)
    speed = path_speed(name, device)
    if device.type == "cuda":
        sync(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device) / 2**20
    else:
        base = _reset_peak_rss()
    run_style_transfer(cnn, IMAGENET_MEAN, IMAGENET_STD, inputs.content, inputs.style, inputs.content.clone(),
                       steps, STYLE_WEIGHT, CONTENT_WEIGHT, speed=speed)
    if device.type == "cuda":
        sync(device)
        peak = torch.cuda.max_memory_allocated(device) / 2**20
    else:
        peak = _status_mib("VmHWM:")
        if math.isnan(peak):  # not Linux: the process's peak since it started
            scale = 1 if sys.platform.startswith("linux") else 1 / 1024  # ru_maxrss: KiB on Linux, bytes on macOS
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 1024
    return {"peak_mib": peak, "base_mib": base, "run_mib": peak - base}


def quality_run(cnn: torch.nn.Sequential, inputs: Inputs, device: torch.device, evals: int,
                names: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """Each named path for the same budget from the content image: time, and the fp32 loss of two images.

    The final image is what the loop returns. The best image is the one of the run's evaluations
    with the lowest loss (the path's own loss; bf16-evaluated on the fast path), then evaluated in
    fp32: under random weights LBFGS (lr 1, no line search) spikes, and the last evaluations are
    often on a spike, so the final loss mostly says where the run stopped, the best loss how far
    the path got. Returns the figures and the best images.
    """
    result: dict[str, Any] = {}
    finals, bests = {}, {}
    for name in names:
        stats, best = RunStats(), {"loss": math.inf, "step": 0, "image": inputs.content}

        def keep_best(info: Any) -> None:
            if info.loss < best["loss"]:  # stats holds a copy of the image this evaluation saw
                best.update(loss=info.loss, step=info.step, image=stats._last_good.clone())

        sync(device)
        start, cpu = time.perf_counter(), time.process_time()
        stopped = None
        try:
            finals[name] = run_style_transfer(cnn, IMAGENET_MEAN, IMAGENET_STD, inputs.content, inputs.style,
                                              inputs.content.clone(), evals, STYLE_WEIGHT, CONTENT_WEIGHT,
                                              progress=keep_best, stats=stats, speed=path_speed(name, device))
        except NonFiniteLoss as exc:  # an LBFGS update went non-finite: the user gets the last good image
            finals[name] = inputs.content if exc.image is None else exc.image.to(device)
            stopped = exc.step
        sync(device)
        wall = time.perf_counter() - start
        bests[name] = best["image"].clamp(0, 1)
        result[name] = {"wall_s": wall, "cpu_s": time.process_time() - cpu, "evaluations": stats.evaluations,
                        "loop_s_per_eval": wall / max(1, stats.evaluations), "non_finite_after": stopped,
                        "fp32_loss": fp32_loss(cnn, inputs, finals[name]),
                        "best_fp32_loss": fp32_loss(cnn, inputs, bests[name]), "best_at_evaluation": best["step"]}
        print(f"    {inputs.size} px {name}: {stats.evaluations} evaluations in {wall:.1f} s, fp32 loss final "
              f"{result[name]['fp32_loss']:.5g}, best {result[name]['best_fp32_loss']:.5g} (evaluation "
              f"{best['step']})" + (f"; stopped: non-finite loss after evaluation {stopped}" if stopped else ""),
              flush=True)
    for name in names[1:]:
        ours, default = result[name], result["default"]
        ours["loss_ratio"] = ours["fp32_loss"] / default["fp32_loss"]
        ours["best_loss_ratio"] = ours["best_fp32_loss"] / default["best_fp32_loss"]
        ours["mean_abs_diff_levels"] = _mean_abs_levels(finals[name], finals["default"])
        ours["best_mean_abs_diff_levels"] = _mean_abs_levels(bests[name], bests["default"])
    return result, bests


def _mean_abs_levels(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().mean() * 255)


def quality_runs(cnn: torch.nn.Sequential, inputs: Inputs, device: torch.device, evals: int,
                 seeds: int, control_seeds: int, images: Path | None = None) -> dict[str, Any]:
    """The default path and --fast for the same budget, once per network seed (seed 0 is ``cnn``).

    Under random weights LBFGS is chaotic (PERFORMANCE.md), so one run says little: the summary is
    the median over seeds of the fast/default fp32 loss ratios (final and best image) and of their
    mean absolute pixel differences. The first ``control_seeds`` seeds also run ``channels_last``
    in fp32, a path that computes the same numbers in another summation order: its distance from
    the default is what chaos alone gives, the yardstick for the fast path's. With ``images``, the
    best images of seed 0 are written there as PNGs, to look at side by side.
    """
    runs = []
    for seed in range(seeds):
        net = cnn if seed == 0 else freeze(random_vgg19_features(seed)).to(device)
        names = ("default", "fast", "channels_last") if seed < control_seeds else ("default", "fast")
        result, bests = quality_run(net, inputs, device, evals, names)
        runs.append({"seed": seed, **result})
        if images is not None and seed == 0:
            images.mkdir(parents=True, exist_ok=True)
            for name, image in bests.items():
                save_image(image, images / f"{inputs.size}px-seed0-best-{name}.png")
    summary: dict[str, Any] = {"seeds": runs, "default": runs[0]["default"], "fast": runs[0]["fast"],
                               **_against_default(runs, "fast")}
    if control_seeds:
        summary["control"] = _against_default(runs, "channels_last")
    return summary


def _against_default(runs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """Medians and ranges over the seeds that ran ``name`` of its loss ratios and pixel differences."""
    rows = [run[name] for run in runs if name in run]
    summary: dict[str, Any] = {"count": len(rows)}
    for kind in ("", "best_"):
        ratios = [row[f"{kind}loss_ratio"] for row in rows]
        summary[f"{kind}loss_ratio_median"] = statistics.median(ratios)
        summary[f"{kind}loss_ratio_min"], summary[f"{kind}loss_ratio_max"] = min(ratios), max(ratios)
        summary[f"{kind}not_worse_by_5pct"] = sum(r <= 1.05 for r in ratios)
        diffs = [row[f"{kind}mean_abs_diff_levels"] for row in rows]
        summary[f"{kind}mean_abs_diff_levels_median"] = statistics.median(diffs)
        summary[f"{kind}mean_abs_diff_levels_range"] = [min(diffs), max(diffs)]
    return summary


def c2f_run(cnn: torch.nn.Sequential, inputs: Inputs, device: torch.device, scales: int, scale_steps: list[int],
            targets: dict[str, float], weights: str = "random") -> dict[str, Any]:
    """Coarse-to-fine with --fast through ``stylize()`` (the product's path, ``cnn``'s weights: random ones
    are seed 0's): wall time, final fp32 loss, and when the last size first reached each target loss."""
    config = StyleConfig(size=inputs.size, fast=True, scales=scales, scale_steps=tuple(scale_steps),
                         style_weight=STYLE_WEIGHT, content_weight=CONTENT_WEIGHT, weights=weights,
                         device=str(device))
    sizes = scale_sizes(inputs.size, scales)
    record: list[tuple[float, int, float]] = []
    stats = RunStats()
    earlier = sum(-(-n // LBFGS_MAX_ITER) * LBFGS_MAX_ITER for n in scale_steps[:-1])
    first: dict[str, dict[str, Any]] = {}

    def on_step(info: Any) -> None:
        record.append((time.perf_counter() - start, info.step, info.loss))
        for name, target in targets.items():
            if info.step > earlier and info.loss <= target and name not in first:
                # The image this evaluation saw (the loop keeps a copy of it): its fp32 loss is checked after.
                first[name] = {"step": info.step, "seconds": record[-1][0], "image": stats._last_good.clone()}

    sync(device)
    start, cpu = time.perf_counter(), time.process_time()
    try:
        result = stylize(CONTENT, STYLE, config, progress=on_step, stats=stats)
    except NonFiniteLoss as exc:  # the user gets the last good image; so does this measurement
        result = tensor_to_pil(inputs.content if exc.image is None else exc.image)
    sync(device)
    image = pil_to_tensor(result).to(device)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    report: dict[str, Any] = {"sizes": sizes, "scale_steps": scale_steps, "evaluations": len(record), "wall_s": wall,
                              "cpu_s": cpu, "fp32_loss": fp32_loss(cnn, inputs, image), "targets": {}}
    for name, target in targets.items():
        # "Reached": the first evaluation at the last size whose loss (bf16-evaluated on the fast path) was at
        # most the target, confirmed by the fp32 loss of the image it evaluated.
        hit = first.get(name)
        loss = fp32_loss(cnn, inputs, hit["image"]) if hit else None
        report["targets"][name] = {
            "loss": target, "reached_s": hit["seconds"] if hit and loss is not None and loss <= target else None,
            "at_evaluation": hit["step"] if hit else None, "fp32_loss_then": loss}
    return report


def growth(sizes: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Exponent of ``key`` against pixels between consecutive sizes."""
    out = []
    for a, b in zip(sizes, sizes[1:]):
        if a.get(key) and b.get(key):
            out.append({"from": a["size"], "to": b["size"],
                        "exponent": math.log(b[key] / a[key]) / math.log(b["pixels"] / a["pixels"])})
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())))
        return 0
    global STYLE_WEIGHT, CONTENT_WEIGHT
    pretrained = args.weights != "random"
    if args.loss_scale is None:
        args.loss_scale = 1.0 if pretrained else 1000.0
    STYLE_WEIGHT, CONTENT_WEIGHT = 1e6 * args.loss_scale, 1.0 * args.loss_scale
    threads = args.threads or physical_cores()
    torch.set_num_threads(threads)  # a script owns its process; the library never does this
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but no CUDA GPU is available", file=sys.stderr)
        return 2
    if args.probe:
        size, name, steps = args.probe
        print(json.dumps(_probe(int(size), name, int(steps), device, 0)))
        return 0

    if args.label is not None and not LABEL_RE.match(args.label):
        print(f"error: --label must be letters, digits, '.', '_' or '-' (a file name part), got {args.label!r}",
              file=sys.stderr)
        return 2
    suffix = f"{device.type}-{args.label}" if args.label else device.type
    out = Path(args.out) if args.out else ROOT / "benchmarks" / f"results-{suffix}.json"
    started = time.perf_counter()
    bf16 = bf16_supported(device)
    names = [n for n in PATHS if bf16 or n not in BF16_PATHS]
    try:
        cnn = (load_vgg19_features(args.weights) if pretrained else freeze(random_vgg19_features(0))).to(device)
    except StyleTransferError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if pretrained:
        args.seeds = 1  # one network: the given weights
    report: dict[str, Any] = {
        "machine": describe_machine(device, args.label),
        "weights": args.weights, "seeds": args.seeds, "control_seeds": min(args.seeds, args.control_seeds),
        "device": _device_name(device), "threads": threads, "torch": torch.__version__, "bf16_native": bf16,
        "paths": {n: PATHS[n] for n in names}, "fast_resolves_to": path_speed("fast", device).__dict__,
        "evals_budget": args.evals, "style_weight": STYLE_WEIGHT, "content_weight": CONTENT_WEIGHT,
        "sizes": [], "notes": [],
    }
    print(f"Measured on: {machine_summary(report['machine'])}")
    if not bf16:
        report["notes"].append("no native bf16 on this device: bf16 paths skipped, --fast runs in fp32")
    for size in args.sizes:
        inputs = Inputs(size, device)
        entry: dict[str, Any] = {"size": size, "shape": list(inputs.content.shape[-2:]), "pixels": inputs.pixels}
        entry["paths"] = time_paths(cnn, inputs, names, device, args.rounds, args.warmup)
        base = entry["paths"]["default"]["s_per_eval"]
        for stats in entry["paths"].values():
            stats["speedup"] = base / stats["s_per_eval"]
        for name in ("default", "fast"):
            entry["paths"][name]["memory"] = probe_memory(size, name, args.probe_steps, device, 0)
        entry["s_per_eval_default"] = base
        entry["s_per_eval_fast"] = entry["paths"]["fast"]["s_per_eval"]
        entry["peak_mib_default"] = entry["paths"]["default"]["memory"]["peak_mib"]
        entry["peak_mib_fast"] = entry["paths"]["fast"]["memory"]["peak_mib"]
        runs = args.evals + 20  # the loop passes its budget by up to one LBFGS step
        control = min(args.seeds, args.control_seeds) * runs * entry["paths"]["channels_last"]["s_per_eval"]
        estimate = (args.seeds * runs * (base + entry["s_per_eval_fast"]) + control) * 1.15 + sum(
            n * entry["s_per_eval_fast"] / 4 ** (args.scales - 1 - i) for i, n in enumerate(args.scale_steps))
        spent = time.perf_counter() - started
        if spent + estimate > args.budget_s:
            entry["quality"] = None
            report["notes"].append(f"{size} px: quality runs skipped (estimated {estimate:.0f} s, "
                                   f"{spent:.0f} s spent of the {args.budget_s:.0f} s budget)")
        else:
            entry["quality"] = quality_runs(cnn, inputs, device, args.evals, args.seeds, args.control_seeds,
                                            Path(args.images) if args.images else None)
            if size == max(args.sizes) or args.smoke:
                # Targets: the default's loss after its budget (its final image's, as the issue states it),
                # and its best image's, the stricter one when lower (the final image is often on a spike).
                default = entry["quality"]["default"]
                targets = {"default_final": default["fp32_loss"], "default_best": default["best_fp32_loss"]}
                c2f = c2f_run(cnn, inputs, device, args.scales, args.scale_steps, targets, args.weights)
                c2f["time_ratio"] = c2f["wall_s"] / default["wall_s"]
                c2f["cpu_ratio"] = c2f["cpu_s"] / default["cpu_s"]
                for target in c2f["targets"].values():
                    reached = target["reached_s"]
                    target["reach_ratio"] = None if reached is None else reached / default["wall_s"]
                entry["coarse_to_fine"] = c2f
        report["sizes"].append(entry)
        print_size(entry)
        out.write_text(json.dumps(report, indent=1) + "\n")  # so far: a later failure keeps the sizes done
    report["growth"] = {key: growth(report["sizes"], key) for key in
                        ("s_per_eval_default", "s_per_eval_fast", "peak_mib_default", "peak_mib_fast")}
    report["wall_s"] = time.perf_counter() - started
    print_summary(report)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs"


def print_size(entry: dict[str, Any]) -> None:
    h, w = entry["shape"]
    print(f"\n{entry['size']} px ({w}x{h})")
    print(f"  {'path':20s} {'s/eval':>8s} {'ratio':>6s} {'GFLOP':>7s} {'GFLOP/s':>8s} {'peak MiB':>9s}")
    for name, stats in entry["paths"].items():
        memory = stats.get("memory", {}).get("peak_mib")
        print(f"  {name:20s} {stats['s_per_eval']:8.4f} {stats['speedup']:5.2f}x {stats['flops'] / 1e9:7.2f} "
              f"{stats['gflops_per_s']:8.1f} {'' if memory is None else f'{memory:9.0f}'}")
    quality = entry.get("quality")
    if quality:
        for run in quality["seeds"]:
            d, f = run["default"], run["fast"]
            print(f"  seed {run['seed']}, {d['evaluations']} evaluations: fp32 loss default final {d['fp32_loss']:.5g} "
                  f"best {d['best_fp32_loss']:.5g} ({d['wall_s']:.1f} s); fast final {f['fp32_loss']:.5g} "
                  f"best {f['best_fp32_loss']:.5g} ({f['wall_s']:.1f} s); ratio final {f['loss_ratio']:.3f} "
                  f"best {f['best_loss_ratio']:.3f}; mean |fast - default| final {f['mean_abs_diff_levels']:.1f}, "
                  f"best {f['best_mean_abs_diff_levels']:.1f} / 255")
        for label, image, q, kind in _quality_rows(quality, "control (channels_last fp32)"):
            low, high = q[kind + "mean_abs_diff_levels_range"]
            seeds = "seed" if q["count"] == 1 else "seeds"
            print(f"  {label}/default, {image} images, {q['count']} {seeds}: fp32 loss ratio median "
                  f"{q[kind + 'loss_ratio_median']:.3f} ({q[kind + 'loss_ratio_min']:.3f} to "
                  f"{q[kind + 'loss_ratio_max']:.3f}; <= 1.05 in {q[kind + 'not_worse_by_5pct']}); mean abs "
                  f"pixel difference median {q[kind + 'mean_abs_diff_levels_median']:.1f} ({low:.1f} to "
                  f"{high:.1f}) / 255")
    c2f = entry.get("coarse_to_fine")
    if c2f:
        print(f"  coarse-to-fine --fast {c2f['sizes']} x {c2f['scale_steps']} evaluations: {c2f['wall_s']:.1f} s "
              f"({c2f['time_ratio']:.3f} of the default's wall, {c2f['cpu_ratio']:.3f} of its CPU time), "
              f"fp32 loss of the result {c2f['fp32_loss']:.6g}")
        for name, target in c2f["targets"].items():
            reached = target["reached_s"]
            print(f"    reached {name} ({target['loss']:.6g}) "
                  + (f"after {reached:.1f} s ({target['reach_ratio']:.3f} of the default's wall; fp32 loss then "
                     f"{target['fp32_loss_then']:.6g})" if reached else "never"))
    sys.stdout.flush()


def print_summary(report: dict[str, Any]) -> None:
    print("\ncost growth with pixels (exponent between sizes):")
    for key, rows in report["growth"].items():
        print(f"  {key:20s} " + ", ".join(f"{r['from']}->{r['to']}: {r['exponent']:.2f}" for r in rows))
    for note in report["notes"]:
        print(f"note: {note}")
    print(f"device: {report['device']}, {report['threads']} threads, torch {report['torch']}; "
          f"total {report['wall_s']:.0f} s")


def _quality_rows(quality: dict[str, Any], control_label: str) -> Any:
    """(path label, image label, summary, key prefix) for --fast, then the control; best image first."""
    for name, label in (("fast", "fast"), ("control", control_label)):
        if name in quality:
            summary = quality if name == "fast" else quality["control"]
            for kind, image in (("best_", "best"), ("", "final")):
                yield label, image, summary, kind


def machine_line(report: dict[str, Any]) -> str:
    """The machine summary of a report; an older report without a machine block gets its top-level fields."""
    if report.get("machine"):
        return machine_summary(report["machine"])
    bf16 = report.get("bf16_native")
    return (f"{report.get('device', 'unknown device')}, {report.get('threads', 'unknown')} threads, "
            f"torch {report.get('torch', 'unknown')}, native bf16 "
            f"{'unknown' if bf16 is None else 'yes' if bf16 else 'no'} (no machine block in this report)")


def markdown(report: dict[str, Any]) -> str:
    """The README's tables from a report: per-evaluation cost per path, then runs and memory."""
    names = list(report["paths"])
    lines = [f"Measured on: {machine_line(report)}", "",
             "| size | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for entry in report["sizes"]:
        h, w = entry["shape"]
        cells = [f"{entry['paths'][n]['s_per_eval']:.3f} s ({entry['paths'][n]['speedup']:.2f}x)" for n in names]
        lines.append(f"| {w}x{h} | " + " | ".join(cells) + " |")
    lines += ["", "| size | GFLOP/eval default, fast | GFLOP/s default, fast | peak RSS default, fast (MiB) |",
              "|---|---|---|---|"]
    for entry in report["sizes"]:
        h, w = entry["shape"]
        d, f = entry["paths"]["default"], entry["paths"]["fast"]
        lines.append(f"| {w}x{h} | {d['flops'] / 1e9:.1f}, {f['flops'] / 1e9:.1f} | {d['gflops_per_s']:.0f}, "
                     f"{f['gflops_per_s']:.0f} | {d['memory']['peak_mib']:.0f}, {f['memory']['peak_mib']:.0f} |")
    lines += ["", "| size | path / default | image | fp32 loss ratio: median (range) | seeds <= 1.05 "
              "| mean abs pixel diff: median (range) |", "|---|---|---|---|---|---|"]
    for entry in report["sizes"]:
        h, w = entry["shape"]
        q = entry.get("quality")
        if not q:
            lines.append(f"| {w}x{h} | | skipped | | | |")
            continue
        for label, image, row, kind in _quality_rows(q, "control: channels_last fp32"):
            low, high = row[kind + "mean_abs_diff_levels_range"]
            lines.append(f"| {w}x{h} | {label} | {image} | {row[kind + 'loss_ratio_median']:.3f} "
                         f"({row[kind + 'loss_ratio_min']:.3f} to {row[kind + 'loss_ratio_max']:.3f}) | "
                         f"{row[kind + 'not_worse_by_5pct']} of {row['count']} | "
                         f"{row[kind + 'mean_abs_diff_levels_median']:.1f} ({low:.1f} to {high:.1f}) / 255 |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
