"""An ONNX file's graph read from its protobuf bytes: nodes, attributes and stored tensors, without the onnx package.

What it reads of onnx.proto (field numbers as there): ``ModelProto.graph`` (7); ``GraphProto`` ``node`` (1),
``initializer`` (5); ``NodeProto`` ``input`` (1), ``output`` (2), ``name`` (3), ``op_type`` (4), ``attribute`` (5);
``AttributeProto`` ``name`` (1), ``f`` (2), ``i`` (3), ``s`` (4), ``t`` (5), ``floats`` (7), ``ints`` (8),
``type`` (20); ``TensorProto`` ``dims`` (1), ``data_type`` (2), ``segment`` (3, only noticed), ``float_data`` (4),
``int32_data`` (5), ``int64_data`` (7), ``name`` (8), ``raw_data`` (9), ``double_data`` (10), ``data_location``
(14). Every other field is skipped by its wire type; repeated numbers are read packed or not. A tensor's values stay
bytes of the file (a view, no copy) until ``Tensor.values`` is asked for them: FLOAT, FLOAT16, BFLOAT16, DOUBLE,
INT32 and INT64, from ``raw_data`` or the typed fields; external data and other types are refused.

Why not the onnx package: importing it (most of it ``ml_dtypes``) cost every run on ONNX weights about a second,
ten times this reader's time (benchmarks/NOTEBOOK.md, 2026-12-03 (late)). Torch-free (``weights`` reads a graph for
``StyleConfig``'s checks): ``onnx`` makes tensors.
"""

from __future__ import annotations

import math
import os
import struct
import sys
from dataclasses import dataclass, field
from typing import BinaryIO, Iterator, Union

_Buffer = Union[bytes, bytearray, memoryview]
_Value = Union[int, memoryview]

# Wire types (protobuf's encoding): 0 varint, 1 64-bit, 2 length-delimited, 5 32-bit; 3 and 4 start and end a
# group, which onnx.proto does not use.
_VARINT, _FIXED64, _LENGTH, _GROUP_START, _GROUP_END, _FIXED32 = 0, 1, 2, 3, 4, 5
_MASK64 = (1 << 64) - 1

# TensorProto.DataType, as onnx.proto numbers them (names for messages).
DATA_TYPES = ("UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "STRING", "BOOL",
              "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN",
              "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4", "FLOAT4E2M1", "FLOAT8E8M0",
              "UINT2", "INT2", "FLOAT6E2M3", "FLOAT6E3M2")
# The data types read: number -> (torch's dtype name, bytes per element).
KINDS = {1: ("float32", 4), 6: ("int32", 4), 7: ("int64", 8), 10: ("float16", 2), 11: ("float64", 8),
         16: ("bfloat16", 2)}
EXTERNAL = 1  # TensorProto.DataLocation: the values are in another file


class OnnxFormatError(ValueError):
    """The bytes are not a protobuf ONNX ModelProto with a graph (truncated, another format, a bad field)."""


class OnnxTensorError(ValueError):
    """A stored tensor whose values this reader does not read (external data, an unread data type, a bad size)."""


@dataclass
class Tensor:
    """A ``TensorProto``: its name, dims and where its values are; ``values()`` reads them."""

    name: str = ""
    dims: list[int] = field(default_factory=list)
    data_type: int = 0
    data_location: int = 0
    raw_data: memoryview | None = None  # None: the field is absent (a present, empty one is b"")
    segmented: bool = False
    # The typed fields as found: (wire type, value) per occurrence, decoded only by values().
    float_data: list[tuple[int, _Value]] = field(default_factory=list)
    int32_data: list[tuple[int, _Value]] = field(default_factory=list)
    int64_data: list[tuple[int, _Value]] = field(default_factory=list)
    double_data: list[tuple[int, _Value]] = field(default_factory=list)

    def values(self) -> tuple[str, bytearray | memoryview]:
        """The values as torch's dtype name (``"float32"``, ...) and their bytes in row-major order, in this
        machine's byte order, writable (for ``torch.frombuffer``).

        Raises:
            OnnxTensorError: external data, a segment, a data type not in ``KINDS``, or a count of values that is
                not the product of the dims.
        """
        if self.data_location == EXTERNAL:
            raise OnnxTensorError(f"tensor {self.name!r} keeps its values in an external file, which this reader "
                                  f"does not read; save the model with its tensors inside it")
        if self.segmented:
            raise OnnxTensorError(f"tensor {self.name!r} is stored in segments, which this reader does not read")
        if self.data_type not in KINDS:
            known = DATA_TYPES[self.data_type] if 0 <= self.data_type < len(DATA_TYPES) else "unknown"
            raise OnnxTensorError(f"tensor {self.name!r} has data type {self.data_type} ({known}), which this reader "
                                  f"does not read (it reads {', '.join(DATA_TYPES[k] for k in KINDS)})")
        kind, size = KINDS[self.data_type]
        if any(d < 0 for d in self.dims):
            raise OnnxTensorError(f"tensor {self.name!r} has a negative dimension ({self.dims})")
        count = math.prod(self.dims)
        if self.raw_data is not None:
            data: bytearray | memoryview = self.raw_data if not self.raw_data.readonly else bytearray(self.raw_data)
            found = len(data) // size if len(data) % size == 0 else -1
        elif self.data_type == 1:
            data = _fixed_bytes(self.float_data, 4)
            found = len(data) // 4
        elif self.data_type == 11:
            data = _fixed_bytes(self.double_data, 8)
            found = len(data) // 8
        else:
            numbers = _varints(self.int64_data if self.data_type == 7 else self.int32_data)
            found = len(numbers)
            data = _packed(numbers, kind) if found == count else bytearray()
        if found != count:
            stored = f"{len(data)} bytes of raw data" if self.raw_data is not None else f"{found} values"
            raise OnnxTensorError(f"tensor {self.name!r} holds {stored}, where its dims {self.dims} need {count} "
                                  f"{kind} values")
        return kind, _native(data, size)


