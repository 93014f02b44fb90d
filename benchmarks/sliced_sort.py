"""The sliced loss with its style projections sorted once per draw (kept for the LBFGS step) against sorted at
every evaluation, alternating in one process so both see the same machine load.

    python benchmarks/sliced_sort.py --model vgg16 --weights FILE.onnx [--size 256] [--steps 20] [--repeats 3]
        [--threads 2] [--json FILE]

Each run is ``stylize``'s (``Run``) of the cat in the stain with ``--style-loss sliced``; the seconds per
evaluation are the median gap between progress events (the first two left out: model building and LBFGS's
start). The kept path is the tool's (``SlicedStyleLoss.sorted_targets``); the other empties the keep before every
evaluation, so the style is sorted again each time, as before 2026-12-01. Printed: each path's median per run, the
ratio of the medians (sorted each time / kept) and whether the two paths made the same image (they must: the same
sort of the same numbers). The machine and network are named.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import machines  # noqa: E402
import networks  # noqa: E402
import torch  # noqa: E402

from style_transfer.losses.statistics import SlicedStyleLoss  # noqa: E402
from style_transfer.run.run import Run  # noqa: E402

KEPT = SlicedStyleLoss.sorted_targets


def sorted_each_time(self: SlicedStyleLoss, dirs: torch.Tensor, targets):  # the path before the keep
    self._sorted_targets = None
    return KEPT(self, dirs, targets)


def timed(config, content: str, style: str, keep: bool, network) -> tuple[float, bytes]:
    """One run on the loaded ``network``: its median seconds per evaluation, and its image's bytes."""
    SlicedStyleLoss.sorted_targets = KEPT if keep else sorted_each_time  # type: ignore[method-assign]
    try:
        stamps: list[float] = []
        result = Run(content, style, config, cnn=network).execute(lambda event: stamps.append(time.perf_counter()))
    finally:
        SlicedStyleLoss.sorted_targets = KEPT  # type: ignore[method-assign]
    gaps = [b - a for a, b in zip(stamps[2:], stamps[3:])]
    return statistics.median(gaps), result.image.tobytes()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    networks.add_options(parser)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each path, alternating (default 3)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--content", default=str(ROOT / "images" / "chelsea.png"))
    parser.add_argument("--style", default=str(ROOT / "images" / "ihc.png"))
    parser.add_argument("--json", help="write the report here too")
    args = parser.parse_args(argv)
    if args.steps < 4 or args.repeats < 1:
        parser.error("--steps must be at least 4 and --repeats at least 1")
    config = networks.config(args, size=args.size, steps=args.steps, style_loss="sliced", seed=0,
                             threads=args.threads, device="cpu")
    network = networks.load(args)
    medians: dict[str, list[float]] = {"kept": [], "sorted each time": []}
    images: dict[str, bytes] = {}
    for _ in range(args.repeats):
        for name, keep in (("kept", True), ("sorted each time", False)):
            seconds, images[name] = timed(config, args.content, args.style, keep, network)
            medians[name].append(seconds)
    ratio = statistics.median(medians["sorted each time"]) / statistics.median(medians["kept"])
    report = {"machine": machines.describe(torch.device("cpu")),
              "network": networks.block_of(network, args.weights),
              "size": args.size, "steps": args.steps, "threads": args.threads, "median_s": medians,
              "ratio": ratio, "same_image": images["kept"] == images["sorted each time"]}
    print(f"Measured on: {machines.summary(report['machine'])}")
    print(networks.summary(report["network"]))
    for name, values in medians.items():
        print(f"{name}: median s / evaluation per run {[round(v, 4) for v in values]}")
    print(f"ratio (sorted each time / kept): {ratio:.3f}")
    print(f"same image: {report['same_image']}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
