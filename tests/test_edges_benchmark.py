"""The edges study (benchmarks/studies/edges.py): its edge measure against a picture made by hand, and a smoke run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from .conftest import load_benchmark

ROOT = Path(__file__).resolve().parent.parent


def test_an_edge_twice_as_busy_as_its_inside_measures_2() -> None:
    """Rows step by 10 grey levels, the last 3 steps by 20; columns by 10, the first 3 steps by 5: bottom 2,
    left 0.5, top and right 1 (every band 5 to 15 px in steps by 10)."""
    edges = load_benchmark("edges")
    height, width = 40, 50
    rows = np.cumsum([0] + [10] * (height - 4) + [20] * 3)  # height values: 36 steps of 10, then 3 of 20
    cols = np.cumsum([0] + [5] * 3 + [10] * (width - 4))
    image = (rows[:, None] + cols[None, :])[..., None].repeat(3, axis=2).astype(np.float64)
    ratios = edges.edge_ratios(image)
    assert ratios["bottom"] == pytest.approx(2.0)
    assert ratios["top"] == pytest.approx(1.0)
    assert ratios["left"] == pytest.approx(0.5)
    assert ratios["right"] == pytest.approx(1.0)


@pytest.mark.slow
def test_smoke(tmp_path: Path) -> None:
    out = tmp_path / "edges.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks", "edges", "--weights", "random",
                           "--size", "32", "--steps", "2", "--pairs", "0", "--margins", "0", "3", "--threads", "1",
                           "--out", str(out)], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    (pair,) = report["pairs"]
    assert pair["size"] == [32, 21] and report["machine"]["cpu_model"]
    for name in ("photo", "margin 0", "margin 3"):
        assert all(pair[name][edge] > 0 for edge in ("top", "bottom", "left", "right")), (name, pair)
    assert "chelsea.png in ihc.png (32x21)" in done.stdout
