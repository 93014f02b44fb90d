"""The default path against --fast in one process, on the cat and stain (issue 12's target at 512 px).

    python -m benchmarks benchmark                  # 128, 256 and 512 px on the CPU, ~1 h on 2 cores
    python -m benchmarks benchmark --smoke          # one 32 px size, tiny runs: seconds (CI)
    python -m benchmarks benchmark --markdown FILE  # the tables of a report

Per size: seconds per evaluation of the default and of each speed lever (interleaved, after a warm-up), FLOPs,
peak memory of a whole ``stylize()`` run (a fresh child process on the CPU), and whole runs of the default and
--fast per network (``--seeds``), scored by the default's float32 loss (``scoring.Scorer``): wall ratio, best and
final loss ratios, and when --fast first came within 5 % of the default's best. ``--control-seeds`` adds a
channels_last float32 control (how far chaos alone moves the ratios).
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import json
import math
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from style_transfer import NonFiniteLoss, RunStats, StyleConfig, TransferSettings, stylize
from style_transfer.errors import StyleTransferError
from style_transfer.io.images import load_image, pil_to_tensor, save_image, tensor_to_pil
from style_transfer.run.plans import FAST_STEPS_SHARE, RunPlan, plan_run, scale_sizes
from style_transfer.core.steps import planned_evaluations
from style_transfer.fast.fast import Speed, accelerate, accelerator, speed_from_config
from style_transfer.fast.hardware import bf16_supported, physical_cores

from .. import memory, network as networks, report as reports, timing
from ..machine import summary as machine_summary
from ..scoring import CONTENT, STYLE, WITHIN, Scorer, first_within, spread, timed_run

TARGET_SIZE, TARGET_WALL_RATIO = 512, 1 / 3  # issue 12: --fast to the default's quality in 1/3 of its time, 512 px
STYLE_WEIGHT, CONTENT_WEIGHT = 1e6, 1.0  # the tutorial preset's for the network's input scale, times --loss-scale
LOSS_SCALE = 1.0  # --loss-scale as resolved (main)

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
                        help="--steps of the quality runs, for the default path (300 runs 320 evaluations) and "
                             "--fast (split over its sizes by its shares: 100, 60, 100 for 300)")
    parser.add_argument("--seeds", type=int, default=5,
                        help="networks of the quality runs (random weight seeds 0..N-1; each runs the default "
                             "path and --fast)")
    parser.add_argument("--images", metavar="DIR", default=None,
                        help="write each quality run's best images (default, --fast, control) there as PNGs")
    parser.add_argument("--control-seeds", type=int, default=None,
                        help="how many of the seeds also run the control, channels_last fp32 at one size "
                             "(what chaos alone does to the loss ratios); default 0: it adds about the default "
                             "path's time to each seed, nearly doubling the quality runs (--smoke: 2)")
    parser.add_argument("--rounds", type=int, default=5, help="timed evaluations per path and size")
    parser.add_argument("--warmup", type=int, default=2, help="untimed evaluations per path first")
    parser.add_argument("--probe-steps", type=int, default=20,
                        help="the default path's --steps in each memory probe (20 runs 40 evaluations, two LBFGS "
                             "steps); --fast's probe runs as many at its final size, one LBFGS step at each other")
    parser.add_argument("--budget-s", type=float, default=5400.0,
                        help="skip the quality runs of a size whose estimated time would pass this (s)")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: physical cores)")
    networks.add_options(parser, weights_help="random (seeded, default), imagenet (the pretrained weights, from "
                         "the torch hub cache or downloaded), or a FILE (a state dict .pth or an ONNX file of a VGG); "
                         "with pretrained weights the quality runs use that one network (one seed)")
    parser.add_argument("--loss-scale", type=float, default=None,
                        help="both loss weights (the tutorial preset's for the network's input scale: 1e6 and 1, "
                             "300 and 1 at Caffe's) times this (default 1000 with random weights: LBFGS then "
                             "stores curvature pairs as with pretrained ones; 1, the preset's weights, otherwise)")
    parser.add_argument("--label", metavar="NAME", default=None,
                        help="a name for this machine (letters, digits, . _ -), kept in the JSON's machine block "
                             "and the default output's name")
    parser.add_argument("--out", default=None,
                        help="JSON output (default: benchmarks/results/benchmark/DATE-CLASS-NETWORK-SIZESpx.json)")
    parser.add_argument("--smoke", action="store_true",
                        help="CI smoke mode: one 32 px size, two timed evaluations per path, one LBFGS step per "
                             "run and size, two networks with the control")
    parser.add_argument("--markdown", metavar="JSON", default=None,
                        help="print the tables of an earlier run's JSON as Markdown (for the README) and exit")
    parser.add_argument("--probe", nargs=3, metavar=("SIZE", "PATH", "STEPS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.rounds, args.warmup, args.evals, args.seeds, args.probe_steps = "32", 2, 1, 1, 2, 1
        args.control_seeds = 2 if args.control_seeds is None else args.control_seeds
    args.control_seeds = args.control_seeds or 0
    args.sizes = [int(s) for s in str(args.sizes).split(",")]
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


def build(network: Any, inputs: Inputs, speed: Speed) -> tuple[Any, list, list]:
    """A path's model for timing: a bf16 model runs in bf16 from its first evaluation (the steady
    state; a run's first LBFGS step is float32, see fast.FastStyleModel, and the quality runs'
    wall times include them). Each model gets its own preprocessing module."""
    model, style_losses, content_losses = networks.style_model(network, inputs.style, inputs.content)
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


def time_paths(network: Any, inputs: Inputs, names: list[str], device: torch.device,
               rounds: int, warmup: int) -> dict[str, dict[str, float]]:
    """Median s/evaluation (interleaved), FLOPs and FLOP/s of each path at one size."""
    built = {name: build(network, inputs, path_speed(name, device)) for name in names}
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
            times[name].append(timing.seconds(lambda: evaluate(built[name], image), device))
    for name in names:
        seconds = statistics.median(times[name])
        result[name].update(s_per_eval=seconds, gflops_per_s=result[name]["flops"] / seconds / 1e9)
    return result


def probe_memory(size: int, name: str, steps: int, device: torch.device, seed: int,
                 net: argparse.Namespace) -> dict[str, Any]:
    """Peak memory of one path: a child process's peak RSS (CPU) or max_memory_allocated (CUDA).

    ``net``: the options' ``model``, ``weights`` and ``preprocess`` (the network the probe's run loads)."""
    if device.type == "cuda":
        return _probe(size, name, steps, device, seed, net)
    command = [sys.executable, "-m", "benchmarks", "benchmark", "--probe", str(size), name, str(steps),
               "--threads", str(torch.get_num_threads()), "--loss-scale", str(LOSS_SCALE),
               "--model", net.model, "--weights", net.weights]
    if net.preprocess is not None:
        command += ["--preprocess", net.preprocess]
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=reports.RESULTS.parent.parent)
    if done.returncode != 0:
        raise RuntimeError(f"memory probe {size} px {name} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _probe(size: int, name: str, steps: int, device: torch.device, seed: int,
           net: argparse.Namespace) -> dict[str, Any]:
    """Run the product (``stylize()``) on the path at ``size``; its peak memory from after the images are read.

    The default path runs ``steps`` (two LBFGS steps for 20); ``--fast`` runs its coarse-to-fine
    sizes ending at ``size``, one LBFGS step at each smaller size and at ``size`` as many evaluations
    as the default path runs (a bf16 run's first step there is float32, its second bf16): the peak
    of a coarse-to-fine run is at its final size. The weights (``net``'s; seeded random ones are
    ``seed`` 0: "random") are loaded inside the measured span on both paths alike.
    """
    if seed != 0:
        raise ValueError("the memory probe runs stylize(weights='random'), which is seed 0")
    content, style = load_image(CONTENT, size, device), load_image(STYLE, size, device)
    config = networks.config(net, size=size, steps=steps, style_weight=STYLE_WEIGHT, content_weight=CONTENT_WEIGHT,
                             device=str(device), **PATHS[name])
    if config.scales > 1:
        final = planned_evaluations(steps)  # the default path's evaluations
        config = dataclasses.replace(config, scale_steps=(1,) * (config.scales - 1) + (final,))
    base = memory.reset_peak(device)
    stylize(content, style, config)
    peak = memory.peak_mib(device)
    return {"peak_mib": peak, "base_mib": base, "run_mib": peak - base,
            "sizes": scale_sizes(size, config.scales), "scale_steps": list(config.scale_steps) or [steps]}


def _or_start(image: torch.Tensor | None, score: Scorer) -> torch.Tensor:
    """``image``, or the start image (the content) when a run kept none (its first loss was not finite)."""
    return score.content if image is None else image


def _fp32(score: Scorer, image: torch.Tensor | None) -> float:
    """The default path's fp32 loss of ``image`` at the final size."""
    return score(_or_start(image, score))


def _mean_abs_levels(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.clamp(0, 1) - b.clamp(0, 1).to(a.device)).abs().mean() * 255)


