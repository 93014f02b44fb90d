"""The ``stylize-batch`` command: many contents in one or more styles, resumable, on one machine or Ray.

Owns the progress bar, Ctrl-C, the summary and the exit codes; the work is ``engine.run_batch``.
Nothing here imports torch or ray at module level (``--help`` and option errors answer at once).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

import click

from .. import __version__
from ..io.files import check_not_an_input, check_writable, shown
from ..config.text import as_options
from ..cli.options import (OneLineCommand, ProgressLines, UsageFault, check_input_paths, config_from_options, note,
                           own_process, setting_inputs, settings_options, unexpected_error)
from .items import OUTPUT_EXTENSIONS, check_outputs, cross_items, expand_contents, read_manifest

EXIT_FAILED, EXIT_INTERRUPTED = 1, 130
# Outcome statuses (report.STATUSES): the bar counts the finished; a stop leaves the others short of their end.
FINISHED, UNFINISHED = ("done", "skipped", "failed"), ("interrupted", "not-run")


SECTIONS = {**{name: "Batch" for name in ("styles", "output_dir", "manifest", "ext", "force", "report_path")},
            **{name: "Engine" for name in ("engine", "workers", "address", "gpus_per_item", "cpus_per_item",
                                           "max_retries", "max_pending")}}
SHORT = {
    "styles": "A style image; repeat for several (every content in every style).",
    "output_dir": "Folder for the results: {content}__{style}.{ext}.",
    "manifest": "CSV or JSONL of items: content, style, output, any option per row.",
    "ext": "Format of the results (each holds its provenance record).",
    "force": "Make every item again, even those already done with a matching record.",
    "engine": "local (this machine) or ray (tasks on a Ray cluster).",
    "workers": "local: worker processes (one per GPU on a multi-GPU machine).",
    "address": "ray: the cluster, auto or HOST:PORT.",
    "gpus_per_item": "ray: GPUs per task (default: 1 where the cluster has GPUs).",
    "max_retries": "ray: runs of an item again after its worker or node died.",
    "max_pending": "ray: tasks in flight at most (default: twice the cluster's slots).",
    "report_path": "The JSON Lines report, appended (default: batch.jsonl in -o DIR).",
    "quiet": "No progress bar or summary counts (failures are still named).",
    "debug": "On an unexpected error, print the traceback too.",
}


@click.command(cls=OneLineCommand, sections=SECTIONS, short_help_of=SHORT)
@click.argument("contents", nargs=-1, metavar="CONTENTS...", type=click.Path(path_type=str))
@click.option("--style", "styles", multiple=True, type=click.Path(path_type=str),
              help="A style image (repeat for several: every content is made in every style). Manifest rows "
                   "without a style use these.")
@click.option("-o", "--output-dir", "output_dir", type=click.Path(path_type=str),
              help="Folder for the results (made if missing): {content}__{style}.{ext}.")
@click.option("--manifest", type=click.Path(path_type=str), default=None,
              help="A CSV (header row) or JSONL file of items: content, style (several: ';'-separated or a "
                   "JSON list, blended), output (a name in -o DIR), and any option below by name "
                   "(size, style-weight, ...), which overrides the command line's for that row.")
@click.option("--ext", type=click.Choice(OUTPUT_EXTENSIONS), default="png", show_default=True,
              help="Format of the results (each holds its provenance record, which resuming reads).")
@click.option("--force", is_flag=True, help="Make every item again, even those whose output is already there "
                                           "with a matching record (skipped by default).")
@click.option("--engine", type=click.Choice(("local", "ray")), default="local", show_default=True,
              help="local: this machine (this process, or --workers processes). ray: tasks on a Ray cluster "
                   "(pip install 'style_transfer[ray]').")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="local: worker processes, one per GPU on a multi-GPU machine (each loads the network once).")
@click.option("--address", default="auto", show_default=True,
              help="ray: the cluster: auto (started with 'ray start' here, or RAY_ADDRESS) or HOST:PORT.")
@click.option("--gpus-per-item", type=click.FloatRange(min=0), default=None,
              help="ray: GPUs per task (a fraction shares one). Default: 1 where the cluster has GPUs, else 0.")
@click.option("--cpus-per-item", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True,
              help="ray: CPUs per task.")
@click.option("--max-retries", type=click.IntRange(min=0), default=3, show_default=True,
              help="ray: runs of an item again after its worker process or node died.")
@click.option("--max-pending", type=click.IntRange(min=1), default=None,
              help="ray: tasks in flight at most (default: twice what the cluster runs at once).")
@click.option("--report", "report_path", type=click.Path(path_type=str), default=None,
              help="The JSON Lines report, one line per item and run, appended: each run's lines are marked with "
                   "its run and kept (default: batch.jsonl in -o DIR).")
@settings_options
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or summary counts (failures are still named).")
@click.option("--debug", is_flag=True, help="On an unexpected error, print the traceback.")
@click.version_option(__version__, "--version", prog_name="stylize-batch")
def main(contents: tuple[str, ...], styles: tuple[str, ...], output_dir: str | None, manifest: str | None,
         ext: str, force: bool, engine: str, workers: int, address: str, gpus_per_item: float | None,
         cpus_per_item: float, max_retries: int, max_pending: int | None, report_path: str | None, quiet: bool,
         debug: bool, **settings: Any) -> None:
    """Stylise every CONTENTS image (files, folders, globs) in every --style, or a --manifest's items.

    Results go to -o DIR as {content}__{style}.{ext}; inputs with the same name get their
    folders' names in front (a-cat, b-cat). Each is written atomically with its provenance
    record; running the batch again skips items whose result is there with the same settings
    and inputs (--force redoes them). An item that fails is reported and the batch goes on;
    DIR/batch.jsonl gets a line per item of every run. Weights that cannot be had fail the batch once, before
    the first item. Ctrl-C stops after the items under way (a second one
    stops those too). Exit codes: 0 all made or skipped, 1 some failed, 2 bad option or input path,
    130 interrupted.
    """
    raw = dict(settings)
    config = config_from_options(settings)
    if output_dir is None:
        raise UsageFault("Missing option '-o' / '--output-dir'")
    if not contents and manifest is None:
        raise UsageFault("Missing argument 'CONTENTS...' (or --manifest)")
    if engine == "local" and any(v is not None for v in (gpus_per_item, max_pending)):
        raise UsageFault("--gpus-per-item and --max-pending are for --engine ray")
    try:
        check_input_paths([*(("--style", style) for style in styles), *setting_inputs(config)])
        items = []
        if contents:
            if not styles:
                raise UsageFault("Missing option '--style' (one or more)")
            items += cross_items(expand_contents(contents), styles, output_dir, config, ext)
        if manifest is not None:
            items += read_manifest(manifest, styles=styles, out_dir=output_dir, options=raw, ext=ext)
        check_outputs(items)
        if os.path.exists(output_dir) and not os.path.isdir(output_dir):
            raise ValueError(f"-o {shown(output_dir)}: is not a folder")
        made_folder = not os.path.exists(output_dir)
        os.makedirs(output_dir, exist_ok=True)
        report_path = report_path or os.path.join(output_dir, "batch.jsonl")
        check_writable(report_path)
        check_not_an_input([("--report", report_path)], [("an input", path) for item in items
                                                          for path in (item.content, *item.styles)])
    except (ValueError, OSError) as exc:
        raise UsageFault(str(exc) if not isinstance(exc, OSError) else f"-o {shown(output_dir)}: {exc.strerror}") from None

    from ..errors import StyleTransferError
    from .engine import run_batch
    from .report import Report, failure_line, summary

    try:
        runner = _engine(engine, workers, address, gpus_per_item, cpus_per_item, max_retries, max_pending)
        # A size that cannot fit is refused now, before the report and the bar (run_batch checks again,
        # with the items it will really run: those not done already).
        runner.check([item for item in items if force or not os.path.exists(item.output)])
    except StyleTransferError as exc:
        _remove_if_empty(output_dir, made_folder)
        raise click.ClickException(str(exc)) from None
    if engine == "local" and workers == 1:
        own_process(config.threads)
    outcomes = []
    bar = None
    stops = _Stops(runner)
    try:
        with stops:
            try:  # weights that cannot be had fail the batch here, once, before any item or report
                items = _settle_weights(items, quiet)
                runner.prepare(items)
            except StyleTransferError:
                _remove_if_empty(output_dir, made_folder)
                raise
            bar = None if quiet else _ItemsBar(len(items))
            with Report(report_path) as report:  # the report appears once Ctrl-C is ours to handle
                for outcome in run_batch(items, runner, force=force, report=report,
                                         on_progress=bar.progress if bar is not None else None):
                    outcomes.append(outcome)
                    if outcome.status == "failed":  # named once, as it happens; settings as flags (--size 160)
                        if bar is not None:
                            bar.write(as_options(failure_line(outcome)))
                        else:
                            click.echo(as_options(failure_line(outcome)), err=True)
                    if bar is not None:
                        bar.ended(outcome, outcomes)
    except StyleTransferError as exc:  # the weights cannot be had, the cluster could not be reached
        raise click.ClickException(str(exc)) from None
    except Exception as exc:
        unexpected_error(exc, debug)
    finally:
        if bar is not None:
            bar.close()
        runner.close()
    if not quiet:
        click.echo(f"{summary(outcomes)}; report: {shown(report_path)}", err=True)
    if stops.count:
        click.echo("interrupted: items under way were finished, the rest not started (run again to continue)"
                   if stops.count == 1 else "interrupted: items under way were stopped and not written", err=True)
        raise SystemExit(EXIT_INTERRUPTED)
    if any(o.status == "failed" for o in outcomes):
        raise SystemExit(EXIT_FAILED)


def _engine(name: str, workers: int, address: str, gpus_per_item: float | None, cpus_per_item: float,
            max_retries: int, max_pending: int | None) -> Any:
    if name == "ray":
        from .ray import RayEngine, import_ray

        import_ray()  # a missing extra is named before anything runs
        return RayEngine(address, gpus_per_item=gpus_per_item, cpus_per_item=cpus_per_item,
                         max_retries=max_retries, max_pending=max_pending)
    from .local import LocalEngine

    return LocalEngine(workers)


def _remove_if_empty(folder: str, made: bool) -> None:
    """Take back the -o folder this command made, when a failure before the first item left it empty."""
    if made:
        try:
            os.rmdir(folder)
        except OSError:  # not empty after all (something else wrote there): left alone
            pass


class _ItemsBar:
    """The items bar: items finished (done, skipped or failed) of all; after them, the items under way (each one's
    evaluations and the time left at its pace), then the counts. Where stderr is no terminal, the same as plain lines
    now and then (``ProgressLines``)."""

    REFRESH_S = 0.5  # the items under way are redrawn at most this often (and at each item's first news)

    def __init__(self, total: int) -> None:
        self.lines = ProgressLines(total, "items") if ProgressLines.wanted() else None
        self.bar: Any = None
        if self.lines is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="item", file=sys.stderr, dynamic_ncols=True,
                            bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} items [{elapsed}<{remaining}{postfix}]")
        self.under_way: dict[str, Any] = {}  # output -> its latest worker.ItemProgress
        self.done: set[str] = set()  # outputs of the items ended: late news of them is dropped
        self.finished = 0  # the count the bar shows
        self.counts = ""
        self._drawn_at = float("-inf")

    def progress(self, told: Any) -> None:
        """``run_batch``'s on_progress: an item under way made an evaluation."""
        if told.output in self.done:
            return  # a worker process's news that came after its item's outcome
        new = told.output not in self.under_way
        self.under_way[told.output] = told
        if self.lines is not None:
            self.lines.update(self.finished, self._text())
            return
        now = time.monotonic()
        if new or now - self._drawn_at >= self.REFRESH_S:
            self._drawn_at = now
            self._postfix(refresh=True)

    def ended(self, outcome: Any, outcomes: list[Any]) -> None:
        self.done.add(outcome.item.output)
        self.under_way.pop(outcome.item.output, None)
        self.counts = _counts_text(outcomes)
        # An item a stop left unstarted or cut short ends too, but is not counted: a stopped batch's bar ends short.
        finished = outcome.status in FINISHED
        self.finished += finished
        if self.lines is not None:
            self.lines.update(self.finished, self._text())
            return
        self._postfix(refresh=not finished)  # before the count: the redraw shows the counts with it
        if finished:
            self.bar.update(1)

    def write(self, line: str) -> None:
        if self.lines is not None:
            click.echo(line, err=True)
        else:
            self.bar.write(line, file=sys.stderr)

    def close(self) -> None:
        if self.lines is not None:
            self.lines.close()
        else:
            self.bar.close()

    def _postfix(self, refresh: bool) -> None:
        self.bar.set_postfix_str(self._text(), refresh=refresh)

    def _text(self) -> str:
        """The items under way, then the counts skipped and failed."""
        from .report import progress_text

        return "; ".join(t for t in (progress_text(self.under_way.values()), self.counts) if t)


