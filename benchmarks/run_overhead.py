"""What the run API costs a run that asks for nothing: ``Run.execute()`` against the tutorial's loop alone.

Run from the repository root::

    python benchmarks/run_overhead.py                 # 128 and 256 px, 60 evaluations, 5 rounds
    python benchmarks/run_overhead.py --smoke         # seconds

Per size it times, alternating in one process so both see the same machine load:

* ``loop``: the network loaded from the weights file, the images loaded and ``transfer.run_style_transfer``
  run on them (the tutorial's loop: what ``stylize()`` did before the run API);
* ``run``: ``run.Run(...).execute()`` with no options (what ``stylize()`` and the command run now: events,
  the provenance record of the result, its input hashes included);
* ``run+previews``: the same with a preview every 10 evaluations;
* ``run+served``: a preview every 5 evaluations (``stylize-serve``'s default), each one encoded as PNG on
  another thread while the run goes on, as the web app does when the page fetches every preview.

All load the same network (``--model``, ``--weights`` and ``--preprocess``, as the command's; by default VGG19 with
random weights, seed 0, saved once to a file) with the tutorial preset's loss weights for its input scale, and run the
same evaluations. It prints the median seconds of each and their ratios to ``loop``; issue 13's target: ``run`` at
most 1.02x; issue 14's: ``run+served`` at most 1.05x. The JSON records the network beside the machine block.
"""

from __future__ import annotations

import argparse
import io
import json
import queue
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing the package
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402

import machines  # noqa: E402
import networks  # noqa: E402
from style_transfer.config.run_options import RunOptions
from style_transfer.config.style import StyleConfig
from style_transfer.fast.hardware import physical_cores  # noqa: E402
from style_transfer.errors import StyleTransferError  # noqa: E402
from style_transfer.io.images import load_image  # noqa: E402
from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD, load_network  # noqa: E402
from style_transfer.run.run import Run  # noqa: E402
from style_transfer.core.transfer import TransferSettings, run_style_transfer  # noqa: E402

CONTENT = ROOT / "images" / "chelsea.png"
STYLE = ROOT / "images" / "ihc.png"


def served(config: StyleConfig) -> None:
    """A run with a preview every 5 evaluations, each encoded as PNG on a second thread (the web app's work)."""
    previews: queue.Queue = queue.Queue()

    def encode() -> None:
        while (image := previews.get()) is not None:
            image.save(io.BytesIO(), format="PNG")

    encoder = threading.Thread(target=encode)
    encoder.start()
    try:
        Run(CONTENT, STYLE, config, RunOptions(preview_every=5)).execute(
            lambda event: previews.put(event.preview) if event.preview is not None else None)
    finally:
        previews.put(None)
        encoder.join()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="128,256")
    parser.add_argument("--steps", type=int, default=59, help="the loop's --steps (59 runs 60 evaluations)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", default=None, help="JSON output (default: benchmarks/results-run-overhead.json)")
    parser.add_argument("--smoke", action="store_true")
    networks.add_options(parser)
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.steps, args.rounds = "32", 1, 1
    torch.set_num_threads(args.threads or physical_cores())
    try:
        net = networks.load(args)  # random: load_network(model, "random"), seed 0
        networks.preset_weights(args)
    except (StyleTransferError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = {"machine": machines.describe(torch.device("cpu")), "network": networks.block_of(net, args.weights),
              "sizes": {}}
    print(f"Measured on: {machines.summary(report['machine'])}")
    print(networks.summary(report["network"]))
    with tempfile.TemporaryDirectory() as folder:
        weights = args.weights
        if networks.is_random(args):  # the same network for Run, which loads its weights itself
            weights = str(Path(folder) / f"{args.model}-random-0.pth")
            torch.save(net.features.state_dict(), weights)
        for size in (int(s) for s in args.sizes.split(",")):
            config = StyleConfig(size=size, steps=args.steps, model=args.model, weights=weights,
                                 preprocess=net.preprocess, device="cpu")

            def loop() -> None:
                network = load_network(config.model, weights, preprocess=config.preprocess)
                content, style = load_image(CONTENT, size), load_image(STYLE, size)
                run_style_transfer(network.features, IMAGENET_MEAN, IMAGENET_STD, content, style, content.clone(),
                                   args.steps, config.style_weight, config.content_weight,
                                   TransferSettings(content_layers=config.content_layers,
                                                    style_layers=config.style_layers,
                                                    normalization=network.normalization()))

            paths = {"loop": loop, "run": lambda: Run(CONTENT, STYLE, config).execute(),
                     "run+previews": lambda: Run(CONTENT, STYLE, config, RunOptions(preview_every=10)).execute(),
                     "run+served": lambda: served(config)}
            times: dict[str, list[float]] = {name: [] for name in paths}
            for _ in range(args.rounds):
                for name, path in paths.items():
                    start = time.perf_counter()
                    path()
                    times[name].append(time.perf_counter() - start)
            medians = {name: statistics.median(t) for name, t in times.items()}
            report["sizes"][size] = {"median_s": medians, "runs_s": times,
                                     "ratio": {name: medians[name] / medians["loop"] for name in paths}}
            print(f"{size} px, {args.steps + 1} evaluations, median of {args.rounds}: " + ", ".join(
                f"{name} {medians[name]:.2f} s ({medians[name] / medians['loop']:.3f}x)" for name in paths))
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results-run-overhead.json"
    out.write_text(json.dumps(report, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
