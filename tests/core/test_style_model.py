"""Building the style model: names, ReLUs, loss positions, truncation, targets."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from style_transfer import ContentLoss, Normalization, StyleLoss, get_style_model_and_losses
from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD
from style_transfer.core.style_model import layer_names


def build(cnn, content, style, **layers):
    return get_style_model_and_losses(cnn, IMAGENET_MEAN, IMAGENET_STD, style, content, **layers)


def test_tutorial_layout(cnn, content_32, style_32) -> None:
    model, style_losses, content_losses = build(cnn, content_32, style_32)
    names = [name for name, _ in model.named_children()]
    assert names == ["0", "conv_1", "style_loss_1", "relu_1", "conv_2", "style_loss_2", "relu_2", "pool_2",
                     "conv_3", "style_loss_3", "relu_3", "conv_4", "content_loss_4", "style_loss_4", "relu_4",
                     "pool_4", "conv_5", "style_loss_5"]
    assert isinstance(model[0], Normalization)
    assert len(style_losses) == 5 and len(content_losses) == 1
    assert model.content_loss_4 is content_losses[0]
    assert [model.get_submodule(f"style_loss_{i}") for i in range(1, 6)] == style_losses


def test_relus_out_of_place_and_cnn_untouched(cnn, content_32, style_32) -> None:
    model, _, _ = build(cnn, content_32, style_32)
    relus = [m for m in model if isinstance(m, nn.ReLU)]
    assert relus and all(not m.inplace for m in relus)
    assert all(m.inplace for m in cnn if isinstance(m, nn.ReLU))  # the source network is left as it was


def test_custom_layers_and_truncation(cnn, content_32, style_32) -> None:
    model, style_losses, content_losses = build(cnn, content_32, style_32, content_layers=["relu_2"],
                                                style_layers=["conv_1", "pool_4"])
    names = [name for name, _ in model.named_children()]
    assert names[-1] == "style_loss_4" and names[-2] == "pool_4"
    assert names.index("content_loss_2") == names.index("relu_2") + 1
    assert len(style_losses) == 2 and len(content_losses) == 1


def test_layer_names_of_vgg19(cnn) -> None:
    names = layer_names(cnn)
    assert len(names) == 37
    assert names[:5] == ["conv_1", "relu_1", "conv_2", "relu_2", "pool_2"]
    assert sum(n.startswith("conv_") for n in names) == 16
    assert names[-1] == "pool_16"


def test_unknown_layer_lists_valid(cnn, content_32, style_32) -> None:
    with pytest.raises(ValueError, match=r"unknown layer 'conv_99'.*valid layers: conv_1, relu_1"):
        build(cnn, content_32, style_32, content_layers=["conv_99"])


def test_targets_match_plain_forward(cnn, content_32, style_32) -> None:
    model, style_losses, content_losses = build(cnn, content_32, style_32)
    # Second computation: run the normalised images through cnn's first layers by hand.
    mean = torch.tensor(IMAGENET_MEAN).view(-1, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(-1, 1, 1)
    layers = list(cnn.children())
    with torch.no_grad():
        x = (content_32 - mean) / std
        for layer in layers[:8]:  # up to and including conv_4 (index 7)
            x = torch.relu(x) if isinstance(layer, nn.ReLU) else layer(x)
        torch.testing.assert_close(content_losses[0].target, x, rtol=0, atol=0)
        s = (style_32 - mean) / std
        s = layers[0](s)
        f = s[0].reshape(s.shape[1], -1)
        torch.testing.assert_close(style_losses[0].target, f @ f.t() / s.numel(), rtol=1e-6, atol=1e-6)


def test_loss_modules_are_transparent(cnn, content_32, style_32) -> None:
    model, _, _ = build(cnn, content_32, style_32)
    plain = nn.Sequential(*[m for m in model if not isinstance(m, (ContentLoss, StyleLoss))])
    with torch.no_grad():
        torch.testing.assert_close(model(content_32), plain(content_32), rtol=0, atol=0)