def quality_seed(seed: int, network: Any, weights: str, inputs: Inputs, device: torch.device,
                 evals: int, control: bool, images: Path | None) -> dict[str, Any]:
    """One network: the default and --fast through ``stylize()`` (same weights file, network, preprocessing,
    loss weights and ``--steps``), and with ``control`` the channels_last fp32 control; each scored by the
    default path's fp32 loss at the final size."""
    score = Scorer(network, inputs.size, (STYLE_WEIGHT, CONTENT_WEIGHT), device)
    common = {"size": inputs.size, "steps": evals, "style_weight": STYLE_WEIGHT, "content_weight": CONTENT_WEIGHT,
              "model": network.model, "weights": weights, "preprocess": network.preprocess, "device": str(device)}
    default = timed_run(StyleConfig(**common), score.shape)
    default_best = _fp32(score, default["best"]["image"])
    default_final = _fp32(score, default["image"])
    target = default_best * WITHIN
    fast = timed_run(StyleConfig(fast=True, **common), score.shape, keep_below=target)
    fast_best = _fp32(score, fast["best"]["image"])
    fast_final = _fp32(score, fast["image"])
    hit = first_within(fast, target, score)
    result: dict[str, Any] = {"seed": seed}
    result["default"] = {
        "wall_s": default["wall_s"], "cpu_s": default["cpu_s"], "evaluations": default["evaluations"],
        "best_fp32_loss": default_best, "best_at_evaluation": default["best"]["step"],
        "best_at_s": default["best"]["seconds"], "fp32_loss": default_final,
        "non_finite_after": default["non_finite_after"]}
    result["fast"] = {
        "wall_s": fast["wall_s"], "cpu_s": fast["cpu_s"], "evaluations": fast["evaluations"],
        "final_size_evaluations": fast["final_size_evaluations"],
        "best_fp32_loss": fast_best, "best_at_evaluation": fast["best"]["step"], "fp32_loss": fast_final,
        "non_finite_after": fast["non_finite_after"],
        "wall_ratio": fast["wall_s"] / default["wall_s"], "cpu_ratio": fast["cpu_s"] / default["cpu_s"],
        "best_loss_ratio": fast_best / default_best, "loss_ratio": fast_final / default_final,
        # The first evaluation at the final size whose loss (bf16-evaluated where --fast uses bf16) was within
        # 5 % of the default's best, confirmed by the fp32 loss of the image it evaluated.
        "within_5pct_s": None if hit is None else hit["seconds"],
        "within_5pct_ratio": None if hit is None else hit["seconds"] / default["wall_s"],
        "within_5pct_at_evaluation": None if hit is None else hit["step"],
        "within_5pct_fp32_loss": None if hit is None else hit["fp32_loss"],
        "best_mean_abs_diff_levels": _mean_abs_levels(_or_start(fast["best"]["image"], score),
                                                      _or_start(default["best"]["image"], score))}
    bests = {"default": default["best"]["image"], "fast": fast["best"]["image"]}
    if control:
        result["control"], bests["control"] = control_run(network, inputs, device, evals, score, default_best,
                                                          default_final)
        result["control"]["best_mean_abs_diff_levels"] = _mean_abs_levels(_or_start(bests["control"], score),
                                                                          _or_start(bests["default"], score))
    d, f = result["default"], result["fast"]
    within = "never" if hit is None else \
        f"after {hit['seconds']:.1f} s ({f['within_5pct_ratio']:.3f} of the default's wall)"
    print(f"    {inputs.size} px seed {seed}: default {d['evaluations']} evaluations {d['wall_s']:.1f} s, best fp32 "
          f"loss {default_best:.5g} (evaluation {d['best_at_evaluation']}); --fast {f['evaluations']} evaluations "
          f"{f['wall_s']:.1f} s ({f['wall_ratio']:.3f}), best {fast_best:.5g} ({f['best_loss_ratio']:.3f}x), "
          f"final {f['loss_ratio']:.3f}x; within 5 % {within}"
          + "".join(f"; {name} stopped: non-finite loss after evaluation {run['non_finite_after']}"
                    for name, run in (("default", d), ("--fast", f)) if run["non_finite_after"]), flush=True)
    if images is not None:
        images.mkdir(parents=True, exist_ok=True)
        for name, image in bests.items():
            save_image(_or_start(image, score).clamp(0, 1).cpu(),
                       images / f"{inputs.size}px-seed{seed}-best-{name}.png")
    return result


