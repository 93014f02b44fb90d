"""Presets (tutorial, paper), explicit options over a preset, the paper's loss definitions."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from torch import nn

from style_transfer import StyleConfig, get_style_model_and_losses, run_style_transfer, stylize
from style_transfer.cli.stylize import main
from style_transfer.cli.options import option_reference
from style_transfer.io.images import pil_to_tensor, tensor_to_pil
from style_transfer.losses.terms import PaperContentLoss, WeightedStyleLoss, paper_content_loss, paper_style_loss
from style_transfer.losses.tutorial import ContentLoss, StyleLoss
from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD
from style_transfer.fast.fast import Speed, accelerator
from style_transfer.run.settings import transfer_settings

from . import tutorial_reference as tutorial

PAPER_STYLE = ("conv1_1", "conv2_1", "conv3_1", "conv4_1", "conv5_1")


def test_default_config_is_the_tutorial_preset() -> None:
    config = StyleConfig()
    assert config == StyleConfig(preset="tutorial")
    assert config.content_layers == ("conv_4",)
    assert config.style_layers == ("conv_1", "conv_2", "conv_3", "conv_4", "conv_5")
    assert (config.style_weight, config.content_weight) == (1e6, 1.0)
    assert config.style_layer_weights == (1.0,) * 5
    assert (config.pooling, config.loss_form, config.optimizer, config.lr) == ("max", "tutorial", "lbfgs", None)


def test_paper_preset_values() -> None:
    config = StyleConfig(preset="paper")
    assert config.content_layers == ("conv4_2",)
    assert config.style_layers == PAPER_STYLE
    assert config.style_layer_weights == (0.2,) * 5
    assert config.pooling == "avg" and config.loss_form == "paper"
    assert config.content_weight / config.style_weight == pytest.approx(1e-3)  # alpha / beta


def test_explicit_values_override_the_preset() -> None:
    config = StyleConfig(preset="paper", pooling="max", style_weight=5.0, style_layers=("conv1_1", "conv2_1"))
    assert config.pooling == "max"  # the tutorial's value, given explicitly, still wins
    assert config.style_weight == 5.0
    assert config.style_layers == ("conv1_1", "conv2_1")
    assert config.style_layer_weights == (0.5, 0.5)  # the paper's rule, 1/n, for the layers given
    assert config.loss_form == "paper" and config.content_layers == ("conv4_2",)
    assert StyleConfig(style_layers=("conv_2",), style_layer_weights=(3,)).style_layer_weights == (3,)


@pytest.mark.parametrize("kwargs, needle", [
    ({"preset": "picasso"}, "preset"),
    ({"style_layer_weights": (1, 2)}, "style_layer_weights"),
    ({"style_layer_weights": (1, 1, 1, -1, 1)}, "style_layer_weights"),
    ({"style_blend": (0, 0)}, "style_blend"),
    ({"style_scale": 0}, "style_scale"),
    ({"tv_weight": -1}, "tv_weight"),
    ({"pooling": "min"}, "pooling"),
    ({"loss_form": "x"}, "loss_form"),
    ({"optimizer": "sgd"}, "optimizer"),
    ({"lr": 0}, "lr"),
    ({"preserve_colors": "all"}, "preserve_colors"),
    ({"init": "no-such-file.png"}, "init"),
])
def test_bad_control_values(kwargs, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        StyleConfig(**kwargs)


def test_tutorial_preset_equals_the_tutorial_code(cnn, content_32, style_32) -> None:
    """stylize() with the tutorial preset gives what the tutorial's own code gives."""
    style_32 = style_32[..., 5:26, :].contiguous()  # the tutorial needs both images the same size
    config = StyleConfig(preset="tutorial", size=32, steps=1, weights="random", device="cpu")  # 20 evaluations
    ours = stylize(content_32, style_32, config)
    # The cnn fixture is random_vgg19_features(0), the weights stylize() builds (the reference copies it).
    theirs, _ = tutorial.run_style_transfer(cnn, list(IMAGENET_MEAN),
                                            list(IMAGENET_STD), content_32, style_32, content_32.clone(),
                                            num_steps=1)
    # The same operations in the same order: bit-identical on any CPU (both run on the one at hand).
    assert ours.tobytes() == tensor_to_pil(theirs.detach()).tobytes()
    assert not torch.equal(pil_to_tensor(ours), pil_to_tensor(tensor_to_pil(content_32)))


def test_paper_style_loss_is_e_l() -> None:
    """E_l = sum (G - A)^2 / (4 N^2 M^2) with raw Grams, worked out in float64."""
    torch.manual_seed(0)
    x, s = torch.rand(1, 4, 3, 5), torch.rand(1, 4, 2, 6)
    loss = WeightedStyleLoss([s], form="paper")
    loss(x)
    n, m = 4, 15
    fx, fs = x.double().reshape(4, -1), s.double().reshape(4, -1)
    raw_g, raw_a = fx @ fx.T, fs @ fs.T  # A from the style's own M = 12: normalised by its own size
    expected = (((raw_g / (n * m) - raw_a / (n * 12)) * (n * m)) ** 2).sum() / (4 * n**2 * m**2)
    assert float(loss.loss) == pytest.approx(float(expected), rel=1e-5)
    # Same-size features: exactly the paper's formula with one M.
    s2 = torch.rand(1, 4, 3, 5)
    fs2 = s2.double().reshape(4, -1)
    e_l = ((fx @ fx.T - fs2 @ fs2.T) ** 2).sum() / (4 * n**2 * m**2)
    weighted = WeightedStyleLoss([s2], weight=0.2, form="paper")
    weighted(x)
    assert float(weighted.loss) == pytest.approx(0.2 * float(e_l), rel=1e-5)


