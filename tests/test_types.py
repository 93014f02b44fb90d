"""The type checker: mypy, configured by setup.cfg's ``[mypy]`` section, passes on the package
(docs/development.md says which strictness and why).

Each test runs mypy in a child process (about 20 s on 2 cores for the package), so both are slow. The control
checks a two-line program with the same configuration: it must fail where the default strictness would not.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy", reason="mypy comes with the test extra (pip install '.[test]')")

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def _mypy(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m mypy ARGS`` in the repository's root, where it reads setup.cfg."""
    return subprocess.run([sys.executable, "-m", "mypy", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)


def test_the_package_passes_the_type_checker() -> None:
    done = _mypy()
    assert done.returncode == 0, f"mypy found errors:\n{done.stdout}{done.stderr}"
    assert "Success: no issues found" in done.stdout, done.stdout
    assert "source files" in done.stdout and " 0 source files" not in done.stdout, done.stdout


def test_the_configuration_is_the_one_read(tmp_path: Path) -> None:
    # An unannotated function is an error only with disallow_untyped_defs, a None in an int under any mypy:
    # both reported shows that setup.cfg's [mypy] section is the configuration in force.
    program = tmp_path / "program.py"
    program.write_text("def untyped(x):\n    return x\n\n\nn: int = None\n")
    done = _mypy(str(program))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "[no-untyped-def]" in done.stdout and "[assignment]" in done.stdout, done.stdout
