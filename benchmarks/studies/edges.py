"""The edge strip: how much busier each edge of a picture is than the band 5 to 15 px inside it.

Without a border and with ``--margin``, beside the photo's own (docs/usage.md, "Edges"):

    python -m benchmarks edges --weights original --size 128 --margins 0 12
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ..scoring import IMAGES, PAIRS as ALL_PAIRS

PAIRS = [ALL_PAIRS[i] for i in (0, 1, 4, 5)]
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


def main(argv: list[str] | None = None) -> None:
    from .. import network as networks, report as reports

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    networks.add_options(parser, weights="original")
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--margins", type=int, nargs="+", default=[0, 12])
    parser.add_argument("--pairs", type=int, nargs="+", default=list(range(len(PAIRS))))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--pictures", type=Path, help="folder for the pictures")
    parser.add_argument("--out", type=Path, default=None,
                        help="JSON output (default: benchmarks/results/edges/DATE-CLASS-NETWORK-SIZEpx.json)")
    args = parser.parse_args(argv)

    import torch

    from style_transfer import Run, StyleConfig
    from style_transfer.io.images import load_image

    torch.set_num_threads(args.threads)
    network = networks.load(args)
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
    report = reports.start(args, networks.block_of(network, args.weights), model=args.model,
                           weights=networks.block_of(network, args.weights)["weights"], size=args.size,
                           steps=args.steps, pairs=rows)
    reports.write(report, args.out or reports.path("edges", report, args.size))


if __name__ == "__main__":
    main()