@dataclass
class Attribute:
    """An ``AttributeProto``; ``value`` is the field its ``type`` names."""

    name: str = ""
    type: int = 0
    f: float = 0.0
    i: int = 0
    s: bytes = b""
    t: Tensor | None = None
    floats: list[float] = field(default_factory=list)
    ints: list[int] = field(default_factory=list)

    @property
    def value(self) -> float | int | bytes | Tensor | list[float] | list[int] | None:
        """FLOAT: ``f``, INT: ``i``, STRING: ``s``, TENSOR: ``t``, FLOATS: ``floats``, INTS: ``ints`` (the
        AttributeType numbers 1, 2, 3, 4, 6, 7); None for the other types (graphs, ...), which are not read."""
        by_type: dict[int, float | int | bytes | Tensor | list[float] | list[int] | None]
        by_type = {1: self.f, 2: self.i, 3: self.s, 4: self.t, 6: self.floats, 7: self.ints}
        return by_type.get(self.type)


@dataclass
class Node:
    """A ``NodeProto``."""

    input: list[str] = field(default_factory=list)
    output: list[str] = field(default_factory=list)
    name: str = ""
    op_type: str = ""
    attribute: list[Attribute] = field(default_factory=list)


@dataclass
class Graph:
    """A ``GraphProto``'s nodes, in the file's order, and its stored tensors."""

    node: list[Node] = field(default_factory=list)
    initializer: list[Tensor] = field(default_factory=list)


def read_graph(source: str | os.PathLike[str] | BinaryIO) -> Graph:
    """The graph of the ONNX file at ``source`` (a path, or a file opened for reading in binary), read whole.

    Raises:
        OSError: the file cannot be read.
        OnnxFormatError: it is not an ONNX model with a graph.
    """
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as handle:
            return parse_graph(_read_all(handle))
    return parse_graph(_read_all(source))


def parse_graph(data: _Buffer) -> Graph:
    """The graph of a serialised ``ModelProto``. Tensors' values are views of ``data``: keep it unchanged.

    Raises:
        OnnxFormatError: the bytes are truncated, not protobuf, or a ModelProto without a graph.
    """
    view = memoryview(data).cast("B") if isinstance(data, memoryview) else memoryview(data)
    try:
        chunks = []
        for number, wire, value in _fields(view, "ModelProto"):
            if number == 7:
                chunks.append(_bytes(value, wire, "ModelProto.graph"))
            elif number == 1:
                _number(value, wire, "ModelProto.ir_version")  # a model's first field: 0x08
        if not chunks:
            raise OnnxFormatError("no graph (ModelProto field 7)")
        graph = Graph()
        for chunk in chunks:  # a message field given twice is merged, as protobuf does
            _graph(chunk, graph)
        return graph
    except (IndexError, struct.error, UnicodeDecodeError, OverflowError) as exc:  # a guard: the checks come first
        raise OnnxFormatError(f"bad protobuf: {type(exc).__name__}: {exc}") from None


