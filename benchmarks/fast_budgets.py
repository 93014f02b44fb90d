"""How --fast splits its evaluations over its coarse-to-fine sizes: candidates measured over several networks.

Run from the repository root::

    python benchmarks/fast_budgets.py                       # 256 px, 5 networks, the candidates below
    python benchmarks/fast_budgets.py --size 512 --seeds 3  # the size the target is stated at
    python benchmarks/fast_budgets.py --smoke               # seconds: 32 px, tiny budgets (CI)

For each network (VGG19 with seeded random weights, seeds 0..N-1; both loss weights x1000 so that LBFGS
stores curvature pairs as it does with pretrained weights) it runs, on the sample cat and stain:

* the default path for ``--steps`` (300: 320 evaluations), through ``stylize()``: its wall time and its
  best image's loss (the lowest loss any evaluation saw; on the default path that is the fp32 loss);
* each candidate: ``stylize()`` with ``fast=True`` and the candidate's evaluations per size as
  ``scale_steps`` (smallest size first): wall time, and its best image at the final size, scored by the
  default path's fp32 loss; and when (seconds from the start) its final size first reached the default's
  best loss times 1.05, confirmed in fp32.

Under random weights LBFGS (lr 1, no line search) spikes and is chaotic from about the 30th evaluation on,
so one network says little: the summary gives, per candidate, the median over networks of the best-loss
ratio and of the wall-time ratio, and on how many networks the candidate came within 5 % of the default.
It prints the table and writes JSON (``--out``).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing the package

import torch  # noqa: E402

from style_transfer.config import StyleConfig  # noqa: E402
from style_transfer.errors import NonFiniteLoss  # noqa: E402
from style_transfer.fast import FAST_SCALE_SHARES, physical_cores, scale_budgets  # noqa: E402
from style_transfer.guards import RunStats  # noqa: E402
from style_transfer.images import load_image  # noqa: E402
from style_transfer.models import IMAGENET_MEAN, IMAGENET_STD, freeze, random_vgg19_features  # noqa: E402
from style_transfer.transfer import get_style_model_and_losses, stylize  # noqa: E402

CONTENT = ROOT / "images" / "chelsea.png"
STYLE = ROOT / "images" / "ihc.png"
WITHIN = 1.05  # "the default's quality": the best image's fp32 loss at most 5 % above the default's
CANDIDATES = "shares;60,40,60;100,40,60;60,60,100;100,60,100;100,100,100"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=256, help="final long side in px (default 256)")
    parser.add_argument("--steps", type=int, default=300, help="the default path's --steps (300 runs 320)")
    parser.add_argument("--seeds", type=int, default=5, help="networks (random weight seeds 0..N-1)")
    parser.add_argument("--candidates", default=CANDIDATES,
                        help="';'-separated evaluations per size, smallest first; 'shares' is --fast's own split "
                             f"of --steps (default: {CANDIDATES})")
    parser.add_argument("--loss-scale", type=float, default=1000.0, help="both loss weights times this")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: physical cores)")
    parser.add_argument("--out", default=None, help="JSON output (default: benchmarks/results-fast-budgets.json)")
    parser.add_argument("--smoke", action="store_true", help="32 px, 2 networks, tiny budgets: seconds")
    args = parser.parse_args(argv)
    if args.smoke:
        args.size, args.steps, args.seeds, args.candidates = 32, 5, 2, "shares;1,1,1"
    return args


def candidate_budgets(text: str, steps: int) -> list[int]:
    """A candidate's evaluations per size: 'shares' is what --fast runs for ``steps``."""
    if text == "shares":
        return scale_budgets(steps, len(FAST_SCALE_SHARES), shares=FAST_SCALE_SHARES)
    return [int(n) for n in text.split(",")]


class Scorer:
    """The default path's fp32 loss of an image at the final size (the benchmark's yardstick)."""

    def __init__(self, cnn: torch.nn.Sequential, size: int, weights: tuple[float, float]) -> None:
        content, style = load_image(CONTENT, size), load_image(STYLE, size)
        self.model, self.style_losses, self.content_losses = get_style_model_and_losses(
            cnn, IMAGENET_MEAN, IMAGENET_STD, style, content)
        self.style_weight, self.content_weight = weights

    def __call__(self, image: torch.Tensor) -> float:
        with torch.no_grad():
            self.model(image.clamp(0, 1))
            return float(self.style_weight * sum(sl.loss for sl in self.style_losses)
                         + self.content_weight * sum(cl.loss for cl in self.content_losses))


