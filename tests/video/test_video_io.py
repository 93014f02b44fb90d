"""Video (issue 17): reading and writing with PyAV. Timestamps of a variable-frame-rate clip, the display
rotation and the audio packets survive (audio byte for byte); animated GIF and folder-of-frames inputs;
bad inputs and a missing extra give one line."""

from __future__ import annotations

import fractions
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

av = pytest.importorskip("av", reason="the video extra is not installed")

from style_transfer.errors import MissingExtra  # noqa: E402
from style_transfer.video import VideoError, require  # noqa: E402
from style_transfer.video.io import frames, probe, write_video  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
VFR_PTS = (0, 40, 120, 130, 300)  # milliseconds: gaps of 40, 80, 10, 170


def make_clip(path: Path, pts=VFR_PTS, *, width: int = 48, height: int = 32, rotation: int = 90,
              audio: bool = True) -> Path:
    """An H.264 MP4 with the given timestamps (ms), a display rotation and a mono AAC track."""
    rng = np.random.default_rng(0)
    with av.open(str(path), "w") as out:
        video = out.add_stream("libx264")
        video.width, video.height, video.pix_fmt = width, height, "yuv420p"
        video.time_base = video.codec_context.time_base = fractions.Fraction(1, 1000)
        if rotation:
            video.set_display_rotation(rotation)
        sound = out.add_stream("aac", rate=8000) if audio else None
        for i, p in enumerate(pts):
            picture = np.clip(rng.random((height, width, 3)) * 80 + i * 35, 0, 255).astype(np.uint8)
            frame = av.VideoFrame.from_ndarray(picture, format="rgb24")
            frame.pts, frame.time_base = p, video.time_base
            for packet in video.encode(frame):
                out.mux(packet)
        for packet in video.encode():
            out.mux(packet)
        if sound is not None:
            for k in range(6):
                samples = (rng.random((1, 1024)) - 0.5).astype(np.float32)
                chunk = av.AudioFrame.from_ndarray(samples, format="fltp", layout="mono")
                chunk.sample_rate, chunk.pts = 8000, k * 1024
                for packet in sound.encode(chunk):
                    out.mux(packet)
            for packet in sound.encode():
                out.mux(packet)
    return path


def audio_packets(path: Path) -> list[tuple[int | None, bytes]]:
    with av.open(str(path)) as container:
        return [(p.pts, bytes(p)) for p in container.demux(container.streams.audio[0]) if p.size]


def frame_times(path: Path) -> tuple[list[float], int]:
    with av.open(str(path)) as container:
        decoded = list(container.decode(container.streams.video[0]))
        return [float(f.pts * f.time_base) for f in decoded], decoded[0].rotation


def test_timestamps_rotation_and_audio_survive_a_rewrite(tmp_path: Path) -> None:
    source = make_clip(tmp_path / "in.mp4")
    clip = probe(source)
    assert (clip.width, clip.height, clip.count, clip.rotation, clip.audio) == (48, 32, 5, 90, 1)
    assert clip.seconds == pytest.approx([p / 1000 for p in VFR_PTS])
    pictures = [Image.new("RGB", (48, 32), (40 * i, 200 - 40 * i, 90)) for i in range(clip.count)]
    out = tmp_path / "out.mp4"
    write_video(out, pictures, clip)
    times, rotation = frame_times(out)
    assert times == pytest.approx([p / 1000 for p in VFR_PTS], abs=1e-6)  # variable frame rate kept
    assert rotation == 90
    before, after = audio_packets(source), audio_packets(out)
    assert len(before) >= 5 and [data for _, data in after] == [data for _, data in before]  # byte for byte
    with av.open(str(out)) as container:
        assert container.streams.video[0].codec_context.name == "h264"
        assert container.streams.audio[0].codec_context.name == "aac"
        decoded = next(container.decode(container.streams.video[0])).to_ndarray(format="rgb24")
    assert np.abs(decoded.astype(int) - np.asarray(pictures[0], dtype=int)).mean() < 8  # our pictures went in


def test_a_gif_input_and_a_folder_of_frames(tmp_path: Path) -> None:
    pictures = [Image.new("RGB", (40, 30), (60 * i, 100, 250 - 60 * i)) for i in range(4)]
    gif = tmp_path / "in.gif"
    pictures[0].save(gif, save_all=True, append_images=pictures[1:], duration=[100, 200, 100, 300], loop=0)
    clip = probe(gif)
    assert (clip.width, clip.height, clip.count, clip.audio) == (40, 30, 4, 0)
    assert clip.seconds == pytest.approx([0, 0.1, 0.3, 0.4])  # the GIF's own frame durations
    got = list(frames(clip))
    assert [p.getpixel((5, 5)) for p in got] == [p.getpixel((5, 5)) for p in pictures]
    folder = tmp_path / "frames"
    folder.mkdir()
    for i, picture in enumerate(pictures):
        picture.save(folder / f"f{i:02d}.png")
    (folder / "notes.txt").write_text("not a frame")
    clip = probe(folder, fps=10)
    assert clip.folder and clip.count == 4 and clip.seconds == pytest.approx([0, 0.1, 0.2, 0.3])
    assert [p.getpixel((5, 5)) for p in frames(clip)] == [p.getpixel((5, 5)) for p in pictures]
    out = tmp_path / "out.gif"
    write_video(out, pictures, probe(gif))
    assert probe(out).count == 4 and probe(out).seconds == pytest.approx([0, 0.1, 0.3, 0.4])


