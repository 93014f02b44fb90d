"""Each style loss (``--style-loss``) side by side: time per evaluation and the style distances it did not optimise.

    python -m benchmarks style_losses --model vgg16 --weights FILE.onnx [--size 256] [--steps 300] [--grid]

One run per style loss at its preset weight; each result's distance to the style by every statistic at the loss's
layers and by the Gram matrices at ``HELD_OUT`` layers, as a ratio to the photo's own (docs/gallery.md). ``--grid``:
each loss also masked (the style on the left half) and averaged.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from style_transfer import Run, StyleConfig
from style_transfer.losses import masks as guided
from style_transfer.losses.statistics import SlicedStyleLoss
from style_transfer.io.images import load_image
from style_transfer.presets import STYLE_LOSSES

from .. import network as networks, report as reports
from ..scoring import CONTENT, STYLE
from ..timing import Clock

HELD_OUT = ("conv3_3", "conv4_1", "conv5_1")  # Gram layers no run optimises (the tutorial's end at conv3_1 on VGG16)
METER_DIRECTIONS = 4  # per channel, fixed (seed 12345): the sliced distance as a measurement, not as a loss


def distances(network, style: torch.Tensor, content: torch.Tensor, image: torch.Tensor,
              layers: tuple[str, ...], guides: guided.Guides | None = None) -> dict[str, float]:
    """Each statistic's distance of ``image`` to ``style`` at the loss's ``layers``, and the Gram one at HELD_OUT;
    with ``guides`` the guided statistics over the style mask's region."""
    out: dict[str, float] = {}
    for kind in STYLE_LOSSES:
        model, losses, _ = networks.style_model(network, style, content, (), layers, style_loss=kind, guides=guides)
        for module in losses:
            if isinstance(module, SlicedStyleLoss):
                module.seed, module.evaluations = 12345, 0
                module.directions = METER_DIRECTIONS * (module.target.shape[0] - 1)
        with torch.no_grad():
            model(image)
        out[kind] = sum(float(m.loss) for m in losses)
    model, losses, _ = networks.style_model(network, style, content, (), HELD_OUT, guides=guides)
    with torch.no_grad():
        model(image)
    out["gram held-out"] = sum(float(m.loss) for m in losses)
    return out


def left_half(hw: tuple[int, int]):
    """The grid's style mask: white on the left half of the content, black on the right (a Pillow image)."""
    from PIL import Image

    height, width = hw
    mask = Image.new("L", (width, height), 0)
    mask.paste(255, (0, 0, width // 2, height))
    return mask


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
    parser.add_argument("--grid", action="store_true",
                        help="each loss masked and unmasked, averaging off and on (the issue's options), one process")
    parser.add_argument("--average-decay", type=float, default=0.9, help="--grid's --average (default 0.9)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    network = networks.load(args)
    content, style = load_image(args.content, args.size), load_image(args.style, args.size)
    base = networks.config(args, size=args.size, steps=args.steps, device="cpu", threads=args.threads)
    layers = tuple(base.style_layers)
    mask = left_half(tuple(content.shape[-2:]))
    guides = guided.load_guides([mask], None, args.content, tuple(content.shape[-2:]), 1)
    start = {False: distances(network, style, content, content, layers),
             True: distances(network, style, content, content, layers, guides) if args.grid else None}
    report = {**reports.start(args, networks.block_of(network, args.weights)), "size": args.size, "steps": args.steps,
              "content": Path(args.content).name, "style": Path(args.style).name, "style_layers": list(layers),
              "held_out_layers": list(HELD_OUT), "photo_distances": start[False], "runs": []}
    if args.grid:
        report["photo_distances_masked"] = start[True]
        report["average_decay"] = args.average_decay
    ways = [(m, a) for m in (False, True) for a in (None, args.average_decay)] if args.grid else [(False, None)]
    for item in args.losses.split(","):
        kind, _, weight = item.partition("=")
        for masked, average in ways:
            fields = {f: getattr(base, f) for f in ("size", "steps", "model", "weights", "preprocess", "device",
                                                    "threads")}
            config = StyleConfig(**fields, style_loss=kind, style_weight=float(weight) if weight else None,
                                 style_masks=(mask,) if masked else (), average=average)
            clock = Clock()
            result = Run(args.content, args.style, config, cnn=network).execute(clock)
            image = torch.from_numpy(__import__("numpy").asarray(result.image, dtype="float32") / 255).permute(2, 0, 1)[None]
            found = distances(network, style, content, image, layers, guides if masked else None)
            report["runs"].append({
                "style_loss": kind, "style_weight": config.style_weight, "masked": masked, "average": average,
                "evaluations": result.evaluations, "seconds": round(clock.elapsed, 1),
                "median_evaluation_s": round(clock.per_evaluation() or 0.0, 4),
                "ratios": {name: found[name] / start[masked][name] for name in found}})
            if args.pictures:
                Path(args.pictures).mkdir(parents=True, exist_ok=True)
                from style_transfer.io.metadata import save_options  # the run's record, as stylize embeds it

                tail = ("-masked" if masked else "") + (f"-average" if average else "")
                result.image.convert("RGB").save(
                    Path(args.pictures) / f"style-loss-{kind}{'-' + weight if weight else ''}{tail}.jpg", quality=88,
                    **save_options(result.record, "JPEG"))
            print(f"{kind}{' masked' if masked else ''}{' averaged' if average else ''}: {result.evaluations} "
                  f"evaluations in {clock.elapsed:.0f} s", file=sys.stderr, flush=True)
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
        lines.insert(4, "mask: the style on the left half only, its distances the guided ones over that half (ratios to "
                        f"the photo's there); average: --average {report['average_decay']:g}, measured on the average.")
    for run in report["runs"]:
        cells = [f"{run['ratios'][n]:.2g}{'*' if n == run['style_loss'] else ''}" for n in names]
        mask = "left half" if run.get("masked") else "none"
        average = f"{run['average']:g}" if run.get("average") else "off"
        lines.append(f"| {run['style_loss']} | {run['style_weight']:g} | {mask} | {average} | {run['evaluations']} "
                     f"| {run['seconds']:.0f} | {run['median_evaluation_s']:.3f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
