"""Many pictures at once: items from folders, globs and manifests, run on an engine, each output once.

    from style_transfer.batch.engine import run_batch
    from style_transfer.batch.items import cross_items
    from style_transfer.batch.local import LocalEngine
    items = cross_items(["a.jpg", "b.jpg"], ["wave.jpg"], "out", StyleConfig(size=256))
    for outcome in run_batch(items, LocalEngine()):   # each item's Outcome as it finishes
        print(outcome.item.output, outcome.status, outcome.error)

Engines: ``local.LocalEngine`` (this process, or one process per GPU) and ``ray.RayEngine`` (tasks on a
Ray cluster; ``pip install 'style_transfer[ray]'``). Importing this package imports neither torch nor ray.
"""

