"""What runs the items, in any engine: one network per worker, each style's Gram targets computed once.

A ``Worker`` lives as long as its process (the command's own, a local worker process, a Ray worker)
and makes items one after another: it loads VGG19 once per (weights, device) and keeps a
``TargetCache`` of Gram targets keyed by ``run.inputs.style_targets_key`` (the style files' hashes, the
layers, the working size, the style scale, ...), so each style's targets are computed once and reused
for every content. It returns the encoded output file (bytes, with its provenance record); the
driver (``engine.run_batch``) writes it.
"""

from __future__ import annotations

import io
import os
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import NonFiniteLoss, RunStopped, StyleTransferError
from .items import Item


@dataclass
class Made:
    """What a worker made of one item: the output file's bytes, or the error."""

    status: str  # "done", "failed" or "interrupted" (cancelled while under way: nothing to write)
    data: bytes | None = None  # the encoded output file, provenance record included
    seconds: float = 0.0  # wall time of the item in the worker (loading the model included, the first time)
    evaluations: int = 0
    losses: dict[str, float] = field(default_factory=dict)
    stopped: str | None = None  # RunResult.stopped
    error: str | None = None  # one line
    worker: str = ""  # "pid@host" of the process that made it


@dataclass(frozen=True)
class ItemProgress:
    """An item under way, after one of its evaluations: what a batch's display shows of it."""

    output: str  # the item's output path, which names it in its batch (engine.run_batch refuses two alike)
    step: int  # evaluations done (StepInfo.step)
    total: int  # evaluations planned (StepInfo.total)
    elapsed: float  # seconds of optimisation so far (the network's loading and the model's building aside)

    @classmethod
    def of(cls, item: Item, info: Any) -> ItemProgress:
        """From a run's ``StepInfo`` (small and picklable: it crosses from worker processes)."""
        return cls(item.output, info.step, info.total, info.elapsed)

    @property
    def seconds_left(self) -> float:
        """At the pace so far, the seconds the evaluations left take."""
        return self.elapsed / self.step * max(0, self.total - self.step) if self.step else 0.0


ProgressCallback = Callable[[ItemProgress], None]


def throttled(callback: ProgressCallback, every: float = 0.5) -> ProgressCallback:
    """``callback`` for an item's first and last evaluation and at most every ``every`` seconds between (what
    crosses a process's queue stays a few lines a second however fast the evaluations go)."""
    last = [float("-inf")]

    def call(progress: ItemProgress) -> None:
        now = time.monotonic()
        if progress.step <= 1 or progress.step >= progress.total or now - last[0] >= every:
            last[0] = now
            callback(progress)

    return call


def events_of(item: Item, on_progress: ProgressCallback | None) -> Callable[[Any], None] | None:
    """The run's ``on_event`` that tells ``on_progress`` of ``item`` after each evaluation (None: nothing to tell)."""
    if on_progress is None:
        return None

    def on_event(info: Any) -> None:
        on_progress(ItemProgress.of(item, info))

    return on_event


class TargetCache(dict):
    """Gram targets shared by the runs of a worker (``Run(style_targets=...)``), counting its use.

    ``computed``: style target sets computed (cache misses); ``reused``: runs that found theirs.
    """

    def __init__(self) -> None:
        super().__init__()
        self.computed = 0
        self.reused = 0

    def get(self, key: Any, default: Any = None) -> Any:
        found = super().get(key, default)
        if found:
            self.reused += 1
        return found

    def __setitem__(self, key: Any, value: Any) -> None:
        self.computed += 1
        super().__setitem__(key, value)


# What names an item's network: (model, weights, preprocess), as its StyleConfig says.
NetworkSpec = tuple[str, str, "str | None"]


def network_spec(config: Any) -> NetworkSpec:
    """The ``(model, weights, preprocess)`` of a ``StyleConfig``: items with the same share one network."""
    return (config.model, config.weights, config.preprocess)


