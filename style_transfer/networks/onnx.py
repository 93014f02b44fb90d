"""VGG weights read from an ONNX file (the ONNX model zoo's, a Keras export): convolutions by order and shape.

Only the graph's stored tensors are read (``config.onnx_graph`` parses the protobuf, without the onnx package;
nothing in the file runs). The convolutions and pools before the classifier must be a VGG16's or VGG19's, in
order; the head is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config.onnx_graph import Attribute, Graph, Node, OnnxFormatError, OnnxTensorError, Tensor, read_graph
from ..config.weights import input_is_channels_last, producers
from ..errors import WeightsError, first_line
from ..io.files import open_regular, shown
from ..layers import VGG_LAYOUTS as _LAYOUTS, conv_indices

if TYPE_CHECKING:  # torch is imported where tensors are made
    import torch

# Nodes allowed between the graph's input and its first convolution: a layout change, nothing that changes values.
_PASS_THROUGH = ("Transpose", "Identity", "Cast", "Reshape")
_POOLS = ("MaxPool", "AveragePool")


@dataclass
class OnnxVgg:
    """The VGG convolutions found in an ONNX graph.

    Attributes:
        state: torchvision's ``features`` keys (``"0.weight"``, ``"0.bias"``, ...) -> float32 tensors.
        model: ``"vgg16"`` or ``"vgg19"``, by the convolutions found.
        channels_last: the graph takes (N, H, W, 3) input (a Keras/TensorFlow export) and transposes it.
        preprocess: ``"caffe"`` for a Keras export (keras.applications' VGGs take Caffe's BGR, 0-255, minus the
            mean); None when the file cannot tell (the ONNX model zoo has both kinds).
    """

    state: dict[str, "torch.Tensor"]
    model: str
    channels_last: bool
    preprocess: str | None


def read_onnx_vgg(path: str | Path) -> OnnxVgg:
    """Read the VGG16 or VGG19 convolutions of an ONNX file.

    Raises:
        WeightsError: the file is missing, not ONNX, or not a VGG (one line saying why: a kernel that is not 3x3,
            a count or channel number no VGG has, batch normalisation, weights computed in the graph,
            preprocessing inside the graph), or a convolution's tensor cannot be read (kept in an external file,
            a data type not read).
    """
    import torch

    path = Path(path)
    graph = _graph(path)
    constants: dict[str, Tensor] = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].t is not None and node.output:
            constants[node.output[0]] = node.attribute[0].t

    def array(name: str) -> "torch.Tensor":
        try:
            return to_torch(constants[name]).float()
        except OnnxTensorError as exc:
            raise WeightsError(f"{shown(path)}: {exc}") from None

    layers: list[tuple[str, Node]] = []  # ("C", node) and ("M", node), in graph order, up to the head
    for node in graph.node:
        if node.op_type == "Conv":
            layers.append(("C", node))
        elif node.op_type in _POOLS:
            layers.append(("M", node))
        elif node.op_type == "BatchNormalization" and any(kind == "C" for kind, _ in layers):
            raise WeightsError(f"{shown(path)}: not a plain VGG: it has batch normalisation (a VGG-BN), which the "
                               f"style losses' VGG does not")
        elif node.op_type in ("Gemm", "MatMul", "Flatten") and layers:
            break  # the classifier head: ignored
    convs = [node for kind, node in layers if kind == "C"]
    if not convs:
        raise WeightsError(f"{shown(path)}: not a VGG: the graph has no convolution")
    model = _model_of(path, layers, convs, constants)
    channels_last = input_is_channels_last(graph, convs[0])
    preceding = _ops_before(graph, convs[0])
    changing = [op for op in preceding if op not in _PASS_THROUGH]
    if changing:
        raise WeightsError(f"{shown(path)}: the graph preprocesses its input itself ({', '.join(changing)} before the "
                           f"first convolution), which this reader does not apply; export the network without it")
    state: dict[str, "torch.Tensor"] = {}
    for index, node in zip(conv_indices(_LAYOUTS[model]), convs):
        state[f"{index}.weight"] = array(node.input[1])
        bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
        state[f"{index}.bias"] = array(bias) if bias is not None else torch.zeros(state[f"{index}.weight"].shape[0])
    return OnnxVgg(state, model, channels_last, "caffe" if channels_last else None)


def to_torch(tensor: Tensor) -> "torch.Tensor":
    """A stored ONNX tensor's values as a torch tensor of its own dtype and dims (a copy: the file's bytes can go).

    Raises:
        OnnxTensorError: values kept in an external file, a data type not read, a size that does not fit the dims.
    """
    import torch

    kind, data = tensor.values()
    dtype = getattr(torch, kind)
    if not len(data):
        return torch.empty(tuple(tensor.dims), dtype=dtype)
    return torch.frombuffer(data, dtype=dtype).reshape(tuple(tensor.dims)).clone()


def _graph(path: Path) -> Graph:
    """The file's ONNX graph (``config.onnx_graph`` reads the protobuf; nothing in it runs).

    Raises:
        WeightsError: the file is missing, a folder, or not ONNX.
    """
    with open_regular(path, WeightsError) as handle:  # missing, a folder, a FIFO: named in one line
        try:
            return read_graph(handle)
        except (OnnxFormatError, OSError) as exc:  # truncated, not protobuf, no graph; a read error
            first = first_line(exc, 160)
            raise WeightsError(f"{shown(path)}: not a readable ONNX model ({first})") from None


def _model_of(path: Path, layers: list[tuple[str, Node]], convs: list[Node], constants: dict[str, Tensor]) -> str:
    """Which VGG the convolutions and pools are, or a one-line WeightsError saying why they are not one."""
    for number, node in enumerate(convs, start=1):
        attributes = {a.name: _attribute(a) for a in node.attribute}
        if len(node.input) < 2 or node.input[1] not in constants:
            raise WeightsError(f"{shown(path)}: convolution {number}'s weights are computed in the graph, not stored; "
                               f"cannot read them")
        dims = tuple(constants[node.input[1]].dims)
        kernel = tuple(attributes.get("kernel_shape", dims[2:]))
        if len(dims) != 4 or kernel != (3, 3) or dims[2:] != (3, 3):
            raise WeightsError(f"{shown(path)}: not a VGG: convolution {number} has a {'x'.join(map(str, kernel))} "
                               f"kernel (VGG's are all 3x3)")
        if any(v != 1 for v in attributes.get("strides", [1, 1])) or attributes.get("group", 1) != 1 or \
                any(v != 1 for v in attributes.get("dilations", [1, 1])) or \
                tuple(attributes.get("pads", [1, 1, 1, 1])) != (1, 1, 1, 1):
            raise WeightsError(f"{shown(path)}: not a VGG: convolution {number} is strided, grouped, dilated or not "
                               f"padded by 1 (VGG's are not)")
    shape = [("M" if kind == "M" else int(constants[node.input[1]].dims[0])) for kind, node in layers]
    channels_in = [int(constants[node.input[1]].dims[1]) for node in convs]
    for model, layout in _LAYOUTS.items():
        expected_in = [3] + [c for c in layout if c != "M"][:-1]
        if shape[:len(layout)] == list(layout) and channels_in == expected_in:
            return model
    counts = {name: sum(1 for c in layout if c != "M") for name, layout in _LAYOUTS.items()}
    if len(convs) not in counts.values():
        raise WeightsError(f"{shown(path)}: not a VGG16 or VGG19: {len(convs)} convolutions before the head "
                           f"(VGG16 has {counts['vgg16']}, VGG19 {counts['vgg19']})")
    raise WeightsError(f"{shown(path)}: not a VGG16 or VGG19: its convolutions' channels and pools "
                       f"({','.join(map(str, shape))}) are not a VGG's")


def _attribute(attribute: Attribute) -> Any:
    value = attribute.value
    return list(value) if isinstance(value, (list, tuple)) else value


def _ops_before(graph: Graph, first_conv: Node) -> list[str]:
    """The op types on the path from the graph's input to the first convolution's data input."""
    made_by, ops, name = producers(graph), [], first_conv.input[0] if first_conv.input else ""
    while name in made_by:
        node = made_by[name]
        ops.append(node.op_type)
        name = node.input[0] if node.input else ""
    return ops[::-1]
