"""A run's memory, tiled or not: what it needs estimated before it starts (``estimate_bytes``, ``check_memory``),
the memory free on its device, and an allocator's failure named (``out_of_memory``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from .config.style import StyleConfig
from .config.checks import filled
from .errors import ResourceError
from .core.steps import TORCH_LBFGS_HISTORY
from .fast.speed import Speed

# Maps a long side in px to the (height, width) working sizes of the content and style images.
SizeFn = Callable[[int], tuple[tuple[int, int], tuple[int, int]]]

GIB = 2**30
# What a run needs beyond the process it runs in, measured on the CPU with the tutorial's layers
# (peak RSS at 64..384 px, see benchmarks/studies/memory.py): the cut network, the targets, slack.
BASE_BYTES = 256 * 2**20
# Per pixel of the working content image: saved activations and gradients (measured 3072 B),
# plus LBFGS's history of 100 (step, gradient-change) pairs of 3 floats each (2400 B).
ACTIVATION_BYTES_PER_PIXEL = 3072
LBFGS_HISTORY_BYTES_PER_PIXEL = 100 * 2 * 3 * 4
# The bf16 fast path keeps half the bytes for backward (982 B/px against 1900, tests/run/test_faults.py), but
# its first LBFGS step runs in float32 (1516 B/px: fast.FastStyleModel) and its peak RSS
# grows nearly as fast (python -m benchmarks memory --fast: 3550 B/px from 128 to 384 px, the default 3706), so
# the estimate keeps ACTIVATION_BYTES_PER_PIXEL for it; only the LBFGS history follows the speed.
# Per pixel of the style image: its one no_grad pass keeps about two feature maps of 64 channels.
STYLE_BYTES_PER_PIXEL = 2 * 64 * 4


# What each style loss module saves for its backward, in bytes per value of the input's feature map (channels x
# positions; counted with torch.autograd.graph.saved_tensors_hooks, tests/tiling/test_style_loss_memory.py): unmasked,
# then for a guided loss a fixed part and a part per style. W2: the centred features (and, guided, their
# mask-weighted copy); sliced: the sort's order (int64), the sorted projections, the differences to the matched
# target (and, guided, each style's masses and differences); guided Gram: each style's masked features.
SAVED_BYTES_PER_VALUE: dict[str, tuple[int, int, int]] = {"gram": (0, 0, 4), "wasserstein": (4, 0, 8),
                                                          "sliced": (16, 12, 8)}
# Per style term, bytes per channel^2 saved besides: Gram and W2 matrices (float64 for W2's); sliced's directions,
# once (every style of an evaluation shares them).
SAVED_BYTES_PER_CHANNEL_PAIR: dict[str, int] = {"gram": 8, "wasserstein": 16, "sliced": 4}
# A guided loss's masks saved per style and position (the sliced loss saves its masses per value instead).
SAVED_MASK_BYTES_PER_POSITION: dict[str, int] = {"gram": 4, "wasserstein": 4, "sliced": 0}
# The sliced loss's peak while it sorts the style's projections at a layer (one layer at a time, no gradient): the
# projections (float32), numpy's order (int64) and the gathered sorted values (float32), per channel x style position.
SLICED_SORT_BYTES_PER_VALUE = 16
# What the sliced loss keeps between the evaluations of an LBFGS step, per channel x style position at every style
# layer (``SlicedStyleLoss.sorted_targets``): the sorted projections (float32), and for a blend of several styles
# without masks their order too (int64, needed where the styles' masses differ: counted whether or not they do).
SLICED_KEPT_BYTES_PER_VALUE, SLICED_KEPT_ORDER_BYTES_PER_VALUE = 4, 8


@dataclass(frozen=True)
class StyleLossPlan:
    """What a run's style loss modules keep, for the estimate: the style statistics and where they are taken.

    ``estimate_bytes``'s measured figures (``BASE_BYTES``, ``ACTIVATION_BYTES_PER_PIXEL``) are the unmasked Gram
    loss's, whose targets are ``C x C`` per layer; the other losses keep more: W2 a ``(C + 1) x C`` target per
    style term and its centred features for backward, sliced the features of every style position at every style
    layer (``sliced_target``), their projections sorted once per draw of directions and kept for the step, and
    four values per input value for backward.

    Attributes:
        style_loss: ``gram``, ``wasserstein`` or ``sliced``. style_layers: the tutorial's names (``conv_N``).
        model: a network of ``layers.MODELS``. styles: the style images. masked: style masks (guided losses).
    """

    style_loss: str = "gram"
    style_layers: tuple[str, ...] = ()
    model: str = "vgg19"
    styles: int = 1
    masked: bool = False

    @classmethod
    def of(cls, config: StyleConfig, styles: int = 1) -> StyleLossPlan:
        """The plan of a ``StyleConfig`` with ``styles`` style images (its layers resolved to tutorial names)."""
        from .layers import model_layer_names, resolve_layers

        layers = resolve_layers(filled(config.style_layers), model_layer_names(config.model))
        return cls(config.style_loss, tuple(layers), config.model, styles, bool(config.style_masks))

    def _shapes(self, hw: tuple[int, int]) -> list[tuple[int, int]]:
        """(channels, positions) of each style layer's feature map for an image of ``hw``."""
        return [(c, h * w) for c, h, w in layer_shapes(self.style_layers, self.model, hw)]

    def _terms(self) -> int:
        """Style terms per layer: one per style when guided, else one (the styles' blend)."""
        return self.styles if self.masked else 1

    def target_bytes(self, style_hw: tuple[int, int]) -> int:
        """The loss modules' targets (float32 buffers), every style image at ``style_hw`` (the largest's)."""
        total = 0
        for c, n in self._shapes(style_hw):
            if self.style_loss == "sliced":
                total += (c + 1) * n * self.styles * 4  # masses and features of every style position
            else:
                total += (c * c if self.style_loss == "gram" else (c + 1) * c) * self._terms() * 4
        return total

    def saved_bytes(self, content_hw: tuple[int, int]) -> int:
        """What the loss modules save for backward at one evaluation of a content of ``content_hw``."""
        plain, fixed, per_style = SAVED_BYTES_PER_VALUE[self.style_loss]
        per_value = fixed + per_style * self.styles if self.masked else plain
        pair = SAVED_BYTES_PER_CHANNEL_PAIR[self.style_loss] * (1 if self.style_loss == "sliced" else self._terms())
        mask = SAVED_MASK_BYTES_PER_POSITION[self.style_loss] * self.styles if self.masked else 0
        return sum(c * m * per_value + c * c * pair + m * mask for c, m in self._shapes(content_hw))

    def sort_bytes(self, style_hw: tuple[int, int]) -> int:
        """The sliced loss's peak while it sorts the style's projections at its widest layer (0 for the others)."""
        if self.style_loss != "sliced":
            return 0
        return max((c * n * self.styles * SLICED_SORT_BYTES_PER_VALUE for c, n in self._shapes(style_hw)), default=0)

    def kept_bytes(self, style_hw: tuple[int, int]) -> int:
        """The sliced loss's sorted style projections, kept for the evaluations of a step (0 for the others)."""
        if self.style_loss != "sliced":
            return 0
        per_value = SLICED_KEPT_BYTES_PER_VALUE + (SLICED_KEPT_ORDER_BYTES_PER_VALUE
                                                   if self.styles > 1 and not self.masked else 0)
        return sum(c * n * self.styles * per_value for c, n in self._shapes(style_hw))

    def bytes(self, content_hw: tuple[int, int], style_hw: tuple[int, int]) -> int:
        """What these losses need beyond the measured figures (the unmasked Gram loss's, which count it: 0)."""
        if self.style_loss == "gram" and not self.masked:
            return 0
        return (self.target_bytes(style_hw) + self.saved_bytes(content_hw) + self.sort_bytes(style_hw)
                + self.kept_bytes(style_hw))


