"""Masks in video (issue 26.1 with issue 17): ``--style-mask`` / ``--content-mask`` over the frames, each frame's
run taking them at its own working size; a bad mask refused before a frame is read; a changed mask file not
taken for the same run when a stopped video continues."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from PIL import Image

pytest.importorskip("av", reason="the video extra is not installed")
pytest.importorskip("cv2", reason="the video extra is not installed")

from benchmarks.studies.flicker import moving_pattern, style_picture, write_frames  # noqa: E402
from style_transfer.config.style import StyleConfig  # noqa: E402
from style_transfer.losses import masks  # noqa: E402
from style_transfer.video.cli import main  # noqa: E402
from style_transfer.video.runner import VideoRun, VideoSettings  # noqa: E402

from ..helpers import one_error_line, run_command  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.video]

WIDTH, HEIGHT, FRAMES = 48, 32, 3
CONFIG = StyleConfig(size=32, steps=2, weights="random", style_weight=1e9, content_weight=1e3, device="cpu")
SETTINGS = {"temporal_weight": 1e6, "first_frame_steps": 2}


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("video") / "clip"
    write_frames(str(folder), moving_pattern(WIDTH, HEIGHT, FRAMES, (3, 2)))
    return folder


@pytest.fixture(scope="module")
def styles(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("styles")
    paths = [folder / "a.png", folder / "b.png"]
    style_picture(64).save(paths[0])
    style_picture(64).transpose(Image.Transpose.ROTATE_90).save(paths[1])
    return paths


def left_half(path: Path, width: int = WIDTH, height: int = HEIGHT, level: int = 255) -> Path:
    mask = Image.new("L", (width, height), 0)
    mask.paste(level, (0, 0, width // 2, height))
    mask.save(path)
    return path


def test_every_frame_takes_the_masks_at_its_own_size(clip: Path, styles: list[Path], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Style 1 on the left half, style 2 (no mask) on what is left: each frame's run holds both, resized to the
    frame's working size (32x21); and they change the frames (the unmasked video's differ)."""
    seen = []
    real = masks.load_guides

    def spy(*args, **kwargs):
        guides = real(*args, **kwargs)
        seen.append((tuple(args[3]), guides))
        return guides

    monkeypatch.setattr(masks, "load_guides", spy)
    config = dataclasses.replace(CONFIG, style_masks=(str(left_half(tmp_path / "left.png")),))
    masked = VideoRun(clip, styles, config, VideoSettings(**SETTINGS, work_dir=str(tmp_path / "masked")))
    assert masked.execute().stopped == "done"
    runs = [guides for hw, guides in seen if hw == (21, 32)]
    # every run at the frame's working size: one a frame, and one more for each frame painted first (temporal.painted)
    assert len(runs) >= FRAMES and len(runs) == len(seen) - 1, [hw for hw, _ in seen]  # and the check before any
    for guides in runs:
        left, rest = guides.styles
        assert left.shape == rest.shape == (1, 1, 21, 32)
        assert float(left[..., :15].min()) > 0.99 and float(left[..., 17:].max()) < 0.01
        assert float((left + rest - 1).abs().max()) < 1e-6  # the unmasked style: what the mask leaves

    plain = VideoRun(clip, styles, CONFIG, VideoSettings(**SETTINGS, work_dir=str(tmp_path / "plain")))
    assert plain.execute().stopped == "done"
    for index in range(FRAMES):
        assert masked.stylised_frame(index).tobytes() != plain.stylised_frame(index).tobytes(), index


@pytest.mark.parametrize("mask, needle", [
    ("square", "style mask 1 (square.png): 32x32 has another aspect ratio than the video's frames (48x32)"),
    ("black", "style mask 1 (black.png): the mask is empty (all black)"),
], ids=["aspect", "empty"])
def test_a_bad_mask_is_refused_in_one_line_before_a_frame_is_read(
        clip: Path, styles: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mask: str,
        needle: str) -> None:
    from style_transfer.video import runner

    Image.new("L", (32, 32), 255).save(tmp_path / "square.png")
    Image.new("L", (WIDTH, HEIGHT), 0).save(tmp_path / "black.png")
    monkeypatch.setattr(runner, "frames", lambda *a, **k: pytest.fail("a frame was read"))
    out = tmp_path / "out.mp4"
    result = run_command(main, [clip, styles[0], "-o", out, "--weights", "random", "--size", "32", "--steps", "2",
                                "--style-mask", tmp_path / f"{mask}.png", "-q"], exit_code=2)
    assert needle in one_error_line(result)
    assert not out.exists() and not (tmp_path / "out.mp4.frames").exists()


def test_a_stopped_video_does_not_continue_with_another_mask(clip: Path, styles: list[Path],
                                                             tmp_path: Path) -> None:
    """The work folder's frames were made with the mask's bytes, not its name: the same file changed is
    another run (the folder is refused), the same bytes under another name the same run (it continues)."""
    mask = left_half(tmp_path / "mask.png")
    config = dataclasses.replace(CONFIG, style_masks=(str(mask),))
    settings = VideoSettings(**SETTINGS, work_dir=str(tmp_path / "work"))
    first = VideoRun(clip, styles, config, settings)
    stopped = first.execute(on_frame=lambda info: first.cancel("interrupted") if info.index == 0 else None)
    assert (stopped.stopped, stopped.done) == ("interrupted", 1)

    left_half(mask, level=128)  # the same name, another mask
    with pytest.raises(ValueError, match="holds frames of another run .*masks"):
        VideoRun(clip, styles, config, settings).execute()

    moved = left_half(tmp_path / "moved.png")  # the first mask's bytes again, under another name
    again = dataclasses.replace(CONFIG, style_masks=(str(moved),))
    seen = []
    assert VideoRun(clip, styles, again, settings).execute(on_frame=seen.append).stopped == "done"
    assert [f.resumed for f in seen] == [True, False, False]
