"""Many pictures at once: items from folders, globs and manifests, run on an engine, each output once.

    from style_transfer.batch import LocalEngine, cross_items, run_batch
    items = cross_items(["a.jpg", "b.jpg"], ["wave.jpg"], "out", StyleConfig(size=256))
    for outcome in run_batch(items, LocalEngine()):   # each item's Outcome as it finishes
        print(outcome.item.output, outcome.status, outcome.error)

Engines: ``local.LocalEngine`` (this process, or one process per GPU) and ``ray.RayEngine`` (tasks on a
Ray cluster; ``pip install 'style_transfer[ray]'``). Importing this package imports neither torch nor ray.
"""

from __future__ import annotations

from .engine import Engine, is_done, run_batch
from .items import Item, cross_items, expand_contents, read_manifest, unique_names
from .local import LocalEngine
from .report import Outcome, Report, latest, read_report, summary
from .worker import Made, TargetCache, Worker

__all__ = ["Engine", "Item", "LocalEngine", "Made", "Outcome", "Report", "TargetCache", "Worker", "cross_items",
           "expand_contents", "is_done", "latest", "read_manifest", "read_report", "run_batch", "summary",
           "unique_names"]
