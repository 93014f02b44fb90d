"""What a weights file tells of the preprocessing it expects, found without torch (``StyleConfig`` asks it).

torchvision's ImageNet and random weights and state dicts take torchvision's; neural-style-pt's Caffe files
are known by name (``caffe256``); an ONNX file's graph tells (a Keras export takes ``caffe``). Reading the
graph needs the optional ``onnx`` package; nothing in a file runs.
"""

from __future__ import annotations

import functools
import os
from typing import Any

# neural-style-pt's Caffe-converted files (torchvision's key layout), recognised by name: caffe256 input.
CAFFE256_FILES = ("vgg19-d01eb7cb.pth", "vgg16-00b39a1b.pth")


def preprocess_by_name(weights: str) -> str | None:
    """The preprocessing that ``weights`` tell by their name alone, or None when only an ONNX file's graph can.

    torchvision's ImageNet and random weights, and state dicts: ``torchvision``; neural-style-pt's file names:
    ``caffe256``; an ``.onnx`` file: None (``onnx_preprocess`` reads it: a Keras export takes ``caffe``).
    """
    name = os.path.basename(str(weights))
    if name in CAFFE256_FILES:
        return "caffe256"
    return None if name.lower().endswith(".onnx") else "torchvision"


class Unreadable(Exception):
    """The graph could not be read here (no onnx package, not ONNX): the weights loader names the problem."""


def onnx_preprocess(path: str) -> str | None:
    """The preprocessing a regular ONNX file's graph tells (``"caffe"`` for a channels-last Keras export), or
    None; read once per file while it stays unchanged (a batch makes a config per item).

    Raises:
        Unreadable: the file is not a readable ONNX graph, or onnx is not installed.
    """
    try:
        info = os.stat(path)
    except OSError:
        raise Unreadable(path) from None
    return _onnx_preprocess(os.path.realpath(path), info.st_mtime_ns, info.st_size)


@functools.lru_cache(maxsize=8)
def _onnx_preprocess(path: str, mtime_ns: int, size: int) -> str | None:
    try:
        import onnx

        graph = onnx.load(path).graph
    except Exception:  # ImportError, protobuf's DecodeError, missing external data: the loader says which
        raise Unreadable(path) from None
    conv = next((node for node in graph.node if node.op_type == "Conv"), None)
    return "caffe" if conv is not None and input_is_channels_last(graph, conv) else None


def producers(graph: Any) -> dict[str, Any]:
    """Each value name of an ONNX graph -> the node that makes it."""
    return {output: node for node in graph.node for output in node.output}


def input_is_channels_last(graph: Any, first_conv: Any) -> bool:
    """True when the first convolution reads the input through a Transpose with perm (0, 3, 1, 2)."""
    from onnx import helper

    made_by, name = producers(graph), first_conv.input[0]
    while name in made_by:
        node = made_by[name]
        if node.op_type == "Transpose":
            perm = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "perm"), None)
            return perm is not None and list(perm) == [0, 3, 1, 2]
        name = node.input[0] if node.input else ""
    return False
