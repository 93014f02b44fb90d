"""Each style loss (``--style-loss``) side by side: time per evaluation and the style distances it did not optimise.

    python -m benchmarks style_losses --model vgg16 --weights FILE.onnx [--size 256] [--steps 300]

One run per style loss at its preset weight; each result's distance to the style by every statistic at the loss's
layers and by the Gram matrices at ``HELD_OUT`` layers, as a ratio to the photo's own (docs/gallery.md). The
markdown still reads the retired ``--grid``'s report (masked and averaged runs: benchmarks/NOTEBOOK.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from style_transfer import Run, StyleConfig
from style_transfer.losses.statistics import SlicedStyleLoss
from style_transfer.io.images import load_image, pil_to_tensor
from style_transfer.io.metadata import save_options
from style_transfer.presets import STYLE_LOSSES

from .. import network as networks, report as reports
from ..scoring import CONTENT, STYLE
from ..timing import Clock

HELD_OUT = ("conv3_3", "conv4_1", "conv5_1")  # Gram layers no run optimises (the tutorial's end at conv3_1 on VGG16)
METER_DIRECTIONS = 4  # per channel, fixed (seed 12345): the sliced distance as a measurement, not as a loss


def distances(network, style: torch.Tensor, content: torch.Tensor, image: torch.Tensor,
              layers: tuple[str, ...]) -> dict[str, float]:
    """Each statistic's distance of ``image`` to ``style`` at the loss's ``layers``, and the Gram one at HELD_OUT."""
    out: dict[str, float] = {}
    for kind in STYLE_LOSSES:
        model, losses, _ = networks.style_model(network, style, content, (), layers, style_loss=kind)
        for module in losses:
            if isinstance(module, SlicedStyleLoss):
                module.seed, module.evaluations = 12345, 0
                module.directions = METER_DIRECTIONS * (module.target.shape[0] - 1)
        with torch.no_grad():
            model(image)
        out[kind] = sum(float(m.loss) for m in losses)
    model, losses, _ = networks.style_model(network, style, content, (), HELD_OUT)
    with torch.no_grad():
        model(image)
    out["gram held-out"] = sum(float(m.loss) for m in losses)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    networks.add_options(parser)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--content", default=str(CONTENT))
    parser.add_argument("--style", default=str(STYLE))
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: spare the shared CPU)")
    parser.add_argument("--losses", default=",".join(STYLE_LOSSES),
                        help="comma-separated style losses, each at its preset weight or KIND=WEIGHT; default all")
    parser.add_argument("--pictures", help="write each result as DIR/style-loss-KIND.jpg")
    parser.add_argument("--json", help="write the report here too")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    network = networks.load(args)
    content, style = load_image(args.content, args.size), load_image(args.style, args.size)
    base = networks.config(args, size=args.size, steps=args.steps, device="cpu", threads=args.threads)
    layers = tuple(base.style_layers)
    start = distances(network, style, content, content, layers)
    report = {**reports.start(args, networks.block_of(network, args.weights)), "size": args.size, "steps": args.steps,
              "content": Path(args.content).name, "style": Path(args.style).name, "style_layers": list(layers),
              "held_out_layers": list(HELD_OUT), "photo_distances": start, "runs": []}
    for item in args.losses.split(","):
        kind, _, weight = item.partition("=")
        fields = {f: getattr(base, f) for f in ("size", "steps", "model", "weights", "preprocess", "device", "threads")}
        config = StyleConfig(**fields, style_loss=kind, style_weight=float(weight) if weight else None)
        clock = Clock()
        result = Run(args.content, args.style, config, cnn=network).execute(clock)
        found = distances(network, style, content, pil_to_tensor(result.image), layers)
        report["runs"].append({
            "style_loss": kind, "style_weight": config.style_weight, "masked": False, "average": None,
            "evaluations": result.evaluations, "seconds": round(clock.elapsed, 1),
            "median_evaluation_s": round(clock.per_evaluation() or 0.0, 4),
            "ratios": {name: found[name] / start[name] for name in found}})
        if args.pictures:
            Path(args.pictures).mkdir(parents=True, exist_ok=True)
            name = f"style-loss-{kind}{'-' + weight if weight else ''}.jpg"
            # the run's record, as stylize embeds it; quality 88 as the committed gallery
            result.image.convert("RGB").save(Path(args.pictures) / name, quality=88,
                                             **save_options(result.record, "JPEG"))
        print(f"{kind}: {result.evaluations} evaluations in {clock.elapsed:.0f} s", file=sys.stderr, flush=True)
    print(markdown(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0


def markdown(report: dict) -> str:
    names = [*STYLE_LOSSES, "gram held-out"]
    heads = {"gram": "Gram", "wasserstein": "W2", "sliced": "sliced", "gram held-out": "Gram, held-out layers"}
    lines = [*reports.head(report), "", f"{report['content']} in {report['style']} at {report['size']} px, "
             f"{report['steps']} steps; distances to the style as ratios to the photo's (loss layers "
             f"{','.join(report['style_layers'])}; held out "
             f"{','.join(report['held_out_layers'])}); * the statistic the run optimised.", "",
             "| style loss | style weight | mask | average | evaluations | s | median s / evaluation | "
             + " | ".join(heads[n] for n in names) + " |", "|---" * (7 + len(names)) + "|"]
    if "average_decay" in report:
        lines.insert(4, "mask: the style on the left half only, its distances the guided ones over that half (ratios "
                        f"to the photo's there); average: --average {report['average_decay']:g}, measured on the "
                        "average.")
    for run in report["runs"]:
        cells = [f"{run['ratios'][n]:.2g}{'*' if n == run['style_loss'] else ''}" for n in names]
        mask = "left half" if run.get("masked") else "none"
        average = f"{run['average']:g}" if run.get("average") else "off"
        lines.append(f"| {run['style_loss']} | {run['style_weight']:g} | {mask} | {average} | {run['evaluations']} "
                     f"| {run['seconds']:.0f} | {run['median_evaluation_s']:.3f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
