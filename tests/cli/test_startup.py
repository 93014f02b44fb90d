"""Fast start (issue 12): the command answers --help, --version and early errors without importing torch.

Not a timed test: what makes `stylize --help` slow is importing torch and torchvision (about 3 s of
the 3.8 s it took), so the check is that they are never imported on these paths. `python -X
importtime` lists every module a process imports, on stderr, whatever imports it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import IMAGES

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "torchvision", "numpy", "tqdm", "matplotlib")


def imported(args: list[str], exit_code: int) -> tuple[set[str], str]:
    """Run ``python -X importtime -m style_transfer ARGS``; the top-level packages it imported, and stderr."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "style_transfer", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == exit_code, (args, done.returncode, done.stderr[-2000:])
    modules = {line.split("|")[-1].strip().split(".")[0] for line in done.stderr.splitlines()
               if line.startswith("import time:") and "|" in line}
    assert "click" in modules  # the parse found the import lines at all (the check could fail)
    messages = "\n".join(line for line in done.stderr.splitlines() if not line.startswith("import time:"))
    return modules, messages


@pytest.mark.slow
def test_importing_the_cli_imports_no_torch() -> None:
    code = "import sys, style_transfer.cli.stylize; print(sorted(m for m in %r if m in sys.modules))" % (HEAVY,)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_package_still_exports_the_library_api() -> None:
    import style_transfer

    assert "stylize" in style_transfer.__all__ and "stylize" in dir(style_transfer)
    from style_transfer import StyleConfig, stylize  # imported on first use
    from style_transfer.run.run import stylize as direct

    assert stylize is direct and StyleConfig().steps == 300
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        style_transfer.nope  # noqa: B018


@pytest.mark.parametrize("args, exit_code, message", [
    (["--help"], 0, ""),
    (["--version"], 0, ""),
    (["--print-config", "--fast"], 0, ""),
    ([str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", "out.png", "--steps", "0"], 2, "steps must be"),
    ([str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", "out.png", "--style-layers", "conv_99"], 2,
     "style_layers"),
    ([str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", "/nonexistent-folder/out.png"], 2,
     "does not exist"),
    (["missing.jpg", str(IMAGES / "ihc.png"), "-o", "out.png"], 2, "missing.jpg: no such file"),
    ([str(IMAGES / "chelsea.png"), str(ROOT / "README.md"), "-o", "out.png"], 1, "not a readable image"),
], ids=["help", "version", "print-config", "bad-steps", "bad-layer", "bad-output", "missing-input", "text-input"])
@pytest.mark.slow
def test_early_answers_import_no_torch(args: list[str], exit_code: int, message: str, tmp_path: Path,
                                       imagenet_cached: Path) -> None:  # --print-config asks no network
    args = [str(tmp_path / a) if a == "out.png" else a for a in args]
    modules, stderr = imported(args, exit_code)
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))
    assert message in stderr
    if exit_code:
        assert len([line for line in stderr.splitlines() if line.strip()]) == 1, stderr
        assert not any(tmp_path.iterdir())  # nothing written


@pytest.mark.slow
def test_a_run_does_import_torch(tmp_path: Path) -> None:
    """The negative control: the same check sees torch once a run starts."""
    modules, _ = imported([str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", str(tmp_path / "o.png"),
                           "--weights", "random", "--size", "16", "--steps", "1", "-q"], 0)
    assert "torch" in modules
