"""The default path against --fast in one process, on the cat and stain (issue 12's target at 512 px).

    python -m benchmarks benchmark                  # 128, 256 and 512 px on the CPU, ~1 h on 2 cores
    python -m benchmarks benchmark --smoke          # one 32 px size, tiny runs: seconds (CI)
    python -m benchmarks benchmark --markdown FILE  # the tables of a report

Per size: seconds per evaluation and FLOPs of the default and each speed lever (interleaved, after a warm-up), the
peak memory of a whole ``stylize()`` run (a fresh process on the CPU), and whole runs of the default and --fast per
network (``--seeds``) scored by the default's float32 loss (``scoring.Scorer``). ``--control-seeds`` adds a
channels_last float32 control: how far chaos alone moves the ratios.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from style_transfer import StyleConfig, stylize
from style_transfer.core.steps import planned_evaluations
from style_transfer.errors import StyleTransferError
from style_transfer.io.images import load_image
from style_transfer.run.plans import FAST_STEPS_SHARE, RunPlan, plan_run, scale_sizes
from style_transfer.fast.fast import accelerate, speed_from_config
from style_transfer.fast.hardware import bf16_supported, physical_cores

from .. import memory, network as networks, report as reports, timing
from ..scoring import CONTENT, STYLE, WITHIN, Scorer, first_within, spread, timed_run

TARGET_SIZE, TARGET_WALL_RATIO = 512, 1 / 3  # issue 12: --fast to the default's quality in 1/3 of its time, 512 px
STYLE_WEIGHT, CONTENT_WEIGHT = 1e6, 1.0  # the preset's for the network's input scale, times --loss-scale (main)

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


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N] (default: cpu)")
    parser.add_argument("--sizes", default="128,256,512", help="long sides in px, comma-separated")
    parser.add_argument("--evals", type=int, default=300, help="--steps of the quality runs (default and --fast)")
    parser.add_argument("--seeds", type=int, default=5,
                        help="networks of the quality runs (random weight seeds 0..N-1; one with real weights)")
    parser.add_argument("--control-seeds", type=int, default=None,
                        help="how many seeds also run the channels_last fp32 control (default 0; --smoke: 2)")
    parser.add_argument("--rounds", type=int, default=5, help="timed evaluations per path and size")
    parser.add_argument("--warmup", type=int, default=2, help="untimed evaluations per path first")
    parser.add_argument("--probe-steps", type=int, default=20,
                        help="--steps of each memory probe (--fast: one LBFGS step at each smaller size)")
    parser.add_argument("--budget-s", type=float, default=5400.0,
                        help="skip the quality runs of a size whose estimated time would pass this (s)")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: physical cores)")
    networks.add_options(parser, loss_scale=True)
    reports.add_options(parser, "benchmark")
    parser.add_argument("--smoke", action="store_true",
                        help="CI smoke mode: one 32 px size, two timed evaluations per path, one LBFGS step per "
                             "run and size, two networks with the control")
    parser.add_argument("--probe", nargs=3, metavar=("SIZE", "PATH", "STEPS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.rounds, args.warmup, args.evals, args.seeds, args.probe_steps = "32", 2, 1, 1, 2, 1
        args.control_seeds = 2 if args.control_seeds is None else args.control_seeds
    args.control_seeds = args.control_seeds or 0
    args.sizes = [int(s) for s in str(args.sizes).split(",")]
    return args


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


def time_paths(network: Any, size: int, names: list[str], device: torch.device,
               rounds: int, warmup: int) -> dict[str, dict[str, float]]:
    """Median s/evaluation (interleaved: every path sees the same load), FLOPs and FLOP/s of each path; a bf16 model
    runs in bf16 from its first evaluation here (the steady state; a run's first step is float32)."""
    content, style = load_image(CONTENT, size, device), load_image(STYLE, size, device)
    built = {}
    for name in names:
        built[name] = networks.style_model(network, style, content)
        speed = speed_from_config(StyleConfig(**PATHS[name]), device)
        if speed.changes_model:
            built[name] = accelerate(*built[name], speed)
            built[name][0].exact_left = 0
    image = content.clone().requires_grad_(True)
    result: dict[str, dict[str, float]] = {}
    for name in names:
        with FlopCounterMode(display=False) as counter:
            first_loss = evaluate(built[name], image)
        result[name] = {"flops": float(counter.get_total_flops()), "first_loss": first_loss}
        for _ in range(warmup):
            evaluate(built[name], image)
    times: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(rounds):
        for name in names:
            times[name].append(timing.seconds(lambda: evaluate(built[name], image), device))
    for name in names:
        seconds = statistics.median(times[name])
        result[name].update(s_per_eval=seconds, gflops_per_s=result[name]["flops"] / seconds / 1e9)
    return result


def probe_memory(size: int, name: str, steps: int, device: torch.device, net: argparse.Namespace) -> dict[str, Any]:
    """Peak memory of one path's run: a child process's (CPU) or max_memory_allocated (CUDA)."""
    if device.type == "cuda":
        return _probe(size, name, steps, device, net)
    return json.loads(memory.child(
        f"memory probe {size} px {name}", "-m", "benchmarks", "benchmark", "--probe", str(size), name, str(steps),
        "--threads", str(torch.get_num_threads()), "--loss-scale", str(net.loss_scale), "--model", net.model,
        "--weights", net.weights, *(["--preprocess", net.preprocess] if net.preprocess else [])))


def _probe(size: int, name: str, steps: int, device: torch.device, net: argparse.Namespace) -> dict[str, Any]:
    """``stylize()`` on the path at ``size``, its peak from after the images are read (the weights' loading in it);
    --fast's coarse-to-fine sizes run one LBFGS step each, then at ``size`` the default's evaluations."""
    content, style = load_image(CONTENT, size, device), load_image(STYLE, size, device)
    config = networks.config(net, size=size, steps=steps, style_weight=STYLE_WEIGHT, content_weight=CONTENT_WEIGHT,
                             device=str(device), **PATHS[name])
    if config.scales > 1:
        config = dataclasses.replace(config, scale_steps=(1,) * (config.scales - 1) + (planned_evaluations(steps),))
    run = timing.clocked(lambda clock: stylize(content, style, config), device)
    return {"peak_mib": run["peak_mib"], "base_mib": run["base_mib"], "run_mib": run["peak_mib"] - run["base_mib"],
            "stopped": run["stopped"], "sizes": scale_sizes(size, config.scales),
            "scale_steps": list(config.scale_steps) or [steps]}


def scored(run: dict[str, Any], score: Scorer, default: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``timed_run``'s figures scored by ``score``; with the ``default``'s, the ratios to it and when it first came
    within 5 % of the default's best."""
    best = run["best"]["image"] if run["best"]["image"] is not None else score.content  # none: the start image
    row = {"wall_s": run["wall_s"], "cpu_s": run["cpu_s"], "evaluations": run["evaluations"],
           "final_size_evaluations": run["final_size_evaluations"], "best_fp32_loss": score(best),
           "best_at_evaluation": run["best"]["step"], "best_at_s": run["best"]["seconds"],
           "fp32_loss": score(run["image"] if run["image"] is not None else score.content),
           "non_finite_after": run["non_finite_after"], "best_image": best}
    if default is None:
        return row
    hit = first_within(run, default["best_fp32_loss"] * WITHIN, score)
    row.update(wall_ratio=run["wall_s"] / default["wall_s"], cpu_ratio=run["cpu_s"] / default["cpu_s"],
               best_loss_ratio=row["best_fp32_loss"] / default["best_fp32_loss"],
               loss_ratio=row["fp32_loss"] / default["fp32_loss"],
               # confirmed by the fp32 loss of the image the run evaluated (bf16-evaluated where --fast is bf16)
               within_5pct_s=None if hit is None else hit["seconds"],
               within_5pct_ratio=None if hit is None else hit["seconds"] / default["wall_s"],
               within_5pct_at_evaluation=None if hit is None else hit["step"],
               within_5pct_fp32_loss=None if hit is None else hit["fp32_loss"],
               best_mean_abs_diff_levels=float((best.clamp(0, 1) - default["best_image"].clamp(0, 1).to(
                   best.device)).abs().mean() * 255))
    return row


def quality_seed(seed: int, network: Any, weights: str, size: int, device: torch.device,
                 args: argparse.Namespace) -> dict[str, Any]:
    """One network through ``stylize()``: the default, --fast and (a control seed) channels_last fp32, scored alike."""
    score = Scorer(network, size, (STYLE_WEIGHT, CONTENT_WEIGHT), device)
    common = {"size": size, "steps": args.evals, "style_weight": STYLE_WEIGHT, "content_weight": CONTENT_WEIGHT,
              "model": network.model, "weights": weights, "preprocess": network.preprocess, "device": str(device)}
    result: dict[str, Any] = {"seed": seed, "default": scored(timed_run(StyleConfig(**common), score.shape), score)}
    target = result["default"]["best_fp32_loss"] * WITHIN
    candidates = (("fast", {"fast": True}), ("control", {"channels_last": True}))
    for name, fields in candidates[:2 if seed < args.control_seeds else 1]:
        run = timed_run(StyleConfig(**fields, **common), score.shape, keep_below=target)
        result[name] = scored(run, score, result["default"])
    d, f = result["default"], result["fast"]
    within = "never" if f["within_5pct_s"] is None else f"at {f['within_5pct_ratio']:.3f} of the default's wall"
    print(f"    {size} px seed {seed}: default {d['evaluations']} evaluations {d['wall_s']:.1f} s, best fp32 loss "
          f"{d['best_fp32_loss']:.5g}; --fast {f['evaluations']} evaluations {f['wall_s']:.1f} s "
          f"({f['wall_ratio']:.3f}), best {f['best_loss_ratio']:.3f}x, final {f['loss_ratio']:.3f}x; within 5 % "
          f"{within}" + "".join(f"; {name} stopped: non-finite loss after evaluation {row['non_finite_after']}"
                                for name, row in result.items() if name != "seed" and row["non_finite_after"]),
          flush=True)
    for name in ("default", "fast", "control"):
        result.get(name, {}).pop("best_image", None)
    return result


def _summary(runs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """Medians and ranges over the seeds that ran ``name`` (``fast`` or ``control``) of its ratios to the default."""
    rows = [run[name] for run in runs if name in run]
    summary: dict[str, Any] = {"count": len(rows), "within_5pct": sum(r["best_loss_ratio"] <= WITHIN for r in rows),
                               "reached": sum(r["within_5pct_ratio"] is not None for r in rows)}
    for key in ("wall_s", "wall_ratio", "best_loss_ratio", "loss_ratio", "best_mean_abs_diff_levels"):
        summary.update(spread([row[key] for row in rows], key))
    # Never within 5 %: infinitely late (the median says "never" when most never were).
    summary.update(spread([math.inf if r["within_5pct_ratio"] is None else r["within_5pct_ratio"] for r in rows],
                          "within_5pct_ratio"))
    return summary


def quality_runs(network: Any, size: int, device: torch.device, args: argparse.Namespace) -> dict[str, Any]:
    """The default and --fast for the same ``--steps`` on each network (random weights: a seed's state dict in a file,
    as a user's ``--weights FILE``); LBFGS is chaotic there, so medians and ranges over the seeds."""
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        for seed in range(args.seeds):
            net, path = network, args.weights
            if args.weights == "random":
                features = networks.random_features(network.model, seed)
                path = str(Path(folder) / f"{network.model}-random-{seed}.pth")
                torch.save(features.state_dict(), path)
                net = networks.wrap(features.to(device), network.model, network.preprocess)
            runs.append(quality_seed(seed, net, path, size, device, args))
    plan = fast_plan(size, args.evals)
    quality: dict[str, Any] = {
        "steps": args.evals, "default_evaluations": planned_evaluations(args.evals), "fast_sizes": list(plan.sizes),
        "fast_budgets": list(plan.budgets), "seeds": runs,
        "default": spread([run["default"]["wall_s"] for run in runs], "wall_s"), "fast": _summary(runs, "fast")}
    if any("control" in run for run in runs):
        quality["control"] = _summary(runs, "control")
    return quality


def verdict(entry: dict[str, Any]) -> dict[str, Any]:
    """Issue 12's target: --fast's best fp32 loss within 5 % of the default's in 1/3 of its wall, no more memory."""
    fast, peak_default, peak_fast = entry["quality"]["fast"], entry["peak_mib_default"], entry["peak_mib_fast"]
    ok = {"loss_ok": fast["best_loss_ratio_median"] <= WITHIN,
          "time_ok": fast["wall_ratio_median"] <= TARGET_WALL_RATIO, "memory_ok": peak_fast <= peak_default}
    reach = fast["within_5pct_ratio_median"]
    line = (f"{entry['size']} px: --fast {'meets' if all(ok.values()) else 'misses'} the target "
            f"(best-image fp32 loss within 5 % of the default's, in at most 1/3 of its wall time, peak memory at or "
            f"below its; medians over {fast['count']} network{'' if fast['count'] == 1 else 's'}): best-loss ratio "
            f"{fast['best_loss_ratio_median']:.3f} ({'ok' if ok['loss_ok'] else 'over 1.05'}), wall ratio "
            f"{fast['wall_ratio_median']:.3f} ({'ok' if ok['time_ok'] else 'over 1/3'}), peak {peak_fast:.0f} MiB "
            f"against {peak_default:.0f} ({'ok' if ok['memory_ok'] else 'over'}); within 5 % on {fast['within_5pct']} "
            f"of {fast['count']}, first within 5 % at {'never' if reach is None else f'{reach:.3f}'} of the default's "
            "wall (median)")
    return {"size": entry["size"], "meets": all(ok.values()), **ok, "line": line}


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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())))
        return 0
    global STYLE_WEIGHT, CONTENT_WEIGHT
    try:
        STYLE_WEIGHT, CONTENT_WEIGHT = networks.loss_weights(args)  # sets args.loss_scale as resolved
        network = None if args.probe else networks.load(args)  # random: load_network(model, "random"), seed 0
    except (StyleTransferError, ValueError) as exc:  # a weights file missing, or not telling its preprocessing
        print(f"error: {exc}", file=sys.stderr)
        return 2
    threads = args.threads or physical_cores()
    torch.set_num_threads(threads)  # a script owns its process; the library never does this
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but no CUDA GPU is available", file=sys.stderr)
        return 2
    if args.probe:
        size, name, steps = args.probe
        print(json.dumps(_probe(int(size), name, int(steps), device, args)))
        return 0
    if reports.bad_label(args.label):
        return 2
    started = time.perf_counter()
    bf16 = bf16_supported(device)
    names = [n for n in PATHS if bf16 or n not in BF16_PATHS]
    network.features.to(device)
    if not args.weights == "random":
        args.seeds = 1  # one network: the given weights
    report: dict[str, Any] = reports.start(
        args, networks.block_of(network, args.weights), device, args.label, **{
            "weights": networks.block_of(network, args.weights)["weights"], "seeds": args.seeds,
            "control_seeds": min(args.seeds, args.control_seeds), "device": str(device), "threads": threads,
            "torch": torch.__version__, "bf16_native": bf16, "paths": {n: PATHS[n] for n in names},
            "fast_resolves_to": speed_from_config(StyleConfig(fast=True), device).__dict__,
            "fast_runs": "stylize(fast=True): its share of the steps at one size, in the quality runs and memory "
                         "probes", "fast_steps_share": FAST_STEPS_SHARE, "evals_budget": args.evals,
            "style_weight": STYLE_WEIGHT, "content_weight": CONTENT_WEIGHT, "sizes": [], "notes": []})
    out = Path(args.out) if args.out else reports.path("benchmark", report, reports.sizes(args.sizes),
                                                       ("smoke-" if args.smoke else "") + (args.label or ""))
    if not bf16:
        report["notes"].append("no native bf16 on this device: bf16 paths skipped, --fast runs in fp32")
    for size in args.sizes:
        shape = list(load_image(CONTENT, size).shape[-2:])
        entry: dict[str, Any] = {"size": size, "shape": shape, "pixels": shape[0] * shape[1]}
        entry["paths"] = time_paths(network, size, names, device, args.rounds, args.warmup)
        base = entry["paths"]["default"]["s_per_eval"]
        for stats in entry["paths"].values():
            stats["speedup"] = base / stats["s_per_eval"]
        for name in ("default", "fast"):
            entry["paths"][name]["memory"] = probe_memory(size, name, args.probe_steps, device, args)
            entry[f"s_per_eval_{name}"] = entry["paths"][name]["s_per_eval"]
            entry[f"peak_mib_{name}"] = entry["paths"][name]["memory"]["peak_mib"]
        print(f"{size} px: " + ", ".join(f"{n} {s['s_per_eval']:.4f} s/eval ({s['speedup']:.2f}x)"
                                          for n, s in entry["paths"].items()), flush=True)
        estimate = quality_estimate(entry, args.evals, args.seeds, min(args.seeds, args.control_seeds))
        spent = time.perf_counter() - started
        if spent + estimate > args.budget_s:
            entry["quality"] = None
            report["notes"].append(f"{size} px: quality runs skipped (estimated {estimate:.0f} s, "
                                   f"{spent:.0f} s spent of the {args.budget_s:.0f} s budget)")
        else:
            entry["quality"] = quality_runs(network, size, device, args)
            entry["verdict"] = verdict(entry)
        report["sizes"].append(entry)
        reports.write(report, out)  # so far: a later failure keeps the sizes done
    report["wall_s"] = time.perf_counter() - started
    at_target = [e["verdict"] for e in report["sizes"] if e["size"] == TARGET_SIZE and e.get("verdict")]
    report["verdict"] = at_target[0] if at_target else None
    reports.write(report, out)
    print("\n".join(markdown(report).splitlines()[2:] + [f"note: {note}" for note in report["notes"]]))
    print(f"total {report['wall_s']:.0f} s; wrote {out}")
    return 0


