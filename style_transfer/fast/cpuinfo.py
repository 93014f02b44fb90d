"""The CPU's flags, read without torch (``stylize --print-config`` answers without importing it)."""

from __future__ import annotations

# The x86 flags of CPUs with bf16 instructions (AMX's matrix units, or AVX512-BF16's vector ones): oneDNN runs bf16
# natively on them, and --fast takes bf16 there (hardware.bf16_supported, hardware.bf16_pays_off).
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


def fast_precision_on_cpu(flags: set[str] | None, cap: str | None = None) -> str:
    """What ``--fast`` runs on this CPU, for ``--print-config``: bf16 with bf16 instructions (AMX or AVX512-BF16)
    that ``ONEDNN_MAX_CPU_ISA`` (``cap``) leaves oneDNN, else fp32 (``hardware.bf16_pays_off``)."""
    if flags is not None and flags & BF16_FLAGS and not onednn_cap_allows_bf16(cap):
        return f"fp32 on this CPU (ONEDNN_MAX_CPU_ISA={(cap or '').strip()} leaves oneDNN no bf16 instructions)"
    if flags is None:
        return "fp32 on this CPU (its flags cannot be read; bf16 needs AMX or AVX512-BF16)"
    if "amx_bf16" in flags:
        return "bf16 on this CPU (AMX), where torch's oneDNN has bf16"
    if "avx512_bf16" in flags:
        return "bf16 on this CPU (AVX512-BF16), where torch's oneDNN has bf16"
    return "fp32 on this CPU (no bf16 instructions; --fast takes bf16 with AMX, AVX512-BF16 or a GPU's native bf16)"
