"""What a batch saves against a shell loop of ``stylize``: start-up, the model and the style targets once.

    nice -n 19 python -m benchmarks batch --sizes 64 --steps 20 --pictures 4
    python -m benchmarks batch --sizes 256,512 --steps 20 --pictures 4 --ray-nodes 1,2 --json out.json

The same N pictures in one style: a loop of ``stylize`` processes, ``stylize-batch`` (one process; ``--workers 2``),
``--engine ray`` on clusters started here (``--ray-nodes``: root and ``unshare``) or a running one (``--ray-address``).
The rows (pictures per hour, time per picture beyond the evaluations): docs/batch.md, "Measured".
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

from style_transfer.io.metadata import read_record

from .. import network as networks
from .. import ROOT

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


def _row(name: str, wall: float, outputs: list[Path], at_once: int = 1) -> dict:
    n = len(outputs)
    optimising = sum(float((read_record(p) or {}).get("seconds", 0.0)) for p in outputs)  # the records' seconds
    return {"engine": name, "pictures": n, "processes_at_once": at_once, "wall_s": round(wall, 2),
            "per_picture_s": round(wall / n, 3), "pictures_per_hour": round(3600 * n / wall, 1),
            "optimising_per_picture_s": round(optimising / n, 3),
            "beyond_evaluations_per_picture_s": round((wall * at_once - optimising) / n, 3)}


def _run_engines(folder: Path, size: int, args: argparse.Namespace, env: dict, ray_address: str | None,
                 node_counts: list[int], preprocessings: set[str] | None = None) -> list[dict]:
    """One size: the loop, the local engine (one process; two with two CPUs), Ray at each node count;
    ``preprocessings`` gets the preprocessing each output's record names (what the weights told the commands)."""
    settings = ["--size", str(size), "--steps", str(args.steps), "--model", args.model, "--weights", args.weights,
                "--device", "cpu", "--threads", str(args.threads)]
    if args.preprocess is not None:
        settings += ["--preprocess", args.preprocess]
    contents, style = _inputs(folder, args.pictures, size)
    rows = []

    def timed(name: str, command: list[str], outputs: list[Path], at_once: int = 1) -> None:
        start = time.perf_counter()
        for line in command:
            subprocess.run(line, check=True, env=env, stdin=subprocess.DEVNULL)
        rows.append({"size": size, **_row(name, time.perf_counter() - start, outputs, at_once)})
        if preprocessings is not None:
            preprocessings.update(str(((read_record(p) or {}).get("settings") or {}).get("preprocess"))
                                  for p in outputs)

    loop = folder / "loop"
    loop.mkdir()
    outputs = [loop / f"{c.stem}__{style.stem}.png" for c in contents]
    timed("loop of stylize", [[sys.executable, "-m", "style_transfer", str(c), str(style), "-o", str(o), "-q",
                               *settings] for c, o in zip(contents, outputs)], outputs)
    batch = [sys.executable, "-m", "style_transfer.batch.cli", *map(str, contents), "--style", str(style), "-q",
             *settings]
    runs: list[tuple[str, list[str], int, int]] = [("local", [], 1, 0)]  # name, options, at once, nodes
    if (os.cpu_count() or 1) >= 2 and args.workers:
        runs.append(("local --workers 2", ["--workers", "2"], 2, 0))
    for nodes in node_counts:
        runs.append((f"ray, {nodes} worker node{'s' if nodes > 1 else ''}", ["--engine", "ray"], nodes, nodes))
    if ray_address:
        runs.append(("ray", ["--engine", "ray", "--address", ray_address], 1, 0))
    for name, extra, at_once, nodes in runs:
        out_dir = folder / name.replace(" ", "_").replace(",", "")
        outputs = [out_dir / f"{c.stem}__{style.stem}.png" for c in contents]
        with local_cluster(nodes) if nodes else contextlib.nullcontext() as address:
            started = ["--address", address] if address else []
            timed(f"stylize-batch --engine {name}", [[*batch, "-o", str(out_dir), *extra, *started]], outputs, at_once)
    base = rows[0]
    for row in rows[1:]:
        row["speedup_vs_loop"] = round(base["wall_s"] / row["wall_s"], 2)
        row["overhead_ratio_vs_loop"] = round(row["beyond_evaluations_per_picture_s"]
                                              / base["beyond_evaluations_per_picture_s"], 3)
    return rows


@contextlib.contextmanager
def local_cluster(nodes: int, port: int = 6392) -> Iterator[str]:
    """A Ray cluster here, its address: a head that only schedules and ``nodes`` one-CPU worker nodes, stopped on
    exit; run in a loopback-only network namespace (``main``), else Ray advertises the machine's address."""
    ray, temps = str(Path(sys.executable).parent / "ray"), []
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0",  # workers: this tree
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}

    def start(name: str, *flags: str) -> None:
        temps.append(Path(tempfile.mkdtemp(prefix=f"r{name}", dir="/tmp")))  # Ray's socket paths must stay short
        subprocess.run([ray, "start", "--node-ip-address=127.0.0.1", f"--temp-dir={temps[-1]}", "--num-gpus=0",
                        "--object-store-memory=300000000", "--disable-usage-stats", *flags],
                       env={**env, "RAY_TMPDIR": str(temps[-1])}, check=True, timeout=120,
                       stdin=subprocess.DEVNULL, capture_output=True)

    address = f"127.0.0.1:{port}"
    start("h", "--head", f"--port={port}", "--include-dashboard=false", "--num-cpus=0")
    for i in range(nodes):
        start(f"n{i}", f"--address={address}", "--num-cpus=1", f"--dashboard-agent-listen-port={52400 + i}",
              f"--node-manager-port={52500 + i}", f"--object-manager-port={52600 + i}")
    os.environ.update(RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    try:
        yield address
    finally:
        subprocess.run([ray, "stop", "--force"], env=env, timeout=120, stdin=subprocess.DEVNULL, capture_output=True)
        for temp in temps:
            shutil.rmtree(temp, ignore_errors=True)


NAMESPACES = ["unshare", "--net", "--pid", "--fork", "--mount-proc"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64", help="long sides in px, comma-separated (default 64)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--pictures", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ray-nodes", default="", help="comma-separated worker-node counts: start a Ray "
                        "cluster of each on this machine, in a loopback-only network namespace (root, unshare)")
    parser.add_argument("--ray-address", default=None, help="also run --engine ray on this running cluster")
    parser.add_argument("--no-workers", dest="workers", action="store_false", help="leave out --workers 2")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    networks.add_options(parser)
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    node_counts = [int(n) for n in args.ray_nodes.split(",") if n]
    if node_counts and not args.inside:  # again, in namespaces of its own: only loopback, and Ray dies with it
        again = [sys.executable, "-m", "benchmarks", "batch", *(sys.argv[1:] if argv is None else argv), "--inside"]
        command = " ".join(["ip link set lo up && exec", *map(shlex.quote, again)])
        sys.exit(subprocess.run([*NAMESPACES, "bash", "-c", command], stdin=subprocess.DEVNULL, cwd=ROOT).returncode)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    rows, preprocessings = [], set()
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
            rows += _run_engines(Path(tmp), size, args, env, args.ray_address, node_counts, preprocessings)
    network = networks.block(args.model, args.weights, ", ".join(sorted(preprocessings)) or args.preprocess)
    from .. import report as reports  # imports torch: after the commands ran, not in the parent of their timing

    report = reports.start({k: v for k, v in vars(args).items() if k != "inside"}, network,
                           load_average=os.getloadavg(), rows=rows)
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
