"""The outcome of each item, the ``batch.jsonl`` report (one JSON line per item and run) and the summary."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import IO, TYPE_CHECKING, Any

from ..io.files import shown
from .items import Item

if TYPE_CHECKING:
    from .worker import ItemProgress

# done: written now; skipped: its output was there with a matching record; failed: error says why;
# interrupted: under way when the batch was cancelled (nothing written); not-run: the batch stopped first.
STATUSES = ("done", "skipped", "failed", "interrupted", "not-run")


@dataclass
class Outcome:
    """How one item ended."""

    item: Item
    status: str  # one of STATUSES
    seconds: float = 0.0  # the item's time in its worker (model loading included for a worker's first item)
    evaluations: int = 0
    losses: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    worker: str = ""  # "pid@host" of the process that made it
    # Not done, yet a file is at item.output: an earlier run's, not made from the inputs and settings as they are
    # now (an input that had a result and is now unreadable leaves its old output there). engine.run_batch sets it.
    stale: bool = False

    def as_json(self) -> dict[str, Any]:
        item = self.item
        return {"content": item.content, "styles": list(item.styles), "output": item.output,
                "status": self.status, "seconds": round(self.seconds, 3), "evaluations": self.evaluations,
                "losses": self.losses, "error": self.error, "worker": self.worker, "stale": self.stale,
                **({"origin": item.origin} if item.origin else {})}


def run_id() -> str:
    """What marks one run's lines in a report: its start, UTC to the microsecond (``2026-12-02T07:44:30.123456Z``)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Report:
    """``batch.jsonl``: one line per item, appended (and flushed) as each item ends, so a crash keeps
    what was reported. Each run of the batch appends its lines after the earlier runs' (their times and
    losses stay), each line marked with the run's ``run`` (``run_id``); ``latest`` reads the last line per item."""

    def __init__(self, path: str, run: str | None = None) -> None:
        self.path = path
        self.run = run or run_id()
        self._handle: IO[str] | None = open(path, "a", encoding="utf-8")
        if self._handle.tell() and not _ends_a_line(path):  # a run that crashed mid-line: start on a line of our own
            self._handle.write("\n")

    def add(self, outcome: Outcome) -> None:
        if self._handle is not None:
            self._handle.write(json.dumps({"run": self.run, **outcome.as_json()}, ensure_ascii=True,
                                          allow_nan=False, default=str) + "\n")
            self._handle.flush()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __enter__(self) -> Report:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ends_a_line(path: str) -> bool:
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


def read_report(path: str) -> list[dict[str, Any]]:
    """The lines of a ``batch.jsonl`` report: every run's, oldest first (each line's ``run`` says which; lines of
    reports written before runs were marked have none). ``latest`` keeps each item's last. A line cut short (a run
    killed while writing it; the next run starts on a line of its own) is left out."""
    lines = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # empty, or cut short
    return lines


def latest(lines: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each item's last line (items by their ``output``, in the order they first appear): where the batch stands."""
    last: dict[str, dict[str, Any]] = {}
    for line in lines:
        last[line["output"]] = line
    return list(last.values())


def counts(outcomes: Iterable[Outcome]) -> dict[str, int]:
    found = {status: 0 for status in STATUSES}
    for outcome in outcomes:
        found[outcome.status] += 1
    return found


def failure_line(outcome: Outcome) -> str:
    """``failed: cat__wave.png (cat.jpg in wave.jpg): <error>`` on one line; when an earlier run's output is still
    there, ``; cat__wave.png there is stale (...)`` after it."""
    item = outcome.item
    origin = f", {item.origin}" if item.origin else ""
    name = shown(os.path.basename(item.output))
    stale = f"; {name} there is stale (an earlier run's, not made from these inputs and settings)" \
        if outcome.stale else ""
    return (f"failed: {name} ({shown(os.path.basename(item.content))} in "
            f"{'+'.join(shown(os.path.basename(s)) for s in item.styles)}{origin}): {outcome.error}{stale}")


def progress_text(under_way: Iterable[ItemProgress], shown_at_most: int = 2) -> str:
    """The items under way as a display shows them: ``cat__wave.png 12/40 evaluations, 0:21 left`` (the time left at
    the pace so far), ``; ``-separated, the first ``shown_at_most`` and then ``+N more``."""
    texts = [f"{shown(os.path.basename(p.output))} {p.step}/{p.total} evaluations, {_duration(p.seconds_left)} left"
             for p in under_way]
    more = f"; +{len(texts) - shown_at_most} more" if len(texts) > shown_at_most else ""
    return "; ".join(texts[:shown_at_most]) + more


def _duration(seconds: float) -> str:
    """``0:21``, ``5:38``, ``1:05:38``: minutes and seconds, hours when there are any."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def summary(outcomes: list[Outcome]) -> str:
    """The closing line: the counts (``3 done, 1 skipped, 1 failed``); each failure has its own
    ``failure_line``, shown once, as it happens."""
    found = counts(outcomes)
    return ", ".join(f"{n} {status}" for status, n in found.items() if n or status in ("done", "failed"))


__all__ = ["Outcome", "Report", "STATUSES", "counts", "failure_line", "latest", "progress_text", "read_report",
           "run_id", "summary"]
