"""The Ray engine: every item a Ray task on a cluster; inputs go as bytes, results come back as bytes.

The driver reads each input file and ships it (each style once, through the object store); a task
writes the bytes into its node's temp folder under their own base names, runs the item with its
process's ``Worker`` (one network per worker process, each style's targets once) and returns the
encoded output file. The driver writes it, so no filesystem is shared. A task whose worker process or
node dies is run again (``max_retries``); results already written stay written. At most
``max_pending`` tasks are in flight (``ray.wait``), so a batch of thousands never floods the cluster,
and results stream back as they finish.

Ray is optional: ``pip install 'style_transfer[ray]'``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import ImageError, StyleTransferError, WeightsError, first_line
from ..io.files import open_regular
from .engine import Engine
from .items import Item
from .worker import ItemProgress, Made, ProgressCallback, describe, events_of, local_copies, process_worker, throttled

HEAD = "node:__internal_head__"  # a resource only the head node has
MISSING_RAY = "--engine ray needs Ray: pip install 'style_transfer[ray]'"


class RayUnavailable(StyleTransferError):
    """Ray is not installed, or no cluster answers at the address."""


def import_ray() -> Any:
    """The ``ray`` module, or ``RayUnavailable`` naming the extra."""
    try:
        import ray
    except ImportError:
        raise RayUnavailable(MISSING_RAY) from None
    return ray


class RayEngine(Engine):
    """Runs items as tasks on a Ray cluster.

    Args:
        address: the cluster (``auto``: the one started on this machine with ``ray start``, or
            ``RAY_ADDRESS``; ``HOST:PORT`` a head node). Not used when Ray is already initialised.
        gpus_per_item: GPUs each task asks for (a fraction shares a GPU); default 1 where the cluster
            has GPUs, else 0 (CPUs only).
        cpus_per_item: CPUs each task asks for.
        max_retries: runs of a task after its worker process or node died.
        max_pending: tasks in flight at most; default twice the items the cluster can run at once.
        pid_dir: each task writes an empty file ``PID-OUTPUTNAME`` here when it starts (to watch the
            workers; the tests kill one by it). Only for a folder the tasks' machine sees.
    """

    def __init__(self, address: str = "auto", *, gpus_per_item: float | None = None, cpus_per_item: float = 1.0,
                 max_retries: int = 3, max_pending: int | None = None, pid_dir: str | None = None) -> None:
        if gpus_per_item is not None and gpus_per_item < 0:
            raise ValueError(f"gpus_per_item must be >= 0, got {gpus_per_item!r}")
        if cpus_per_item <= 0:
            raise ValueError(f"cpus_per_item must be > 0, got {cpus_per_item!r}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries!r}")
        if max_pending is not None and max_pending < 1:
            raise ValueError(f"max_pending must be >= 1, got {max_pending!r}")
        super().__init__()
        self.address = address
        self.gpus_per_item, self.cpus_per_item = gpus_per_item, cpus_per_item
        self.max_retries, self.max_pending, self.pid_dir = max_retries, max_pending, pid_dir
        self._stopped = self._cancelled = False
        self._connected = False

    def connect(self) -> Any:
        """Join the cluster (once); the ``ray`` module."""
        ray = import_ray()
        if not ray.is_initialized():
            try:
                ray.init(address=self.address, logging_level=logging.WARNING, log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                first = first_line(exc)
                raise RayUnavailable(f"no Ray cluster at {self.address} ({first}); start one with "
                                     f"'ray start --head' or give --address HOST:PORT") from None
            self._connected = True
        return ray

    def prepare(self, items: Sequence[Item]) -> None:
        """Check the items' weights on the cluster, in one task per weights (the nodes load them, not
        the driver); the worker process that checks keeps the network for the items it runs."""
        weights = self._unchecked_weights(items)
        if not weights:
            return
        ray = self.connect()
        gpus, _ = self._slots(ray)
        check = ray.remote(_check_weights).options(num_cpus=self.cpus_per_item, num_gpus=gpus,
                                                   max_retries=self.max_retries, retry_exceptions=False)
        pending = {check.remote(w): w for w in weights}
        while pending and not self._stopped:  # Ctrl-C: the batch then starts nothing
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for ref in ready:
                name = pending.pop(ref)
                try:
                    problem = ray.get(ref, timeout=60)
                except Exception as exc:  # the worker or node died each time
                    problem = f"ray: checking the weights {name[1]}: {describe(exc)}"
                if problem:
                    raise WeightsError(problem)
                self._checked_weights.add(name)

    def _slots(self, ray: Any) -> tuple[float, float]:
        """GPUs per task, and how many tasks the cluster runs at once."""
        resources = ray.cluster_resources()
        gpus = self.gpus_per_item
        if gpus is None:
            gpus = 1.0 if resources.get("GPU", 0) >= 1 else 0.0
        return gpus, resources.get("GPU", 0) / gpus if gpus else resources.get("CPU", 1) / self.cpus_per_item

    def run(self, items: Sequence[Item], on_progress: ProgressCallback | None = None) -> Iterator[tuple[Item, Made]]:
        """The items as tasks. ``on_progress`` is told of the items under way: each task puts its ``ItemProgress``
        (its first and last evaluation, at most two a second between) into a Ray queue, an actor the driver
        drains between its waits."""
        ray = self.connect()
        progress = _Progress(on_progress) if on_progress is not None else None
        try:
            yield from self._run(ray, items, progress)
        finally:
            if progress is not None:
                progress.close()

    def _run(self, ray: Any, items: Sequence[Item], progress: _Progress | None) -> Iterator[tuple[Item, Made]]:
        gpus, at_once = self._slots(ray)
        limit = self.max_pending or max(2, int(2 * at_once))
        task = ray.remote(_run_item).options(num_cpus=self.cpus_per_item, num_gpus=gpus,
                                             max_retries=self.max_retries, retry_exceptions=False)
        styles: dict[str, Any] = {}  # each style file's bytes, put in the object store once
        pending: dict[Any, Item] = {}
        waiting = list(items)
        while waiting or pending:
            while waiting and len(pending) < limit and not self._stopped:
                item = waiting.pop(0)
                try:
                    content = _read(item.content)
                    refs = [styles[s] if s in styles else styles.setdefault(s, ray.put(_read(s)))
                            for s in item.styles]
                except ImageError as exc:
                    yield item, Made("failed", error=str(exc))
                    continue
                pending[task.remote(item, content, *refs, pid_dir=self.pid_dir,
                                    progress=None if progress is None else progress.queue)] = item
            if not pending:
                return
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            if progress is not None:
                progress.drain()
            for ref in ready:
                item = pending.pop(ref)
                try:
                    made = ray.get(ref, timeout=60)
                except Exception as exc:  # retries used up (the node died each time), or cancelled
                    made = Made("interrupted" if self._cancelled else "failed", error=f"ray: {describe(exc)}")
                yield item, made
            if self._cancelled:
                for ref, item in list(pending.items()):
                    ray.cancel(ref, force=True)
                    yield item, Made("interrupted")
                return

    def stop(self) -> None:
        self._stopped = True

    def cancel(self) -> None:
        self._stopped = self._cancelled = True

    def close(self) -> None:
        if self._connected:
            import_ray().shutdown()
            self._connected = False


class _Progress:
    """The tasks' ``ItemProgress`` on their way to the driver: a Ray queue, an actor that takes no CPU slot, on the
    head node (a worker node may die under a batch: its tasks run again, and the queue must outlive it; the
    cluster does not outlive its head). Pinned by the head's own resource, not by the driver's node: where two
    nodes share an address the driver's node id can name either."""

    def __init__(self, on_progress: ProgressCallback) -> None:
        from ray.util.queue import Queue

        self.on_progress = on_progress
        self.queue = Queue(actor_options={"num_cpus": 0, "max_restarts": -1, "resources": {HEAD: 0.001}})

    def drain(self) -> None:
        """Hand on what the tasks told so far, without waiting for more."""
        try:
            told = self.queue.get_nowait_batch(self.queue.qsize())
        except Exception:  # the queue's actor is gone: progress is a display, the batch goes on
            return
        for each in told:
            self.on_progress(each)

    def close(self) -> None:
        try:
            self.queue.shutdown()
        except Exception:  # already gone with the cluster
            pass