def timed_run(config: StyleConfig, final_from: int) -> dict[str, Any]:
    """``stylize()`` with a recording callback: wall time, and per evaluation at the final size its time,
    loss and image (the copy the loop keeps), from evaluation ``final_from`` on."""
    stats, trace = RunStats(), []

    def on_step(info: Any) -> None:
        if info.step > final_from:
            trace.append((time.perf_counter() - start, info.step, info.loss, stats._last_good.clone()))

    start = time.perf_counter()
    try:
        stylize(CONTENT, STYLE, config, progress=on_step, stats=stats)
        stopped = None
    except NonFiniteLoss as exc:  # the user keeps the last good image; so does this measurement
        stopped = exc.step
    return {"wall_s": time.perf_counter() - start, "evaluations": stats.evaluations, "trace": trace,
            "non_finite_after": stopped}


def measure(seed: int, args: argparse.Namespace, weights_file: Path) -> dict[str, Any]:
    cnn = freeze(random_vgg19_features(seed))
    torch.save(cnn.state_dict(), weights_file)
    weights = (1e6 * args.loss_scale, 1.0 * args.loss_scale)
    score = Scorer(cnn, args.size, weights)
    common = {"size": args.size, "style_weight": weights[0], "content_weight": weights[1],
              "weights": str(weights_file), "device": "cpu"}
    default = timed_run(StyleConfig(steps=args.steps, **common), 0)
    best_default = min(default["trace"], key=lambda row: row[2])
    target = best_default[2] * WITHIN
    result: dict[str, Any] = {"seed": seed, "default": {
        "wall_s": default["wall_s"], "evaluations": default["evaluations"], "best_loss": best_default[2],
        "best_at": best_default[1], "non_finite_after": default["non_finite_after"]}}
    print(f"  seed {seed} default: {default['evaluations']} evaluations, {default['wall_s']:.1f} s, best loss "
          f"{best_default[2]:.5g} at evaluation {best_default[1]}", flush=True)
    for text in args.candidates.split(";"):
        budgets = candidate_budgets(text, args.steps)
        earlier = sum(20 * math.ceil(n / 20) for n in budgets[:-1])
        run = timed_run(StyleConfig(fast=True, scales=len(budgets), scale_steps=tuple(budgets), **common), earlier)
        best = min(run["trace"], key=lambda row: row[2]) if run["trace"] else None
        best_fp32 = score(best[3]) if best else math.inf
        reached = next((row[0] for row in run["trace"] if row[2] <= target and score(row[3]) <= target), None)
        result[text] = {"budgets": budgets, "wall_s": run["wall_s"], "evaluations": run["evaluations"],
                        "best_fp32_loss": best_fp32, "best_loss_ratio": best_fp32 / best_default[2],
                        "wall_ratio": run["wall_s"] / default["wall_s"],
                        "reached_within_s": reached,
                        "reached_ratio": None if reached is None else reached / default["wall_s"],
                        "non_finite_after": run["non_finite_after"]}
        print(f"  seed {seed} {text} {budgets}: {run['wall_s']:.1f} s ({result[text]['wall_ratio']:.3f} of the "
              f"default's), best fp32 loss {best_fp32:.5g} ({result[text]['best_loss_ratio']:.3f}x), within 5 % "
              f"after {'never' if reached is None else f'{reached:.1f} s'}", flush=True)
    return result


def summarise(runs: list[dict[str, Any]], candidates: list[str]) -> list[dict[str, Any]]:
    rows = []
    for text in candidates:
        ratios = [run[text]["best_loss_ratio"] for run in runs]
        walls = [run[text]["wall_ratio"] for run in runs]
        rows.append({"candidate": text, "budgets": runs[0][text]["budgets"],
                     "best_loss_ratio_median": statistics.median(ratios), "best_loss_ratio_max": max(ratios),
                     "within_5pct": sum(r <= WITHIN for r in ratios), "networks": len(runs),
                     "wall_ratio_median": statistics.median(walls), "wall_ratio_max": max(walls)})
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads or physical_cores())
    candidates = args.candidates.split(";")
    machine = {"cpu_capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(),
               "torch": torch.__version__}
    print(f"fast budgets at {args.size} px, {args.seeds} networks, default {args.steps} steps; {machine}", flush=True)
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        for seed in range(args.seeds):
            runs.append(measure(seed, args, Path(folder) / f"vgg19-random-{seed}.pth"))
    rows = summarise(runs, candidates)
    print("\ncandidate (evaluations per size) | best loss / default's: median, max | within 5 % | "
          "wall time / default's: median, max")
    for row in rows:
        print(f"{row['candidate']:>12} {row['budgets']} | {row['best_loss_ratio_median']:.3f}, "
              f"{row['best_loss_ratio_max']:.3f} | {row['within_5pct']} of {row['networks']} | "
              f"{row['wall_ratio_median']:.3f}, {row['wall_ratio_max']:.3f}")
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results-fast-budgets.json"
    out.write_text(json.dumps({"args": {k: v for k, v in vars(args).items()}, "machine": machine, "runs": runs,
                               "summary": rows}, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
