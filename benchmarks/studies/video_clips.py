"""Flicker of stylize-video's consistent mode against --independent on three clips, both real networks, with a control.

    python -m benchmarks video_clips --size 48 --size 128 --json benchmarks/results/video_clips/DATE-CLASS-NETS-SIZEpx.json

The clips (made here at the working size, 8 frames): ``texture``, a random texture of 2x2 blocks panned by (2, 1) px
a frame at 48 px; ``pan``, a window panning over images/chelsea.png by (3, 1) px a frame at 48 px; ``zoom``, a zoom
into images/coffee.png by 4 % a frame. Motion scales with the size. Each clip runs frame by frame
(``--independent``), in the consistent mode, and in the consistent mode again with channels_last float32 (another
summation order of the same maths: the control, which shows how much of a difference is LBFGS's chaos). The style
is images/ihc.png. Rows give the warping error, its ratio to frame by frame's, seconds per frame, and the later
frames' style and content losses. ``--temporal-weight`` (repeatable) sweeps the weight.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np

IMAGES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "images")
CLIPS = ("texture", "pan", "zoom")
FRAMES = 8


def _photo(name: str) -> np.ndarray:
    from PIL import Image

    with Image.open(os.path.join(IMAGES, name)) as image:
        return np.asarray(image.convert("RGB"), dtype=np.float32) / 255


def _resize(array: np.ndarray, width: int, height: int) -> np.ndarray:
    from PIL import Image

    image = Image.fromarray(np.rint(np.clip(array, 0, 1) * 255).astype(np.uint8))
    return np.asarray(image.resize((width, height), Image.Resampling.LANCZOS), dtype=np.float32) / 255


def make_clip(kind: str, width: int, height: int, frames: int = FRAMES, seed: int = 3) -> list[np.ndarray]:
    """``frames`` frames ``(H, W, 3)`` in [0, 1] of the clip ``kind`` at ``width`` x ``height``."""
    scale = width / 48
    if kind == "texture":
        rng = np.random.default_rng(seed)
        dx, dy = round(2 * scale), round(scale)
        blocks = rng.random(((height + dy * frames) // 2 + 2, (width + dx * frames) // 2 + 2, 3)).astype(np.float32)
        field = blocks.repeat(2, 0).repeat(2, 1)
        return [field[t * dy:t * dy + height, t * dx:t * dx + width].copy() for t in range(frames)]
    if kind == "pan":
        dx, dy = 3 * scale, 1 * scale
        photo = _photo("chelsea.png")
        big_w = int(width + dx * frames) + 2
        big = _resize(photo, big_w, round(photo.shape[0] * big_w / photo.shape[1]))
        assert big.shape[0] >= height + dy * frames, "the photo is too wide for this pan"
        return [big[round(t * dy):round(t * dy) + height, round(t * dx):round(t * dx) + width].copy()
                for t in range(frames)]
    if kind == "zoom":
        photo = _photo("coffee.png")
        h, w = photo.shape[:2]
        out = []
        for t in range(frames):
            crop_w = w / 1.04 ** t
            crop_h = crop_w * height / width
            x0, y0 = (w - crop_w) / 2, (h - crop_h) / 2
            from PIL import Image

            image = Image.fromarray(np.rint(photo * 255).astype(np.uint8))
            part = image.resize((width, height), Image.Resampling.LANCZOS, box=(x0, y0, x0 + crop_w, y0 + crop_h))
            out.append(np.asarray(part, dtype=np.float32) / 255)
        return out
    raise ValueError(f"clip must be one of {', '.join(CLIPS)}, got {kind!r}")


def measure(folder: str, style: str, config: object, settings: object, size: int, cnn: object) -> dict:
    """One mode over the clip in ``folder``: seconds per frame, warping error, the later frames' style and content
    losses (of the images handed back; the consistent mode's include no temporal term)."""
    from style_transfer.video.runner import VideoRun, flicker

    video = VideoRun(folder, [style], config, settings)
    began = time.perf_counter()
    result = video.execute()
    total = time.perf_counter() - began
    later = result.frame_losses[1:]  # the frames handed back (a consistent frame's best evaluated image)
    return {"seconds_per_frame": total / result.count, "warping_error": flicker(video, size),
            "style_loss": float(np.mean([e["style"] for e in later])),
            "content_loss": float(np.mean([e["content"] for e in later]))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, action="append", help="working sizes (repeatable); default 48 and 128")
    parser.add_argument("--clip", choices=CLIPS, action="append", help="default: all three")
    parser.add_argument("--steps", type=int, default=None, help="evaluations a frame (default: the command's)")
    parser.add_argument("--frames", type=int, default=FRAMES)
    parser.add_argument("--temporal-weight", type=float, action="append", help="repeatable; default the tool's")
    parser.add_argument("--no-control", action="store_true", help="skip the channels_last control run")
    parser.add_argument("--network", choices=("vgg19", "vgg16"), action="append", help="default: both")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    from style_transfer.config.style import StyleConfig
    from style_transfer.video.runner import VideoSettings
    from style_transfer.video import DEFAULT_TEMPORAL_WEIGHT

    from .. import network as networks, report as reports
    from .flicker import write_frames

    style = os.path.join(IMAGES, "ihc.png")
    rows = []
    for model, weights in networks.installed():
        if args.network and model not in args.network:
            continue
        for size in args.size or [48, 128]:
            width, height = size, size * 2 // 3
            for clip in args.clip or CLIPS:
                with tempfile.TemporaryDirectory() as tmp:
                    folder = write_frames(os.path.join(tmp, clip), make_clip(clip, width, height, args.frames))
                    extra = {} if args.steps is None else {"steps": args.steps}
                    config = StyleConfig(size=size, model=model, weights=weights, device="cpu", **extra)
                    head = {"network": model, "size": f"{width}x{height}", "clip": clip, "steps": config.steps}
                    base = measure(folder, style, config, VideoSettings(independent=True), size, None)
                    rows.append({**head, "mode": "independent", **base})
                    print(json.dumps(rows[-1]), flush=True)
                    for weight in args.temporal_weight or [DEFAULT_TEMPORAL_WEIGHT]:
                        variants = [("consistent", config)]
                        if not args.no_control:
                            import dataclasses

                            variants.append(("control", dataclasses.replace(config, channels_last=True)))
                        for mode, cfg in variants:
                            row = measure(folder, style, cfg, VideoSettings(temporal_weight=weight), size, None)
                            rows.append({**head, "mode": mode, "temporal_weight": weight, **row,
                                         "ratio": row["warping_error"] / base["warping_error"]})
                            print(json.dumps(rows[-1]), flush=True)
    report = reports.start(args, None, rows=rows)  # the networks: each row's
    if args.json:
        reports.write(report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