def _counts_text(outcomes: list[Any]) -> str:
    """The counts of the items that ended other than done (``3 skipped, 1 failed, 2 not-run``), those there are."""
    found = {status: sum(o.status == status for o in outcomes) for status in ("skipped", "failed", *UNFINISHED)}
    return ", ".join(f"{n} {status}" for status, n in found.items() if n)


class _Stops:
    """Ctrl-C (and SIGTERM): the first stops starting items, the second stops those under way."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.count = 0
        self._before: dict[int, Any] = {}

    def __enter__(self) -> _Stops:
        for number in (signal.SIGINT, signal.SIGTERM):
            try:
                self._before[number] = signal.signal(number, self._handle)
            except ValueError:  # not the main thread (a test runner's): no handlers
                pass
        return self

    def __exit__(self, *exc: object) -> None:
        for number, handler in self._before.items():
            signal.signal(number, handler)

    def _handle(self, number: int, frame: object) -> None:
        self.count += 1
        if self.count == 1:
            self.engine.stop()
        else:
            self.engine.cancel()


def _settle_weights(items: list[Any], quiet: bool) -> list[Any]:
    """The items with the weights their runs will load: torchvision's VGG19 where it can be had, else the original
    VGG19 where installed (``networks.download``; said once on stderr, not with --quiet: each record names them)."""
    import dataclasses

    from ..networks.download import original_config, resolve_weights

    fell_back = False
    settled = []
    for item in items:
        config = item.config
        if config.weights == "imagenet" and config.model == "vgg19":
            config = original_config(config) if fell_back else resolve_weights(
                config, on_notice=None if quiet else note)
            fell_back = config is not item.config
        settled.append(dataclasses.replace(item, config=config))
    return settled


if __name__ == "__main__":  # python -m style_transfer.batch.cli (after every definition it calls)
    main(prog_name="stylize-batch")
