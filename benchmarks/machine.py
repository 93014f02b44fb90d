"""The machine a measurement ran on, read one way: a JSON-ready block, a one-line summary (no hostnames) and its
class for results file names (amx, avx512bf16, avx2, or the GPU's name)."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from typing import Any

import torch
import torchvision

from style_transfer.fast.hardware import bf16_supported, physical_cores

# CPU flags (Linux /proc/cpuinfo names) that decide which kernels torch and oneDNN can use.
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
# Environment variables that change those kernels (ATEN_CPU_CAPABILITY=avx2 emulates an AVX2-only CPU).
KERNEL_ENV = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _cpuinfo() -> tuple[str | None, set[str] | None]:
    """The first ``model name`` and ``flags`` of /proc/cpuinfo, or ``(None, None)`` off Linux."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return None, None
    model, flags = None, None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model is None:
            model = value.strip()
        elif key in ("flags", "Features") and flags is None:  # Features: arm64's name for them
            flags = set(value.split())
    return model, flags


def _nvidia_driver() -> str | None:
    """The NVIDIA driver version from ``nvidia-smi``, or None when it cannot be asked."""
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=20, check=True).stdout.split()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def gpu_info(device: torch.device) -> dict[str, Any]:
    """Name, compute capability, memory and the CUDA stack of a CUDA ``device``."""
    props = torch.cuda.get_device_properties(device)
    return {"name": props.name, "capability": f"{props.major}.{props.minor}",
            "memory_gib": round(props.total_memory / 2**30, 1), "multiprocessors": props.multi_processor_count,
            "bf16_native": bf16_supported(device), "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(), "driver": _nvidia_driver()}


def describe(device: torch.device, label: str | None = None) -> dict[str, Any]:
    """The machine block: CPU, its kernels, threads, versions and, on CUDA, the GPU; never a hostname or user name
    (the block is committed with the figures)."""
    model, flags = _cpuinfo()
    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        affinity = None
    return {"label": label,
            "description": None,  # for a person to fill in when committing the figures ("2-core Sapphire Rapids VM")
            "date": datetime.date.today().isoformat(), "cpu_model": model or platform.processor() or None,
            "architecture": platform.machine(), "os": platform.system(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "bf16_native_cpu": bf16_supported(torch.device("cpu")),
            "cpu_flags": None if flags is None else {flag: flag in flags for flag in CPU_FLAGS},
            "logical_cpus": os.cpu_count(), "cpus_available": affinity, "physical_cores": physical_cores(),
            "threads": torch.get_num_threads(),
            "kernel_env": {name: os.environ[name] for name in KERNEL_ENV if name in os.environ},
            "torch": torch.__version__, "torchvision": torchvision.__version__, "python": platform.python_version(),
            "gpu": gpu_info(device) if device.type == "cuda" else None}


def machine_class(machine: dict[str, Any]) -> str:
    """``amx``, ``avx512bf16``, ``avx2`` (or ``cpu``) from the CPU flags, or the GPU's name as a file name part."""
    if machine.get("gpu"):
        return "-".join(str(machine["gpu"]["name"]).lower().replace("nvidia", "").split())
    flags = machine.get("cpu_flags") or {}
    for flag, name in (("amx_bf16", "amx"), ("avx512_bf16", "avx512bf16"), ("avx2", "avx2")):
        if flags.get(flag):
            return name
    return "cpu"


def summary(machine: dict[str, Any]) -> str:
    """One line naming the machine, for printouts and Markdown ("Measured on: ..."); None fields say so."""

    def known(value: Any, text: str | None = None) -> str:
        return "unknown" if value is None else (text if text is not None else str(value))

    parts = [machine["description"]] if machine.get("description") else []
    if machine.get("cpu_model") or not parts:
        arch = machine.get("architecture")
        parts.append(f"CPU {known(machine.get('cpu_model'))}" + (f" ({arch})" if arch else ""))
    present = [name for name, on in (machine.get("cpu_flags") or {}).items() if on]
    parts.append(f"torch capability {known(machine.get('cpu_capability'))}"
                 + (f" (CPU flags: {', '.join(present)})" if present else ""))
    bf16 = machine.get("bf16_native_cpu")
    parts.append(f"native bf16 {known(bf16, 'yes' if bf16 else 'no')}")
    threads, cores = machine.get("threads"), machine.get("physical_cores")
    parts.append(f"{known(threads)} thread{'' if threads == 1 else 's'} on {known(cores)} physical "
                 f"core{'' if cores == 1 else 's'}")
    if machine.get("kernel_env"):
        parts.append(" ".join(f"{k}={v}" for k, v in machine["kernel_env"].items()))
    parts.append(f"torch {known(machine.get('torch'))}, torchvision {known(machine.get('torchvision'))}, "
                 f"Python {known(machine.get('python'))}")
    if gpu := machine.get("gpu"):
        parts.append(f"GPU {gpu['name']} (capability {gpu['capability']}, CUDA {known(gpu.get('cuda'))}, "
                     f"driver {known(gpu.get('driver'))})")
    if machine.get("date"):
        parts.append(str(machine["date"]))
    label = f"[{machine['label']}] " if machine.get("label") else ""
    return label + "; ".join(parts)
