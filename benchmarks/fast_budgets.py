"""How --fast splits its evaluations over its coarse-to-fine sizes: candidates measured over several networks.

Run from the repository root::

    python benchmarks/fast_budgets.py                       # 256 px, 5 networks, the candidates below
    python benchmarks/fast_budgets.py --size 512 --seeds 3  # the size the target is stated at
    python benchmarks/fast_budgets.py --smoke               # seconds: 32 px, tiny budgets (CI)

For each network (by default VGG19 with seeded random weights, seeds 0..N-1, both loss weights x1000 so that
LBFGS stores curvature pairs as it does with pretrained weights; ``--model``, ``--weights`` and ``--preprocess``
as the command's, where real weights are the one network with the tutorial preset's loss weights for their input
scale) it runs, on the sample cat and stain:

* the default path for ``--steps`` (300: 320 evaluations), through ``stylize()``: its wall time and its
  best image's loss (the lowest loss any evaluation saw; on the default path that is the fp32 loss);
* each candidate: ``stylize()`` with ``fast=True`` and the candidate's evaluations per size as
  ``scale_steps`` (smallest size first): wall time, and its best image at the final size, scored by the
  default path's fp32 loss; and when (seconds from the start) its final size first reached the default's
  best loss times 1.05, confirmed in fp32.

Under random weights LBFGS (lr 1, no line search) spikes and is chaotic from about the 30th evaluation on,
so one network says little: the summary gives, per candidate, the median over networks of the best-loss
ratio and of the wall-time ratio, and on how many networks the candidate came within 5 % of the default.
It prints the table and writes JSON (``--out``; the ``network`` block beside ``machine``).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing the package
sys.path.insert(0, str(ROOT / "benchmarks"))  # quality.py

import torch  # noqa: E402

import networks  # noqa: E402
from quality import WITHIN, Scorer, first_within, random_network, timed_run  # noqa: E402
from style_transfer.config.style import StyleConfig  # noqa: E402
from style_transfer.errors import StyleTransferError  # noqa: E402
from style_transfer.run.plans import FAST_SCALE_SHARES, scale_budgets  # noqa: E402
from style_transfer.fast.hardware import physical_cores  # noqa: E402

CANDIDATES = "shares;60,40,60;100,40,60;60,60,100;100,60,100;100,100,100"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=256, help="final long side in px (default 256)")
    parser.add_argument("--steps", type=int, default=300, help="the default path's --steps (300 runs 320)")
    parser.add_argument("--seeds", type=int, default=5,
                        help="networks (random weight seeds 0..N-1; real weights are one network)")
    parser.add_argument("--candidates", default=CANDIDATES,
                        help="';'-separated evaluations per size, smallest first; 'shares' is --fast's own split "
                             f"of --steps (default: {CANDIDATES})")
    networks.add_options(parser)
    parser.add_argument("--loss-scale", type=float, default=None,
                        help="both loss weights (the tutorial preset's for the network's input scale) times this "
                             "(default 1000 with random weights, 1 with real ones)")
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


def measure(seed: int, args: argparse.Namespace, folder: Path, network: Any) -> dict[str, Any]:
    """One network: seed ``seed``'s random weights (saved to a file in ``folder``), or ``network`` itself
    (a ``models.Network`` of real weights)."""
    if networks.is_random(args):
        cnn, weights_file = random_network(seed, folder, model=args.model)
    else:
        cnn, weights_file = network.features, args.weights
    preset = networks.preset_weights(args)
    weights = (preset[0] * args.loss_scale, preset[1] * args.loss_scale)
    score = Scorer(cnn, args.size, weights, normalization=network.normalization())
    common = {"size": args.size, "style_weight": weights[0], "content_weight": weights[1], "model": args.model,
              "weights": str(weights_file), "preprocess": network.preprocess, "device": "cpu"}
    default = timed_run(StyleConfig(steps=args.steps, **common), score.shape)
    best_default = default["best"]
    target = best_default["loss"] * WITHIN
    result: dict[str, Any] = {"seed": seed, "default": {
        "wall_s": default["wall_s"], "evaluations": default["evaluations"], "best_loss": best_default["loss"],
        "best_at": best_default["step"], "non_finite_after": default["non_finite_after"]}}
    print(f"  seed {seed} default: {default['evaluations']} evaluations, {default['wall_s']:.1f} s, best loss "
          f"{best_default['loss']:.5g} at evaluation {best_default['step']}", flush=True)
    for text in args.candidates.split(";"):
        budgets = candidate_budgets(text, args.steps)
        run = timed_run(StyleConfig(fast=True, scales=len(budgets), scale_steps=tuple(budgets), **common),
                        score.shape, keep_below=target)
        best_fp32 = score(run["best"]["image"]) if run["best"]["image"] is not None else math.inf
        hit = first_within(run, target, score)
        reached = None if hit is None else hit["seconds"]
        result[text] = {"budgets": budgets, "wall_s": run["wall_s"], "evaluations": run["evaluations"],
                        "best_fp32_loss": best_fp32, "best_loss_ratio": best_fp32 / best_default["loss"],
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
    try:
        network = networks.load(args)  # random: seed 0's, for its model and preprocessing
        networks.preset_weights(args)
    except (StyleTransferError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.loss_scale = networks.loss_scale(args, args.loss_scale)
    if not networks.is_random(args):
        args.seeds = 1  # one network: the given weights
    machine = {"cpu_capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(),
               "torch": torch.__version__}
    network_block = networks.block_of(network, args.weights, loss_scale=args.loss_scale)
    print(f"fast budgets at {args.size} px, {args.seeds} networks, default {args.steps} steps; {machine}", flush=True)
    print(networks.summary(network_block), flush=True)
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        for seed in range(args.seeds):
            runs.append(measure(seed, args, Path(folder), network))
    rows = summarise(runs, candidates)
    print("\ncandidate (evaluations per size) | best loss / default's: median, max | within 5 % | "
          "wall time / default's: median, max")
    for row in rows:
        print(f"{row['candidate']:>12} {row['budgets']} | {row['best_loss_ratio_median']:.3f}, "
              f"{row['best_loss_ratio_max']:.3f} | {row['within_5pct']} of {row['networks']} | "
              f"{row['wall_ratio_median']:.3f}, {row['wall_ratio_max']:.3f}")
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results-fast-budgets.json"
    out.write_text(json.dumps({"args": {**vars(args), "weights": network_block["weights"]}, "machine": machine,
                               "network": network_block, "runs": runs, "summary": rows}, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
