"""The time-to-quality study's ``--defaults``: an earlier report's default rows stand in for the default's runs only
where they were made on the same kind of machine, network, size and steps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import load_benchmark

MACHINE = {"cpu_flags": {"avx2": True, "avx512f": True, "avx512_bf16": True, "amx_bf16": False}, "gpu": None}
NETWORK = {"model": "vgg19", "weights": "original", "preprocess": "caffe"}


def earlier(path: Path, **changes: Any) -> tuple[dict[str, Any], str]:
    """An earlier report, as --defaults reads it from ``path``, and that path."""
    default = {"evaluations": 320, "loss": 200.0, "content": 150.0, "wall_s": 300.0, "cpu_s": 600.0,
               "final_loss_own": 190.0}
    report = {"commit": "abc", "machine": MACHINE, "network": NETWORK, "size": 512, "steps": 300,
              "pairs": [{"pair": ["chelsea.png", "ihc.png"], "default": default, "candidates": {}}], **changes}
    path.write_text(json.dumps(report))
    return json.loads(path.read_text()), str(path)


def test_an_earlier_default_row_is_compared_as_a_run_would_be(tmp_path: Path) -> None:
    study = load_benchmark("time_to_quality")
    now = {"machine": MACHINE, "network": NETWORK, "size": 512, "steps": 300}
    rows = study.earlier_defaults(*earlier(tmp_path / "r.json"), now)
    default = rows[("chelsea.png", "ihc.png")]
    assert default["trace"] == [(320, 190.0, 300.0, 600.0)]  # its own final loss, what `reach` is measured to
    run = {"loss": 180.0, "content": 120.0, "wall_s": 60.0, "cpu_s": 120.0, "evaluations": 140,
           "trace": [(20, 400.0, 10.0, 20.0), (40, 185.0, 20.0, 40.0), (140, 170.0, 60.0, 120.0)]}
    row = study.compare(default, run)
    assert (row["loss"], row["content"], row["wall"], row["cpu"]) == (0.9, 0.8, 0.2, 0.2)
    assert row["reach_evaluation"] == 40 and row["marks"] == {20: 400 / 190, 40: 185 / 190, 140: 170 / 190}


@pytest.mark.parametrize("changes, refused", [
    ({"size": 256}, "its size is 256, this run's 512"),
    ({"steps": 200}, "its steps is 200"),
    ({"network": {**NETWORK, "model": "vgg16"}}, "its network is"),
    ({"machine": {**MACHINE, "cpu_flags": {"avx2": True}}}, "made on avx2, this machine is avx512bf16"),
])
def test_a_default_from_elsewhere_is_refused(tmp_path: Path, changes: dict[str, Any], refused: str) -> None:
    study = load_benchmark("time_to_quality")
    now = {"machine": MACHINE, "network": NETWORK, "size": 512, "steps": 300}
    with pytest.raises(SystemExit, match=refused):
        study.earlier_defaults(*earlier(tmp_path / "r.json", **changes), now)