class Worker:
    """Runs items one at a time with one network per (model, weights, preprocessing, device) and cached style
    targets.

    Args:
        device: the device every item runs on when its settings say ``auto`` (a local worker process
            per GPU passes ``cuda:N``); None keeps each item's own setting.
    """

    def __init__(self, device: str | None = None) -> None:
        self.device = device
        self.networks: dict[tuple[str | None, ...], Any] = {}  # by NetworkSpec and device
        self._unplaced: dict[NetworkSpec, Any] = {}  # loaded by prepare, not yet moved to an item's device
        self.targets = TargetCache()
        self.loads = 0  # networks loaded (one per weights and device)
        self._run: Any = None
        self._lock = threading.Lock()
        self._cancelled = False

    def prepare(self, spec: NetworkSpec) -> None:
        """Load the network of ``spec`` (``network_spec``) now, before the first item that needs it (no-op
        when loaded).

        Raises:
            WeightsError: it cannot be had (the batch fails once instead of every item).
        """
        if spec not in self._unplaced and not any(key[:-1] == spec for key in self.networks):
            self._unplaced[spec] = self._load(spec)

    def network(self, config: Any, device: Any) -> Any:
        """The network of ``config`` (model, weights, preprocessing) on ``device``, loaded once."""
        spec = network_spec(config)
        key = (*spec, str(device))
        if key not in self.networks:
            loaded = self._unplaced.pop(spec, None)
            network = loaded if loaded is not None else self._load(spec)
            network.features.to(device)
            self.networks[key] = network
        return self.networks[key]

    def _load(self, spec: NetworkSpec) -> Any:
        from ..networks.vgg import load_network

        model, weights, preprocess = spec
        network = load_network(model, weights, preprocess=preprocess)
        self.loads += 1
        return network

    def make(self, item: Item, *, content: str | None = None, styles: tuple[str, ...] | None = None,
             on_event: Callable[[Any], None] | None = None) -> Made:
        """Run ``item`` and encode its output; never raises for a bad item (the error is in ``Made``).

        Args:
            content, styles: local copies of the item's inputs to read instead (a Ray worker's).
        """
        start = time.perf_counter()
        here = f"{os.getpid()}@{os.uname().nodename}"
        config = item.config
        if self.device is not None and config.device == "auto":
            config = replace(config, device=self.device)
        try:
            from ..run.run import Run
            from ..run.prepare import resolve_device
            from ..run.rates import rates_path
            from ..config.run_options import RunOptions

            device = resolve_device(config.device)
            run = Run(content or item.content, list(styles or item.styles), config,
                      RunOptions(rates=str(rates_path())),  # this machine's book of rates, as the command keeps it
                      cnn=self.network(config, device), style_targets=self.targets)
            with self._lock:
                if self._cancelled:
                    return Made("interrupted", seconds=time.perf_counter() - start, worker=here)
                self._run = run
            try:
                result = run.execute(on_event)
            finally:
                with self._lock:
                    self._run = None
            if result.stopped in ("cancelled", "interrupted", "terminated"):
                return Made("interrupted", seconds=time.perf_counter() - start, evaluations=result.evaluations,
                            losses=result.losses, stopped=result.stopped, worker=here)
            data = encode(result.image, item.output, result.record)
            return Made("done", data, time.perf_counter() - start, result.evaluations, result.losses,
                        result.stopped, worker=here)
        except Exception as exc:  # a bad item fails alone: the batch goes on
            evaluations = exc.step if isinstance(exc, RunStopped) else 0
            return Made("failed", seconds=time.perf_counter() - start, evaluations=evaluations,
                        error=describe(exc), worker=here)

    def cancel(self) -> None:
        """Stop the item under way at its next evaluation (nothing is written for it)."""
        with self._lock:
            self._cancelled = True
            if self._run is not None:
                self._run.cancel("interrupted")


def describe(exc: BaseException) -> str:
    """An item's error in one line."""
    if isinstance(exc, NonFiniteLoss):
        return f"{exc} (at evaluation {exc.step})"
    if isinstance(exc, (StyleTransferError, ValueError, FileNotFoundError)):
        text = str(exc)
    elif isinstance(exc, MemoryError) or "out of memory" in str(exc).lower():
        text = f"out of memory ({str(exc).strip() or type(exc).__name__})"
    else:
        text = f"unexpected {type(exc).__name__}: {exc}"
    lines = text.strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def encode(image: Any, output: str, record: Mapping[str, Any]) -> bytes:
    """The output file's bytes in the format of ``output``'s extension, with the record embedded."""
    from ..io.images import output_format, pil_to_rgb
    from ..io.metadata import save_options

    fmt = output_format(output)  # the driver's folder need not exist here (a Ray node)
    if image.mode not in (("RGB", "L") if fmt == "JPEG" else ("RGB", "RGBA", "L", "P", "1")):
        image = pil_to_rgb(image)
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **save_options(record, fmt))
    return buffer.getvalue()


# The worker of this process (a Ray worker's tasks share it: one network per process, targets once).
_PROCESS_WORKER: Worker | None = None


def process_worker() -> Worker:
    global _PROCESS_WORKER
    if _PROCESS_WORKER is None:
        _PROCESS_WORKER = Worker()
    return _PROCESS_WORKER


def local_copies(inputs: Mapping[str, bytes]) -> dict[str, str]:
    """Write input files that came as bytes into this process's temp folder, named by their hash and
    their own base name (so the record names them as the driver's files); returns name -> local path."""
    import hashlib

    folder = os.path.join(tempfile.gettempdir(), f"style_transfer-batch-{os.getpid()}")
    paths = {}
    for name, data in inputs.items():
        digest = hashlib.sha256(data).hexdigest()
        path = os.path.join(folder, digest[:32], os.path.basename(name) or "input")
        if not os.path.isfile(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        paths[name] = path
    return paths


__all__ = ["ItemProgress", "Made", "ProgressCallback", "TargetCache", "Worker", "describe", "encode", "local_copies",
           "process_worker", "throttled"]
