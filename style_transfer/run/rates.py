"""How fast this machine runs an evaluation, kept between runs: each run measures its seconds per
megapixel-evaluation (``timing.Timing``) and ``Rates`` keeps the latest, by what sets it (the device and its threads,
the network, the precision and what the evaluation computes); ``fits.forecast`` tells a run's time before it starts
from that.

The book is a small JSON file, ``$STYLE_TRANSFER_CACHE/rates.json`` (default ``$XDG_CACHE_HOME/style_transfer``, else
``~/.cache/style_transfer``). It is a cache: one that cannot be read or written is left alone, never an error. This
module imports torch only to name a device.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..config.style import StyleConfig
from ..fast.speed import Speed
from .timing import Timing

if TYPE_CHECKING:
    import torch

RATES_FILE = "rates.json"
MIN_TIMED = 10  # evaluations a run times (after each size's first) before its rate is kept


@dataclass(frozen=True)
class Rate:
    """What an evaluation costs on this machine: seconds per megapixel-evaluation, and a size's set-up (building the
    model and style targets, in its first evaluation) in seconds."""

    seconds_per_megapixel: float
    setup: float


def rates_path() -> Path:
    """Where the book lives: ``$STYLE_TRANSFER_CACHE``, ``$XDG_CACHE_HOME/style_transfer`` or
    ``~/.cache/style_transfer``, then ``rates.json``."""
    folder = os.environ.get("STYLE_TRANSFER_CACHE")
    if not folder:
        folder = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache"), "style_transfer")
    return Path(os.path.expanduser(folder)) / RATES_FILE


def rate_key(config: StyleConfig, speed: Speed, device: torch.device, tiled: bool = False) -> str:
    """What an evaluation's rate depends on: the device (the CPU's model and torch's threads, or the GPU's name),
    the network and layers, the precision and the levers, what LBFGS moves and whether crops are evaluated."""
    import torch  # here: the book is named without torch (the command's options)

    if device.type == "cuda":
        where = torch.cuda.get_device_name(device)
    else:
        where = f"{_cpu_model()}, {torch.get_num_threads()} threads"
    return " | ".join([where, config.model, ",".join(config.style_layers or ()), ",".join(config.content_layers or ()),
                       config.style_loss, speed.precision, f"channels_last={speed.channels_last}",
                       f"fused_gram={speed.fused_gram}", speed.parametrization, f"tiled={tiled}"])


def _cpu_model(path: str = "/proc/cpuinfo") -> str:
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Processor", "cpu model"):
                    return value.strip()
    except OSError:
        pass
    return "cpu"


class Rates:
    """The book of rates measured on this machine (``path``: ``rates_path()``): under each key, the latest rate at
    each size (sizes apart by a factor of sqrt(2) in megapixels), as an evaluation's fixed costs weigh more on a small
    picture. A size is told the rate of the nearest size measured, at most ``REACH`` times larger or smaller."""

    REACH = 4.0

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = Path(path) if path is not None else rates_path()

    def _read(self) -> dict[str, dict[str, dict[str, float]]]:
        try:
            book = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return book if isinstance(book, dict) else {}

    def get(self, key: str, megapixels: float) -> Rate | None:
        """The rate of the size nearest ``megapixels`` measured under ``key``; None where none is within reach."""
        sizes = self._read().get(key)
        found: list[tuple[float, Rate]] = []
        for entry in sizes.values() if isinstance(sizes, dict) else ():
            try:
                rate = Rate(float(entry["seconds_per_megapixel"]), float(entry["setup"]))
                distance = abs(math.log(float(entry["megapixels"]) / megapixels))
            except (TypeError, KeyError, ValueError, ZeroDivisionError):
                continue
            if rate.seconds_per_megapixel > 0 and rate.setup >= 0 and distance <= math.log(self.REACH):
                found.append((distance, rate))
        return min(found, key=lambda pair: pair[0])[1] if found else None

    def put(self, key: str, megapixels: float, rate: Rate) -> None:
        """Keep ``rate``, measured at ``megapixels``, under ``key`` (``put_all``)."""
        self.put_all(key, [(megapixels, rate)])

    def put_all(self, key: str, measured: Sequence[tuple[float, Rate]]) -> None:
        """Keep each ``(megapixels, rate)`` under ``key``: the whole book written once, to a temporary file then
        renamed (a reader never sees half of it)."""
        book = self._read()
        found = book.get(key)
        sizes = found if isinstance(found, dict) else {}
        for megapixels, rate in measured:
            sizes[str(round(2 * math.log2(megapixels)))] = {"megapixels": megapixels, **dataclasses.asdict(rate)}
        book[key] = sizes
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle, name = tempfile.mkstemp(dir=self.path.parent, prefix=".rates-", suffix=".json")
        except OSError:
            return
        try:
            with os.fdopen(handle, "w") as f:
                json.dump(book, f, indent=1, sort_keys=True)
            os.replace(name, self.path)
        except OSError:
            Path(name).unlink(missing_ok=True)


def keep_rate(path: str | os.PathLike | None, timing: Timing | None, config: StyleConfig, speed: Speed,
              device: torch.device, tiles: Sequence[int | None]) -> None:
    """A run's rate at each of its sizes that timed ``MIN_TIMED`` evaluations (``timing``'s) into the book at
    ``path``, under the run's key; nothing where ``path`` is None."""
    if path is None or timing is None:
        return
    key = rate_key(config, speed, device, any(tile is not None for tile in tiles))
    measured = [(megapixels, Rate(seconds, setup)) for megapixels, timed, seconds, setup in timing.measured()
                if timed >= MIN_TIMED]
    if measured:
        Rates(path).put_all(key, measured)
