"""Measure the combined and the per-module backward side by side on the user's images and device.

The library half of ``stylize-compare-backward``: it returns a ``BackwardComparison`` and
prints nothing. Both paths are evaluated at the same image (the start image of a run), so
their gradients can be compared; the image is not optimised.
"""

from __future__ import annotations

import statistics
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
# torch has no CPU allocator statistics; its own FlopCounterMode is built on this mode class too.
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ..core.backward import run_backward
from ..config.choices import BACKWARDS
from ..config.style import StyleConfig
from ..config.checks import filled
from ..io.images import ImageSource, load_image
from ..networks.vgg import IMAGENET_MEAN, IMAGENET_STD, load_vgg19_features
from ..networks.download import DownloadProgress
from .prepare import default_size, initial_image, resolve_device
from ..core.style_model import get_style_model_and_losses

CUDA_MEMORY = "torch.cuda.max_memory_allocated"
TRACKED_MEMORY = "bytes of live tensors, tracked op by op"


@dataclass(frozen=True)
class BackwardRow:
    """What one backward path costs per closure evaluation (forward + backward)."""

    backward: str  # "combined" or "per-module"
    passes: int  # backward passes that reached the image per evaluation (counted by a hook on it)
    seconds: float  # median seconds per evaluation
    peak_bytes: int  # peak memory during one evaluation, above what was allocated before it
    saved_bytes: int  # bytes of activations the graph saved for backward (weights and targets left out)
    held_bytes: int  # memory still allocated after the evaluation, above what was before it
    max_abs_grad_diff: float  # max |gradient on the image - the combined path's gradient|


@dataclass(frozen=True)
class BackwardComparison:
    """The result of ``compare_backward``: one row per path, and how it was measured."""

    rows: tuple[BackwardRow, ...]
    device: str  # where it ran, e.g. "cpu" or "cuda:0"
    width: int  # working image size in px
    height: int
    evaluations: int  # timed evaluations per path (after one warm-up each)
    memory_method: str  # CUDA_MEMORY or TRACKED_MEMORY
    max_abs_grad: float  # max |gradient| of the combined path: the scale of the differences

    def row(self, backward: str) -> BackwardRow:
        """The row of one path (``combined`` or ``per-module``)."""
        return next(r for r in self.rows if r.backward == backward)


def compare_backward(
    content: ImageSource,
    style: ImageSource,
    config: StyleConfig | None = None,
    *,
    evaluations: int = 5,
    download_progress: DownloadProgress | None = None,
) -> BackwardComparison:
    """Evaluate both backward paths at the start image of a run and measure them.

    Per path: one evaluation with memory measurement (first, from the same clean state), one
    warm-up, then ``evaluations`` timed evaluations, interleaved between the paths so that a
    busy machine slows both alike. ``config.backward`` is ignored: both paths run. The model is
    built as ``stylize`` builds it for one style image (layers, layer weights, loss form,
    pooling, loss weights, init); colour preservation, the total variation term and a style
    image's transparency are left out (none of them changes how the backward passes run).

    Memory: on CUDA ``torch.cuda.max_memory_allocated``; elsewhere the bytes of tensors alive,
    followed op by op with a ``TorchDispatchMode`` (every tensor made in the forward and the
    backward passes, counted once per storage, released when its last tensor dies).

    Args:
        content, style: file paths, Pillow images or ``(1, 3, H, W)`` tensors in [0, 1].
        config: size, device, weights, layers, loss weights, init and seed, as for ``stylize``.
        evaluations: timed evaluations per path (>= 1).

    Raises:
        ValueError: ``evaluations`` < 1, an unknown layer, an unavailable device.
        ImageError, WeightsError: as ``stylize``.
    """
    if isinstance(evaluations, bool) or not isinstance(evaluations, int) or evaluations < 1:
        raise ValueError(f"evaluations must be a positive integer, got {evaluations!r}")
    config = config or StyleConfig()
    device = resolve_device(config.device)
    size = config.size or default_size(device)
    content_img = load_image(content, size, device)
    style_img = load_image(style, size, device)
    cnn = load_vgg19_features(config.weights, download_progress=download_progress).to(device)
    model, style_losses, content_losses = get_style_model_and_losses(
        cnn, IMAGENET_MEAN, IMAGENET_STD, style_img, content_img, filled(config.content_layers),
        filled(config.style_layers), style_layer_weights=config.style_layer_weights,
        loss_form=filled(config.loss_form), pooling=filled(config.pooling))
    model.eval()
    model.requires_grad_(False)
    image = initial_image(content_img, config.init, config.seed, style_img=style_img).requires_grad_(True)
    kept = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    passes = [0]
    hook = image.register_hook(lambda grad: passes.__setitem__(0, passes[0] + 1))

    def evaluate(backward: str) -> None:
        image.grad = None  # what optimizer.zero_grad() does
        model(image)
        run_backward(backward, style_losses, content_losses, filled(config.style_weight),
                     filled(config.content_weight))

    try:
        memory: dict[str, tuple[int, int, int]] = {}
        grads: dict[str, torch.Tensor] = {}
        counts: dict[str, int] = {}
        for backward in BACKWARDS:
            passes[0] = 0
            memory[backward] = _measure_memory(lambda: evaluate(backward), device, kept)
            counts[backward] = passes[0]
            grads[backward] = image.grad.detach().clone()  # type: ignore[union-attr]  # evaluate has just filled it
        times: dict[str, list[float]] = {b: [] for b in BACKWARDS}
        for i in range(evaluations + 1):  # the first round warms up
            for backward in BACKWARDS:
                seconds = _timed(lambda: evaluate(backward), device)
                if i:
                    times[backward].append(seconds)
    finally:
        hook.remove()
    reference = grads["combined"]
    rows = tuple(
        BackwardRow(backward=b, passes=counts[b], seconds=statistics.median(times[b]), peak_bytes=memory[b][0],
                    saved_bytes=memory[b][1], held_bytes=memory[b][2],
                    max_abs_grad_diff=float((grads[b] - reference).abs().max()))
        for b in BACKWARDS)
    return BackwardComparison(rows=rows, device=str(device), width=content_img.shape[-1],
                              height=content_img.shape[-2], evaluations=evaluations,
                              memory_method=CUDA_MEMORY if device.type == "cuda" else TRACKED_MEMORY,
                              max_abs_grad=float(reference.abs().max()))


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def _timed(work: Callable[[], None], device: torch.device) -> float:
    _synchronize(device)
    start = time.perf_counter()
    work()
    _synchronize(device)
    return time.perf_counter() - start


