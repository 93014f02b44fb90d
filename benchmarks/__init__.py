"""The benchmark harness: ``python -m benchmarks STUDY``. Shared pieces (machine, network, scoring, timing,
memory, report) beside this file; the studies in ``studies/``; results in ``results/<study>/``."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the checkout: images/ and the package beside benchmarks/
