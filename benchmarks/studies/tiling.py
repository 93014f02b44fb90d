"""Tiled against untiled evaluations: peak memory and seconds per evaluation, in one run.

    python -m benchmarks tiling                                  # 128 256 384 512 px, tile 128, CPU
    python -m benchmarks tiling --sizes 1024 2048 4096 --tile 512 --no-untiled-above 2048
    python -m benchmarks tiling --device cuda --sizes 2048 4096 8192 --tile 2048

Each (size, mode) in a fresh process on square noise images: the peak memory above the state before the model was
built and the median seconds per evaluation; a least-squares line splits the tiled peaks into a fixed part and
bytes per pixel (docs/print-size.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import os
import sys

from .. import memory, network as networks, report as reports

CHILD = r"""
import json, statistics, sys, torch
from style_transfer.tiling import plans, tiling
from style_transfer.core.backward import weighted_scores
from benchmarks.network import load, style_model
size, tile, evaluations, device = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), torch.device(sys.argv[4])
model_name, weights, preprocess = sys.argv[5], sys.argv[6], sys.argv[7] or None
style_weight, content_weight = float(sys.argv[8]), float(sys.argv[9])
network = load(model=model_name, weights=weights, preprocess=preprocess)
network.features.to(device)
content, style, start = (torch.rand(1, 3, size, size, generator=torch.Generator().manual_seed(i)).to(device)
                         for i in (0, 1, 2))
from benchmarks.memory import peak_mib, reset_peak
from benchmarks.timing import seconds as timed
before = reset_peak(device)
tiled = tile > 0 and plans.needs_tiles(size, size, tile)
model, sl, cl = style_model(network, tiling.stand_ins(style) if tiled else style,
                            tiling.stand_ins(content) if tiled else content)
if tiled:
    tiler = tiling.TiledStyleModel(model, tile)
    tiler.set_targets(content, [style])
    crops = len(tiler.crops(size, size))
else:
    crops = 1
targets = sum(m.target.numel() * m.target.element_size() for m in cl)
image = start.clone().requires_grad_(True)
seconds = []
def evaluate():
    global loss
    image.grad = None
    if tiled:
        s, c, _ = tiler.evaluate(image, style_weight, content_weight)
    else:
        model(image)
        s, c = weighted_scores(sl, cl, style_weight, content_weight)
        (s + c).backward()
    loss = float(s + c)
for k in range(evaluations + 1):
    seconds.append(timed(evaluate, device))
print(json.dumps({"peak": (peak_mib(device) - before) * 2**20, "seconds": statistics.median(seconds[1:]), "crops": crops,
                  "target_bytes": targets, "loss": loss}))
"""

def measure(size: int, tile: int, evaluations: int, device: str, threads: int | None, config: object) -> dict:
    """One (size, mode) in a fresh process, on the network and loss weights of ``config`` (a ``StyleConfig``)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads)) if threads else None
    return json.loads(memory.child(f"{size} px", "-c", CHILD, str(size), str(tile), str(evaluations), device,
                                   config.model, config.weights, config.preprocess or "", repr(config.style_weight),
                                   repr(config.content_weight), env=env))


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares ``peak = fixed + per_pixel * pixels``; one point gives ``(0, peak / pixels)``."""
    if len(points) == 1:
        return 0.0, points[0][1] / points[0][0]
    xs, ys = [p for p, _ in points], [b for _, b in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def main(argv: list[str] | None = None) -> int:
    from style_transfer.errors import StyleTransferError
    from style_transfer.tiling import plans

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 256, 384, 512])
    parser.add_argument("--tile", type=int, default=128, help="crop side in px (default 128)")
    parser.add_argument("--evaluations", type=int, default=3, help="timed evaluations after one warm-up")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS of each child")
    parser.add_argument("--no-untiled-above", type=int, default=None,
                        help="skip the untiled run above this size (it would not fit)")
    parser.add_argument("--history-size", type=int, default=plans.TILED_HISTORY_SIZE,
                        help="LBFGS pairs counted in the proportional part (default: a tiled size's "
                             f"{plans.TILED_HISTORY_SIZE})")
    parser.add_argument("--json", default=None,
                        help="the report (default: benchmarks/results/tiling/DATE-CLASS-NETWORK-SIZESpx.json)")
    networks.add_options(parser)
    args = parser.parse_args(argv)
    try:  # what the weights tell (preprocessing, the preset's loss weights), read here without loading them
        config = networks.config(args)
    except (StyleTransferError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    block = networks.block(args.model, args.weights, config.preprocess)

    report = reports.start(args, block, args.device if args.device.startswith("cuda") else "cpu",
                           device=args.device, tile=args.tile)
    print(f"device {args.device}; tile {args.tile} px; {args.evaluations} timed evaluations")
    rows = []
    for size in args.sizes:
        row = {"size": size, "pixels": size * size, "tiled": measure(size, args.tile, args.evaluations, args.device,
                                                                     args.threads, config)}
        if args.no_untiled_above is None or size <= args.no_untiled_above:
            row["untiled"] = measure(size, 0, args.evaluations, args.device, args.threads, config)
        rows.append(row)
        t = row["tiled"]
        line = (f"{size:5d} px: tiled ({t['crops']:3d} crops) peak {t['peak'] / 2**20:8.1f} MiB, "
                f"{t['seconds']:7.2f} s/eval ({t['seconds'] / (size * size / 1e6):6.2f} s/Mpx)")
        if "untiled" in row:
            u = row["untiled"]
            line += (f" | untiled peak {u['peak'] / 2**20:8.1f} MiB, {u['seconds']:7.2f} s/eval | tiled/untiled: "
                     f"memory {t['peak'] / u['peak']:.2f}x, time {t['seconds'] / u['seconds']:.2f}x, "
                     f"loss rel. diff {abs(t['loss'] - u['loss']) / abs(u['loss']):.1e}")
        print(line, flush=True)
    fixed, per_pixel = fit([(r["pixels"], r["tiled"]["peak"]) for r in rows])
    targets = rows[-1]["tiled"]["target_bytes"] / rows[-1]["pixels"]
    history = args.history_size * 2 * 12
    copies = plans.TILED_IMAGE_COPIES * 12
    print(f"tiled peak = {fixed / 2**20:.0f} MiB fixed + {per_pixel:.0f} B/px measured (image, gradient, content "
          f"targets, the style image, allocator slack)")
    print(f"a tiled run's proportional parts by tensor: image + gradient 24 B/px, content targets {targets:.0f} B/px, "
          f"LBFGS history ({args.history_size} pairs) {history} B/px, the loop's other copies "
          f"{copies - 24} B/px: {24 + targets + history + copies - 24:.0f} B/px in all")
    report.update(rows=rows, fixed_bytes=fixed, bytes_per_pixel=per_pixel)
    reports.write(report, args.json or reports.path("tiling", report, reports.sizes(args.sizes), f"tile{args.tile}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
