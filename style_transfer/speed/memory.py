"""Guards around a run: memory estimated before it starts, out-of-memory named, how the run ended."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..errors import ResourceError
from .fast import TORCH_LBFGS_HISTORY, Speed

# Maps a long side in px to the (height, width) working sizes of the content and style images.
SizeFn = Callable[[int], tuple[tuple[int, int], tuple[int, int]]]

GIB = 2**30
# What a run needs beyond the process it runs in, measured on the CPU with the tutorial's layers
# (peak RSS at 64..384 px, see benchmarks/memory.py): the cut network, the targets, slack.
BASE_BYTES = 256 * 2**20
# Per pixel of the working content image: saved activations and gradients (measured 3072 B),
# plus LBFGS's history of 100 (step, gradient-change) pairs of 3 floats each (2400 B).
ACTIVATION_BYTES_PER_PIXEL = 3072
LBFGS_HISTORY_BYTES_PER_PIXEL = 100 * 2 * 3 * 4
# The bf16 fast path keeps half the bytes for backward (1174 B/px against 1900, tests/run/test_faults.py), but
# its first LBFGS step runs in float32 (the default's 1900 B/px: fast.FastStyleModel) and its peak RSS
# grows nearly as fast (benchmarks/memory.py --fast: 3550 B/px from 128 to 384 px, the default 3706), so
# the estimate keeps ACTIVATION_BYTES_PER_PIXEL for it; only the LBFGS history follows the speed.
# Per pixel of the style image: its one no_grad pass keeps about two feature maps of 64 channels.
STYLE_BYTES_PER_PIXEL = 2 * 64 * 4


def estimate_bytes(content_hw: tuple[int, int], style_hw: tuple[int, int], speed: Speed | None = None) -> int:
    """Memory a run needs beyond the process, for working images of these (height, width).

    Args:
        speed: the run's fast-path settings (the LBFGS history is ``speed.history_size`` pairs);
            None for the default path.
    """
    speed = speed or Speed()
    content = content_hw[0] * content_hw[1]
    style = style_hw[0] * style_hw[1]
    history = LBFGS_HISTORY_BYTES_PER_PIXEL * speed.history_size // TORCH_LBFGS_HISTORY
    return BASE_BYTES + content * (ACTIVATION_BYTES_PER_PIXEL + history) + style * STYLE_BYTES_PER_PIXEL


def available_bytes(device: torch.device) -> int | None:
    """Memory free for a run on ``device``: CUDA's free memory, or on Linux the smaller of
    ``MemAvailable`` and the cgroup's limit minus its use; None where it cannot be known."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    if device.type != "cpu":
        return None
    candidates = []
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    candidates.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            with open(limit_file) as limit, open(usage_file) as usage:
                text = limit.read().strip()
                if text != "max" and int(text) < 2**60:
                    candidates.append(max(0, int(text) - int(usage.read().strip())))
        except (OSError, ValueError):
            continue
    return min(candidates) if candidates else None


def largest_fitting_size(content_hw: tuple[int, int], style_hw: tuple[int, int], available: int,
                         sizes: SizeFn, speed: Speed | None = None) -> int | None:
    """The largest long side (a multiple of 16, >= 16) whose estimate fits in ``available``.

    Args:
        sizes: maps a long side to the (content_hw, style_hw) working sizes it gives.
        speed: as for ``estimate_bytes``.
    """
    best = None
    low, high = 1, max(max(content_hw), max(style_hw)) // 16  # in units of 16 px
    while low <= high:
        mid = (low + high) // 2
        if estimate_bytes(*sizes(16 * mid), speed) <= available:
            best, low = 16 * mid, mid + 1
        else:
            high = mid - 1
    return best


def check_memory(content_hw: tuple[int, int], style_hw: tuple[int, int], device: torch.device,
                 size: int, sizes: SizeFn, available: int | None = None, speed: Speed | None = None,
                 tiled: tuple[int, int] | None = None) -> None:
    """Refuse, before the model loads, a size whose run cannot fit in the free memory.

    The estimate follows ``speed`` (None: the default path; ``--fast`` keeps 20 LBFGS pairs, not
    100), so the largest size named is the one that fits with the options the run was given.

    Args:
        tiled: the largest size that fits in tiles and its tile (``tiling.largest_tiled_size``), named
            too when larger than the largest untiled size; None: not named.

    Raises:
        ResourceError: naming the size, the estimate, the free memory and the largest sizes that fit.
    """
    available = available_bytes(device) if available is None else available
    needed = estimate_bytes(content_hw, style_hw, speed)
    if available is None or needed <= available:
        return
    best = largest_fitting_size(content_hw, style_hw, available, sizes, speed)
    raise ResourceError(f"size {size} px needs about {needed / GIB:.1f} GiB but only {available / GIB:.1f} GiB "
                        f"is free on {device}: {fitting_advice(best, tiled)}")


def fitting_advice(untiled: int | None, tiled: tuple[int, int] | None) -> str:
    """What a refusal suggests: the largest size that fits untiled and, when larger, in tiles (size, tile)."""
    if tiled is not None and untiled is not None and tiled[0] <= untiled:
        tiled = None
    in_tiles = None if tiled is None else f"about {tiled[0]} px in tiles (--size {tiled[0]} --tile {tiled[1]})"
    if untiled is None:
        return f"the largest size that fits is {in_tiles}" if in_tiles else \
            "no size fits; free some memory or use another device"
    advice = f"the largest size that fits is about {untiled} px (--size {untiled})"
    return f"{advice}, or {in_tiles}" if in_tiles else advice


def out_of_memory(exc: BaseException, size: int, device: torch.device, tile: int | None = None) -> ResourceError | None:
    """Our one-line error for an allocator failure (CUDA's, the CPU's, Python's), else None.

    It suggests a smaller size and, from 384 px, evaluating in crops (``--tile``: the same picture in
    less memory; a smaller tile when ``tile`` was already given)."""
    text = str(exc)
    if isinstance(exc, ResourceError):
        return None  # already ours (refused beforehand)
    if not (isinstance(exc, (torch.OutOfMemoryError, MemoryError))
            or (isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text
                                                   or "not enough memory" in text))):
        return None
    smaller = max(16, (size * 7 // 10) // 16 * 16)
    advice = f"a smaller --size (e.g. {smaller})"
    if tile is not None and tile >= 256:
        advice = f"a smaller --tile (e.g. {tile // 2 // 64 * 64}) or {advice}"
    elif tile is None and size >= 384:
        advice = f"--tile {min(512, max(192, size // 2 // 64 * 64))} (the same picture, evaluated in crops) or {advice}"
    return ResourceError(f"out of memory on {device} at size {size} px; try {advice}")