def _told(queue: Any) -> ProgressCallback:
    """A task's ``on_progress``: into the driver's queue without waiting for it (the actor's calls from one task
    arrive in order), never failing or slowing the item (progress is only a display: a queue that is gone
    loses a few lines, where a waiting put held the item about two seconds an evaluation)."""

    def put(progress: ItemProgress) -> None:
        try:
            queue.actor.put_nowait.remote(progress)
        except Exception:
            pass

    return throttled(put)


def _read(path: str) -> bytes:
    with open_regular(path, ImageError) as handle:
        try:
            return handle.read()
        except OSError as exc:
            raise ImageError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def _check_weights(spec: tuple) -> str | None:
    """The check task: this process's worker loads the network ``spec`` (``worker.network_spec``) and keeps it;
    the error's line, or None."""
    try:
        process_worker().prepare(tuple(spec))
    except StyleTransferError as exc:
        return describe(exc)
    return None


def _run_item(item: Item, content: bytes, *styles: bytes, pid_dir: str | None = None, progress: Any = None) -> Made:
    """The task: the inputs as local files named as the driver's, then this process's worker runs the item
    (telling ``progress``, the driver's Ray queue, of its evaluations)."""
    if pid_dir:
        open(os.path.join(pid_dir, f"{os.getpid()}-{item.name}"), "w").close()
    import ray

    if item.config.threads:  # a Ray worker process is ours to set (Ray gives it OMP_NUM_THREADS=num_cpus)
        import torch

        torch.set_num_threads(item.config.threads)
    local = local_copies({item.content: content, **dict(zip(item.styles, styles))})
    made = process_worker().make(item, content=local[item.content], styles=tuple(local[s] for s in item.styles),
                                 on_event=None if progress is None else events_of(item, _told(progress)))
    made.worker = f"{made.worker} node {ray.get_runtime_context().get_node_id()[:12]}"
    return made


__all__ = ["MISSING_RAY", "RayEngine", "RayUnavailable", "import_ray"]
