"""A run of several sizes stopped before its last: the picture is the working image of a coarser size upscaled, and
the result, the record, ``stylize-info`` and the command's line say which size it is."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from style_transfer import StyleConfig
from style_transfer.cli.info import main as info
from style_transfer.cli.stylize import _keep_partial
from style_transfer.errors import Interrupted
from style_transfer.io.images import save_image
from style_transfer.run import Unfinished
from style_transfer.run.run import Run

from ..conftest import small_image

IMAGES = (small_image("chelsea.png", (64, 42)), small_image("ihc.png", (64, 64)))
CONFIG = StyleConfig(size=64, scales=3, scale_steps=(20, 20, 20), weights="random", device="cpu",
                     style_weight=1e9, content_weight=1e3)


def stopped_at(evaluation: int) -> tuple:
    run = Run(*IMAGES, CONFIG)
    sizes: list = []

    def on_event(event) -> None:
        sizes.append(event.size)
        if event.step == evaluation:
            run.cancel("interrupted")

    return run.execute(on_event), sizes[-1]


def test_a_run_stopped_at_a_coarse_size_says_which_size_its_picture_is(tmp_path: Path) -> None:
    result, working = stopped_at(5)  # in the first of three sizes (16, 32 and 64 px)
    assert result.stopped == "interrupted" and result.image.size == (64, 42)  # upscaled to the size asked for
    assert working[0] < 64 and result.unfinished == Unfinished(working, 1, 3)
    assert result.record["unfinished"] == {"working": list(working), "scale": 1, "scales": 3}
    assert result.unfinished.text() == f"the {working[0]}x{working[1]} working image of size 1 of 3, upscaled"
    out = tmp_path / "out.png"
    save_image(result.image, str(out), metadata=result.record)
    shown = CliRunner().invoke(info, [str(out)])
    assert shown.exit_code == 0 and f"stopped at size 1 of 3: the {working[0]}x{working[1]} working" in shown.output


def test_a_run_stopped_in_its_last_size_is_that_size() -> None:
    result, working = stopped_at(41)  # the first evaluation of the last size
    assert result.stopped == "interrupted" and working == (64, 42)
    assert result.unfinished is None and "unfinished" not in result.record


def test_the_commands_line_names_the_working_size(tmp_path: Path, capsys) -> None:
    """The line a second Ctrl-C or a NaN loss leaves (the first Ctrl-C's line is the result's, tested above)."""
    out = tmp_path / "out.png"
    with pytest.raises(SystemExit):
        _keep_partial(Interrupted("interrupted at step 5", torch.zeros(1, 3, 8, 8), 5), str(out), False, None,
                      unfinished=Unfinished((16, 11), 1, 3))
    line = capsys.readouterr().err.splitlines()[-1]
    assert line.startswith("interrupted at step 5, saved") and "(the 16x11 working image of size 1 of 3, upscaled)" in line
    assert out.exists()
