"""The temporal weight is relative to the frame's start loss (video/temporal.py): one default for every network."""

from __future__ import annotations

from pathlib import Path

import pytest

from style_transfer.config.style import StyleConfig
from style_transfer.video.runner import VideoRun, VideoSettings
from style_transfer.video import DEFAULT_TEMPORAL_WEIGHT, default_temporal_weight

from ..conftest import small_image


def test_every_input_scale_has_the_same_weight() -> None:
    assert default_temporal_weight("torchvision") == default_temporal_weight(None) == DEFAULT_TEMPORAL_WEIGHT
    assert default_temporal_weight("caffe") == default_temporal_weight("caffe256") == DEFAULT_TEMPORAL_WEIGHT


@pytest.mark.parametrize("fields, given, runs", [
    ({}, None, DEFAULT_TEMPORAL_WEIGHT),  # torchvision's (random weights)
    ({"preprocess": "caffe"}, None, DEFAULT_TEMPORAL_WEIGHT),  # the Keras VGG16's scale: the same, relative
    ({"preprocess": "caffe"}, 5.0, 5.0),  # a weight given is kept
    ({"preprocess": "caffe"}, 0.0, 0.0),  # 0 too: the warped start only
])
def test_a_video_run_resolves_its_weight(tmp_path: Path, fields: dict, given: float | None, runs: float) -> None:
    """VideoRun resolves the weight before any work, so its fingerprint (work.json) holds what runs."""
    clip = tmp_path / "clip"
    clip.mkdir()
    for i in range(2):
        small_image("chelsea.png", (32, 21)).save(clip / f"frame_{i:03d}.png")
    small_image("ihc.png", (32, 32)).save(tmp_path / "style.png")
    config = StyleConfig(size=32, steps=1, weights="random", device="cpu", **fields)
    video = VideoRun(clip, [str(tmp_path / "style.png")], config, VideoSettings(temporal_weight=given))
    assert video.settings.temporal_weight == runs
    assert video.fingerprint()["video"]["temporal_weight"] == runs