def _read_all(handle: BinaryIO) -> bytearray:
    """The file's bytes in one writable buffer (so tensors made from views of it need no copy first)."""
    try:
        size = os.fstat(handle.fileno()).st_size
    except (OSError, AttributeError, ValueError):  # not a real file: read it the plain way
        return bytearray(handle.read())
    data = bytearray(size)
    got = 0
    with memoryview(data) as view:
        while got < size:
            read = handle.readinto(view[got:])  # type: ignore[attr-defined]  # BinaryIO omits it; real files have it
            if not read:
                break
            got += read
    del data[got:]  # the file shrank meanwhile: what was there
    if got == size:
        data += handle.read()  # ... or grew
    return data


def _varint(view: memoryview, pos: int, end: int, where: str) -> tuple[int, int]:
    """The unsigned varint at ``pos`` (masked to 64 bits) and the position after it."""
    result = shift = 0
    while True:
        if pos >= end:
            raise OnnxFormatError(f"truncated in {where} (a varint runs past the end)")
        byte = view[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & _MASK64, pos
        shift += 7
        if shift >= 70:
            raise OnnxFormatError(f"bad varint in {where} (longer than 10 bytes)")


def _fields(view: memoryview, where: str) -> Iterator[tuple[int, int, _Value]]:
    """Each field of the message in ``view``: (field number, wire type, value); a varint's value is an int, the
    others' a view of their bytes."""
    pos, end = 0, len(view)
    while pos < end:
        key, pos = _varint(view, pos, end, where)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise OnnxFormatError(f"bad field number 0 in {where}")
        if wire == _VARINT:
            value, pos = _varint(view, pos, end, where)
            yield number, wire, value
            continue
        if wire == _LENGTH:
            size, pos = _varint(view, pos, end, where)
        elif wire in (_FIXED64, _FIXED32):
            size = 8 if wire == _FIXED64 else 4
        elif wire in (_GROUP_START, _GROUP_END):
            raise OnnxFormatError(f"field {number} of {where} is a group (wire type {wire}), which ONNX does not use")
        else:
            raise OnnxFormatError(f"field {number} of {where} has wire type {wire}, which protobuf does not have")
        if size > end - pos:
            raise OnnxFormatError(f"truncated in {where} (field {number} needs {size} bytes, {end - pos} are left)")
        yield number, wire, view[pos:pos + size]
        pos += size


def _number(value: _Value, wire: int, where: str) -> int:
    """A varint field's value."""
    if wire != _VARINT or not isinstance(value, int):
        raise OnnxFormatError(f"{where} has wire type {wire}, not a varint's ({_VARINT})")
    return value


def _bytes(value: _Value, wire: int, where: str) -> memoryview:
    """A length-delimited field's bytes (a view)."""
    if wire != _LENGTH or not isinstance(value, memoryview):
        raise OnnxFormatError(f"{where} has wire type {wire}, not a length-delimited field's ({_LENGTH})")
    return value


def _text(value: _Value, wire: int, where: str) -> str:
    try:
        return str(_bytes(value, wire, where), "utf-8")
    except UnicodeDecodeError:
        raise OnnxFormatError(f"{where} is not UTF-8 text") from None


def _signed(value: int) -> int:
    """An int64 (or an int32, sign-extended as protobuf writes it) from its varint's 64 bits."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _ints(value: _Value, wire: int, where: str) -> list[int]:
    """A repeated varint field's occurrence, packed (length-delimited) or not, as signed 64-bit ints."""
    if wire == _VARINT:
        return [_signed(_number(value, wire, where))]
    data, numbers, pos = _bytes(value, wire, where), [], 0
    while pos < len(data):
        number, pos = _varint(data, pos, len(data), where)
        numbers.append(_signed(number))
    return numbers


def _floats(value: _Value, wire: int, where: str) -> list[float]:
    """A repeated float field's occurrence, packed or not."""
    data = value if wire == _FIXED32 and isinstance(value, memoryview) else _bytes(value, wire, where)
    if len(data) % 4:
        raise OnnxFormatError(f"{where} holds {len(data)} bytes, not a whole number of floats")
    return list(struct.unpack(f"<{len(data) // 4}f", data))


def _graph(view: memoryview, graph: Graph) -> None:
    for number, wire, value in _fields(view, "GraphProto"):
        if number == 1:
            graph.node.append(_node(_bytes(value, wire, "GraphProto.node")))
        elif number == 5:
            graph.initializer.append(_tensor(_bytes(value, wire, "GraphProto.initializer")))


def _node(view: memoryview) -> Node:
    node = Node()
    for number, wire, value in _fields(view, "NodeProto"):
        if number == 1:
            node.input.append(_text(value, wire, "NodeProto.input"))
        elif number == 2:
            node.output.append(_text(value, wire, "NodeProto.output"))
        elif number == 3:
            node.name = _text(value, wire, "NodeProto.name")
        elif number == 4:
            node.op_type = _text(value, wire, "NodeProto.op_type")
        elif number == 5:
            node.attribute.append(_attribute(_bytes(value, wire, "NodeProto.attribute")))
    return node


def _attribute(view: memoryview) -> Attribute:
    attribute = Attribute()
    for number, wire, value in _fields(view, "AttributeProto"):
        if number == 1:
            attribute.name = _text(value, wire, "AttributeProto.name")
        elif number == 2:
            if wire != _FIXED32 or not isinstance(value, memoryview):
                raise OnnxFormatError(f"AttributeProto.f has wire type {wire}, not a float's ({_FIXED32})")
            attribute.f = struct.unpack("<f", value)[0]
        elif number == 3:
            attribute.i = _signed(_number(value, wire, "AttributeProto.i"))
        elif number == 4:
            attribute.s = bytes(_bytes(value, wire, "AttributeProto.s"))
        elif number == 5:
            attribute.t = _tensor(_bytes(value, wire, "AttributeProto.t"))
        elif number == 7:
            attribute.floats += _floats(value, wire, "AttributeProto.floats")
        elif number == 8:
            attribute.ints += _ints(value, wire, "AttributeProto.ints")
        elif number == 20:
            attribute.type = _number(value, wire, "AttributeProto.type")
    return attribute


def _tensor(view: memoryview) -> Tensor:
    tensor = Tensor()
    typed = {4: (tensor.float_data, _FIXED32), 5: (tensor.int32_data, _VARINT), 7: (tensor.int64_data, _VARINT),
             10: (tensor.double_data, _FIXED64)}
    for number, wire, value in _fields(view, "TensorProto"):
        if number == 1:
            tensor.dims += _ints(value, wire, "TensorProto.dims")
        elif number == 2:
            tensor.data_type = _signed(_number(value, wire, "TensorProto.data_type"))
        elif number == 3:
            tensor.segmented = True
        elif number in typed:
            found, scalar = typed[number]
            if wire not in (scalar, _LENGTH):
                raise OnnxFormatError(f"field {number} of TensorProto has wire type {wire}, not {scalar} or 2")
            found.append((wire, value))
        elif number == 8:
            tensor.name = _text(value, wire, "TensorProto.name")
        elif number == 9:
            tensor.raw_data = _bytes(value, wire, "TensorProto.raw_data")
        elif number == 14:
            tensor.data_location = _number(value, wire, "TensorProto.data_location")
    return tensor


def _fixed_bytes(found: list[tuple[int, _Value]], size: int) -> bytearray:
    """A repeated float (``size`` 4) or double (8) field's bytes, little-endian, its occurrences (packed or not)
    joined."""
    data = bytearray()
    for _, value in found:
        if not isinstance(value, memoryview) or len(value) % size:
            raise OnnxTensorError(f"a packed {'float' if size == 4 else 'double'} field holds "
                                  f"{len(value) if isinstance(value, memoryview) else 'no'} bytes, not a whole "
                                  f"number of values")
        data += value
    return data


def _varints(found: list[tuple[int, _Value]]) -> list[int]:
    try:
        return [n for wire, value in found for n in _ints(value, wire, "TensorProto")]
    except OnnxFormatError as exc:
        raise OnnxTensorError(str(exc)) from None


def _packed(numbers: list[int], kind: str) -> bytearray:
    """Numbers read from ``int32_data``/``int64_data`` as little-endian elements of ``kind``."""
    if kind in ("float16", "bfloat16"):  # their bits in the low 16 (onnx.proto); the rest is dropped, as numpy does
        return bytearray(struct.pack(f"<{len(numbers)}H", *(n & 0xFFFF for n in numbers)))
    low, high = (-(1 << 31), 1 << 31) if kind == "int32" else (-(1 << 63), 1 << 63)
    if any(not low <= n < high for n in numbers):
        raise OnnxTensorError(f"a value does not fit {kind}")
    return bytearray(struct.pack(f"<{len(numbers)}{'i' if kind == 'int32' else 'q'}", *numbers))


def _native(data: bytearray | memoryview, size: int) -> bytearray | memoryview:
    """Little-endian elements of ``size`` bytes in this machine's byte order (a copy only on a big-endian one)."""
    if sys.byteorder == "little" or size == 1:
        return data
    import array

    swapped = array.array({2: "H", 4: "I", 8: "Q"}[size])
    swapped.frombytes(bytes(data))
    swapped.byteswap()
    return bytearray(swapped.tobytes())