def control_run(network: Any, inputs: Inputs, device: torch.device, evals: int, score: Scorer,
                default_best: float, default_final: float) -> tuple[dict[str, Any], torch.Tensor | None]:
    """The control: channels_last in fp32 (the default's numbers in another summation order), one size,
    through ``run_style_transfer`` from the content image for the same ``--steps``. Its distance from the
    default is what chaos alone gives. Returns its figures (loss ratios to the default's; its wall time
    leaves out the image reading and model loading that ``stylize()`` times include) and its best image."""
    stats, best = RunStats(), {"loss": math.inf, "step": None, "image": None}

    def keep_best(info: Any) -> None:
        if info.loss < best["loss"]:  # stats holds a copy of the image this evaluation saw
            best.update(loss=info.loss, step=info.step, image=stats._last_good.clone())

    timing.sync(device)
    start, stopped = time.perf_counter(), None
    try:
        speed = path_speed("channels_last", device)
        settings = TransferSettings(progress=keep_best, stats=stats, accelerate=accelerator(speed),
                                    history_size=speed.history_size)
        final = networks.transfer(network, inputs.content, inputs.style, evals, (STYLE_WEIGHT, CONTENT_WEIGHT),
                                  settings)
    except NonFiniteLoss as exc:  # an LBFGS update went non-finite: the user gets the last good image
        final, stopped = exc.image, exc.step
    timing.sync(device)
    wall = time.perf_counter() - start
    if final is not None:  # what the user gets: 8 bits per channel, as stylize() returns it
        final = pil_to_tensor(tensor_to_pil(final.clamp(0, 1).cpu()))
    best_fp32, final_fp32 = _fp32(score, best["image"]), _fp32(score, final)
    return {"wall_s": wall, "evaluations": stats.evaluations, "best_fp32_loss": best_fp32,
            "best_at_evaluation": best["step"], "fp32_loss": final_fp32, "non_finite_after": stopped,
            "best_loss_ratio": best_fp32 / default_best,
            "loss_ratio": final_fp32 / default_final}, best["image"]


