"""Does --fast ever hand back noise? Every photo against every style, the default beside --fast.

    python -m benchmarks robustness --network vgg19 --size 300 --size 400 --json benchmarks/results/robustness/X.json
    python -m benchmarks robustness --photos chelsea --styles starry_night --size 384   # one pair
    python -m benchmarks robustness --rotate --size 260 --size 300 --fast-from R.jsonl --rows X.jsonl  # default again
    ... --failing-in OLD.jsonl   # only the pairs whose default missed its bar in OLD (against --fast-from's rows)

Styles include ``disc``, mostly flat (the stain as a disc on white); sizes should not be multiples of 64. A row: the
first evaluation's loss, the picture's loss in each mode's own arithmetic (--fast's bf16 reads up to 2.3 % low),
its content loss and, for --fast, the ratios to the default. A --fast run *diverged* when its picture's loss is above
its first loss or 2x the default's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

IMAGES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "images")
PHOTOS = ("chelsea.png", "coffee.png", "astronaut.png", "rocket.jpg")
# The default's bar against --fast on the same pair: its content loss at most this many times --fast's, its loss at most
# LOSS_BAR times, and never above its first loss.
CONTENT_BAR, LOSS_BAR = 1.3, 1.5
STYLES = ("ihc.png", "hubble_deep_field.jpg", "starry_night.jpg", "night_cafe.jpg", "cafe_terrace.jpg", "brick.png",
          "gravel.png", "grass.png", "disc")


def disc_on_white(size: int = 512) -> object:
    """The stain cut to a disc (radius 0.35 of the side) on a white ground: a style that is mostly flat."""
    from PIL import Image

    with Image.open(os.path.join(IMAGES, "ihc.png")) as image:
        stain = np.asarray(image.convert("RGB").resize((size, size)), dtype=np.uint8)
    ys, xs = np.mgrid[0:size, 0:size]
    inside = (xs - size / 2) ** 2 + (ys - size / 2) ** 2 <= (0.35 * size) ** 2
    out = np.full_like(stain, 255)
    out[inside] = stain[inside]
    return Image.fromarray(out)


def missed_bar(default: dict, fast: dict) -> bool:
    """Whether the default's row missed its bar against --fast's row of the same pair."""
    return (default["content"] > CONTENT_BAR * fast["content"] or default["loss"] > LOSS_BAR * fast["loss"]
            or default["loss"] > default["first"])


def pick(names: tuple[str, ...], chosen: list[str] | None) -> list[str]:
    if not chosen:
        return list(names)
    return [n for n in names if os.path.splitext(n)[0] in chosen or n in chosen]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", choices=("vgg19", "vgg16"), default="vgg19")
    parser.add_argument("--size", type=int, action="append", help="repeatable; default 300 and 400")
    parser.add_argument("--photos", nargs="*", help="base names; default all")
    parser.add_argument("--styles", nargs="*", help="base names (disc for the flat style); default all")
    parser.add_argument("--fast-only", action="store_true", help="no default runs (divergence against the start only)")
    parser.add_argument("--reverse", action="store_true",
                        help="the grid from its end (a second process on the same --rows meets the first halfway)")
    parser.add_argument("--failing-in", default=None,
                        help="a rows file with the default's rows: only the pairs whose default missed its bar there")
    parser.add_argument("--fast-from", default=None,
                        help="a rows file of the same grid: its --fast rows stand in for running --fast again")
    parser.add_argument("--rotate", action="store_true",
                        help="each pair at one of the sizes in turn, not at every size (the whole grid in a session)")
    parser.add_argument("--rows", default=None,
                        help="a JSON-lines file: each row appended when done, rows already there skipped (resumable)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    from style_transfer import Run, StyleConfig

    from .. import network as networks, report as reports

    weights = dict(networks.installed())[args.network]
    cnn = networks.load(model=args.network, weights=weights)
    sizes = args.size or [300, 400]
    pairs = [(p, s) for p in pick(PHOTOS, args.photos) for s in pick(STYLES, args.styles)]
    if args.rotate:
        grid = [(sizes[i % len(sizes)], photo, style) for i, (photo, style) in enumerate(pairs)]
    else:
        grid = [(size, photo, style) for size in sizes for photo, style in pairs]
    def rows_done() -> list[dict]:  # read again before each pair: another process may be filling the same file
        if not (args.rows and os.path.exists(args.rows)):
            return []
        with open(args.rows) as handle:
            return [json.loads(line) for line in handle if line.strip()]

    rows = rows_done()
    code = reports.commit()
    earlier = {}
    if args.fast_from:
        with open(args.fast_from) as handle:
            earlier = {(r["size"], r["photo"], r["style"]): r for r in map(json.loads, handle) if r.get("fast")}
    if args.failing_in:
        with open(args.failing_in) as handle:
            old = {(r["size"], r["photo"], r["style"]): r for r in map(json.loads, handle) if r.get("default")}
        grid = [key for key in grid
                if key in old and missed_bar(old[key]["default"], (earlier.get(key) or old[key])["fast"])]
    for size, photo, style_name in reversed(grid) if args.reverse else grid:
        if (size, photo, style_name) in {(r["size"], r["photo"], r["style"]) for r in rows_done()}:
            continue
        style = disc_on_white() if style_name == "disc" else os.path.join(IMAGES, style_name)
        row: dict = {"photo": photo, "style": style_name, "size": size, "commit": code}  # rows outlive sessions
        if earlier:  # --fast's row as the earlier run made it, with that run's commit
            row["fast"] = {**earlier[(size, photo, style_name)]["fast"],
                           "from": earlier[(size, photo, style_name)].get("commit", args.fast_from)}
        for mode in ("default", "fast"):
            if (mode == "default" and args.fast_only) or mode in row:
                continue
            config = StyleConfig(size=size, model=args.network, weights=weights, device="cpu",
                                 fast=mode == "fast")
            events: list = []
            began = time.perf_counter()
            result = Run(os.path.join(IMAGES, photo), style, config, cnn=cnn).execute(events.append)
            row[mode] = {"first": events[0].loss, "loss": result.losses["loss"],
                         "content": result.losses["content"], "kept": result.kept,
                         "rescued_at": result.record.get("rescued_at"),
                         "evaluations": result.evaluations, "seconds": time.perf_counter() - began}
        fast = row["fast"]
        default = row.get("default")
        fast["diverged"] = fast["loss"] > fast["first"] or (
            default is not None and fast["loss"] > 2 * default["loss"])
        if default is not None:
            row["loss_ratio"] = fast["loss"] / default["loss"]
            row["content_ratio"] = fast["content"] / default["content"] if default["content"] else None
            default["diverged"] = default["loss"] > default["first"]
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.rows:
            with open(args.rows, "a") as handle:
                handle.write(json.dumps(row) + "\n")
    ratios = [r["loss_ratio"] for r in rows if "loss_ratio" in r]
    summary = {"runs": len(rows), "fast_diverged": sum(r["fast"]["diverged"] for r in rows),
               "default_diverged": sum(r["default"]["diverged"] for r in rows if "default" in r),
               "default_missed_bar": sum(missed_bar(r["default"], r["fast"]) for r in rows if "default" in r),
               "median_loss_ratio": statistics.median(ratios) if ratios else None,
               "worst_loss_ratio": max(ratios) if ratios else None}
    print(json.dumps(summary))
    if args.json:  # the network as [model, weights] (the committed reports' form)
        report = reports.start(args, None, rows=rows, summary=summary)
        reports.write({**report, "network": [args.network, os.path.basename(weights)]}, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
