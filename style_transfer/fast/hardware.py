"""What this machine's device can do fast: native bfloat16 (a GPU's, a CPU's AVX512-BF16 or AMX through oneDNN),
whether ``--fast`` turns it on (``device_bf16``), the physical CPU cores (the default thread count), and the allocator's hold on freed
memory (``reuse_freed_memory``, which a command sets for its process)."""

from __future__ import annotations

import ctypes
import os
import platform
import sys

import torch

from .cpuinfo import BF16_FLAGS, Bf16, cpu_bf16, cpu_flags, onednn_cap_allows_bf16


def device_bf16(device: torch.device) -> Bf16:
    """Whether ``device`` runs bf16 natively, which is where --fast takes it (``speed.resolve_speed``): a CPU with AMX
    or AVX512-BF16 (its flags, ``cpuinfo.cpu_bf16``) whose oneDNN has bf16, or a GPU with native bf16."""
    if device.type == "cpu":
        told = cpu_bf16(_cpu_flags(), os.environ.get("ONEDNN_MAX_CPU_ISA"))
        if told.native and not bf16_supported(device):
            return Bf16(False, "torch's oneDNN has no bf16 here")
        return told
    if device.type == "cuda":
        return Bf16(True, "native bf16") if bf16_supported(device) else Bf16(False, "no native bf16")
    return Bf16(False, f"bf16 is not used on {device.type}")


def bf16_supported(device: torch.device) -> bool:
    """Whether ``device`` runs bfloat16 convolutions natively (CPU: AVX512-BF16 or AMX; CUDA: Ampere+)."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    if device.type == "cpu":
        check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
        if not (torch.backends.mkldnn.is_available() and check is not None and check()):
            return False
        # oneDNN also says yes on AVX-512 CPUs without bf16 instructions (it converts, slower than
        # fp32), so on x86 Linux ask the CPU itself and honour a cap set by ONEDNN_MAX_CPU_ISA.
        flags = _cpu_flags()
        if flags is None:  # not x86 Linux: oneDNN's answer stands
            return True
        return bool(flags & BF16_FLAGS) and onednn_cap_allows_bf16(os.environ.get("ONEDNN_MAX_CPU_ISA"))
    return False  # MPS: autocast to bf16 is not tested here


def _cpu_flags(path: str = "/proc/cpuinfo") -> set[str] | None:
    """The first CPU's flags on x86 Linux, or None where there are none to read (``cpuinfo.cpu_flags``)."""
    return cpu_flags(path)


def check_bf16(device: torch.device) -> None:
    """Raise ``ValueError`` when ``device`` cannot run the bf16 path natively."""
    if not bf16_supported(device):
        what = {"cpu": "this CPU has no native bfloat16 (AVX512-BF16/AMX) through oneDNN",
                "cuda": "this GPU has no native bfloat16 (needs compute capability 8.0+)"}.get(
                    device.type, f"bf16 autocast is not supported on {device.type}")
        raise ValueError(f"precision 'bf16' is not available: {what}; use precision=fp32")


def physical_cores() -> int:
    """Physical CPU cores available to this process (hyper-threads not counted)."""
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return available
    cores = set()
    physical = core = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "physical id":
            physical = value.strip()
        elif key == "core id":
            core = value.strip()
        elif not line.strip():
            if core is not None:
                cores.add((physical, core))
            physical = core = None
    if core is not None:
        cores.add((physical, core))
    return max(1, min(available, len(cores))) if cores else available


# glibc's mallopt parameters (malloc.h) and what reuse_freed_memory sets them to; KEPT_FREE: above an evaluation's
# feature maps at any size a run takes whole (1.2 GB at 512 px in float32), below what a tiled print-size map takes.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
GLIBC_DEFAULT = 128 * 1024  # both thresholds' starting value in glibc (the mmap one then adapts, up to 32 MiB)
KEPT_FREE = 1 << 30


def reuse_freed_memory(reuse: bool = True) -> bool:
    """Have glibc's malloc keep freed blocks for the next allocation (``reuse``), or give them back as it does by
    default (``False``: both thresholds at glibc's 128 KiB). For a command's own process; the library never calls it.

    By default glibc maps each block over its threshold afresh and unmaps it when freed, and trims the heap's top: each
    evaluation's feature maps then come from new pages, which the kernel zeroes on first touch (about 300,000 page
    faults per float32 evaluation at 512 px, 40,000 in bf16). Kept, they are reused; the arithmetic is the same.

    Returns:
        whether the setting took (glibc on Linux); elsewhere nothing is done.
    """
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    value = KEPT_FREE if reuse else GLIBC_DEFAULT
    return bool(mallopt(M_MMAP_THRESHOLD, value)) and bool(mallopt(M_TRIM_THRESHOLD, value))
