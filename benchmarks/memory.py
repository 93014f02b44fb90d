"""Peak memory, one way: in this process from a reset point (CPU: Linux's VmHWM restarted by clear_refs, after
freed heap is returned; CUDA: ``max_memory_allocated``), or a child's peak RSS (``wait4``)."""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import time

import torch

from . import ROOT
from .timing import sync


def _status_mib(key: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith(key))
    except (OSError, StopIteration):
        return None


def reset_peak(device: torch.device | str = "cpu") -> float:
    """Restart the peak count here; returns what is in use now (MiB), the base a run's own peak is above."""
    device = torch.device(device)
    if device.type == "cuda":
        sync(device)
        torch.cuda.reset_peak_memory_stats(device)
        return torch.cuda.memory_allocated(device) / 2**20
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # VmHWM restarts at the RSS now
    except OSError:
        pass
    return _status_mib("VmRSS:") or 0.0


def peak_mib(device: torch.device | str = "cpu") -> float:
    """The peak since ``reset_peak`` (off Linux on the CPU: the process's peak since it started)."""
    device = torch.device(device)
    if device.type == "cuda":
        sync(device)
        return torch.cuda.max_memory_allocated(device) / 2**20
    peak = _status_mib("VmHWM:")
    if peak is None:  # ru_maxrss: KiB on Linux, bytes on macOS
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1024 if sys.platform.startswith("linux") else 2**20)
    return peak


def run_child(command: list[str], **popen: object) -> tuple[float, int]:
    """Run ``command``: its wall seconds and own peak resident memory in bytes (CalledProcessError on failure)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **popen)  # type: ignore
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code:
        error = process.stderr.read().decode(errors="replace").strip().splitlines() if process.stderr else []
        raise subprocess.CalledProcessError(code, command, stderr=error[-1] if error else "")
    return wall, usage.ru_maxrss * 1024


def child(what: str, *argv: str, env: dict[str, str] | None = None) -> str:
    """The last line ``python *argv`` prints, run in the checkout; on failure exits 1 naming ``what`` and its last line
    of stderr."""
    done = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, env=env)
    if done.returncode:
        sys.exit(f"error: {what}: {(done.stderr.strip().splitlines() or ['the child failed'])[-1]}")
    return done.stdout.strip().splitlines()[-1]
