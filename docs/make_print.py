"""Score print-size pictures as docs/print-size.md does, and cut their crops for the gallery.

    python docs/make_print.py score PRINT.png [PRINT.png ...] [--content images/chelsea.png]
        [--style images/starry_night.jpg] [--json out.json]
    python docs/make_print.py crops PRINT.png OUT_PREFIX [--box X Y W H ...]

``score`` gives, for each print, on the original VGG19 (``--weights original``):

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
import sys
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


def crops(path: Path, prefix: str, boxes: list[list[int]]) -> None:
    """Each box ``X Y W H`` of the print at full resolution, and the whole at 768 px, as JPEG (quality 92)."""
    from PIL import Image

    with Image.open(path) as image:
        image = image.convert("RGB")
        whole = image.copy()
        whole.thumbnail((768, 768), Image.Resampling.LANCZOS)
        whole.save(f"{prefix}.jpg", quality=92)
        for k, (x, y, w, h) in enumerate(boxes, 1):
            image.crop((x, y, x + w, y + h)).save(f"{prefix}-crop{k}.jpg", quality=92)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    scoring = sub.add_parser("score")
    scoring.add_argument("prints", nargs="+", type=Path)
    scoring.add_argument("--content", type=Path, default=ROOT / "images" / "chelsea.png")
    scoring.add_argument("--style", type=Path, default=ROOT / "images" / "starry_night.jpg")
    scoring.add_argument("--json", type=Path, default=None)
    cutting = sub.add_parser("crops")
    cutting.add_argument("print", type=Path)
    cutting.add_argument("prefix")
    cutting.add_argument("--box", nargs=4, type=int, action="append", default=[])
    args = parser.parse_args()
    if args.command == "crops":
        crops(args.print, args.prefix, args.box)
        return
    rows = score(args.prints, args.content, args.style)
    for row in rows:
        print(f"{row['print']}: style seen at {VIEW} px {row['style_at_256']:.4g}, content {row['content']:.4g}")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
