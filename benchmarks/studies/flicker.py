"""Flicker (Lai et al.'s warping error) of stylize-video's consistent mode against --independent, and its time.

    nice -n 19 python -m benchmarks flicker --size 48 --frames 5 --steps 20 --weights random
    python -m benchmarks flicker --size 256 --size 512 --weights imagenet --json out.json   # a GPU machine

On a synthetic clip (a smooth random pattern moving by (3, 2) px per frame at the largest size, with a
still square in front so that part of the background is disoccluded): seconds per frame in both modes,
the share of the consistent mode's time spent on flow and masks, and the ratio of the warping errors
(consistent / independent; below 1 is less flicker). ``--temporal-weight`` may be given several times:
the calibration sweep of docs/video.md. ``--model``, ``--weights`` and ``--preprocess`` name the network as
the command's (default VGG19 with seeded random weights); the loss weights are the preset's for its input scale
unless given. The JSON records the network (model, the weights' base name, preprocessing) beside the machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time

import numpy as np


def moving_pattern(width: int, height: int, frames: int, shift: tuple[float, float] = (3.0, 2.0), *,
                   square: bool = True, seed: int = 0) -> list[np.ndarray]:
    """Frames ``(H, W, 3)`` float32 in [0, 1]: a sum of random sinusoids translated by ``shift`` px per frame
    (exact at every sub-pixel position), with an optional still dark square over the middle third."""
    rng = np.random.default_rng(seed)
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float64)
    waves = [(rng.uniform(0.05, 0.25) * rng.choice([-1, 1]), rng.uniform(0.05, 0.25) * rng.choice([-1, 1]),
              rng.uniform(0, 2 * math.pi), rng.random(3)) for _ in range(6)]
    out = []
    for t in range(frames):
        x, y = xs - shift[0] * t, ys - shift[1] * t
        image = np.zeros((height, width, 3))
        for kx, ky, phase, colour in waves:
            image += np.sin(kx * x + ky * y + phase)[..., None] * colour
        image = 0.5 + 0.5 * image / sum(colour for *_, colour in waves)  # a fixed range: frames differ by the shift only
        if square:
            image[height // 3: 2 * height // 3, width // 3: 2 * width // 3] = 0.1
        out.append(image.astype(np.float32))
    return out


def moving_square(width: int, height: int, frames: int, shift: tuple[int, int] = (3, 0), side: int = 24, *,
                  seed: int = 0) -> list[np.ndarray]:
    """Frames ``(H, W, 3)``: a still textured background, a textured square moving by ``shift`` px per frame
    from ``(width // 4, height // 4)``; its trailing edge uncovers a strip of background each frame."""
    background = moving_pattern(width, height, 1, square=False, seed=seed)[0]
    texture = moving_pattern(side, side, 1, square=False, seed=seed + 5)[0] * 0.6 + 0.4
    out = []
    for t in range(frames):
        image = background.copy()
        x, y = width // 4 + shift[0] * t, height // 4 + shift[1] * t
        image[y:y + side, x:x + side] = texture
        out.append(image)
    return out


def write_frames(folder: str, pictures: list[np.ndarray]) -> str:
    """The frames as PNG files ``frame_000.png`` ... in ``folder`` (a folder-of-frames input)."""
    from PIL import Image

    os.makedirs(folder, exist_ok=True)
    for i, picture in enumerate(pictures):
        Image.fromarray(np.rint(picture * 255).astype(np.uint8)).save(os.path.join(folder, f"frame_{i:03d}.png"))
    return folder


def style_picture(size: int = 64, seed: int = 1) -> "object":
    """A stripy synthetic style image (Pillow)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    ys, xs = np.mgrid[0:size, 0:size]
    image = np.stack([np.sin(xs * 0.7 + c) * 0.5 + 0.5 for c in rng.uniform(0, 3, 3)], -1)
    image = image * (0.6 + 0.4 * (np.sin(ys * 0.3)[..., None] > 0))
    return Image.fromarray(np.rint(image * 255).astype(np.uint8))


def measure(folder: str, style: object, config: object, settings: object) -> dict:
    """Run one mode over the clip in ``folder``: seconds per frame, flow share, warping error."""
    from style_transfer.run.prepare import default_size, resolve_device
    from style_transfer.video.runner import VideoRun, flicker

    video = VideoRun(folder, [style], config, settings)
    last: dict[int, object] = {}
    began = time.perf_counter()
    result = video.execute(on_event=lambda index, info: last.__setitem__(index, info))
    total = time.perf_counter() - began
    size = config.size or default_size(resolve_device(config.device))
    later = [last[i] for i in sorted(last) if i > 0]  # frames after the first: what the temporal term changes
    return {"seconds_per_frame": total / result.count, "flow_share": sum(result.flow_seconds) / total,
            "warping_error": flicker(video, size), "stopped": result.stopped,
            # the price: the style and content losses the later frames end with (lower is better stylised)
            "style_loss": sum(e.style_loss for e in later) / len(later) if later else None,
            "content_loss": sum(e.content_loss for e in later) / len(later) if later else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, action="append", help="working sizes (repeatable); default 48")
    parser.add_argument("--frames", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--first-frame-steps", type=int, default=None)
    parser.add_argument("--temporal-weight", type=float, action="append", help="repeatable; default the tool's")
    from .. import network as networks, report as reports

    networks.add_options(parser)
    parser.add_argument("--style-weight", type=float, default=None)
    parser.add_argument("--content-weight", type=float, default=None)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)

    from style_transfer.config.style import StyleConfig
    from style_transfer.video.runner import VideoSettings
    from style_transfer.video import default_temporal_weight

    rows = []
    for size in args.size or [48]:
        width, height = size, max(16, size * 2 // 3)
        scale = size / 48  # the motion: (3, 2) px per frame at 48 px, in proportion at other sizes
        with tempfile.TemporaryDirectory() as tmp:
            folder = write_frames(os.path.join(tmp, "clip"), moving_pattern(width, height, args.frames,
                                                                            (3 * scale, 2 * scale)))
            extra = {k: v for k, v in (("style_weight", args.style_weight), ("content_weight", args.content_weight))
                     if v is not None}
            config = StyleConfig(size=size, steps=args.steps, model=args.model, weights=args.weights,
                                 preprocess=args.preprocess, device=args.device, **extra)
            base = measure(folder, style_picture(), config, VideoSettings(independent=True))
            rows.append({"size": size, "mode": "independent", **base})
            for weight in args.temporal_weight or [default_temporal_weight(config.preprocess)]:  # the network's
                row = measure(folder, style_picture(), config,
                              VideoSettings(temporal_weight=weight, first_frame_steps=args.first_frame_steps))
                row.update(size=size, mode="consistent", temporal_weight=weight,
                           ratio=row["warping_error"] / base["warping_error"] if base["warping_error"] else None)
                rows.append(row)
    for row in rows:
        print(json.dumps(row))
    report = reports.start(args, networks.block(args.model, args.weights, config.preprocess), rows=rows)
    if args.json:
        reports.write(report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
