"""The backward comparison: its measurements, and the stylize-compare-backward command."""

from __future__ import annotations

import re

import pytest
import torch
from click.testing import CliRunner

from style_transfer import StyleConfig
from style_transfer.run.compare import TRACKED_MEMORY, _LiveTensorBytes, compare_backward
from style_transfer.cli.compare import main
from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD
from style_transfer.core.style_model import get_style_model_and_losses

from ..conftest import IMAGES

CONFIG = StyleConfig(size=32, weights="random", device="cpu")


@pytest.fixture
def shared_cnn(monkeypatch: pytest.MonkeyPatch, cnn) -> None:
    """Comparisons get the session's random VGG instead of building their own."""
    monkeypatch.setattr("style_transfer.run.compare.load_vgg19_features", lambda *args, **kwargs: cnn)


def test_live_tensor_bytes_by_hand() -> None:
    with _LiveTensorBytes() as tracker:
        first = torch.ones(1000)  # 4000 bytes
        second = torch.ones(250)  # 1000 bytes
        view = first[10:]  # a view: no new storage
        del first  # the view still holds the storage
        assert tracker.current == 5000
        del view
        assert tracker.current == 1000
        del second
    assert tracker.peak == 5000 and tracker.current == 0


def test_compare_measures_both_paths(shared_cnn, cnn, content_32, style_32) -> None:
    result = compare_backward(content_32, style_32, CONFIG, evaluations=1)
    combined, per_module = result.row("combined"), result.row("per-module")
    assert (result.width, result.height, result.device, result.memory_method) == (32, 21, "cpu", TRACKED_MEMORY)
    assert combined.passes == 1
    assert per_module.passes == len(CONFIG.style_layers) + len(CONFIG.content_layers) == 6
    # The gradient it measured is the default loss's at the start image: computed here by plain autograd.
    model, style_losses, content_losses = get_style_model_and_losses(cnn, IMAGENET_MEAN, IMAGENET_STD, style_32,
                                                                     content_32)
    image = content_32.clone().requires_grad_(True)
    model(image)
    style_loss = CONFIG.style_weight * sum(s.loss for s in style_losses)
    (style_loss + CONFIG.content_weight * sum(c.loss for c in content_losses)).backward()
    assert result.max_abs_grad == pytest.approx(image.grad.abs().max().item(), rel=1e-5)
    # The per-module path differs from the combined one by summation order only (measured 2.4e-7).
    assert per_module.max_abs_grad_diff <= 1e-5 * result.max_abs_grad
    assert combined.seconds > 0 and per_module.seconds > 0
    # The same graph is saved by both paths; retaining it while the later passes allocate their
    # gradients raises the peak, and the heads only earlier passes traversed stay after the last.
    assert combined.saved_bytes == per_module.saved_bytes > 0
    assert per_module.peak_bytes > combined.peak_bytes >= combined.saved_bytes
    assert per_module.held_bytes > combined.held_bytes


def test_compare_command_prints_both_rows(shared_cnn) -> None:
    args = [str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "--weights", "random", "--size", "32",
            "--device", "cpu", "--evaluations", "1"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()
            if re.match(r"(combined|per-module)\s+\d", line)}
    assert set(rows) == {"combined", "per-module"}
    assert rows["combined"][1] == "1" and rows["per-module"][1] == "6"
    assert all(float(value) >= 0 for row in rows.values() for value in row[2:])
    assert "32x21 px on cpu" in result.stdout


@pytest.mark.parametrize("args, code, needle", [
    (["--evaluations", "0"], 2, "evaluations"),
    (["--size", "8"], 2, "size"),
    (["--style-layers", "conv_99"], 2, "conv_99"),
])
def test_compare_command_bad_input(args: list[str], code: int, needle: str) -> None:
    result = CliRunner().invoke(main, [str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "--weights", "random",
                                       "--device", "cpu", "--size", "32", *args])
    assert result.exit_code == code
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and needle in lines[0]


def test_compare_command_missing_image(tmp_path) -> None:
    result = CliRunner().invoke(main, [str(tmp_path / "nope.png"), str(IMAGES / "ihc.png"), "--weights", "random"])
    assert result.exit_code == 1
    assert result.stderr.strip().startswith("Error: ") and "nope.png" in result.stderr
