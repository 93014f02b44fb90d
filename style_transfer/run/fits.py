"""Whether a run fits before it starts (``check_fits``) and what it will take (``forecast``), from the images'
declared sizes alone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from ..config.checks import filled
from ..config.style import StyleConfig
from ..fast.fast import speed_from_config
from ..io.images import ImageSource
from ..memory import GIB
from ..tiling.plans import plan_tiles, planned_bytes
from .plans import plan_run, scale_sizes
from .prepare import device_and_size, header_sizes
from .rates import Rates, rate_key
from .timing import duration


def check_fits(content: ImageSource | tuple[int, int], style: ImageSource | Sequence[ImageSource],
               config: StyleConfig | None = None, *, available: int | None = None) -> list[int | None]:
    """Refuse, from the images' declared sizes alone, a run that cannot fit in its device's free memory.

    What ``Run.execute`` checks first, for front ends to check before they start work (a batch before its
    first item, the web app when a job is submitted). Only headers are read (``images.header_size``): no
    image is decoded or upscaled, so an impossible size is refused in a moment and in little memory.

    Args:
        content: an image source, or its (width, height) (a video's frames).
        available: bytes free for the run; None: ``memory.available_bytes`` of ``config.device`` (where it
            cannot be known, nothing is refused).

    Returns:
        The tile of each working size (None: untiled), as the run will choose them.

    Raises:
        ResourceError: naming the size, the estimate, the free memory and the largest size that fits,
            untiled and in tiles. ImageError: an input that cannot be read. ValueError: bad settings.
    """
    config = config or StyleConfig()
    # A list or tuple holds sources; anything else (a str path too, a Sequence to mypy) is one source.
    styles = cast(list[ImageSource], list(style) if isinstance(style, (list, tuple)) else [style])
    device, size = device_and_size(config)
    speed = speed_from_config(config, device)
    sizes = scale_sizes(size, filled(config.scales), config.min_size)
    return plan_tiles(sizes, header_sizes(content, styles, config), config, speed, device, available,
                      styles=len(styles))


@dataclass(frozen=True)
class Forecast:
    """What a run will take, worked out before it starts (``forecast``)."""

    sizes: tuple[tuple[int, int], ...]  # each working size's (width, height), smallest first
    evaluations: tuple[int, ...]  # the evaluations each plans
    tiles: tuple[int | None, ...]  # each size's tile (None: untiled)
    memory: int  # bytes the most demanding size needs (the memory check's estimate)
    seconds: float | None  # the whole run on this machine, from the rate measured here; None: none measured yet

    def text(self) -> str:
        """One line: ``512x341, 810x539 and 1280x851 px, 360 evaluations; about 1.9 GiB of memory, about 8 min on
        this machine``."""
        sizes = [f"{w}x{h}" for w, h in self.sizes]
        shown = sizes[0] if len(sizes) == 1 else f"{', '.join(sizes[:-1])} and {sizes[-1]}"
        tiled = [t for t in self.tiles if t is not None]
        line = (f"{shown} px{f' (tiles of {tiled[-1]} px)' if tiled else ''}, {sum(self.evaluations)} evaluations; "
                f"about {self.memory / GIB:.1f} GiB of memory")
        if self.seconds is None:
            return line + "; the time is told after the first evaluations (no run like it measured on this machine)"
        return line + f", about {duration(max(1.0, self.seconds))} on this machine"


def forecast(content: ImageSource | tuple[int, int], style: ImageSource | Sequence[ImageSource],
             config: StyleConfig | None = None, *, rates: Rates | None = None) -> Forecast:
    """The sizes, evaluations, memory and time of a run, before it starts: ``check_fits``' arithmetic on the images'
    declared sizes (its check too), and the time at the rate ``rates`` (``rates.Rates()``: this machine's book) keeps
    for a run like it.

    Raises:
        ResourceError, ImageError, ValueError: as ``check_fits``.
    """
    config = config or StyleConfig()
    styles = cast(list[ImageSource], list(style) if isinstance(style, (list, tuple)) else [style])
    device, size = device_and_size(config)
    speed = speed_from_config(config, device)
    plan = plan_run(config, size, speed)
    size_fn = header_sizes(content, styles, config)
    tiles = plan_tiles(list(plan.sizes), size_fn, config, speed, device, styles=len(styles))  # check_fits' check
    hw = [size_fn(s)[0] for s in plan.sizes]
    book, key = rates if rates is not None else Rates(), rate_key(config, speed, device, any(tiles))
    found = [book.get(key, h * w / 1e6) for h, w in hw]  # each size at the rate measured nearest its size
    seconds = None if None in found else sum(rate.setup + rate.seconds_per_megapixel * count * h * w / 1e6
                                             for rate, (h, w), count in zip(found, hw, plan.evaluations) if rate)
    return Forecast(tuple((w, h) for h, w in hw), plan.evaluations, tuple(tiles),
                    max(planned_bytes(plan.sizes, size_fn, config, speed, tiles, len(styles))), seconds)