def _measure_memory(work: Callable[[], None], device: torch.device, kept: set[int]) -> tuple[int, int, int]:
    """Run ``work`` once; return (peak bytes, bytes saved for backward, bytes still held after).

    ``kept``: addresses of storages that live anyway (weights, targets), left out of the saved bytes.
    """
    with _saved_bytes(kept) as saved:
        if device.type == "cuda":
            _synchronize(device)
            before = torch.cuda.memory_allocated(device)
            torch.cuda.reset_peak_memory_stats(device)
            work()
            _synchronize(device)
            peak = torch.cuda.max_memory_allocated(device) - before
            held = torch.cuda.memory_allocated(device) - before
        else:
            with _LiveTensorBytes() as tracker:
                work()
            peak, held = tracker.peak, tracker.current
    return peak, saved[0], held


@contextmanager
def _saved_bytes(kept: set[int]) -> Iterator[list[int]]:
    """Count the bytes of distinct storages the autograd graph saves for backward, but ``kept``."""
    total = [0]
    seen = set(kept)

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            total[0] += storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        yield total


class _LiveTensorBytes(TorchDispatchMode):
    """Follow the bytes of tensor storages made while active: current and peak.

    Every op's output storage is counted once when first seen and released when the last
    tensor seen on it is garbage collected (torch keeps a tensor's Python object as long as
    the tensor lives, in the graph too). Storages made before entering are not counted.
    """

    def __init__(self) -> None:
        super().__init__()
        self.current = 0
        self.peak = 0
        self._bytes: dict[int, int] = {}  # storage address -> bytes
        self._tensors: dict[int, set[int]] = {}  # storage address -> ids of live tensors on it

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for tensor in tree_flatten(out)[0]:
            if isinstance(tensor, torch.Tensor):
                self._see(tensor)
        return out

    def _see(self, tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        address = storage.data_ptr()
        if address == 0:
            return
        if address not in self._bytes:
            self._bytes[address] = storage.nbytes()
            self._tensors[address] = set()
            self.current += storage.nbytes()
            self.peak = max(self.peak, self.current)
        if id(tensor) not in self._tensors[address]:
            self._tensors[address].add(id(tensor))
            weakref.finalize(tensor, self._release, address, id(tensor))

    def _release(self, address: int, tensor_id: int) -> None:
        tensors = self._tensors.get(address)
        if tensors is None:
            return
        tensors.discard(tensor_id)
        if not tensors:
            del self._tensors[address]
            self.current -= self._bytes.pop(address)
