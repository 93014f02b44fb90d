"""Which tile each working size of a run uses, and what a tiled run costs in memory (docs/print-size.md):
chosen from the free memory where a size does not fit untiled, refused in one line where nothing fits. The
evaluation over crops itself is ``tiling.tiling``."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch

from .. import memory
from ..config.style import StyleConfig
from ..config.checks import filled
from ..core.steps import TORCH_LBFGS_HISTORY
from ..errors import ResourceError
from ..layers import model_layer_names, resolve_layers
from .crops import Geometry, check_tile, vgg19_geometry, vgg19_mask_bytes, vgg19_target_bytes
from ..fast.speed import Speed


def needs_tiles(height: int, width: int, tile: int | None) -> bool:
    """Whether an image of this size is evaluated in crops: a tile is given and the image is larger."""
    return tile is not None and (height > tile or width > tile)


# Image-sized float32 tensors a tiled run holds besides LBFGS's history and the content targets: the image
# and its gradient, the content image (and its transfer copy), the start image, the last good image kept by
# RunStats, and LBFGS's flat gradient, previous gradient, direction and update (benchmarks/studies/tiling.py measures).
TILED_IMAGE_COPIES = 10
TILE_STEP = 64  # automatic tiles are multiples of this (px)


def tiled_estimate_bytes(content_hw: tuple[int, int], style_hw: tuple[int, int], tile: int,
                         speed: Speed | None = None, target_bytes_per_pixel: float = 0.0) -> int:
    """Memory a tiled run needs beyond the process (``memory.estimate_bytes``'s terms, crop-sized activations).

    A fixed part (``memory.BASE_BYTES`` and one crop's activations, ``tile`` x ``tile`` at most) and parts
    proportional to the picture: LBFGS's history, ``TILED_IMAGE_COPIES`` image copies, the content targets and
    masks (``target_bytes_per_pixel``: ``vgg19_target_bytes``, ``vgg19_mask_bytes``) and the style images (3 floats
    a pixel).
    """
    speed = speed or Speed()
    content = content_hw[0] * content_hw[1]
    crop = min(tile, content_hw[0]) * min(tile, content_hw[1])
    history = memory.LBFGS_HISTORY_BYTES_PER_PIXEL * speed.history_size // TORCH_LBFGS_HISTORY
    per_pixel = history + TILED_IMAGE_COPIES * 12 + target_bytes_per_pixel
    return int(memory.BASE_BYTES + crop * memory.ACTIVATION_BYTES_PER_PIXEL + content * per_pixel
               + style_hw[0] * style_hw[1] * 12)


def plan_tiles(sizes: Sequence[int], size_fn: memory.SizeFn, config: StyleConfig, speed: Speed,
               device: torch.device, available: int | None = None, styles: int = 1) -> list[int | None]:
    """The tile of each working size of a run (None: untiled), checked against the free memory.

    With ``config.tile`` every size gets it (a size smaller than the tile runs untiled). Without it, a size
    whose untiled estimate (``memory.estimate_bytes``) does not fit in the free memory gets the largest
    tile, a multiple of ``TILE_STEP``, whose ``tiled_estimate_bytes`` fits; the others run untiled.

    Arithmetic on the sizes ``size_fn`` gives: ``run.fits.check_fits`` calls it with the sizes the images'
    headers declare, before any image is read at a working size. The untiled estimate counts what the style
    losses keep (``memory.StyleLossPlan`` of ``config`` and its ``styles`` style images).

    Raises:
        ValueError: ``config.tile`` is too small for the layers used (naming the minimum).
        ResourceError: a size fits neither untiled nor tiled (``memory.check_memory``'s message, naming the
            largest size that fits untiled and in tiles, or saying why tiling could not help), or not in
            the tile given.
    """
    available = memory.available_bytes(device) if available is None else available
    geometry, targets = _geometry_and_targets(config, styles)
    losses = memory.StyleLossPlan.of(config, styles)
    tiles: list[int | None] = []

    def in_tiles(size: int) -> tuple[int, int] | None:
        return largest_tiled_size(size, size_fn, available, speed, targets, geometry.minimum_tile)

    for size in reversed(sizes):  # the largest (last) first: a refusal names the size asked for
        content_hw, style_hw = size_fn(size)
        if config.tile is not None:
            tiles.append(config.tile)
            if not needs_tiles(*content_hw, config.tile):
                if available is not None and memory.estimate_bytes(content_hw, style_hw, speed, losses) > available:
                    memory.check_memory(content_hw, style_hw, device, size, size_fn, available, speed, in_tiles(size),
                                        losses)
                continue
            check_tile(config.tile, geometry)
            needed = tiled_estimate_bytes(content_hw, style_hw, config.tile, tiled_speed(speed), targets)
            if available is not None and needed > available:
                untiled = memory.largest_fitting_size(content_hw, style_hw, available, size_fn, speed, losses)
                raise ResourceError(f"size {size} px needs about {needed / memory.GIB:.1f} GiB in tiles of "
                                    f"{config.tile} px but only {available / memory.GIB:.1f} GiB is free on "
                                    f"{device}: {memory.fitting_advice(untiled, in_tiles(size))}")
            continue
        if available is None or memory.estimate_bytes(content_hw, style_hw, speed, losses) <= available:
            tiles.append(None)
            continue
        tile = _largest_tile(content_hw, style_hw, available, tiled_speed(speed), targets, geometry.minimum_tile)
        why = ("backward per-module" if config.backward != "combined" else
               f"style_loss {config.style_loss}" if config.style_loss == "sliced" else
               "precision bf16, channels_last or fused_gram" if speed.changes_model and not speed.levers_optional
               else None)
        if tile is None or why is not None:
            try:
                memory.check_memory(content_hw, style_hw, device, size, size_fn, available, speed,
                                    in_tiles(size) if why is None else None, losses)
            except ResourceError as exc:
                if tile is None:
                    raise
                raise ResourceError(f"{exc}; tiles of {tile} px would fit, but tiling cannot run with {why}") \
                    from None
        tiles.append(tile)
    return tiles[::-1]


def _geometry_and_targets(config: StyleConfig, styles: int) -> tuple[Geometry, float]:
    """The layers' geometry (halo, alignment, smallest tile) and what a tiled run keeps per pixel for its content
    targets and masks."""
    names = model_layer_names(config.model)
    content_layers = resolve_layers(filled(config.content_layers), names)
    style_layers = resolve_layers(filled(config.style_layers), names)
    geometry = vgg19_geometry(tuple(content_layers) + tuple(style_layers), config.model)
    guided = styles if config.style_masks else 0  # masks followed to each loss's whole map (tiling.tiling)
    return geometry, vgg19_target_bytes(content_layers, config.model) + vgg19_mask_bytes(
        style_layers, content_layers, guided, config.content_mask is not None, config.model)


def planned_bytes(sizes: Sequence[int], size_fn: memory.SizeFn, config: StyleConfig, speed: Speed,
                  tiles: Sequence[int | None], styles: int = 1) -> list[int]:
    """The memory each working size needs (``plan_tiles``' estimates): untiled, or in its tile."""
    targets = _geometry_and_targets(config, styles)[1]
    losses = memory.StyleLossPlan.of(config, styles)
    needed = []
    for size, tile in zip(sizes, tiles):
        content_hw, style_hw = size_fn(size)
        needed.append(tiled_estimate_bytes(content_hw, style_hw, tile, tiled_speed(speed), targets)
                      if needs_tiles(*content_hw, tile) and tile is not None else
                      memory.estimate_bytes(content_hw, style_hw, speed, losses))
    return needed


ADVICE_TILE = 512  # the largest tile a refusal suggests: larger crops save little time (docs/print-size.md)


def advice_tile(available: int, minimum: int) -> int:
    """The tile a refusal suggests: the largest multiple of ``TILE_STEP`` up to ``ADVICE_TILE`` whose crop's
    activations take at most a tenth of ``available``, else the smallest the layers allow."""
    smallest = -(-minimum // TILE_STEP) * TILE_STEP
    tile = max(ADVICE_TILE, smallest)
    while tile > smallest and tile * tile * memory.ACTIVATION_BYTES_PER_PIXEL > available // 10:
        tile -= TILE_STEP
    return tile


def largest_tiled_size(size: int, size_fn: memory.SizeFn, available: int | None, speed: Speed, targets: float,
                       minimum: int) -> tuple[int, int] | None:
    """The largest long side up to ``size`` (a multiple of 16) whose run fits in ``available`` in tiles of
    ``advice_tile``, with that tile; None when none fits or the free memory is unknown.

    Tiles bound only the activations: the image, its gradient, the content targets and LBFGS's history
    still grow with the picture (``tiled_estimate_bytes``), so a size can be too large for any tile.
    """
    if available is None:
        return None
    tile = advice_tile(available, minimum)
    best, low, high = None, 1, size // 16  # in units of 16 px
    while low <= high:
        mid = (low + high) // 2
        if tiled_estimate_bytes(*size_fn(16 * mid), tile, tiled_speed(speed), targets) <= available:
            best, low = 16 * mid, mid + 1
        else:
            high = mid - 1
    return None if best is None else (best, tile)


def _largest_tile(content_hw: tuple[int, int], style_hw: tuple[int, int], available: int, speed: Speed,
                  targets: float, minimum: int) -> int | None:
    tile = (max(content_hw) - 1) // TILE_STEP * TILE_STEP
    while tile >= minimum:
        if tiled_estimate_bytes(content_hw, style_hw, tile, speed, targets) <= available:
            return tile
        tile -= TILE_STEP
    return None


TILED_HISTORY_SIZE = 10  # LBFGS pairs at a tiled size, at most (scipy's L-BFGS-B keeps 10 too)


def tiled_speed(speed: Speed) -> Speed:
    """The settings at a tiled size: none of the levers that change the model, and LBFGS's history cut
    to ``TILED_HISTORY_SIZE`` pairs. Each pair costs 24 B per pixel, so torch's 100 would be 2400 B per
    pixel, four times all the rest a tiled run keeps per pixel (``tiled_estimate_bytes``)."""
    return dataclasses.replace(speed, precision="fp32", channels_last=False, fused_gram=False,
                               history_size=min(speed.history_size, TILED_HISTORY_SIZE))
