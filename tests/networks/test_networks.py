"""Networks, weights and preprocessing without a trained network: VGG16 beside VGG19, Caffe's preprocessing as
a module in front of the network (checked against the formula written out), ONNX graphs built here (a VGG16 in
either layout, and graphs that are not a VGG, each refused in one line), Caffe-converted state dicts by name,
weights of the other VGG, non-finite weights, and the presets' loss weights for Caffe's input scale."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from style_transfer.config.style import StyleConfig
from style_transfer.errors import WeightsError
from style_transfer.layers import VGG16_LAYER_NAMES, paper_names
from style_transfer.networks.vgg import (CaffeNormalization, Normalization, load_network, make_normalization,
                                         random_vgg_features)
from style_transfer.presets import preset_values

from ..conftest import small_image

VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")  # by hand


def test_vgg16_has_torchvisions_layout_and_names() -> None:
    import torchvision

    ours, theirs = random_vgg_features("vgg16", 0), torchvision.models.vgg16(weights=None).features
    assert [type(m) for m in ours] == [type(m) for m in theirs]
    assert {k: v.shape for k, v in ours.state_dict().items()} == {k: v.shape for k, v in theirs.state_dict().items()}
    assert len(VGG16_LAYER_NAMES) == len(ours)
    mapping = paper_names(VGG16_LAYER_NAMES)
    assert mapping["conv5_3"] == "conv_13" and mapping["conv4_2"] == "conv_9" and "conv5_4" not in mapping


def test_caffe_normalization_is_the_formula_written_out() -> None:
    image = torch.rand(1, 3, 5, 7, generator=torch.Generator().manual_seed(0))
    mean = torch.tensor([103.939, 116.779, 123.68]).view(1, 3, 1, 1)
    bgr = torch.cat([image[:, 2:3], image[:, 1:2], image[:, 0:1]], dim=1)
    for name, scale in (("caffe", 255.0), ("caffe256", 256.0)):
        module = make_normalization(name)
        assert isinstance(module, CaffeNormalization) and isinstance(module, Normalization)
        assert torch.equal(module(image), bgr * scale - mean)
    torchvision_way = make_normalization("torchvision")(image)
    assert torch.equal(torchvision_way, Normalization()(image))
    with pytest.raises(ValueError, match="preprocess must be one of torchvision, caffe, caffe256"):
        make_normalization("keras")


def test_the_default_path_is_unchanged_by_the_preprocessing_module(cnn, content_32, style_32) -> None:
    """The tutorial's Normalization(mean, std) and the module torchvision's weights get give the same model."""
    from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD
    from style_transfer.core.style_model import get_style_model_and_losses

    image = content_32.clone()
    losses = []
    for normalization in (None, make_normalization("torchvision")):
        model, style_losses, content_losses = get_style_model_and_losses(
            cnn, IMAGENET_MEAN, IMAGENET_STD, style_32, content_32, normalization=normalization)
        model(torch.rand(image.shape, generator=torch.Generator().manual_seed(1)))
        losses.append([float(m.loss) for m in [*style_losses, *content_losses]])
    assert losses[0] == losses[1]


def onnx_vgg(path: Path, layout=VGG16, *, channels_last: bool = True, seed: int = 0, first_op: str | None = None,
             kernel: int = 3, batchnorm: bool = False) -> dict[str, np.ndarray]:
    """Write an ONNX graph of a VGG (convs, ReLUs, max pools, a Flatten and a Gemm head); return its weights."""
    onnx = pytest.importorskip("onnx", reason="the onnx package is not installed (pip install '.[test]')")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits, weights = [], [], {}
    shape = ["N", 32, 32, 3] if channels_last else ["N", 3, 32, 32]
    x = "input"
    if channels_last:
        nodes.append(helper.make_node("Transpose", [x], ["nchw"], perm=[0, 3, 1, 2]))
        x = "nchw"
    if first_op is not None:
        inits.append(numpy_helper.from_array(np.ones((1, 3, 1, 1), np.float32), "pre_c"))
        nodes.append(helper.make_node(first_op, [x, "pre_c"], ["pre"]))
        x = "pre"
    channels, conv = 3, 0
    for item in layout:
        if item == "M":
            nodes.append(helper.make_node("MaxPool", [x], [f"pool{conv}"], kernel_shape=[2, 2], strides=[2, 2]))
            x = f"pool{conv}"
            continue
        conv += 1
        w = (rng.standard_normal((item, channels, kernel, kernel)) * 0.05).astype(np.float32)
        b = (rng.standard_normal(item) * 0.1).astype(np.float32)
        weights[f"w{conv}"], weights[f"b{conv}"] = w, b
        inits += [numpy_helper.from_array(w, f"w{conv}"), numpy_helper.from_array(b, f"b{conv}")]
        nodes.append(helper.make_node("Conv", [x, f"w{conv}", f"b{conv}"], [f"c{conv}"], kernel_shape=[kernel] * 2,
                                      pads=[kernel // 2] * 4, strides=[1, 1]))
        x = f"c{conv}"
        if batchnorm:
            for name, value in (("s", 1.0), ("o", 0.0), ("m", 0.0), ("v", 1.0)):
                inits.append(numpy_helper.from_array(np.full(item, value, np.float32), f"bn{name}{conv}"))
            nodes.append(helper.make_node("BatchNormalization", [x] + [f"bn{n}{conv}" for n in "somv"],
                                          [f"bn{conv}"]))
            x = f"bn{conv}"
        nodes.append(helper.make_node("Relu", [x], [f"r{conv}"]))
        x, channels = f"r{conv}", item
    inits.append(numpy_helper.from_array(np.zeros((4, channels), np.float32), "head_w"))
    nodes += [helper.make_node("Flatten", [x], ["flat"]), helper.make_node("Gemm", ["flat", "head_w"], ["out"],
                                                                           transB=1)]
    graph = helper.make_graph(nodes, "vgg", [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return weights


def test_an_onnx_vgg16_loads_its_convolutions_in_order(tmp_path: Path) -> None:
    path = tmp_path / "keras_vgg16.onnx"
    weights = onnx_vgg(path)
    network = load_network("vgg16", str(path))
    assert (network.model, network.preprocess) == ("vgg16", "caffe")  # channels-last: a Keras export
    convs = [m for m in network.features if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) == 13
    for k, conv in enumerate(convs, start=1):
        assert np.array_equal(conv.weight.numpy(), weights[f"w{k}"]) and np.array_equal(conv.bias.numpy(),
                                                                                         weights[f"b{k}"])
    assert not any(p.requires_grad for p in network.features.parameters())
    assert StyleConfig(model="vgg16", weights=str(path)).preprocess == "caffe"


def test_an_nchw_onnx_vgg_must_be_told_its_preprocessing(tmp_path: Path) -> None:
    path = tmp_path / "zoo_vgg16.onnx"
    onnx_vgg(path, channels_last=False)
    with pytest.raises(ValueError, match="cannot tell which preprocessing .* pass preprocess"):
        StyleConfig(model="vgg16", weights=str(path))
    with pytest.raises(WeightsError, match="cannot tell which preprocessing"):
        load_network("vgg16", str(path))
    assert load_network("vgg16", str(path), preprocess="torchvision").preprocess == "torchvision"
    assert StyleConfig(model="vgg16", weights=str(path), preprocess="torchvision").style_weight == 1e6


@pytest.mark.parametrize("build, message", [
    ({"kernel": 7}, r"not a VGG: convolution 1 has a 7x7 kernel \(VGG's are all 3x3\)"),
    ({"layout": (64, 64, "M", 128, "M")}, r"not a VGG16 or VGG19: 3 convolutions before the head"),
    ({"layout": (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 256, "M")},
     r"not a VGG16 or VGG19: its convolutions' channels and pools"),
    ({"batchnorm": True, "layout": (64, "M")}, r"not a plain VGG: it has batch normalisation"),
    ({"first_op": "Sub"}, r"the graph preprocesses its input itself \(Sub before the first convolution\)"),
], ids=["resnet-stem", "too-few", "wrong-channels", "batchnorm", "preprocessing-inside"])
def test_a_graph_that_is_not_a_vgg_is_refused_in_one_line(tmp_path: Path, build: dict, message: str) -> None:
    path = tmp_path / "other.onnx"
    onnx_vgg(path, **build)
    with pytest.raises(WeightsError, match=message) as info:
        load_network("vgg16", str(path), preprocess="caffe")
    assert "\n" not in str(info.value) and "other.onnx" in str(info.value)


def test_a_file_that_is_not_onnx_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "noise.onnx"
    path.write_bytes(b"\x08\x07" + bytes(range(256)) * 4)
    with pytest.raises(WeightsError, match="noise.onnx: not a readable ONNX model"):
        load_network("vgg16", str(path), preprocess="caffe")


def test_state_dicts_of_either_vgg_and_caffe_files_by_name(tmp_path: Path) -> None:
    source = random_vgg_features("vgg16", 3)
    plain = tmp_path / "mine.pth"
    torch.save({"features." + k: v for k, v in source.state_dict().items()}, plain)
    network = load_network("vgg16", str(plain))
    assert network.preprocess == "torchvision"
    assert torch.equal(network.features[28].weight, source[28].weight)
    caffe = tmp_path / "vgg16-00b39a1b.pth"  # neural-style-pt's name: BGR times 256 minus the mean
    torch.save(source.state_dict(), caffe)
    assert load_network("vgg16", str(caffe)).preprocess == "caffe256"
    config = StyleConfig(model="vgg16", weights=str(caffe))
    assert config.preprocess == "caffe256"
    assert config.style_weight == preset_values("tutorial", "caffe", model="vgg16")["style_weight"] == 300
    with pytest.raises(WeightsError, match=r"mine.pth: holds a VGG16 \(13 convolutions\), not a VGG19 \(16\); "
                                           r"pass model=vgg16"):
        load_network("vgg19", str(plain))


def test_non_finite_weights_are_refused(tmp_path: Path) -> None:
    state = random_vgg_features("vgg16", 0).state_dict()
    state["5.weight"][0, 0, 0, 0] = float("nan")
    path = tmp_path / "nan.pth"
    torch.save(state, path)
    with pytest.raises(WeightsError, match=r"nan.pth: weights 5.weight hold NaN or infinite values"):
        load_network("vgg16", str(path))


def test_the_presets_loss_weights_follow_the_input_scale() -> None:
    assert StyleConfig().style_weight == 1e6  # the tutorial's, with torchvision's weights
    # Caffe's scale: 1e6 / 3400 carried over (300 on VGG16), 1000 on the original VGG19, looked at (presets.py)
    assert StyleConfig(preprocess="caffe").style_weight == preset_values("tutorial", "caffe")["style_weight"] == 1e3
    assert StyleConfig(preprocess="caffe", model="vgg16").style_weight == 300
    assert StyleConfig(preprocess="caffe", style_weight=5e5).style_weight == 5e5  # an explicit value wins
    assert StyleConfig(preset="paper", preprocess="caffe").style_weight == 1e3  # the paper's, set on Caffe's VGG
    with pytest.raises(ValueError, match="model must be one of vgg19, vgg16"):
        StyleConfig(model="vgg11")
    with pytest.raises(ValueError, match="style_layers: unknown layer 'conv5_4'"):
        StyleConfig(model="vgg16", style_layers=("conv5_4",))


def test_the_command_runs_vgg16_and_prints_its_settings(tmp_path: Path) -> None:
    from style_transfer.cli.stylize import main
    from style_transfer.io.metadata import read_record

    content, style, out = tmp_path / "c.png", tmp_path / "s.png", tmp_path / "out.png"
    small_image("chelsea.png", (32, 21)).save(content)
    small_image("ihc.png", (32, 32)).save(style)
    shown = CliRunner().invoke(main, ["--model", "vgg16", "--preprocess", "caffe256", "--print-config"])
    assert shown.exit_code == 0 and "model: vgg16" in shown.output and "preprocess: caffe256" in shown.output
    ran = CliRunner().invoke(main, [str(content), str(style), "-o", str(out), "--model", "vgg16", "--weights",
                                    "random", "--size", "32", "--steps", "5", "-q", "--threads", "1"])
    assert ran.exit_code == 0, ran.output
    record = read_record(out)
    assert record["settings"]["model"] == "vgg16" and record["settings"]["preprocess"] == "torchvision"
    bad = CliRunner().invoke(main, [str(content), str(style), "-o", str(out), "--model", "vgg16",
                                    "--style-layers", "conv_16"])
    assert bad.exit_code == 2 and "unknown layer 'conv_16'" in bad.output and "Traceback" not in bad.output