def layer_shapes(layers: Sequence[str], model: str, hw: tuple[int, int]) -> list[tuple[int, int, int]]:
    """(channels, height, width) of a VGG's feature maps at these tutorial-named layers for an image of ``hw``.

    By arithmetic on ``layers.VGG_LAYOUTS``: 3x3 convolutions keep the size, each 2x2 pool of stride 2 halves it,
    rounding down (max or average pooling alike).
    """
    from .layers import VGG_LAYOUTS, model_layer_names

    shapes: dict[str, tuple[int, int, int]] = {}
    names, (h, w), channels = iter(model_layer_names(model)), hw, 3
    for item in VGG_LAYOUTS[model]:
        if item == "M":
            h, w = h // 2, w // 2
            shapes[next(names)] = (channels, h, w)
            continue
        channels = int(item)
        for _ in range(2):  # conv_N, relu_N
            shapes[next(names)] = (channels, h, w)
    return [shapes[name] for name in layers]


def estimate_bytes(content_hw: tuple[int, int], style_hw: tuple[int, int], speed: Speed | None = None,
                   losses: StyleLossPlan | None = None) -> int:
    """Memory a run needs beyond the process, for working images of these (height, width).

    Args:
        speed: the run's fast-path settings (the LBFGS history is ``speed.history_size`` pairs);
            None for the default path.
        losses: the run's style losses (``StyleLossPlan.bytes``); None: the unmasked Gram loss's, counted in
            the measured figures.
    """
    speed = speed or Speed()
    content = content_hw[0] * content_hw[1]
    style = style_hw[0] * style_hw[1]
    history = LBFGS_HISTORY_BYTES_PER_PIXEL * speed.history_size // TORCH_LBFGS_HISTORY
    extra = 0 if losses is None else losses.bytes(content_hw, style_hw)
    return BASE_BYTES + content * (ACTIVATION_BYTES_PER_PIXEL + history) + style * STYLE_BYTES_PER_PIXEL + extra


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
                         sizes: SizeFn, speed: Speed | None = None, losses: StyleLossPlan | None = None) -> int | None:
    """The largest long side (a multiple of 16, >= 16) whose estimate fits in ``available``.

    Args:
        sizes: maps a long side to the (content_hw, style_hw) working sizes it gives.
        speed, losses: as for ``estimate_bytes``.
    """
    best = None
    low, high = 1, max(max(content_hw), max(style_hw)) // 16  # in units of 16 px
    while low <= high:
        mid = (low + high) // 2
        if estimate_bytes(*sizes(16 * mid), speed, losses) <= available:
            best, low = 16 * mid, mid + 1
        else:
            high = mid - 1
    return best


