"""The suite's tiers: what keeps the quick run (``-m "not slow"``) quick and the whole suite short.

- One frozen VGG per layout with seed 0's random weights (what every run with weights "random" builds) is made
  once for the session and handed to every such ``load_network``: building one takes about 0.2 s, and about 250
  tests run the product on one. Each test checks that it did not change them (``changed_networks``), and the
  session's end compares them bit for bit with a fresh build (``networks_not_as_built``).
- A test that uses a real pretrained network (seconds to read and dequantise; the fixtures ``REAL_NETWORK_FIXTURES``
  fail the collection, a load of the original VGG19 or VGG16 file the test) or starts a Python child process
  (seconds each: torch's import) must be marked slow.

Loaded by ``tests/conftest.py`` (``configure``).
"""

from __future__ import annotations

import _posixsubprocess
import functools
import os
import subprocess
import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
import torch

from style_transfer.networks import vgg

REAL_NETWORK_FIXTURES = ("vgg16", "vgg16_onnx", "vgg19_original", "real")
SHARE = True  # False (the conftest's fresh_random_networks): each load builds its network, for tests of the building

_SHARED: dict[str, vgg.Network] = {}
_FINGERPRINTS: dict[str, list[tuple]] = {}
_CHILDREN = [0]  # Python child processes started since the running test's setup began
_REAL = [0]  # real pretrained networks loaded since then


def configure(config: pytest.Config) -> None:
    _share_cores()
    _share_random_networks()
    _real_files()  # now, before any test stands in for the packages that hold them
    # subprocess (its own binding of the name) and multiprocessing start every child through fork_exec
    if getattr(subprocess, "_fork_exec", None) is not None:
        subprocess._fork_exec = _counting_children(subprocess._fork_exec)
    _posixsubprocess.fork_exec = _counting_children(_posixsubprocess.fork_exec)
    config.pluginmanager.register(_Tiers(), "tiers")


def _share_cores() -> None:
    """Under ``pytest -n N`` each worker gets its share of the cores, pinned, and as many torch threads: the
    commands run in-process take their thread count from the cores they see (physical_cores), and on the suite's
    tiny images a second thread spins more than it helps."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if workers <= 1 or not worker.startswith("gw"):
        return
    cores = sorted(os.sched_getaffinity(0))
    share = len(cores) // workers
    if share >= 1:
        index = int(worker[2:]) % workers
        os.sched_setaffinity(0, cores[index * share:(index + 1) * share])
    torch.set_num_threads(max(1, share))


def _fingerprint(features: torch.nn.Module) -> list[tuple]:
    """What a test could change of a module, cheap to read: each parameter's identity, in-place version, dtype
    and requires_grad, each layer's identity, mode and hooks."""
    return ([(id(p), p._version, p.requires_grad, p.dtype, p.device) for p in features.parameters()]
            + [(id(m), m.training, len(m._forward_hooks), len(m._forward_pre_hooks), len(m._backward_hooks))
               for m in features.modules()])


def shared_random_network(model: str = "vgg19") -> vgg.Network:
    """The session's frozen VGG (``model``) with seed 0's random weights; never modify it (each test checks)."""
    if model not in _SHARED:
        _SHARED[model] = vgg.Network(vgg.freeze(vgg.random_vgg_features(model, 0)), model, "torchvision")
        _FINGERPRINTS[model] = _fingerprint(_SHARED[model].features)
    return _SHARED[model]


def changed_networks() -> list[str]:
    """The shared networks a test changed since they were built; they are dropped (the next test builds afresh)."""
    changed = [model for model, network in _SHARED.items() if _fingerprint(network.features) != _FINGERPRINTS[model]]
    for model in changed:
        del _SHARED[model]
    return changed


def networks_not_as_built() -> list[str]:
    """The shared networks whose weights differ from a fresh build's."""
    changed = []
    for model, network in _SHARED.items():
        fresh = vgg.random_vgg_features(model, 0).state_dict()
        changed += [f"{model} {k}" for k, v in network.features.state_dict().items() if not torch.equal(v, fresh[k])]
    return changed


def _share_random_networks() -> None:
    """Make ``load_network(model, "random")`` with seed 0 hand out the session's network, in the module that
    defines it and in each module that imported it (modules imported later take it from these). Other seeds
    load afresh: the tests of the loading itself use them."""
    original = vgg.load_network

    def load_network(model: str = "vgg19", weights: str = "imagenet", *, preprocess: str | None = None,
                     seed: int = 0, **kwargs: Any) -> vgg.Network:
        if SHARE and weights == "random" and seed == 0 and model in vgg.VGG_LAYOUTS and preprocess in (None, *vgg.PREPROCESSINGS):
            shared = shared_random_network(model)
            return shared if preprocess in (None, shared.preprocess) else vgg.Network(shared.features, model, preprocess)
        network = original(model, weights, preprocess=preprocess, seed=seed, **kwargs)
        if weights == vgg.ORIGINAL or os.path.realpath(weights) in _real_files():
            _REAL[0] += 1
        return network

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("style_transfer") and getattr(module, "load_network",
                                                                                      None) is original:
            module.load_network = load_network


@functools.cache
def _real_files() -> frozenset[str]:
    from .conftest import original_vgg19_file, real_vgg16_onnx

    return frozenset(os.path.realpath(path) for path in (original_vgg19_file(), real_vgg16_onnx()) if path is not None)


def _is_python(argv: Any) -> bool:
    here = str(Path(sys.executable).parent)  # the environment's python and its console scripts (stylize, ...)
    for arg in argv or ():
        text = os.fsdecode(arg)
        if text == sys.executable or text.startswith(here + os.sep) or Path(text).name.startswith("python"):
            return True
    return False


def _counting_children(fork_exec: Any) -> Any:
    def counted(args: Any, *rest: Any) -> Any:
        if _is_python(args):
            _CHILDREN[0] += 1
        return fork_exec(args, *rest)

    return counted


class _Tiers:
    """The hooks (a plugin object: the conftest's own hook names are the interrupt plugin's)."""

    @pytest.hookimpl(tryfirst=True)  # before -m deselects any
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        unmarked = [item.nodeid for item in items if set(REAL_NETWORK_FIXTURES) & set(item.fixturenames)
                    and item.get_closest_marker("slow") is None]
        if unmarked:
            raise pytest.UsageError(f"these use a real pretrained network, so must be marked slow: {unmarked}")

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, object, object]:
        _CHILDREN[0] = _REAL[0] = 0  # before any fixture: a module's fixture that starts a child counts for its first test
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, object, object]:
        result = yield
        if item.get_closest_marker("slow") is None:
            if _CHILDREN[0]:
                raise pytest.fail.Exception(f"{item.nodeid} started {_CHILDREN[0]} Python child process(es), "
                                            f"seconds each (torch's import): mark it slow")
            if _REAL[0]:
                raise pytest.fail.Exception(f"{item.nodeid} loaded a real pretrained network: mark it slow")
        return result