def test_paper_content_loss_is_half_sum_of_squares() -> None:
    torch.manual_seed(1)
    f, p = torch.rand(1, 3, 4, 4), torch.rand(1, 3, 4, 4)
    expected = 0.5 * ((f.double() - p.double()) ** 2).sum()
    assert float(paper_content_loss(f, p)) == pytest.approx(float(expected), rel=1e-6)
    module = PaperContentLoss(p)
    assert module(f) is f
    assert float(module.loss) == pytest.approx(float(expected), rel=1e-6)
    assert float(paper_style_loss(torch.eye(2), torch.zeros(2, 2))) == 0.5  # (1 + 1) / 4


def test_paper_preset_builds_the_papers_model(cnn, content_32, style_32) -> None:
    config = StyleConfig(preset="paper")
    model, style_losses, content_losses = get_style_model_and_losses(
        cnn, IMAGENET_MEAN, IMAGENET_STD, style_32, content_32, config.content_layers, config.style_layers,
        style_layer_weights=config.style_layer_weights, loss_form=config.loss_form, pooling=config.pooling)
    names = list(dict(model.named_children()))
    assert names.index("content_loss_10") == names.index("conv_10") + 1
    assert [names.index(f"style_loss_{i}") for i in (1, 3, 5, 9, 13)] == [
        names.index(f"conv_{i}") + 1 for i in (1, 3, 5, 9, 13)]
    assert all(isinstance(s, WeightedStyleLoss) and s.form == "paper" and s.weight == 0.2 for s in style_losses)
    assert all(isinstance(c, PaperContentLoss) for c in content_losses)
    assert not any(isinstance(m, nn.MaxPool2d) for m in model.children())
    # The tutorial preset builds the tutorial's own modules.
    tutorial_cfg = StyleConfig()
    _, styles, contents = get_style_model_and_losses(
        cnn, IMAGENET_MEAN, IMAGENET_STD, style_32, content_32, tutorial_cfg.content_layers,
        tutorial_cfg.style_layers, style_layer_weights=tutorial_cfg.style_layer_weights)
    assert all(type(s) is StyleLoss for s in styles) and all(type(c) is ContentLoss for c in contents)


@pytest.mark.slow
def test_paper_preset_runs_and_lowers_the_loss(cnn, content_32, style_32) -> None:
    c = StyleConfig(preset="paper")

    def lowest(**objects) -> float:  # the lowest loss of the run, as a share of its first
        infos: list = []
        run_style_transfer(cnn, IMAGENET_MEAN, IMAGENET_STD, content_32, style_32, content_32.clone(), 1,
                           c.style_weight, c.content_weight,
                           transfer_settings(c, progress=infos.append, **objects))
        assert len(infos) == 20
        return min(i.loss for i in infos) / infos[0].loss

    # At the paper's weights LBFGS swings: over 12 runs (AVX-512, AVX2 and scalar kernels, each from the
    # inputs and from three one-rounding-step moves of them) the last loss ended between 0.24 and 2.7 of
    # the first, so the last loss proves nothing; the lowest one reached was 0.24 to 0.63 of it. Those are
    # one machine's figures, so the margin comes from a control run here: the same run in channels_last
    # (float32, the same maths summed in another order). 0.8 is widened by 3x the two orders' difference:
    # one pair's difference understates how far rounding can move the figure (the 12 runs spread 0.39),
    # as in test_fast.py's test_fast_reaches_the_defaults_quality.
    ours, control = lowest(), lowest(accelerate=accelerator(Speed(channels_last=True)))
    spread = abs(ours - control)
    print(f"lowest loss / first: {ours:.3f}, in channels_last {control:.3f}, spread {spread:.3f}")
    assert max(ours, control) < 1  # the run lowered the loss, in either order
    assert ours < 0.8 + 3 * spread, (ours, control)


def test_print_config_shows_resolved_settings(imagenet_cached: Path) -> None:
    result = CliRunner().invoke(main, ["--print-config", "--preset", "paper", "--pooling", "max",
                                       "--style-weight", "50"])
    assert result.exit_code == 0, result.output
    lines = dict(line.split(": ", 1) for line in result.stdout.splitlines())
    assert lines["preset"] == "paper"
    assert lines["pooling"] == "max"  # explicit
    assert lines["style_weight"] == "50.0"  # explicit
    assert lines["content_layers"] == "conv4_2"  # from the preset
    assert lines["style_layer_weights"] == "0.2,0.2,0.2,0.2,0.2"
    assert lines["loss_form"] == "paper"
    # every field, the LBFGS a run gets (fast.speed.resolve_speed: torch's here) and the plan
    assert set(lines) == {f.name for f in dataclasses.fields(StyleConfig)} | {"two_loop", "sizes", "evaluations"}
    assert lines["two_loop"] == "torch"
    default = CliRunner().invoke(main, ["--print-config"])
    assert "style_weight: 1000000.0" in default.stdout and "pooling: max" in default.stdout


def test_config_is_unchanged_by_copy() -> None:
    config = StyleConfig(preset="paper", pooling="max")
    assert copy.deepcopy(config) == config
    assert dataclasses.replace(config, steps=5).pooling == "max"


def test_every_config_field_is_a_documented_cli_option() -> None:
    text = " ".join(option_reference(main, "stylize").split())  # each option in full (docs/options.md)
    for field in dataclasses.fields(StyleConfig):
        option = "--" + field.name.replace("_", "-")
        assert option in text, f"{field.name} has no CLI option {option}"
    for words in ["conv_4 is the paper's conv2_2", "conv1_1,conv1_2,conv2_1,conv2_2,conv3_1", "luminance",
                  "covariance", "replaces every max pool", "input scaled", "Explicit options override"]:
        assert words in text, words
