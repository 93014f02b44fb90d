"""The local engine: items run in this process (one worker), or in one process per GPU (``workers``)."""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

from ..io.files import shown
from .engine import Engine
from .items import Item
from .worker import Made, ProgressCallback, Worker, events_of, network_spec, throttled


class LocalEngine(Engine):
    """Runs items on this machine.

    Args:
        workers: 1 runs every item in this process, one after another (one network, targets once).
            More starts that many worker processes, each with its own network and target cache,
            each on its own device of ``devices``.
        devices: one device per worker process (default: ``cuda:0`` .. ``cuda:N-1`` when the machine has
            that many GPUs, else each item's own setting); used for items whose device is ``auto``.
    """

    def __init__(self, workers: int = 1, devices: Sequence[str] | None = None) -> None:
        if not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
        if devices is not None and len(devices) != workers:
            raise ValueError(f"{len(devices)} device(s) for {workers} worker(s)")
        super().__init__()
        self.workers = workers
        self.devices = list(devices) if devices is not None else None
        self.worker = Worker(self.devices[0] if self.devices and workers == 1 else None)
        self._stopped = threading.Event()
        self._cancelled = False
        self._pool: ProcessPoolExecutor | None = None

    def prepare(self, items: Sequence[Item]) -> None:
        """Load the items' weights now (one worker: into it, for its items; several: a check here)."""
        if self.workers > 1:
            super().prepare(items)
            return
        for spec in dict.fromkeys(network_spec(item.config) for item in items):
            self.worker.prepare(spec)

    def run(self, items: Sequence[Item], on_progress: ProgressCallback | None = None) -> Iterator[tuple[Item, Made]]:
        if self.workers == 1:
            for item in items:
                if self._stopped.is_set():
                    return
                yield item, self.worker.make(item, on_event=events_of(item, on_progress))
        else:
            yield from self._run_processes(items, on_progress)

    def _run_processes(self, items: Sequence[Item],
                       on_progress: ProgressCallback | None = None) -> Iterator[tuple[Item, Made]]:
        import multiprocessing

        context = multiprocessing.get_context("spawn")  # no fork of a process that holds torch's threads
        devices = self.devices or _default_devices(self.workers)
        queue = context.Queue()
        for device in devices:
            queue.put(device)
        progress = context.Queue() if on_progress is not None else None  # ItemProgress from the workers
        threads = max(1, (os.cpu_count() or 1) // self.workers)
        self._pool = ProcessPoolExecutor(self.workers, mp_context=context, initializer=_start_process,
                                         initargs=(queue, threads, progress))
        pending: dict[Future, Item] = {}
        waiting = list(items)
        try:
            while waiting or pending:
                while waiting and len(pending) < self.workers and not self._stopped.is_set():
                    item = waiting.pop(0)
                    pending[self._pool.submit(_make, item)] = item
                if not pending:
                    return
                done, _ = wait(list(pending), timeout=0.5 if progress is not None else 1.0,
                               return_when=FIRST_COMPLETED)
                if progress is not None and on_progress is not None:
                    _drain(progress, on_progress)
                for future in done:
                    item = pending.pop(future)
                    try:
                        made = future.result()
                    except Exception as exc:  # the process died (killed, out of memory)
                        made = Made("interrupted" if self._cancelled else "failed",
                                    error=f"worker process failed: {type(exc).__name__}: {exc}")
                    yield item, made
                if self._cancelled:
                    for item in pending.values():
                        yield item, Made("interrupted")
                    return
        finally:
            self._shutdown()

    def check(self, items: Sequence[Item]) -> None:
        """Each item's size against this machine's free memory (``run.fits.check_fits``: headers only), before the
        first item. Not with several GPU workers: a CUDA context made here would take memory from theirs."""
        from ..errors import ResourceError
        from ..run.fits import check_fits
        from ..run.prepare import resolve_device

        device = self.worker.device if self.workers == 1 else (self.devices or _default_devices(self.workers))[0]
        for item in items:
            config = item.config if device is None or item.config.device != "auto" else \
                dataclasses.replace(item.config, device=device)
            if self.workers > 1 and resolve_device(config.device).type == "cuda":
                continue
            try:
                check_fits(item.content, list(item.styles), config)
            except ResourceError as exc:
                raise ResourceError(f"{shown(item.name)}{f' ({item.origin})' if item.origin else ''}: {exc}; "
                                    f"no item was run") from None
            except (ValueError, OSError, RuntimeError):  # a bad input or setting fails in its own item
                continue

    def stop(self) -> None:
        self._stopped.set()

    def cancel(self) -> None:
        self._stopped.set()
        self._cancelled = True
        self.worker.cancel()
        if self._pool is not None:
            for process in list(getattr(self._pool, "_processes", {}).values()):
                process.terminate()  # our own worker processes, by their handles

    def close(self) -> None:
        self._shutdown()

    def _shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=not self._cancelled, cancel_futures=True)
            self._pool = None


def _default_devices(count: int) -> list[Any]:
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() >= count:
        return [f"cuda:{i}" for i in range(count)]
    return [None] * count


_WORKER: Worker | None = None
_PROGRESS: Any = None  # the driver's queue for ItemProgress, None when it asked for none


def _start_process(queue: Any, threads: int, progress: Any = None) -> None:
    """A worker process: Ctrl-C is the parent's to handle (items under way finish), then its device."""
    global _WORKER, _PROGRESS
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import torch

    torch.set_num_threads(threads)
    _WORKER = Worker(queue.get())
    _PROGRESS = progress


def _make(item: Item) -> Made:
    assert _WORKER is not None  # set by _start_process
    return _WORKER.make(item, on_event=events_of(item, throttled(_PROGRESS.put) if _PROGRESS is not None else None))


def _drain(progress: Any, on_progress: ProgressCallback) -> None:
    """Hand on what the worker processes told of their items so far (without waiting for more)."""
    import queue

    while True:
        try:
            told = progress.get_nowait()
        except queue.Empty:
            return
        on_progress(told)


__all__ = ["LocalEngine"]
