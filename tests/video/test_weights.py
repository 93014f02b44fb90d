"""The temporal weight follows the network's input scale (issue 23.4): 1e3 for torchvision's, 3.4e6 for Caffe's."""

from __future__ import annotations

from pathlib import Path

import pytest

from style_transfer.config import StyleConfig
from style_transfer.video.runner import VideoRun, VideoSettings
from style_transfer.video.weights import CAFFE_TEMPORAL_WEIGHT, DEFAULT_TEMPORAL_WEIGHT, default_temporal_weight

from ..conftest import small_image


def test_each_input_scale_has_its_weight() -> None:
    assert (DEFAULT_TEMPORAL_WEIGHT, CAFFE_TEMPORAL_WEIGHT) == (1e3, 3.4e6)
    assert default_temporal_weight("torchvision") == default_temporal_weight(None) == DEFAULT_TEMPORAL_WEIGHT
    assert default_temporal_weight("caffe") == default_temporal_weight("caffe256") == CAFFE_TEMPORAL_WEIGHT


@pytest.mark.parametrize("fields, given, runs", [
    ({}, None, DEFAULT_TEMPORAL_WEIGHT),  # torchvision's (random weights)
    ({"preprocess": "caffe"}, None, CAFFE_TEMPORAL_WEIGHT),  # the Keras VGG16's scale
    ({"preprocess": "caffe256"}, None, CAFFE_TEMPORAL_WEIGHT),  # neural-style-pt's files
    ({"preprocess": "caffe"}, 5.0, 5.0),  # a weight given is kept
    ({"preprocess": "caffe"}, 0.0, 0.0),  # 0 too: the warped start only
])
def test_a_video_run_picks_its_networks_weight(tmp_path: Path, fields: dict, given: float | None,
                                               runs: float) -> None:
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
