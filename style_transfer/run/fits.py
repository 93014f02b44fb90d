"""Whether a run fits before it starts: ``check_fits``, from the images' declared sizes alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from ..config.checks import filled
from ..config.style import StyleConfig
from ..fast.fast import speed_from_config
from ..io.images import ImageSource
from ..tiling.plans import plan_tiles
from .plans import scale_sizes
from .prepare import device_and_size, header_sizes


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
