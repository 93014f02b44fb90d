"""The engine interface and the driver: skip what is done, run the rest on an engine, write each result.

``run_batch(items, engine)`` is the library's batch: it yields each item's ``Outcome`` as it finishes.
An engine (``local.LocalEngine``, ``ray.RayEngine``) only runs items and hands back the encoded
output files; the driver alone writes them (atomically, each with its provenance record) and the
report, so no engine needs a filesystem shared with the driver.
"""

from __future__ import annotations

import abc
import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

from ..config.choices import INITS
from ..config.weights import WEIGHTS_WORDS
from ..io import provenance
from ..io.metadata import read_record, record_text
from ..errors import ImageError, OutputError, StyleTransferError, first_line
from ..io.files import atomic_output
from .items import Item, check_outputs
from .report import Outcome, Report
from .worker import Made, NetworkSpec, ProgressCallback, network_spec

# Settings that do not take part in the resume check: where and with how many threads an item ran.
UNCHECKED_SETTINGS = ("device", "threads")
COMPLETE = ("done", "converged", "plateau")  # RunResult.stopped of a finished output


class Engine(abc.ABC):
    """Runs items somewhere and yields ``(item, Made)`` as each finishes, in any order."""

    def __init__(self) -> None:
        self._checked_weights: set[NetworkSpec] = set()

    def prepare(self, items: Sequence[Item]) -> None:
        """Check, before the first item starts, that the weights every item names can be had.

        Weights that cannot be had (a missing or corrupt file, a refused download) would fail every
        item the same way; they fail the batch once, here. Each weights is checked once per engine.
        This one loads them in this process and lets them go (its workers load their own); the local
        engine keeps them for its worker, the Ray engine checks them on the cluster.

        Raises:
            WeightsError: one line naming the weights and the fix.
        """
        for spec in self._unchecked_weights(items):
            from ..networks.vgg import load_network

            model, weights, preprocess = spec
            load_network(model, weights, preprocess=preprocess)
            self._checked_weights.add(spec)

    def _unchecked_weights(self, items: Sequence[Item]) -> list[NetworkSpec]:
        """The networks (``worker.network_spec``) the items name that this engine has not checked yet."""
        return [s for s in dict.fromkeys(network_spec(item.config) for item in items) if s not in self._checked_weights]

    @abc.abstractmethod
    def run(self, items: Sequence[Item], on_progress: ProgressCallback | None = None) -> Iterator[tuple[Item, Made]]:
        """Run ``items``; an item not yielded when the iterator ends was never started (``stop``).

        ``on_progress`` (in the caller's thread, between the items it yields) is told of the items under way as
        their evaluations go (``worker.ItemProgress``): every evaluation in this process, at most two a second per
        item from other processes and from Ray tasks.
        """

    @abc.abstractmethod
    def stop(self) -> None:
        """Start no more items; those under way finish and are yielded (the first Ctrl-C)."""

    @abc.abstractmethod
    def cancel(self) -> None:
        """Also end the items under way; they come back ``interrupted`` (the second Ctrl-C)."""

    def check(self, items: Sequence[Item]) -> None:
        """Refuse, before the first item runs, items that cannot fit where this engine runs them.

        Raises:
            ResourceError: naming the item (``run.fits.check_fits``'s message). The default checks nothing
                (where the machines are not known here, each run still refuses its own size at once).
        """

    def close(self) -> None:
        """Release what the engine holds (processes, a cluster connection)."""


