"""Peak memory of a run against the estimate the size check uses (style_transfer.guards).

    python benchmarks/memory.py [SIZE ...]          # default: 64 128 256 384, one LBFGS step each
    python benchmarks/memory.py --fast [SIZE ...]   # the same with --fast

Each size runs in a fresh process (seeded random weights, the tutorial's layers, square noise
images) and reports its peak RSS above the process's start; the slope between the sizes is
the per-pixel cost that ``ACTIVATION_BYTES_PER_PIXEL`` stands for (on both paths: see guards.py). Random weights store no LBFGS pairs, so the estimate's history term
(2400 B/px, 480 with --fast's 20 pairs) is not in these measurements.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHILD = """
import resource, sys, torch
from style_transfer import StyleConfig, stylize
size, fast = int(sys.argv[1]), sys.argv[2] == "fast"
images = [torch.rand(1, 3, size, size, generator=torch.Generator().manual_seed(i)) for i in (0, 1)]
start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
stylize(*images, StyleConfig(size=size, steps=1, weights="random", device="cpu", fast=fast))
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - start) * 1024)
"""


def main() -> None:
    sys.path.insert(0, str(ROOT))
    import torch

    from style_transfer import StyleConfig, guards
    from style_transfer.fast import speed_from_config

    args = sys.argv[1:]
    fast = "--fast" in args
    sizes = [int(s) for s in args if s != "--fast"] or [64, 128, 256, 384]
    speed = speed_from_config(StyleConfig(fast=fast), torch.device("cpu"))
    per_pixel = guards.ACTIVATION_BYTES_PER_PIXEL
    history = guards.LBFGS_HISTORY_BYTES_PER_PIXEL * speed.history_size // 100
    print(f"{'--fast' if fast else 'default path'}: {speed}")
    peaks = {}
    for size in sizes:
        out = subprocess.run([sys.executable, "-c", CHILD, str(size), "fast" if fast else "default"], cwd=ROOT,
                             check=True, capture_output=True, text=True).stdout
        peaks[size] = int(out.split()[-1])
        without_history = guards.estimate_bytes((size, size), (size, size), speed) - size * size * history
        print(f"{size:5d} px: peak {peaks[size] / 2**20:7.1f} MiB above start; estimate without LBFGS history "
              f"{without_history / 2**20:7.1f} MiB (ratio {without_history / peaks[size]:.2f})")
    for low, high in zip(sizes, sizes[1:]):
        slope = (peaks[high] - peaks[low]) / (high * high - low * low)
        print(f"{low}->{high} px: {slope:.0f} B per pixel (the estimate's {per_pixel}, ratio {per_pixel / slope:.2f})")


if __name__ == "__main__":
    main()
