"""What a batch saves against a shell loop of ``stylize``: start-up, the model and the style targets once.

Runs, in one go and on the same pictures (N contents in one style, seeded random weights):

* loop: one ``python -m style_transfer CONTENT STYLE -o OUT`` process per picture (what users write);
* local: one ``python -m style_transfer.batch.cli CONTENTS --style STYLE -o DIR`` process for all;
* ray (with ``--ray-address``): the same command with ``--engine ray`` on a cluster already running.

For each it reports the wall time per picture, pictures per hour, and the time per picture beyond the
evaluations: wall time minus the optimisation time each output's provenance record holds (``seconds``),
that is start-up, the model, the targets and writing. Ratios are within this one run only; on a
shared machine absolute times mean little. Prints one JSON object.

    nice -n 19 python benchmarks/batch.py --size 64 --steps 20 --pictures 4
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from style_transfer.provenance import read_record  # noqa: E402  (torch-free)

SOURCES = ["chelsea.png", "coffee.png", "brick.png", "hubble_deep_field.jpg"]


def _inputs(folder: Path, count: int, size: int) -> tuple[list[Path], Path]:
    from PIL import Image

    contents = []
    for i in range(count):
        with Image.open(ROOT / "images" / SOURCES[i % len(SOURCES)]) as image:
            path = folder / f"c{i}.png"
            image.convert("RGB").resize((size, size * 3 // 4)).rotate(90 * (i // len(SOURCES))).save(path)
            contents.append(path)
    style = folder / "style.png"
    with Image.open(ROOT / "images" / "ihc.png") as image:
        image.convert("RGB").resize((size, size)).save(style)
    return contents, style


def _optimising(outputs: list[Path]) -> float:
    return sum(float((read_record(p) or {}).get("seconds", 0.0)) for p in outputs)


def _row(name: str, wall: float, outputs: list[Path]) -> dict:
    n = len(outputs)
    evaluations = _optimising(outputs)
    return {"engine": name, "pictures": n, "wall_s": round(wall, 2), "per_picture_s": round(wall / n, 3),
            "pictures_per_hour": round(3600 * n / wall, 1), "optimising_per_picture_s": round(evaluations / n, 3),
            "beyond_evaluations_per_picture_s": round((wall - evaluations) / n, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--pictures", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ray-address", default=None, help="also run --engine ray on this running cluster")
    args = parser.parse_args()
    settings = ["--size", str(args.size), "--steps", str(args.steps), "--weights", "random", "--device", "cpu",
                "--threads", str(args.threads)]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        folder = Path(tmp)
        contents, style = _inputs(folder, args.pictures, args.size)

        loop = folder / "loop"
        loop.mkdir()
        start = time.perf_counter()
        outputs = []
        for content in contents:
            out = loop / f"{content.stem}__{style.stem}.png"
            subprocess.run([sys.executable, "-m", "style_transfer", str(content), str(style), "-o", str(out),
                            "-q", *settings], check=True, env=env)
            outputs.append(out)
        rows.append(_row("loop of stylize", time.perf_counter() - start, outputs))

        engines = [("local", [])]
        if args.ray_address:
            engines.append(("ray", ["--engine", "ray", "--address", args.ray_address]))
        for name, extra in engines:
            out_dir = folder / name
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "style_transfer.batch.cli", *map(str, contents), "--style",
                            str(style), "-o", str(out_dir), "-q", *extra, *settings], check=True, env=env)
            rows.append(_row(f"stylize-batch --engine {name}", time.perf_counter() - start,
                             [out_dir / f"{c.stem}__{style.stem}.png" for c in contents]))
    base = rows[0]
    for row in rows[1:]:
        row["speedup_vs_loop"] = round(base["wall_s"] / row["wall_s"], 2)
        row["overhead_ratio_vs_loop"] = round(row["beyond_evaluations_per_picture_s"]
                                              / base["beyond_evaluations_per_picture_s"], 3)
    print(json.dumps({"machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                                  "load_average": os.getloadavg(), "python": platform.python_version()},
                      "settings": vars(args), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
