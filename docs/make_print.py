"""Make and score docs/print-size.md's print: the cat in The Starry Night at 2,048 px, coarse-to-fine (the command's
own recipe) and at one size, on the original VGG19 with ``--fast``.

    python docs/make_print.py make [--threads N]    # both runs (about 16 and 45 minutes on 2 cores), crops, scores
    python docs/make_print.py score PRINT.png [PRINT.png ...] [--content images/chelsea.png]
        [--style images/starry_night.jpg] [--json out.json]

``make`` writes docs/gallery/print/: the coarse-to-fine print at 768 px, a crop at full resolution from each print
(the same box), and runs.json (each command, its seconds, its scores). ``score`` gives, for each print, on the
original VGG19 (``--weights original``):

- **the style loss seen from across the room**: the print shrunk to 256 px (long side) against the painting at
  256 px, Gram matrices at the paper's style layers (conv1_1, conv2_1, conv3_1, conv4_1, conv5_1), each layer's
  mean squared Gram difference (the tutorial's loss form), summed and times the preset's style weight;
- **the content loss up close**: the print at its own size against the photo at that size, at the run's content
  layer (the tutorial's ``conv_4``), times the preset's content weight.

The two compare prints of the same pair and size (a coarse-to-fine print against one size), not pairs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from style_transfer import StyleConfig  # noqa: E402
from style_transfer.io.images import load_image  # noqa: E402
from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD, load_network  # noqa: E402
from style_transfer.core.style_model import get_style_model_and_losses  # noqa: E402

VIEW = 256  # the long side a print is seen at from across the room
PAPER_STYLE_LAYERS = ("conv1_1", "conv2_1", "conv3_1", "conv4_1", "conv5_1")
OUT = ROOT / "docs" / "gallery" / "print"
PRINT = ["images/chelsea.png", "images/starry_night.jpg", "--weights", "original", "--fast", "--size", "2048"]
RUNS = {"cat__starry-2048": [], "cat__starry-2048-one": ["--scales", "1"]}  # the recipe, and one size
BOX = (608, 352, 768, 512)  # x, y, width, height at 2048x1362: the cat's left eye and nose
OUTPUTS = (OUT / "cat__starry-2048.jpg", OUT / "cat__starry-2048-crop.jpg", OUT / "cat__starry-2048-one-crop.jpg",
           OUT / "runs.json")


def score(prints: list[Path], content: Path, style: Path) -> list[dict[str, float | str]]:
    config = StyleConfig(weights="original")
    assert config.style_weight is not None and config.content_weight is not None
    network = load_network(config.model, config.weights, preprocess=config.preprocess)
    rows: list[dict[str, float | str]] = []
    for path in prints:
        seen = load_image(path, VIEW, "cpu")
        model, styles, _ = get_style_model_and_losses(
            network.features, IMAGENET_MEAN, IMAGENET_STD, load_image(style, VIEW, "cpu"), seen,
            style_layers=PAPER_STYLE_LAYERS, normalization=network.normalization())
        with torch.no_grad():
            model(seen)
        far = config.style_weight * float(sum(s.loss for s in styles))
        whole = load_image(path, max(_size(path)), "cpu")
        photo = load_image(content, max(whole.shape[-2:]), "cpu")
        if photo.shape != whole.shape:
            raise ValueError(f"{path}: {tuple(whole.shape)} is not the photo's aspect {tuple(photo.shape)}")
        model, _, contents = get_style_model_and_losses(
            network.features, IMAGENET_MEAN, IMAGENET_STD, load_image(style, VIEW, "cpu"), photo,
            style_layers=(), normalization=network.normalization())
        with torch.no_grad():
            model(whole)
        near = config.content_weight * float(sum(c.loss for c in contents))
        rows.append({"print": path.name, "style_at_256": far, "content": near})
    return rows


def _size(path: Path) -> tuple[int, int]:
    from PIL import Image

    with Image.open(path) as image:
        return image.size


def cut(picture: Path, name: str, whole: bool) -> None:
    """The crop ``BOX`` of a print at full resolution (and, with ``whole``, the print at 768 px), as JPEG, each
    carrying the print's record (``stylize-info``)."""
    from PIL import Image

    from style_transfer.io.images import save_image
    from style_transfer.io.metadata import read_record

    record = read_record(picture)
    with Image.open(picture) as image:
        image = image.convert("RGB")
        x, y, w, h = BOX
        save_image(image.crop((x, y, x + w, y + h)), OUT / f"{name}-crop.jpg", metadata=record)
        if whole:
            image.thumbnail((768, 768), Image.Resampling.LANCZOS)
            save_image(image, OUT / f"{name}.jpg", metadata=record)


def make(threads: int = 2) -> None:
    """Both runs, one after the other, then the crops, the whole and runs.json."""
    OUT.mkdir(parents=True, exist_ok=True)
    record = []
    with tempfile.TemporaryDirectory() as folder:
        for name, extra in RUNS.items():
            picture = Path(folder) / f"{name}.png"
            command = [sys.executable, "-m", "style_transfer", *PRINT, *extra, "-o", str(picture),
                       "--threads", str(threads)]
            start = time.monotonic()
            if subprocess.run(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False).returncode:
                sys.exit(f"make_print: {name} failed")
            seconds = time.monotonic() - start
            (row,) = score([picture], ROOT / PRINT[0], ROOT / PRINT[1])
            record.append({"name": name, "command": ["stylize", *PRINT, *extra, "-o", f"{name}.png"],
                           "seconds": round(seconds, 1), "style_at_256": row["style_at_256"],
                           "content": row["content"]})
            cut(picture, name, whole=not extra)
    (OUT / "runs.json").write_text(json.dumps(record, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    making = sub.add_parser("make")
    making.add_argument("--threads", type=int, default=2)
    scoring = sub.add_parser("score")
    scoring.add_argument("prints", nargs="+", type=Path)
    scoring.add_argument("--content", type=Path, default=ROOT / "images" / "chelsea.png")
    scoring.add_argument("--style", type=Path, default=ROOT / "images" / "starry_night.jpg")
    scoring.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.command == "make":
        make(args.threads)
        return
    rows = score(args.prints, args.content, args.style)
    for row in rows:
        print(f"{row['print']}: style seen at {VIEW} px {row['style_at_256']:.4g}, content {row['content']:.4g}")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