def run_batch(items: Sequence[Item], engine: Engine, *, force: bool = False,
              report: Report | None = None, on_progress: ProgressCallback | None = None) -> Iterator[Outcome]:
    """Run a batch: yield every item's ``Outcome`` as it ends, skipped items first; ``on_progress`` is told of the
    items under way, after their evaluations, where the engine can tell (``Engine.run``).

    An item whose output exists with a matching record (``is_done``) is skipped unless ``force``.
    Each result is written atomically by this function; an item's failure is an outcome, never an
    exception. Before anything is yielded, ``engine.prepare`` checks the weights of the items to make:
    weights that cannot be had fail the batch once, not every item. Items the engine never started
    (it was stopped) end as ``not-run``.

    Raises:
        ValueError: two items write the same file, or an output is an input (before anything runs).
        ResourceError: an item to run cannot fit in the memory of the engine's machine (``Engine.check``,
            before anything runs).
        WeightsError: the weights cannot be had (before anything runs or is reported).
    """
    check_outputs(items)
    hashes = _Hashes()
    done = [not force and is_done(item, hashes) for item in items]
    todo = [item for item, skip in zip(items, done) if not skip]
    engine.check(todo)
    if todo:
        engine.prepare(todo)
    for item, skip in zip(items, done):
        if skip:
            yield _reported(Outcome(item, "skipped"), report)
    ended: set[int] = set()
    by_id = {id(item): item for item in todo}
    runs = engine.run(todo) if on_progress is None else engine.run(todo, on_progress=on_progress)
    for item, made in runs:
        ended.add(id(item))
        yield _reported(_write(by_id.get(id(item), item), made), report)
    for item in todo:
        if id(item) not in ended:
            yield _reported(Outcome(item, "not-run"), report)


def _reported(outcome: Outcome, report: Report | None) -> Outcome:
    # A file at the output of an item not made now is not its result: an earlier run's.
    outcome.stale = outcome.status not in ("done", "skipped") and os.path.lexists(outcome.item.output)
    if report is not None:
        report.add(outcome)
    return outcome


def _write(item: Item, made: Made) -> Outcome:
    outcome = Outcome(item, made.status, made.seconds, made.evaluations, dict(made.losses), made.error, made.worker)
    if made.status != "done":
        return outcome
    try:
        if made.data is None:
            raise OutputError("the worker sent no image")
        folder = os.path.dirname(os.path.abspath(item.output))
        os.makedirs(folder, exist_ok=True)
        with atomic_output(item.output, OutputError) as handle:
            handle.write(made.data)
    except (OSError, StyleTransferError) as exc:
        outcome.status, outcome.error = "failed", first_line(exc)
    return outcome


class _Hashes:
    """SHA-256 of input files, once per file while its size and mtime stay the same."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, int, int], str] = {}

    def __call__(self, path: str) -> str | None:
        try:
            info = os.stat(path)
            key = (os.path.realpath(path), info.st_size, info.st_mtime_ns)
            if key not in self._known:
                self._known[key] = provenance.sha256_file(path)
            return self._known[key]
        except (OSError, StyleTransferError):
            return None


def expected_settings(config: Any) -> dict[str, Any]:
    """The settings as a record of this config holds them (file paths as base names), minus the unchecked."""
    values = provenance.settings_dict(config)
    for name, words in (("init", INITS), ("weights", WEIGHTS_WORDS)):
        if isinstance(values.get(name), str) and values[name] not in words:
            values[name] = provenance.base_name(values[name])
    values = json.loads(record_text(values))
    for name in UNCHECKED_SETTINGS:
        values.pop(name, None)
    return values


def is_done(item: Item, hashes: Any = None) -> bool:
    """Whether ``item.output`` holds a finished result of this item: a record with the same settings
    (device and threads aside), the same input hashes and weights, and a run that ended normally."""
    hashes = hashes or _Hashes()
    if not os.path.isfile(item.output):
        return False
    try:
        record = read_record(item.output)
    except ImageError:
        return False
    if not record or record.get("stopped") not in COMPLETE:
        return False
    theirs = dict(record.get("settings") or {})
    for name in UNCHECKED_SETTINGS:
        theirs.pop(name, None)
    if theirs != expected_settings(item.config):
        return False
    inputs = record.get("inputs") or {}
    if (inputs.get("content") or {}).get("sha256") != hashes(item.content) or hashes(item.content) is None:
        return False
    if [s.get("sha256") for s in inputs.get("styles") or []] != [hashes(s) for s in item.styles]:
        return False
    init = item.config.init
    if init not in INITS and (inputs.get("init") or {}).get("sha256") != hashes(init):
        return False
    try:
        return record.get("weights") == provenance.weights_entry(item.config.weights, model=item.config.model)
    except StyleTransferError:
        return False


__all__ = ["Engine", "expected_settings", "is_done", "run_batch"]
