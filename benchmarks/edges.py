"""The edge strip (issue 33, item 12): how much busier each edge of a picture is than the band just inside it,
without a border and with ``--margin``.

For each pair and margin, one default-path run; for each edge of the picture, the mean absolute difference
between neighbouring rows (columns) over the 3 outermost pairs, divided by the same over the pairs 5 to 15 px
in: 1 is an edge like the band inside it, 1.5 a strip half again as busy. The content image's own ratios are
printed beside them (a photo may be busy at an edge by itself). Writes a JSON naming the machine.

    python benchmarks/edges.py --model vgg19 --weights original --size 128 --margins 0 12
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "images"
PAIRS = [("chelsea.png", "ihc.png"), ("coffee.png", "hubble_deep_field.jpg"), ("rocket.jpg", "gravel.png"),
         ("astronaut.png", "grass.png")]
EDGES = ("top", "bottom", "left", "right")


def edge_ratios(image) -> dict[str, float]:
    """Each edge's busyness against the band 5 to 15 px inside it, of an (H, W, 3) array."""
    import numpy as np

    x = np.asarray(image, dtype=np.float64)
    rows = np.abs(np.diff(x, axis=0)).mean(axis=(1, 2))  # rows[i]: between row i and i + 1
    cols = np.abs(np.diff(x, axis=1)).mean(axis=(0, 2))
    ratio = lambda edge, band: float(edge.mean() / band.mean())  # noqa: E731
    return {"top": ratio(rows[:3], rows[5:15]), "bottom": ratio(rows[-3:], rows[-15:-5]),
            "left": ratio(cols[:3], cols[5:15]), "right": ratio(cols[-3:], cols[-15:-5])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="vgg19")
    parser.add_argument("--weights", default="original")
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--margins", type=int, nargs="+", default=[0, 12])
    parser.add_argument("--pairs", type=int, nargs="+", default=list(range(len(PAIRS))))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--pictures", type=Path, help="folder for the pictures")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "measured-edges.json")
    args = parser.parse_args()

    import torch

    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from machines import describe

    from style_transfer.config.style import StyleConfig
    from style_transfer.networks.vgg import load_network
    from style_transfer.io.images import load_image
    from style_transfer.run.run import Run

    torch.set_num_threads(args.threads)
    network = load_network(args.model, args.weights)
    rows = []
    for pair in args.pairs:
        content, style = (IMAGES / name for name in PAIRS[pair])
        photo = load_image(str(content), args.size)[0].permute(1, 2, 0).numpy() * 255
        row = {"content": content.name, "style": style.name, "size": list(photo.shape[1::-1]),
               "photo": edge_ratios(photo)}
        for margin in args.margins:
            config = StyleConfig(size=args.size, steps=args.steps, model=args.model, weights=args.weights,
                                 preprocess=network.preprocess, device="cpu", margin=margin)
            start = time.perf_counter()
            result = Run(str(content), str(style), config, cnn=network).execute()
            seconds = round(time.perf_counter() - start, 1)
            row[f"margin {margin}"] = {**edge_ratios(result.image), "seconds": seconds}
            if args.pictures:
                args.pictures.mkdir(parents=True, exist_ok=True)
                result.image.save(args.pictures / f"{content.stem}__{style.stem}-margin{margin}.png")
        rows.append(row)
        print(f"{content.name} in {style.name} ({row['size'][0]}x{row['size'][1]}):")
        for name in ["photo"] + [f"margin {m}" for m in args.margins]:
            print(f"  {name:10s} " + "  ".join(f"{e} {row[name][e]:.2f}" for e in EDGES)
                  + (f"  ({row[name]['seconds']} s)" if "seconds" in row[name] else ""))
    report = {"machine": describe(torch.device("cpu")), "model": args.model, "weights": args.weights,
              "size": args.size, "steps": args.steps, "pairs": rows}
    args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
