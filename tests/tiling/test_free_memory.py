"""The free-memory reading behind the size check: /proc/meminfo's MemAvailable and the cgroup's limit."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from style_transfer import memory

CPU = torch.device("cpu")
GIB = 2**30
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and cgroups are Linux's")

MEMINFO = "/proc/meminfo"
V2_MAX, V2_CURRENT = "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"
V1_LIMIT, V1_USAGE = "/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"
V1_UNLIMITED = "9223372036854771712"  # what cgroup v1 shows without a limit (2^63 rounded down to a page)


def meminfo(available_kib: int) -> str:
    return f"MemTotal:       33554432 kB\nMemFree:         1024000 kB\nMemAvailable:   {available_kib:>8} kB\n"


@pytest.fixture
def system(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., None]:
    """Give the memory module a fake file system: only the files passed to the returned function exist."""
    files: dict[str, Path] = {}
    real_open = open

    def fake_open(path, *args, **kwargs):
        if str(path) not in files:
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real_open(files[str(path)], *args, **kwargs)

    def make(**contents: str) -> None:
        for name, text in contents.items():
            path = {"meminfo": MEMINFO, "v2_max": V2_MAX, "v2_current": V2_CURRENT, "v1_limit": V1_LIMIT,
                    "v1_usage": V1_USAGE}[name]
            local = tmp_path / name
            local.write_text(text)
            files[path] = local

    monkeypatch.setattr(memory, "open", fake_open, raising=False)  # the module's own name lookup, nothing else's
    return make


def test_meminfo_alone(system) -> None:
    system(meminfo=meminfo(8 * 1024 * 1024))
    assert memory.available_bytes(CPU) == 8 * GIB


@pytest.mark.parametrize("limit, usage, expected", [
    (str(2 * GIB), str(GIB // 2), 3 * GIB // 2),  # the cgroup leaves less than MemAvailable: its room counts
    (str(GIB), str(GIB + 4096), 0),  # over its limit (page cache counted in the use): nothing free, never negative
    (str(64 * GIB), str(GIB), 8 * GIB),  # a limit above what the machine has: MemAvailable counts
])
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_cgroup_limit_minus_usage(system, version: str, limit: str, usage: str, expected: int) -> None:
    if version == "v2":
        system(meminfo=meminfo(8 * 1024 * 1024), v2_max=limit + "\n", v2_current=usage + "\n")
    else:
        system(meminfo=meminfo(8 * 1024 * 1024), v1_limit=limit + "\n", v1_usage=usage + "\n")
    assert memory.available_bytes(CPU) == expected


@pytest.mark.parametrize("files", [
    {"v2_max": "max\n", "v2_current": "123456789\n"},  # cgroup v2 without a limit
    {"v1_limit": V1_UNLIMITED + "\n", "v1_usage": "11467649024\n"},  # cgroup v1 without a limit
    {"v2_max": str(GIB)},  # a limit without its usage file: not half a reading
    {"v2_max": "garbage\n", "v2_current": "1\n"},  # unreadable numbers are ignored, not an error
])
def test_no_usable_cgroup_limit_leaves_meminfo(system, files: dict[str, str]) -> None:
    system(meminfo=meminfo(4 * 1024 * 1024), **files)
    assert memory.available_bytes(CPU) == 4 * GIB


def test_cgroup_without_meminfo(system) -> None:
    system(v2_max=str(3 * GIB), v2_current=str(GIB))
    assert memory.available_bytes(CPU) == 2 * GIB


def test_nothing_readable_is_unknown(system) -> None:
    system()
    assert memory.available_bytes(CPU) is None
    system(meminfo="MemTotal: 1 kB\nMemAvailable: lots\n")
    assert memory.available_bytes(CPU) is None


@linux_only
def test_free_memory_is_known_on_this_machine() -> None:
    free = memory.available_bytes(CPU)
    with open(MEMINFO) as handle:
        total = int(next(line for line in handle if line.startswith("MemTotal:")).split()[1]) * 1024
    assert free is not None and 0 < free <= total


@linux_only
def test_this_machines_cgroup_limit_is_counted() -> None:
    """Where this process runs under a cgroup memory limit, the reading is at most its room (limit - usage)."""
    for limit_file, usage_file in ((V2_MAX, V2_CURRENT), (V1_LIMIT, V1_USAGE)):
        try:
            limit_text, usage_before = Path(limit_file).read_text().strip(), int(Path(usage_file).read_text())
        except (OSError, ValueError):
            continue
        if limit_text == "max" or int(limit_text) >= 2**60:
            continue
        free = memory.available_bytes(CPU)
        assert free is not None
        # The usage moves between the two reads (page cache, this process): 256 MiB of slack.
        assert free <= max(0, int(limit_text) - usage_before) + 256 * 2**20
        return
    pytest.skip("this machine runs without a cgroup memory limit (the fake files above test the parsing)")
