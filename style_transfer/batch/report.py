"""The outcome of each item, the ``batch.jsonl`` report (one JSON line per item) and the summary."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO, Any

from ..io.files import shown
from .items import Item

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

    def as_json(self) -> dict[str, Any]:
        item = self.item
        return {"content": item.content, "styles": list(item.styles), "output": item.output,
                "status": self.status, "seconds": round(self.seconds, 3), "evaluations": self.evaluations,
                "losses": self.losses, "error": self.error, "worker": self.worker,
                **({"origin": item.origin} if item.origin else {})}


class Report:
    """``batch.jsonl``: one line per item, appended (and flushed) as each item ends, so a crash keeps
    what was reported. A new batch starts the file anew."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._handle: IO[str] | None = open(path, "w", encoding="utf-8")

    def add(self, outcome: Outcome) -> None:
        if self._handle is not None:
            self._handle.write(json.dumps(outcome.as_json(), ensure_ascii=True, allow_nan=False,
                                          default=str) + "\n")
            self._handle.flush()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __enter__(self) -> Report:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_report(path: str) -> list[dict[str, Any]]:
    """The lines of a ``batch.jsonl`` report."""
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def counts(outcomes: Iterable[Outcome]) -> dict[str, int]:
    found = {status: 0 for status in STATUSES}
    for outcome in outcomes:
        found[outcome.status] += 1
    return found


def failure_line(outcome: Outcome) -> str:
    """``failed: cat__wave.png (cat.jpg in wave.jpg): <error>`` on one line."""
    item = outcome.item
    origin = f", {item.origin}" if item.origin else ""
    return (f"failed: {shown(os.path.basename(item.output))} ({shown(os.path.basename(item.content))} in "
            f"{'+'.join(shown(os.path.basename(s)) for s in item.styles)}{origin}): {outcome.error}")


def summary(outcomes: list[Outcome]) -> str:
    """The closing line: the counts (``3 done, 1 skipped, 1 failed``); each failure has its own
    ``failure_line``, shown once, as it happens."""
    found = counts(outcomes)
    return ", ".join(f"{n} {status}" for status, n in found.items() if n or status in ("done", "failed"))


__all__ = ["Outcome", "Report", "STATUSES", "counts", "failure_line", "read_report", "summary"]
