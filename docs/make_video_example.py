"""Make docs/video-random-weights.gif: a short pan over a sample photo, stylised frame by frame
(``--independent``) and with temporal consistency (the default), side by side with the input.

    python docs/make_video_example.py [OUT.gif]

It runs ``stylize-video`` twice on a folder of frames (seeded random VGG19 weights, as everywhere on
the machine these pages were made on: no art, but what flicker looks like and what the temporal loss
does to it) and joins the three clips frame by frame. Both weights are scaled by 1000, as in the
tests, so that LBFGS behaves as it does with pretrained weights. About a minute on 2 CPU cores.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image, ImageDraw, ImageSequence

ROOT = Path(__file__).resolve().parent.parent
WIDTH, HEIGHT, FRAMES, SHIFT = 128, 96, 10, (3, 1)  # a 128x96 window moving 3 px right, 1 px down per frame
SETTINGS = ["--size", "128", "--steps", "30", "--weights", "random", "--style-weight", "1e9",
            "--content-weight", "1e3", "--temporal-weight", "1e6", "--seed", "0", "-q"]


def pan(folder: Path) -> None:
    """The input clip: a window sliding over images/chelsea.png, as frame_000.png ... in ``folder``."""
    folder.mkdir()
    with Image.open(ROOT / "images" / "chelsea.png") as photo:
        photo = photo.convert("RGB").resize((WIDTH * 2, WIDTH * 2 * photo.height // photo.width))
    for t in range(FRAMES):
        x, y = 40 + SHIFT[0] * t, 30 + SHIFT[1] * t
        photo.crop((x, y, x + WIDTH, y + HEIGHT)).save(folder / f"frame_{t:03d}.png")


def gif_frames(path: Path) -> list[Image.Image]:
    with Image.open(path) as clip:
        return [frame.convert("RGB") for frame in ImageSequence.Iterator(clip)]


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "video-random-weights.gif"
    with tempfile.TemporaryDirectory(prefix="video-example-") as tmp:
        folder = Path(tmp)
        pan(folder / "in")
        style = ROOT / "images" / "ihc.png"
        clips = {}
        for name, extra in (("independent", ["--independent"]), ("consistent", [])):
            clips[name] = folder / f"{name}.gif"
            subprocess.run([sys.executable, "-m", "style_transfer.video.cli", str(folder / "in"), str(style),
                            "-o", str(clips[name]), "--fps", "8", *SETTINGS, *extra], check=True)
        inputs = [Image.open(p).convert("RGB") for p in sorted((folder / "in").glob("frame_*.png"))]
        columns = [inputs, gif_frames(clips["independent"]), gif_frames(clips["consistent"])]
        labels = ["input", "frame by frame", "temporal loss"]
        joined = []
        for frames in zip(*columns):
            sheet = Image.new("RGB", (3 * WIDTH + 8, HEIGHT + 14), "white")
            draw = ImageDraw.Draw(sheet)
            for i, (frame, label) in enumerate(zip(frames, labels)):
                sheet.paste(frame.resize((WIDTH, HEIGHT)), (i * (WIDTH + 4), 14))
                draw.text((i * (WIDTH + 4) + 2, 1), label, fill="black")
            joined.append(sheet)
        joined[0].save(out, save_all=True, append_images=joined[1:], duration=125, loop=0, optimize=True)
    print(f"{out}: {len(joined)} frames, {out.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