def test_bad_inputs_give_one_line(tmp_path: Path) -> None:
    text = tmp_path / "notes.mp4"
    text.write_text("hello, not a video\n" * 10)
    with pytest.raises(VideoError, match="notes.mp4: not a readable video"):
        probe(text)
    with pytest.raises(VideoError, match="no such file"):
        probe(tmp_path / "missing.mp4")
    sound_only = tmp_path / "sound.m4a"
    with av.open(str(sound_only), "w") as out:
        stream = out.add_stream("aac", rate=8000)
        chunk = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
        chunk.sample_rate, chunk.pts = 8000, 0
        for packet in [*stream.encode(chunk), *stream.encode()]:
            out.mux(packet)
    with pytest.raises(VideoError, match="has no video stream"):
        probe(sound_only)
    folder = tmp_path / "sizes"
    folder.mkdir()
    Image.new("RGB", (40, 30)).save(folder / "a.png")
    Image.new("RGB", (42, 30)).save(folder / "b.png")
    with pytest.raises(VideoError, match="b.png: 42x30, the frames before are 40x30"):
        probe(folder)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(VideoError, match="no image files"):
        probe(empty)
    with pytest.raises(VideoError, match="unknown video extension '.png'"):
        write_video(tmp_path / "x.png", [], None)  # type: ignore[arg-type]  # refused before the clip is used


def test_the_command_says_a_wrong_path_is_a_usage_error(tmp_path: Path) -> None:
    """Issue 33.10: IN, a STYLE or a mask that names no file to read exits 2; a file that is no video exits 1."""
    from style_transfer.video.cli import main

    from ..helpers import one_error_line, run_command

    style, text = tmp_path / "style.png", tmp_path / "notes.mp4"
    Image.new("RGB", (32, 32), (200, 50, 50)).save(style)
    text.write_text("hello, not a video\n" * 10)
    out = tmp_path / "out" / "o.mp4"
    out.parent.mkdir()
    for args, code, wanted in (([tmp_path / "missing.mp4", style], 2, "missing.mp4: no such file"),
                               ([text, tmp_path / "nope.png"], 2, "nope.png: no such file"),
                               ([text, style, "--style-mask", tmp_path], 2, f"--style-mask {tmp_path}: is a directory"),
                               ([text, style], 1, "notes.mp4: not a readable video")):
        line = one_error_line(run_command(main, [*args, "-o", out, "--weights", "random", "--size", "32", "-q"], code))
        assert wanted in line, line
    assert list(out.parent.iterdir()) == []


def test_without_the_extra_one_line_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    real = importlib.import_module

    def refuse(name: str, *args: object) -> object:
        if name in ("av", "cv2"):
            raise ImportError(f"No module named {name!r}")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", refuse)
    with pytest.raises(MissingExtra, match=r"pip install 'style_transfer\[video\]'"):
        require("av")
    with pytest.raises(MissingExtra, match="opencv-python-headless"):
        require("cv2")


@pytest.mark.slow
def test_the_command_without_the_extra_says_so_in_one_line(tmp_path: Path) -> None:
    style = tmp_path / "style.png"
    Image.new("RGB", (32, 32), (200, 50, 50)).save(style)
    (tmp_path / "in.mp4").write_bytes(bytes(64))  # there (a missing IN is a usage error first); never read
    code = ("import sys; sys.modules['av'] = None; sys.modules['cv2'] = None\n"
            "from style_transfer.video.cli import main\n"
            f"main([{str(tmp_path / 'in.mp4')!r}, {str(style)!r}, '-o', {str(tmp_path / 'out.mp4')!r}])")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "Error: video needs PyAV (av), which is not installed: pip install 'style_transfer[video]'"]
    assert not (tmp_path / "out.mp4").exists()


@pytest.mark.slow
def test_the_command_module_imports_neither_torch_nor_the_extra() -> None:
    code = ("import sys, style_transfer.video.cli; "
            "print(sorted(m for m in ('torch', 'av', 'cv2', 'numpy', 'tqdm') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
