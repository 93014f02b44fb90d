"""Layer names (tutorial <-> paper) and the pooling swap."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from style_transfer import StyleConfig, get_style_model_and_losses
from style_transfer.layers import VGG19_LAYER_NAMES, resolve_layer, resolve_layers, swap_pooling
from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD
from style_transfer.core.style_model import layer_names


def paper_module(cnn: nn.Sequential, name: str) -> nn.Module:
    """The module a paper name denotes, found by walking the network independently of layers.py."""
    kind, rest = ("pool", name[4:]) if name.startswith("pool") else (name[:4], name[4:])
    block = int(rest.split("_")[0])
    k = int(rest.split("_")[1]) if "_" in rest else 0
    current_block, conv_in_block = 1, 0
    for module in cnn.children():
        if isinstance(module, nn.Conv2d):
            conv_in_block += 1
            if kind == "conv" and (current_block, conv_in_block) == (block, k):
                return module
        elif isinstance(module, nn.ReLU):
            if kind == "relu" and (current_block, conv_in_block) == (block, k):
                return module
        elif isinstance(module, nn.MaxPool2d):
            if kind == "pool" and current_block == block:
                return module
            current_block, conv_in_block = current_block + 1, 0
    raise KeyError(name)


def test_tutorial_names_are_the_models_names(cnn) -> None:
    assert list(VGG19_LAYER_NAMES) == layer_names(cnn)


@pytest.mark.parametrize("paper, tutorial", [
    ("conv1_1", "conv_1"), ("conv1_2", "conv_2"), ("conv2_1", "conv_3"), ("conv2_2", "conv_4"),
    ("conv3_1", "conv_5"), ("conv4_1", "conv_9"), ("conv4_2", "conv_10"), ("conv5_1", "conv_13"),
    ("conv5_4", "conv_16"), ("relu4_2", "relu_10"), ("relu1_1", "relu_1"),
    ("pool1", "pool_2"), ("pool3", "pool_8"), ("pool5", "pool_16"),
])
def test_paper_names_map_to_the_right_module(cnn, paper: str, tutorial: str) -> None:
    assert resolve_layer(paper) == tutorial  # the hand-written table of the issue
    by_tutorial = dict(zip(layer_names(cnn), cnn.children()))
    assert by_tutorial[resolve_layer(paper)] is paper_module(cnn, paper)


def test_conv4_2_is_a_512_channel_conv_and_conv2_2_a_128_one(cnn) -> None:
    by_tutorial = dict(zip(layer_names(cnn), cnn.children()))
    assert by_tutorial[resolve_layer("conv4_2")].in_channels == 512
    assert by_tutorial[resolve_layer("conv2_2")].out_channels == 128
    assert by_tutorial[resolve_layer("conv3_1")].in_channels == 128  # first conv after pool2


def test_tutorial_names_pass_through() -> None:
    assert resolve_layers(["conv_4", "relu_7", "pool_8"]) == ("conv_4", "relu_7", "pool_8")


@pytest.mark.parametrize("name", ["conv_99", "conv6_1", "conv1_3", "pool6", "relu", "conv4-2"])
def test_unknown_name_one_line_listing_valid(name: str) -> None:
    with pytest.raises(ValueError) as info:
        resolve_layer(name)
    message = str(info.value)
    assert "\n" not in message and repr(name) in message
    assert "conv_1, relu_1" in message and "conv1_1..conv5_4" in message and "pool3" in message


def test_paper_names_build_the_same_model_as_tutorial_names(cnn, content_32, style_32) -> None:
    def losses(content_layers, style_layers):
        model, style_losses, content_losses = get_style_model_and_losses(
            cnn, IMAGENET_MEAN, IMAGENET_STD, style_32, content_32, content_layers, style_layers)
        model(content_32.flip(-1))
        return [float(m.loss) for m in [*style_losses, *content_losses]], list(dict(model.named_children()))

    paper = losses(["conv4_2"], ["conv1_1", "conv2_1", "conv3_1", "conv4_1", "conv5_1"])
    tutorial = losses(["conv_10"], ["conv_1", "conv_3", "conv_5", "conv_9", "conv_13"])
    assert paper == tutorial


def test_config_accepts_paper_names_and_refuses_duplicates() -> None:
    assert StyleConfig(style_layers="conv1_1,conv2_1").style_layers == ("conv1_1", "conv2_1")
    with pytest.raises(ValueError, match="twice"):
        StyleConfig(style_layers=("conv_4", "conv2_2"))
    with pytest.raises(ValueError, match="content_layers: unknown layer 'conv9_1'"):
        StyleConfig(content_layers=("conv9_1",))


def test_swap_pooling_swaps_every_max_pool(cnn) -> None:
    avg = nn.Sequential(*(swap_pooling(layer, "avg") for layer in cnn.children()))
    max_pools = [m for m in cnn.children() if isinstance(m, nn.MaxPool2d)]
    avg_pools = [m for m in avg.children() if isinstance(m, nn.AvgPool2d)]
    assert len(max_pools) == len(avg_pools) == 5
    assert not any(isinstance(m, nn.MaxPool2d) for m in avg.children())
    for old, new in zip(max_pools, avg_pools):
        assert (new.kernel_size, new.stride, new.padding, new.ceil_mode) == (
            old.kernel_size, old.stride, old.padding, old.ceil_mode)
    # The convs are shared, not copied, and the original network is left as it was.
    assert [m for m in avg.children() if isinstance(m, nn.Conv2d)] == [
        m for m in cnn.children() if isinstance(m, nn.Conv2d)]
    assert sum(isinstance(m, nn.MaxPool2d) for m in cnn.children()) == 5
    x = torch.rand(1, 64, 4, 4)
    torch.testing.assert_close(avg[4](x), nn.functional.avg_pool2d(x, 2, 2))
    assert all(swap_pooling(layer, "max") is layer for layer in cnn.children())


def test_avg_pooling_in_the_style_model(cnn, content_32, style_32) -> None:
    layers = ["conv1_1", "conv2_1", "conv3_1", "conv4_1", "conv5_1"]
    avg_model, avg_styles, _ = get_style_model_and_losses(cnn, IMAGENET_MEAN, IMAGENET_STD, style_32, content_32,
                                                          ["conv4_2"], layers, pooling="avg")
    max_model, max_styles, _ = get_style_model_and_losses(cnn, IMAGENET_MEAN, IMAGENET_STD, style_32, content_32,
                                                          ["conv4_2"], layers)
    assert sum(isinstance(m, nn.AvgPool2d) for m in avg_model.children()) == 4  # pools 1-4 precede conv5_1
    assert not any(isinstance(m, nn.MaxPool2d) for m in avg_model.children())
    assert sum(isinstance(m, nn.MaxPool2d) for m in max_model.children()) == 4
    # The layers before the first pool see the same input; after it, the targets differ.
    assert torch.equal(avg_styles[0].target, max_styles[0].target)
    assert not torch.allclose(avg_styles[1].target, max_styles[1].target)