def _summary(runs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """Medians and ranges over the seeds that ran ``name`` (``fast`` or ``control``) of its ratios to the default."""
    rows = [run[name] for run in runs if name in run]
    summary: dict[str, Any] = {"count": len(rows), "within_5pct": sum(r["best_loss_ratio"] <= WITHIN for r in rows)}
    for key in ("wall_s", "best_loss_ratio", "loss_ratio", "best_mean_abs_diff_levels"):
        summary.update(spread([row[key] for row in rows], key))
    if name == "fast":  # the control's wall time leaves out what stylize() does before the loop: no ratio
        summary.update(spread([row["wall_ratio"] for row in rows], "wall_ratio"))
        # Never within 5 %: infinitely late (the median says "never" when most never were).
        summary.update(spread([math.inf if r["within_5pct_ratio"] is None else r["within_5pct_ratio"] for r in rows],
                              "within_5pct_ratio"))
        summary["reached"] = sum(r["within_5pct_ratio"] is not None for r in rows)
    return summary


def quality_runs(network: Any, weights: str, inputs: Inputs, device: torch.device, evals: int,
                 seeds: int, control_seeds: int, images: Path | None = None) -> dict[str, Any]:
    """The default path and the product's --fast (coarse-to-fine) for the same ``--steps``, per network.

    With random weights each seed is a network (its state dict saved to a file that both runs load,
    as a user's ``--weights FILE``, the same model and preprocessing as ``network``); with pretrained ones
    ``network`` and ``weights`` are the one network.
    Under random weights LBFGS is chaotic, so one network says little: the summary gives medians and
    ranges over the seeds, and the first ``control_seeds`` seeds also run the control (``control_run``).
    """
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        for seed in range(seeds):
            if weights == "random":
                features = networks.random_features(network.model, seed)
                path = Path(folder) / f"{network.model}-random-{seed}.pth"  # stylize(weights=FILE) loads it
                torch.save(features.state_dict(), path)
                runs.append(quality_seed(seed, networks.wrap(features.to(device), network.model, network.preprocess),
                                         str(path), inputs,
                                         device, evals, seed < control_seeds, images))
            else:
                runs.append(quality_seed(seed, network, weights, inputs, device, evals, seed < control_seeds, images))
    default_walls = [run["default"]["wall_s"] for run in runs]
    quality: dict[str, Any] = {
        "steps": evals, "default_evaluations": planned_evaluations(evals),
        "fast_sizes": list(fast_plan(inputs.size, evals).sizes),
        "fast_budgets": list(fast_plan(inputs.size, evals).budgets),
        "seeds": runs, "default": spread(default_walls, "wall_s"), "fast": _summary(runs, "fast")}
    if any("control" in run for run in runs):
        quality["control"] = _summary(runs, "control")
    return quality


def verdict(entry: dict[str, Any]) -> dict[str, Any] | None:
    """Issue 12's target for one size's quality runs: --fast's best-image fp32 loss within 5 % of the default's
    (median over networks) in at most 1/3 of its wall time (median), with peak memory at or below its."""
    quality = entry.get("quality")
    if not quality:
        return None
    fast = quality["fast"]
    loss_ok = fast["best_loss_ratio_median"] <= WITHIN
    time_ok = fast["wall_ratio_median"] <= TARGET_WALL_RATIO
    peak_default, peak_fast = entry["peak_mib_default"], entry["peak_mib_fast"]
    memory_ok = peak_fast <= peak_default
    reach = fast["within_5pct_ratio_median"]
    networks = f"{fast['count']} network{'' if fast['count'] == 1 else 's'}"
    line = (f"{entry['size']} px: --fast {'meets' if loss_ok and time_ok and memory_ok else 'misses'} the target "
            f"(best-image fp32 loss within 5 % of the default's, in at most 1/3 of its wall time, peak memory at or "
            f"below its; medians over {networks}): best-loss ratio {fast['best_loss_ratio_median']:.3f} "
            f"({'ok' if loss_ok else 'over 1.05'}), wall ratio {fast['wall_ratio_median']:.3f} "
            f"({'ok' if time_ok else 'over 1/3'}), peak {peak_fast:.0f} MiB against {peak_default:.0f} "
            f"({'ok' if memory_ok else 'over'}); within 5 % on {fast['within_5pct']} of {fast['count']}, first "
            f"within 5 % at {'never' if reach is None else f'{reach:.3f}'} of the default's wall (median)")
    return {"size": entry["size"], "meets": loss_ok and time_ok and memory_ok, "loss_ok": loss_ok,
            "time_ok": time_ok, "memory_ok": memory_ok, "line": line}


def quality_estimate(entry: dict[str, Any], evals: int, seeds: int, control_seeds: int) -> float:
    """Seconds the quality runs of one size should take, from its measured seconds per evaluation."""
    paths = entry["paths"]
    default = planned_evaluations(evals) * paths["default"]["s_per_eval"]
    plan = fast_plan(entry["size"], evals)
    fast = sum(n * paths["fast"]["s_per_eval"] * (size / plan.sizes[-1]) ** 2  # each halving: a quarter of the pixels
               for n, size in zip(plan.evaluations, plan.sizes))
    control = planned_evaluations(evals) * paths["channels_last"]["s_per_eval"]
    return (seeds * (default + fast) + control_seeds * control) * 1.15


def fast_plan(size: int, evals: int) -> RunPlan:
    """The sizes and evaluations of ``--fast --steps evals`` at ``size`` (plans.plan_run)."""
    return plan_run(StyleConfig(fast=True, steps=evals, weights="random"), size)


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
    global STYLE_WEIGHT, CONTENT_WEIGHT, LOSS_SCALE
    pretrained = not networks.is_random(args)
    try:
        preset = networks.preset_weights(args)  # the preset's for the input scale the weights tell
    except ValueError as exc:  # an ONNX file that does not tell its preprocessing
        print(f"error: {exc}", file=sys.stderr)
        return 2
    LOSS_SCALE = args.loss_scale = networks.loss_scale(args, args.loss_scale)
    STYLE_WEIGHT, CONTENT_WEIGHT = preset[0] * args.loss_scale, preset[1] * args.loss_scale
    threads = args.threads or physical_cores()
    torch.set_num_threads(threads)  # a script owns its process; the library never does this
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but no CUDA GPU is available", file=sys.stderr)
        return 2
    if args.probe:
        size, name, steps = args.probe
        print(json.dumps(_probe(int(size), name, int(steps), device, 0, args)))
        return 0

    if args.label is not None and not LABEL_RE.match(args.label):
        print(f"error: --label must be letters, digits, '.', '_' or '-' (a file name part), got {args.label!r}",
              file=sys.stderr)
        return 2
    started = time.perf_counter()
    bf16 = bf16_supported(device)
    names = [n for n in PATHS if bf16 or n not in BF16_PATHS]
    try:
        network = networks.load(args)  # random: load_network(model, "random"), seed 0
    except (StyleTransferError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    network.features.to(device)
    if pretrained:
        args.seeds = 1  # one network: the given weights
    report: dict[str, Any] = reports.start(
        args, networks.block_of(network, args.weights), device, args.label,
        weights=os.path.basename(args.weights), seeds=args.seeds, **{
        "control_seeds": min(args.seeds, args.control_seeds),
        "device": _device_name(device), "threads": threads, "torch": torch.__version__, "bf16_native": bf16,
        "paths": {n: PATHS[n] for n in names}, "fast_resolves_to": path_speed("fast", device).__dict__,
        "fast_runs": "stylize(fast=True): its share of the steps at one size, in the quality runs and memory probes",
        "fast_steps_share": FAST_STEPS_SHARE, "evals_budget": args.evals,
        "style_weight": STYLE_WEIGHT, "content_weight": CONTENT_WEIGHT,
        "sizes": [], "notes": []})
    out = Path(args.out) if args.out else reports.path("benchmark", report, reports.sizes(args.sizes),
                                                       ("smoke-" if args.smoke else "") + (args.label or ""))
    if not bf16:
        report["notes"].append("no native bf16 on this device: bf16 paths skipped, --fast runs in fp32")
    for size in args.sizes:
        inputs = Inputs(size, device)
        entry: dict[str, Any] = {"size": size, "shape": list(inputs.content.shape[-2:]), "pixels": inputs.pixels}
        entry["paths"] = time_paths(network, inputs, names, device, args.rounds, args.warmup)
        base = entry["paths"]["default"]["s_per_eval"]
        for stats in entry["paths"].values():
            stats["speedup"] = base / stats["s_per_eval"]
        for name in ("default", "fast"):
            entry["paths"][name]["memory"] = probe_memory(size, name, args.probe_steps, device, 0, args)
        entry["s_per_eval_default"] = base
        entry["s_per_eval_fast"] = entry["paths"]["fast"]["s_per_eval"]
        entry["peak_mib_default"] = entry["paths"]["default"]["memory"]["peak_mib"]
        entry["peak_mib_fast"] = entry["paths"]["fast"]["memory"]["peak_mib"]
        estimate = quality_estimate(entry, args.evals, args.seeds, min(args.seeds, args.control_seeds))
        spent = time.perf_counter() - started
        if spent + estimate > args.budget_s:
            entry["quality"] = None
            report["notes"].append(f"{size} px: quality runs skipped (estimated {estimate:.0f} s, "
                                   f"{spent:.0f} s spent of the {args.budget_s:.0f} s budget)")
        else:
            entry["quality"] = quality_runs(network, args.weights, inputs, device, args.evals, args.seeds,
                                            args.control_seeds, Path(args.images) if args.images else None)
            entry["verdict"] = verdict(entry)
        report["sizes"].append(entry)
        print_size(entry)
        reports.write(report, out)  # so far: a later failure keeps the sizes done
    report["growth"] = {key: growth(report["sizes"], key) for key in
                        ("s_per_eval_default", "s_per_eval_fast", "peak_mib_default", "peak_mib_fast")}
    report["wall_s"] = time.perf_counter() - started
    at_target = [e["verdict"] for e in report["sizes"] if e["size"] == TARGET_SIZE and e.get("verdict")]
    report["verdict"] = at_target[0] if at_target else None
    print_summary(report)
    reports.write(report, out)
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
    print("  (s/eval: one evaluation at this size; peak MiB: a whole stylize() run, --fast's coarse-to-fine "
          "ending at this size)")
    quality = entry.get("quality")
    if quality:
        for line in quality_lines(entry):
            print(f"  {line}")
    sys.stdout.flush()


def _range(row: dict[str, Any], key: str, digits: int = 3) -> str:
    """``median (min to max)`` of a spread; "never" for an infinite one."""
    def show(value: float | None) -> str:
        return "never" if value is None else f"{value:.{digits}f}"
    low, high = row[f"{key}_min"], row[f"{key}_max"]
    return show(row[f"{key}_median"]) + ("" if low == high else f" ({show(low)} to {show(high)})")


def quality_lines(entry: dict[str, Any]) -> list[str]:
    """The printout's summary of one size's quality runs."""
    q = entry["quality"]
    fast = q["fast"]
    sizes = ", ".join(str(n) for n in q["fast_sizes"])
    budgets = ", ".join(str(n) for n in q["fast_budgets"])
    lines = [f"quality, --steps {q['steps']} on {fast['count']} network{'' if fast['count'] == 1 else 's'} "
             f"(default: {q['default_evaluations']} evaluations at {entry['size']} px; --fast: {budgets} at "
             f"{sizes} px):",
             f"  wall time: default {_range(q['default'], 'wall_s', 1)} s, --fast {_range(fast, 'wall_s', 1)} s, "
             f"ratio {_range(fast, 'wall_ratio')}",
             f"  --fast's best image / the default's (fp32 loss): {_range(fast, 'best_loss_ratio')}; within 5 % on "
             f"{fast['within_5pct']} of {fast['count']}",
             f"  --fast first within 5 % of the default's best at {_range(fast, 'within_5pct_ratio')} of the "
             f"default's wall time",
             f"  final images (fp32 loss, 8-bit results): --fast / default {_range(fast, 'loss_ratio')}"]
    control = q.get("control")
    if control:
        lines.append(f"  control (channels_last fp32, one size) / default on {control['count']}: best "
                     f"{_range(control, 'best_loss_ratio')} (within 5 % on {control['within_5pct']}), final "
                     f"{_range(control, 'loss_ratio')}; mean |best - default's best| "
                     f"{_range(control, 'best_mean_abs_diff_levels', 1)} / 255, --fast's "
                     f"{_range(fast, 'best_mean_abs_diff_levels', 1)}")
    if entry.get("verdict"):
        lines.append(entry["verdict"]["line"])
    return lines


def print_summary(report: dict[str, Any]) -> None:
    print("\ncost growth with pixels (exponent between sizes):")
    for key, rows in report["growth"].items():
        print(f"  {key:20s} " + ", ".join(f"{r['from']}->{r['to']}: {r['exponent']:.2f}" for r in rows))
    for note in report["notes"]:
        print(f"note: {note}")
    verdict = report.get("verdict")
    print(verdict["line"] if verdict else f"verdict: no quality runs at {TARGET_SIZE} px, where the target is stated")
    print(f"device: {report['device']}, {report['threads']} threads, torch {report['torch']}; "
          f"total {report['wall_s']:.0f} s")


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
    lines = [f"Measured on: {machine_line(report)}", networks.summary(report.get("network"), report.get("weights")),
             "", "| size | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for entry in report["sizes"]:
        h, w = entry["shape"]
        cells = [f"{entry['paths'][n]['s_per_eval']:.3f} s ({entry['paths'][n]['speedup']:.2f}x)" for n in names]
        lines.append(f"| {w}x{h} | " + " | ".join(cells) + " |")
    legacy = "fast_runs" not in report  # a report from before the whole runs measured the product's --fast
    memory = "peak memory" if (report.get("machine") or {}).get("gpu") else "peak RSS"
    lines += ["", f"| size | GFLOP/eval default, fast | GFLOP/s default, fast | {memory} default, fast (MiB"
              + (") |" if legacy else "; --fast's coarse-to-fine run) |"), "|---|---|---|---|"]
    for entry in report["sizes"]:
        h, w = entry["shape"]
        d, f = entry["paths"]["default"], entry["paths"]["fast"]
        lines.append(f"| {w}x{h} | {d['flops'] / 1e9:.1f}, {f['flops'] / 1e9:.1f} | {d['gflops_per_s']:.0f}, "
                     f"{f['gflops_per_s']:.0f} | {d['memory']['peak_mib']:.0f}, {f['memory']['peak_mib']:.0f} |")
    lines += [""] + (["Quality runs of an earlier benchmark (--fast's levers at one size): see the JSON."] if legacy
                     else _quality_table(report))
    return "\n".join(lines)


def _quality_table(report: dict[str, Any]) -> list[str]:
    """The quality runs' table: the default and the product's --fast over the seeds, per size, and the verdict."""
    lines = ["| size | default wall s | --fast wall s | wall ratio | best-loss ratio | networks within 5 % "
             "| first within 5 % / default's wall | final-image loss ratio |", "|---|---|---|---|---|---|---|---|"]
    controls, verdicts, setup = [], [], None
    for entry in report["sizes"]:
        h, w = entry["shape"]
        q = entry.get("quality")
        if not q:
            lines.append(f"| {w}x{h} | skipped | | | | | | |")
            continue
        fast = q["fast"]
        lines.append(f"| {w}x{h} | {_range(q['default'], 'wall_s', 1)} | {_range(fast, 'wall_s', 1)} | "
                     f"{_range(fast, 'wall_ratio')} | {_range(fast, 'best_loss_ratio')} | {fast['within_5pct']} of "
                     f"{fast['count']} | {_range(fast, 'within_5pct_ratio')} | {_range(fast, 'loss_ratio')} |")
        setup = (f"Medians (ranges) over {fast['count']} network{'' if fast['count'] == 1 else 's'}, --steps "
                 f"{q['steps']}: the default runs {q['default_evaluations']} evaluations at the size, --fast "
                 f"{', '.join(map(str, q['fast_budgets']))} at {', '.join(map(str, q['fast_sizes']))} px for the "
                 "largest; losses are the default path's fp32 loss at the final size, \"best\" the run's "
                 "lowest-loss image there.")
        if q.get("control"):
            c = q["control"]
            controls.append(f"| {w}x{h} | {_range(c, 'best_loss_ratio')} | {c['within_5pct']} of {c['count']} | "
                            f"{_range(c, 'loss_ratio')} |")
        if entry.get("verdict"):
            verdicts.append(entry["verdict"]["line"])
    if setup:
        lines += ["", setup]
    if controls:
        lines += ["", "Control (channels_last fp32 at one size: the default's numbers in another summation order; "
                  "how far chaos alone moves the ratios):", "",
                  "| size | best-loss ratio | networks within 5 % | final-image loss ratio |", "|---|---|---|---|",
                  *controls]
    if verdicts:
        lines += [""] + verdicts
    return lines


if __name__ == "__main__":
    sys.exit(main())
