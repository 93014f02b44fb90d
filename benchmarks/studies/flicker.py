"""Flicker (Lai et al.'s warping error) of stylize-video's consistent mode against --independent, and its time.

    nice -n 19 python -m benchmarks flicker --size 48 --frames 5 --steps 20     # the pattern, random weights
    python -m benchmarks flicker --real --clip texture --clip pan --clip zoom --size 48 --size 128 --frames 8 \\
        --steps 300 --control --json benchmarks/results/video_clips/DATE-CLASS-NETS-SIZEpx.json   # docs/video.md

Clips made at the working size: ``pattern`` (``moving_pattern`` in a stripy synthetic style) and the photo clips of
``make_clip`` in images/ihc.png. Each runs frame by frame and consistent at each ``--temporal-weight`` (``--control``:
also channels_last float32, LBFGS's chaos); the rows: docs/video.md, "The flicker figure".
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import tempfile
import time

import numpy as np

from .. import ROOT

CLIPS = ("texture", "pan", "zoom")  # the clips of real pictures (docs/video.md's table)


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


def make_clip(kind: str, width: int, height: int, frames: int = 8, seed: int = 3) -> list[np.ndarray]:
    """``frames`` frames ``(H, W, 3)`` in [0, 1] of the clip ``kind`` (one of ``CLIPS``) at ``width`` x ``height``."""
    from PIL import Image

    scale = width / 48
    if kind == "texture":
        rng = np.random.default_rng(seed)
        dx, dy = round(2 * scale), round(scale)
        blocks = rng.random(((height + dy * frames) // 2 + 2, (width + dx * frames) // 2 + 2, 3)).astype(np.float32)
        field = blocks.repeat(2, 0).repeat(2, 1)
        return [field[t * dy:t * dy + height, t * dx:t * dx + width].copy() for t in range(frames)]
    if kind not in CLIPS:
        raise ValueError(f"clip must be one of {', '.join(CLIPS)}, got {kind!r}")
    with Image.open(ROOT / "images" / ("chelsea.png" if kind == "pan" else "coffee.png")) as opened:
        photo = opened.convert("RGB")
    w, h = photo.size
    if kind == "pan":
        dx, dy = 3 * scale, 1 * scale
        big_w = int(width + dx * frames) + 2
        big = np.asarray(photo.resize((big_w, round(h * big_w / w)), Image.Resampling.LANCZOS), dtype=np.float32) / 255
        if big.shape[0] < height + dy * frames:
            raise ValueError("the photo is too wide for this pan")
        return [big[round(t * dy):round(t * dy) + height, round(t * dx):round(t * dx) + width].copy()
                for t in range(frames)]
    out = []
    for t in range(frames):  # zoom: a crop 4 % smaller each frame, about the middle
        crop_w = w / 1.04 ** t
        crop_h = crop_w * height / width
        x0, y0 = (w - crop_w) / 2, (h - crop_h) / 2
        part = photo.resize((width, height), Image.Resampling.LANCZOS, box=(x0, y0, x0 + crop_w, y0 + crop_h))
        out.append(np.asarray(part, dtype=np.float32) / 255)
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


def measure(folder: str, style: object, config: object, settings: object, size: int) -> dict:
    """One mode over the clip in ``folder``: seconds per frame, flow's share, warping error, later frames' losses."""
    from style_transfer.video.runner import VideoRun, flicker

    video = VideoRun(folder, [style], config, settings)
    began = time.perf_counter()
    result = video.execute()
    total = time.perf_counter() - began
    later = result.frame_losses[1:]  # what the temporal term changes: the frames after the first
    return {"seconds_per_frame": total / result.count, "flow_share": sum(result.flow_seconds) / total,
            "warping_error": flicker(video, size), "stopped": result.stopped,
            "style_loss": float(np.mean([e["style"] for e in later])) if later else None,
            "content_loss": float(np.mean([e["content"] for e in later])) if later else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, action="append", help="working sizes (repeatable); default 48")
    parser.add_argument("--clip", choices=("pattern", *CLIPS), action="append", help="repeatable; default pattern")
    parser.add_argument("--frames", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20, help="evaluations a frame (the command's --steps)")
    parser.add_argument("--first-frame-steps", type=int, default=None)
    parser.add_argument("--temporal-weight", type=float, action="append", help="repeatable; default the tool's")
    parser.add_argument("--control", action="store_true", help="also the consistent mode in channels_last fp32")
    from .. import network as networks, report as reports

    networks.add_options(parser)
    parser.add_argument("--real", action="store_true", help="each installed real network, not --model/--weights")
    parser.add_argument("--style-weight", type=float, default=None)
    parser.add_argument("--content-weight", type=float, default=None)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)

    from style_transfer.config.style import StyleConfig
    from style_transfer.video.runner import VideoSettings
    from style_transfer.video import DEFAULT_TEMPORAL_WEIGHT

    nets = networks.installed() if args.real else [(args.model, args.weights)]
    extra = {k: v for k, v in (("style_weight", args.style_weight), ("content_weight", args.content_weight))
             if v is not None}
    rows = []
    for model, weights in nets:
        for size in args.size or [48]:
            width, height = size, max(16, size * 2 // 3)
            config = StyleConfig(size=size, steps=args.steps, model=model, weights=weights,
                                 preprocess=None if args.real else args.preprocess, device=args.device, **extra)
            for clip in args.clip or ["pattern"]:
                style = style_picture() if clip == "pattern" else str(ROOT / "images" / "ihc.png")
                frames = (make_clip(clip, width, height, args.frames) if clip != "pattern" else
                          moving_pattern(width, height, args.frames, (3 * size / 48, 2 * size / 48)))
                head = {"network": model, "size": size, "shape": [height, width], "clip": clip, "steps": args.steps}
                with tempfile.TemporaryDirectory() as tmp:
                    folder = write_frames(os.path.join(tmp, clip), frames)
                    base = measure(folder, style, config, VideoSettings(independent=True), size)
                    rows.append({**head, "mode": "independent", **base})
                    print(json.dumps(rows[-1]), flush=True)
                    for weight in args.temporal_weight or [DEFAULT_TEMPORAL_WEIGHT]:
                        modes = [("consistent", config)] + [
                            ("control", dataclasses.replace(config, channels_last=True))] * args.control
                        for mode, cfg in modes:
                            settings = VideoSettings(temporal_weight=weight, first_frame_steps=args.first_frame_steps)
                            row = measure(folder, style, cfg, settings, size)
                            ratio = row["warping_error"] / base["warping_error"] if base["warping_error"] else None
                            rows.append({**head, "mode": mode, "temporal_weight": weight, **row, "ratio": ratio})
                            print(json.dumps(rows[-1]), flush=True)
    network = None if args.real else networks.block(args.model, args.weights, config.preprocess)  # --real: each row's
    report = reports.start(args, network, rows=rows)
    if args.json:
        reports.write(report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