def _range(row: dict[str, Any], key: str, digits: int = 3) -> str:
    """``median (min to max)`` of a spread; "never" for an infinite one."""
    def show(value: float | None) -> str:
        return "never" if value is None else f"{value:.{digits}f}"
    low, high = row[f"{key}_min"], row[f"{key}_max"]
    return show(row[f"{key}_median"]) + ("" if low == high else f" ({show(low)} to {show(high)})")


def markdown(report: dict[str, Any]) -> str:
    """The tables of a report: per-evaluation cost per path, FLOPs and memory, the quality runs and the verdicts."""
    names = list(report["paths"])
    lines = [*reports.head(report, report.get("weights")), "",
             "| size | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
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
    if legacy:
        return "\n".join(lines + ["", "Quality runs of an earlier benchmark (--fast's levers at one size): the JSON."])
    lines += ["", "| size | default wall s | --fast wall s | wall ratio | best-loss ratio | networks within 5 % "
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
                            f"{_range(c, 'loss_ratio')} | {_range(c, 'best_mean_abs_diff_levels', 1)} |")
        if entry.get("verdict"):
            verdicts.append(entry["verdict"]["line"])
    lines += ["", setup] if setup else []
    if controls:
        lines += ["", "Control (channels_last fp32 at one size: the default's numbers in another summation order; "
                  "how far chaos alone moves the ratios):", "",
                  "| size | best-loss ratio | networks within 5 % | final-image loss ratio | mean abs. difference of "
                  "the best images (levels of 255) |", "|---|---|---|---|---|", *controls]
    return "\n".join(lines + ([""] + verdicts if verdicts else []))


if __name__ == "__main__":
    sys.exit(main())
