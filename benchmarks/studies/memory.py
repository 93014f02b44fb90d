"""Peak memory of a run against the estimate the size check uses (style_transfer.memory).

    python -m benchmarks memory [--fast] [SIZE ...]      # default: 64 128 256 384, one LBFGS step each

Each size in a fresh process on square noise images: its peak RSS above the start (the weights' reading left out)
against the estimate without the LBFGS history (random weights store no pairs), and the slope between sizes.
"""

from __future__ import annotations

import argparse
import sys

from .. import memory, network as networks, report as reports

# The network is read first, then the peak restarts from the RSS before it plus the network (Linux clear_refs), so
# reading a file (an ONNX graph, a zip) does not set the peak.
CHILD = """
import sys, torch
from benchmarks.memory import peak_mib, reset_peak
from benchmarks.network import load
from style_transfer import Run, StyleConfig
size, fast = int(sys.argv[1]), sys.argv[2] == "fast"
model, weights, preprocess = sys.argv[3], sys.argv[4], sys.argv[5] or None
images = [torch.rand(1, 3, size, size, generator=torch.Generator().manual_seed(i)) for i in (0, 1)]
start = reset_peak()
network = load(model=model, weights=weights, preprocess=preprocess)
reset_peak()  # the peak restarts at the RSS now: the network, not the reading's transient
config = StyleConfig(size=size, steps=1, model=model, weights=weights, preprocess=network.preprocess, device="cpu",
                     fast=fast)
Run(*images, config, cnn=network).execute()
print(int((peak_mib() - start) * 2**20))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", type=int, nargs="*", help="square sizes in px (default: 64 128 256 384)")
    parser.add_argument("--fast", action="store_true", help="the --fast path")
    networks.add_options(parser)
    parser.add_argument("--json", default=None, help="also write the report here")
    args = parser.parse_args(argv)

    import torch

    from style_transfer import StyleConfig
    from style_transfer import memory as guards
    from style_transfer.fast.fast import speed_from_config

    fast = args.fast
    sizes = args.sizes or [64, 128, 256, 384]
    speed = speed_from_config(StyleConfig(fast=fast), torch.device("cpu"))
    per_pixel = guards.ACTIVATION_BYTES_PER_PIXEL
    history = guards.LBFGS_HISTORY_BYTES_PER_PIXEL * speed.history_size // 100
    print(f"{'--fast' if fast else 'default path'}: {speed}")
    block = networks.block(args.model, args.weights, networks.config(args).preprocess)  # what the weights tell
    print(networks.summary(block))
    peaks = {}
    for size in sizes:
        peaks[size] = int(memory.child(f"{size} px", "-c", CHILD, str(size), "fast" if fast else "default",
                                       args.model, args.weights, args.preprocess or ""))
        without_history = guards.estimate_bytes((size, size), (size, size), speed) - size * size * history
        print(f"{size:5d} px: peak {peaks[size] / 2**20:7.1f} MiB above start; estimate without LBFGS history "
              f"{without_history / 2**20:7.1f} MiB (ratio {without_history / peaks[size]:.2f})")
    for low, high in zip(sizes, sizes[1:]):
        slope = (peaks[high] - peaks[low]) / (high * high - low * low)
        print(f"{low}->{high} px: {slope:.0f} B per pixel (the estimate's {per_pixel}, ratio {per_pixel / slope:.2f})")
    if args.json:
        reports.write(reports.start(args, block, peak_bytes=peaks), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
