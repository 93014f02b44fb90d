"""Tiled against untiled evaluations (issue 16): peak memory and seconds per evaluation, in one run.

    python benchmarks/tiling.py                                  # 128 256 384 512 px, tile 128, CPU
    python benchmarks/tiling.py --sizes 1024 2048 4096 --tile 512 --no-untiled-above 2048
    python benchmarks/tiling.py --device cuda --sizes 2048 4096 8192 --tile 2048

Each (size, mode) runs in a fresh process: seeded random VGG19 weights, the tutorial's layers, square
noise images (content, style and start image), the closure's work only (``TiledStyleModel.evaluate``,
or the model's forward and one backward): ``--evaluations`` of them after one warm-up. It reports the
peak memory above the process's state before the model was built (CPU: peak RSS, which counts the
allocator's slack; CUDA: ``max_memory_allocated``) and the median seconds per evaluation.

The tiled peaks at two or more sizes are split by a least-squares line into a fixed part (the crop's
activations, the network) and a part proportional to the picture, in bytes per pixel. What a run adds
to the proportional part is listed by tensor: LBFGS's history (``history_size`` pairs of 2 image copies;
not allocated here, random weights store few pairs) and the loop's image copies (``tiling.TILED_IMAGE_COPIES``).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHILD = r"""
import json, resource, statistics, sys, time, torch
from style_transfer import tiling
from style_transfer.models import IMAGENET_MEAN, IMAGENET_STD, freeze, random_vgg19_features
from style_transfer.backward import weighted_scores
from style_transfer.transfer import get_style_model_and_losses
size, tile, evaluations, device = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), torch.device(sys.argv[4])
cnn = freeze(random_vgg19_features(0)).to(device)
content, style, start = (torch.rand(1, 3, size, size, generator=torch.Generator().manual_seed(i)).to(device)
                         for i in (0, 1, 2))
def peak():
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device)
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
if device.type == "cuda":
    torch.cuda.reset_peak_memory_stats(device)
before = peak()
tiled = tile > 0 and tiling.needs_tiles(size, size, tile)
model, sl, cl = get_style_model_and_losses(cnn, IMAGENET_MEAN, IMAGENET_STD,
                                           tiling.stand_ins(style) if tiled else style,
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
for k in range(evaluations + 1):
    image.grad = None
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t = time.perf_counter()
    if tiled:
        s, c, _ = tiler.evaluate(image, 1e6, 1)
    else:
        model(image)
        s, c = weighted_scores(sl, cl, 1e6, 1)
        (s + c).backward()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds.append(time.perf_counter() - t)
    loss = float(s + c)
print(json.dumps({"peak": peak() - before, "seconds": statistics.median(seconds[1:]), "crops": crops,
                  "target_bytes": targets, "loss": loss}))
"""


def measure(size: int, tile: int, evaluations: int, device: str, threads: int | None) -> dict:
    env = None
    if threads:
        import os

        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, "-c", CHILD, str(size), str(tile), str(evaluations), device], cwd=ROOT,
                         check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares ``peak = fixed + per_pixel * pixels``; one point gives ``(0, peak / pixels)``."""
    if len(points) == 1:
        return 0.0, points[0][1] / points[0][0]
    xs, ys = [p for p, _ in points], [b for _, b in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from style_transfer import tiling

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 256, 384, 512])
    parser.add_argument("--tile", type=int, default=128, help="crop side in px (default 128)")
    parser.add_argument("--evaluations", type=int, default=3, help="timed evaluations after one warm-up")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS of each child")
    parser.add_argument("--no-untiled-above", type=int, default=None,
                        help="skip the untiled run above this size (it would not fit)")
    parser.add_argument("--history-size", type=int, default=tiling.TILED_HISTORY_SIZE,
                        help="LBFGS pairs counted in the proportional part (default: a tiled size's "
                             f"{tiling.TILED_HISTORY_SIZE})")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    args = parser.parse_args()

    print(f"machine: {platform.node()} {platform.machine()} {platform.processor() or ''}; device {args.device}; "
          f"tile {args.tile} px; {args.evaluations} timed evaluations")
    rows = []
    for size in args.sizes:
        row = {"size": size, "pixels": size * size, "tiled": measure(size, args.tile, args.evaluations, args.device,
                                                                     args.threads)}
        if args.no_untiled_above is None or size <= args.no_untiled_above:
            row["untiled"] = measure(size, 0, args.evaluations, args.device, args.threads)
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
    copies = tiling.TILED_IMAGE_COPIES * 12
    print(f"tiled peak = {fixed / 2**20:.0f} MiB fixed + {per_pixel:.0f} B/px measured (image, gradient, content "
          f"targets, the style image, allocator slack)")
    print(f"a tiled run's proportional parts by tensor: image + gradient 24 B/px, content targets {targets:.0f} B/px, "
          f"LBFGS history ({args.history_size} pairs) {history} B/px, the loop's other copies "
          f"{copies - 24} B/px: {24 + targets + history + copies - 24:.0f} B/px in all")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": args.device, "tile": args.tile, "rows": rows,
                                               "fixed_bytes": fixed, "bytes_per_pixel": per_pixel}, indent=1))


if __name__ == "__main__":
    main()