def check_memory(content_hw: tuple[int, int], style_hw: tuple[int, int], device: torch.device,
                 size: int, sizes: SizeFn, available: int | None = None, speed: Speed | None = None,
                 tiled: tuple[int, int] | None = None, losses: StyleLossPlan | None = None) -> None:
    """Refuse, before the model loads, a size whose run cannot fit in the free memory.

    The estimate follows ``speed`` (None: the default path; its LBFGS history: 100 pairs, 50 with ``--fast``, 20 where
    it moves the pixels), so the largest size named is the one that fits with the options the run was given.

    Args:
        tiled: the largest size that fits in tiles and its tile (``tiling.plans.largest_tiled_size``), named
            too when larger than the largest untiled size; None: not named.
        losses: the run's style losses (``estimate_bytes``).

    Raises:
        ResourceError: naming the size, the estimate, the free memory and the largest sizes that fit.
    """
    available = available_bytes(device) if available is None else available
    needed = estimate_bytes(content_hw, style_hw, speed, losses)
    if available is None or needed <= available:
        return
    best = largest_fitting_size(content_hw, style_hw, available, sizes, speed, losses)
    raise ResourceError(f"size {size} px needs about {needed / GIB:.1f} GiB but only {available / GIB:.1f} GiB "
                        f"is free on {device}: {fitting_advice(best, tiled)}")


def fitting_advice(untiled: int | None, tiled: tuple[int, int] | None) -> str:
    """What a refusal suggests: the largest size that fits untiled and, when larger, in tiles (size, tile)."""
    if tiled is not None and untiled is not None and tiled[0] <= untiled:
        tiled = None
    in_tiles = None if tiled is None else f"about {tiled[0]} px in tiles (size={tiled[0]} tile={tiled[1]})"
    if untiled is None:
        return f"the largest size that fits is {in_tiles}" if in_tiles else \
            "no size fits; free some memory or use another device"
    advice = f"the largest size that fits is about {untiled} px (size={untiled})"
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
    advice = f"a smaller size (e.g. size={smaller})"
    if tile is not None and tile >= 256:
        advice = f"a smaller tile (e.g. tile={tile // 2 // 64 * 64}) or {advice}"
    elif tile is None and size >= 384:
        advice = f"tile={min(512, max(192, size // 2 // 64 * 64))} (the same picture, evaluated in crops) or {advice}"
    return ResourceError(f"out of memory on {device} at size {size} px; try {advice}")
