"""This tool beside pastiche, the peer that ships the original VGG19: seconds per evaluation, peak memory, pictures.

    python -m benchmarks vs_pastiche [--size 256] [--steps 20,300] [--threads 2] [--rounds 2] [--pictures DIR]

Both on pastiche's quantised VGG19 (``--weights original``), the cat in the stain, pastiche's layers, each its own
command in a fresh process, alternating, ``--rounds`` times. Each runs a short and a long job (pastiche as many
evaluations as stylize ran): seconds per evaluation are the difference of their wall times over that of their
evaluations, so start-up cancels; peak memory is the long job's. Medians over rounds, and pastiche / ours.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..scoring import CONTENT, ROOT, STYLE

CONTENT_LAYERS = ("relu4_2",)  # pastiche's block4_relu2
STYLE_LAYERS = ("relu1_1", "relu2_1", "relu3_1", "relu4_1", "relu5_1")  # its block1_relu1 .. block5_relu1


def timed(command: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Run ``command``; its wall seconds and peak resident memory in bytes (this child's alone)."""
    from ..memory import run_child

    try:
        return run_child(command, cwd=ROOT, env=env)
    except subprocess.CalledProcessError as exc:
        sys.exit(f"vs_pastiche: {command[0]} failed (exit {exc.returncode}): {exc.stderr}")


def measure(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    from style_transfer.io.metadata import read_record

    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    short, long = args.steps
    rounds: list[dict[str, Any]] = []
    for round_ in range(args.rounds):
        row: dict[str, Any] = {}
        for name in ("ours", "pastiche"):
            runs = []
            for steps in (short, long):
                out = folder / f"{name}-{steps}.png"
                if name == "ours":
                    seconds, peak = timed([shutil.which("stylize") or "stylize", str(CONTENT), str(STYLE), "-o",
                                           str(out), "--size", str(args.size), "--steps", str(steps), "--weights",
                                           "original", "--content-layers", ",".join(CONTENT_LAYERS),
                                           "--style-layers", ",".join(STYLE_LAYERS), "--seed", "0", "--threads",
                                           str(args.threads), "--device", "cpu", "-q"], env)
                    count = int(read_record(out)["evaluations"])
                else:
                    count = row["ours"]["evaluations"][len(runs)]  # as many evaluations as stylize ran
                    seconds, peak = timed([shutil.which("pastiche") or "pastiche", "--content", str(CONTENT),
                                           "--styles", str(STYLE), "--output", str(out), "--size", str(args.size),
                                           "--num-steps", str(count), "--device", "cpu", "--seed", "0",
                                           "--no-verbose"], env)
                runs.append((count, seconds, peak))
            (e0, t0, _), (e1, t1, peak) = runs
            per = (t1 - t0) / (e1 - e0)
            row[name] = {"evaluations": [e0, e1], "seconds": [round(t0, 2), round(t1, 2)],
                         "seconds_per_evaluation": per, "startup_seconds": t0 - e0 * per, "peak_rss_bytes": peak}
            print(f"round {round_ + 1} {name}: {per:.4f} s/evaluation, start-up {t0 - e0 * per:.1f} s, "
                  f"peak {peak / 2**20:.0f} MiB ({e0} and {e1} evaluations in {t0:.1f} and {t1:.1f} s)", flush=True)
        rounds.append(row)
    if args.pictures is not None:
        args.pictures.mkdir(parents=True, exist_ok=True)
        for name in ("ours", "pastiche"):
            shutil.copyfile(folder / f"{name}-{long}.png", args.pictures / f"vs-pastiche-{name}.png")
    median = {name: {key: statistics.median(r[name][key] for r in rounds)
                     for key in ("seconds_per_evaluation", "startup_seconds", "peak_rss_bytes")}
              for name in ("ours", "pastiche")}
    return {"rounds": rounds, "median": median,
            "ratios": {key: median["pastiche"][key] / median["ours"][key]
                       for key in ("seconds_per_evaluation", "startup_seconds", "peak_rss_bytes")}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--steps", default="20,300", help="stylize's steps of the short and the long job")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pictures", type=Path, default=None, help="folder for the long jobs' pictures")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    args.steps = tuple(int(s) for s in args.steps.split(","))
    if len(args.steps) != 2 or not 0 < args.steps[0] < args.steps[1]:
        parser.error("--steps takes two step counts, the short job's first: 20,300")
    if shutil.which("pastiche") is None:
        sys.exit("vs_pastiche: needs pastiche: pip install '.[original]'")
    from .. import report as reports

    with tempfile.TemporaryDirectory() as folder:
        found = measure(args, Path(folder))
    from importlib.metadata import version

    report = {**reports.start(args, {"model": "vgg19", "weights": "original", "preprocess": "caffe"}), "size": args.size, "steps": list(args.steps), "threads": args.threads,
              "content": CONTENT.name, "style": STYLE.name, "layers": {"content": CONTENT_LAYERS, "style": STYLE_LAYERS},
              "versions": {"pastiche": version("pastiche")}, **found}
    ratios = found["ratios"]
    print(f"{args.size} px, {args.threads} threads, median of {args.rounds} rounds:")
    for name in ("ours", "pastiche"):
        m = found["median"][name]
        print(f"  {name:9s} {m['seconds_per_evaluation']:.4f} s/evaluation, start-up {m['startup_seconds']:.1f} s, "
              f"peak {m['peak_rss_bytes'] / 2**20:.0f} MiB")
    print(f"  pastiche / ours: {ratios['seconds_per_evaluation']:.2f}x the time per evaluation, "
          f"{ratios['startup_seconds']:.2f}x the start-up, {ratios['peak_rss_bytes']:.2f}x the peak memory")
    reports.write(report, args.json or reports.path("vs_pastiche", report, args.size))


if __name__ == "__main__":
    main()
