"""A study's report: printed, and written as JSON with the machine, the network, the arguments and the git
commit inside, by default to ``results/<study>/<date>-<machine class>-<network>-<size>px.json``."""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

from . import machine as machines
from . import network as networks

RESULTS = Path(__file__).resolve().parent / "results"
LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # a machine's name: a file name part


def add_options(parser: argparse.ArgumentParser, study: str) -> None:
    """``--label``, ``--out`` and ``--markdown``, as every study with a results folder of its own takes them."""
    parser.add_argument("--label", metavar="NAME", default=None,
                        help="a name for this machine (letters, digits, . _ -), kept in the JSON's machine block "
                             "and the default output's name")
    parser.add_argument("--out", default=None,
                        help=f"JSON output (default: benchmarks/results/{study}/DATE-CLASS-NETWORK-SIZESpx.json)")
    parser.add_argument("--markdown", metavar="JSON", default=None,
                        help="print the tables of an earlier report as Markdown and exit")


def bad_label(label: str | None) -> bool:
    """Whether ``label`` is no file name part; if so, says so in one line on stderr."""
    bad = label is not None and not LABEL.match(label)
    if bad:
        print(f"error: --label must be letters, digits, '.', '_' or '-' (a file name part), got {label!r}",
              file=sys.stderr)
    return bad


def commit() -> str | None:
    """The checkout's commit (with ``-dirty`` when it has changes), or None outside a git checkout."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head.stdout.strip() + ("-dirty" if dirty else "")


def start(args: argparse.Namespace | dict[str, Any], network: dict[str, Any] | None,
          device: torch.device | str = "cpu", label: str | None = None, /, **fields: Any) -> dict[str, Any]:
    """A report's head: the commit, the machine, the network block, the arguments, then ``fields``; printed."""
    given = dict(vars(args) if isinstance(args, argparse.Namespace) else args)
    if "weights" in given and network:
        given["weights"] = network.get("weights")  # the base name: never a folder of this machine
    report = {"commit": commit(), "machine": machines.describe(torch.device(device), label), "network": network,
              "args": {k: v for k, v in given.items() if not isinstance(v, Path)} | {
                  k: str(v) for k, v in given.items() if isinstance(v, Path)}, **fields}
    print("\n".join(head(report)[:1 if network is None else 2]))
    return report


def head(report: dict[str, Any], fallback_weights: str | None = None) -> list[str]:
    """A report's first two lines in Markdown and printouts: its machine and its network."""
    return [f"Measured on: {machines.summary(report['machine'])}",
            networks.summary(report.get("network"), fallback_weights)]


def path(study: str, report: dict[str, Any], size: str | int, suffix: str = "") -> Path:
    """``results/<study>/<date>-<machine class>-<network>-<size>px[-suffix].json``."""
    network = networks.name(report["network"]) if report.get("network") else "nets"
    date = (report.get("machine") or {}).get("date") or datetime.date.today().isoformat()
    return RESULTS / study / f"{date}-{machines.machine_class(report['machine'])}-{network}-{size}px" \
        f"{'-' + suffix if suffix else ''}.json"


def write(report: dict[str, Any], out: Path | str) -> Path:
    """Write ``report`` as JSON to ``out`` (its folder made), indented one space as the committed results are."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    return out


def sizes(values: list[int]) -> str:
    """A size part of a file name: ``512`` or ``128-512``."""
    return str(values[0]) if min(values) == max(values) else f"{min(values)}-{max(values)}"
