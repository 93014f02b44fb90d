"""The CPU's flags, read without torch (``stylize --print-config`` answers without importing it)."""

from __future__ import annotations

from dataclasses import dataclass

# The x86 flags of CPUs with bf16 instructions (AMX's matrix units, or AVX512-BF16's vector ones): oneDNN runs bf16
# natively on them, and --fast takes bf16 there (cpu_bf16, hardware.device_bf16).
BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})


def cpu_flags(path: str = "/proc/cpuinfo") -> set[str] | None:
    """The first CPU's flags on x86 Linux, or None where there are none to read."""
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return set(value.split())
    except OSError:
        pass
    return None


def onednn_cap_allows_bf16(cap: str | None) -> bool:
    """Whether oneDNN may use bf16 instructions under ``ONEDNN_MAX_CPU_ISA=cap`` (unset or ALL: yes)."""
    if not cap or cap.strip().upper() in ("ALL", "DEFAULT"):
        return True
    cap = cap.strip().upper()
    return "BF16" in cap or "AMX" in cap or cap.startswith("AVX10")  # AVX10 and AVX512_CORE_FP16 include bf16


@dataclass(frozen=True)
class Bf16:
    """Whether a device runs bfloat16 natively (what --fast takes bf16 on: ``speed.resolve_speed``), and why, in
    words (``AMX``, ``no bf16 instructions; ...``)."""

    native: bool
    why: str


def cpu_bf16(flags: set[str] | None, cap: str | None = None) -> Bf16:
    """Whether this CPU has bf16 instructions (AMX or AVX512-BF16) that ``ONEDNN_MAX_CPU_ISA`` (``cap``) leaves
    oneDNN, from its ``flags`` (None: unreadable, not x86 Linux). ``hardware.device_bf16`` adds oneDNN's own yes."""
    if flags is None:
        return Bf16(False, "its flags cannot be read; bf16 needs AMX or AVX512-BF16")
    if flags & BF16_FLAGS and not onednn_cap_allows_bf16(cap):
        return Bf16(False, f"ONEDNN_MAX_CPU_ISA={(cap or '').strip()} leaves oneDNN no bf16 instructions")
    if "amx_bf16" in flags:
        return Bf16(True, "AMX")
    if "avx512_bf16" in flags:
        return Bf16(True, "AVX512-BF16")
    return Bf16(False, "no bf16 instructions; --fast takes bf16 with AMX, AVX512-BF16 or a GPU's native bf16")
