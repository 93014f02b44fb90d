"""The tutorial's loop stays plain: what the options add comes through declared hooks, and a StyleConfig gives the
library and a Run the same algorithm."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest
import torch

import style_transfer.core.transfer as transfer
from style_transfer import Run, StyleConfig
from style_transfer.step_hooks import StepHooks
from style_transfer.core.transfer import TransferSettings
from style_transfer.run.settings import transfer_settings
from style_transfer.fast.fast import speed_from_config

TRANSFER = Path(transfer.__file__)


class Seen(Exception):
    """Ends a run at its first call of the loop."""


def test_the_loop_asks_no_object_what_it_can_do() -> None:
    """No getattr/hasattr in core/transfer.py (core/lbfgs.py's ``_unguarded`` reads torch's own Optimizer class)."""
    tree = ast.parse(TRANSFER.read_text())
    probes = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
              and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")]
    assert probes == [], f"getattr/hasattr at lines {probes} of {TRANSFER}"


def test_optimize_reads_like_the_tutorials_loop() -> None:
    lines = inspect.getsource(inspect.unwrap(transfer.optimize)).splitlines()
    assert len(lines) < 80, len(lines)


def test_every_hook_point_has_a_default_that_does_nothing() -> None:
    hooks = StepHooks()
    image = torch.zeros(1, 3, 2, 2)
    assert hooks.finish_evaluations() == 0 and hooks.switches_arithmetic(last=True) is False
    assert hooks.start_step(3) is None and hooks.before_evaluation(image) is None
    assert hooks.after_backward(image) is None and hooks.after_evaluation(1.0) is None
    assert torch.equal(image, torch.zeros(1, 3, 2, 2))


@pytest.mark.parametrize("config, basis, history", [
    (StyleConfig(), "pixels", 100),
    (StyleConfig(fast=True), "fourier", 50),  # --fast moves the Fourier coefficients, with 50 pairs
    (StyleConfig(fast=True, parametrization="pixels"), "pixels", 20),  # --fast on the pixels: 20 pairs
    (StyleConfig(parametrization="fourier", history_size=30), "fourier", 30),
])
def test_the_library_and_a_run_get_the_same_algorithm_from_a_config(config: StyleConfig, basis: str, history: int,
                                                                   cnn, monkeypatch: pytest.MonkeyPatch) -> None:
    """transfer_settings resolves the basis, LBFGS's history and its kind as a Run does (TransferSettings.from_config
    once gave the pixel basis for --fast, where a Run gave the Fourier basis): --fast's stacked LBFGS on any device."""
    two_loop = "stacked" if config.fast else "torch"
    library = transfer_settings(config)
    assert (library.parts.basis.name, library.maths.history_size, library.maths.two_loop) == (basis, history, two_loop)
    speed = speed_from_config(config, torch.device("cpu"))
    assert (speed.parametrization, speed.history_size, speed.two_loop) == (basis, history, two_loop)

    seen: list[TransferSettings] = []

    def record(*args: object) -> torch.Tensor:
        seen.append(args[-1])  # type: ignore[arg-type]
        raise Seen  # no evaluation needed: the settings are what this test reads

    monkeypatch.setattr("style_transfer.run.run.run_style_transfer", record)
    image = torch.rand(1, 3, 24, 24, generator=torch.Generator().manual_seed(0))
    with pytest.raises(Seen):
        Run(image, image, dataclasses.replace(config, size=24, device="cpu"), cnn=cnn).execute()
    assert seen[0].parts.basis is library.parts.basis
    assert (seen[0].maths.history_size, seen[0].maths.two_loop) == (history, two_loop)


def test_a_run_moves_with_the_two_loop_its_config_gets(cnn, monkeypatch: pytest.MonkeyPatch) -> None:
    """--fast runs the stacked LBFGS (its steps kept in scale before its first pair, core/lbfgs.py), the default
    torch's, and a Run hands that on; Adam has no two-loop."""
    seen: list[TransferSettings] = []

    def record(*args: object) -> torch.Tensor:
        seen.append(args[-1])  # type: ignore[arg-type]
        raise Seen

    monkeypatch.setattr("style_transfer.run.run.run_style_transfer", record)
    image = torch.rand(1, 3, 24, 24, generator=torch.Generator().manual_seed(0))
    assert transfer_settings(StyleConfig(fast=True, optimizer="adam")).maths.two_loop == "torch"
    for fast in (True, False):
        assert transfer_settings(StyleConfig(fast=fast)).maths.two_loop == ("stacked" if fast else "torch")
        with pytest.raises(Seen):
            Run(image, image, StyleConfig(size=24, device="cpu", fast=fast), cnn=cnn).execute()
    assert [settings.maths.two_loop for settings in seen] == ["stacked", "torch"]


@pytest.mark.parametrize("two_loop", ["torch", "stacked"])
def test_the_loop_steps_the_optimiser_its_settings_name(two_loop: str, cnn) -> None:
    from style_transfer.core.lbfgs import StackedLBFGS
    from style_transfer.core.transfer import run_style_transfer

    image = torch.rand(1, 3, 24, 24, generator=torch.Generator().manual_seed(0))
    stepped: list[torch.optim.Optimizer] = []
    run_style_transfer(cnn, [0.485, 0.456, 0.406], [0.229, 0.224, 0.225], image, image, image.clone(), 1,
                       settings=TransferSettings.of(two_loop=two_loop, on_step_end=lambda o, *_: stepped.append(o)))
    assert stepped and isinstance(stepped[0], StackedLBFGS) == (two_loop == "stacked")


def test_no_dataclass_in_core_has_more_than_fourteen_fields() -> None:
    """The loop's settings come by role (Maths, Parts, Watchers), not as one bag."""
    import importlib
    import pkgutil

    import style_transfer.core as core

    sizes = {}
    for info in pkgutil.iter_modules(core.__path__):
        module = importlib.import_module(f"style_transfer.core.{info.name}")
        for name, value in vars(module).items():
            if dataclasses.is_dataclass(value) and isinstance(value, type) and value.__module__ == module.__name__:
                sizes[f"{info.name}.{name}"] = len(dataclasses.fields(value))
    assert "transfer.TransferSettings" in sizes and "transfer.Maths" in sizes
    assert {name: n for name, n in sizes.items() if n > 14} == {}


def test_transfer_settings_take_each_field_by_name_into_its_group() -> None:
    progress = print
    settings = TransferSettings.of(tv_weight=2.0, normalization=None, progress=progress, history_size=7)
    assert (settings.maths.tv_weight, settings.maths.history_size, settings.watchers.progress) == (2.0, 7, progress)
    changed = settings.changed(tv_weight=3.0)
    assert changed.maths == dataclasses.replace(settings.maths, tv_weight=3.0)
    assert changed.watchers.progress is progress and changed.parts.basis is settings.parts.basis
    with pytest.raises(TypeError, match="no transfer setting named tv"):
        TransferSettings.of(tv=1.0)


class Recorder(StepHooks):
    """Every point the loop calls, in order."""

    def __init__(self) -> None:
        self.points: list[str] = []
        self.losses: list[float] = []

    def start_step(self, evaluations: int) -> None:
        self.points.append("start_step")

    def switches_arithmetic(self, last: bool) -> bool:
        self.points.append("switches_arithmetic")
        return False

    def before_evaluation(self, image: torch.Tensor) -> None:
        self.points.append("before_evaluation")

    def after_backward(self, image: torch.Tensor) -> None:
        self.points.append("after_backward")

    def after_evaluation(self, loss: float) -> None:
        self.points.append("after_evaluation")
        self.losses.append(loss)


def test_every_hook_point_reaches_every_hook_with_the_loss_read_once(cnn, monkeypatch: pytest.MonkeyPatch) -> None:
    """The closure tells every hook (not only the image's basis) before each evaluation, after its backward and after
    it, with the loss it read from the device once (``Scores.read``): the float stats checked and progress shows."""
    from style_transfer.core import evaluation
    from style_transfer.core.run_stats import RunStats
    from style_transfer.core.style_model import get_style_model_and_losses
    from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD

    reads = [0]
    read = evaluation.Scores.read

    def counted(scores: evaluation.Scores) -> evaluation.Losses:
        reads[0] += 1
        return read(scores)

    monkeypatch.setattr(evaluation.Scores, "read", counted)
    generator = torch.Generator().manual_seed(0)
    image, style = torch.rand(1, 3, 24, 24, generator=generator), torch.rand(1, 3, 24, 24, generator=generator)
    model, style_losses, content_losses = get_style_model_and_losses(cnn, IMAGENET_MEAN, IMAGENET_STD, style, image)
    recorder, stats, infos, last_losses = Recorder(), RunStats(), [], []

    def progress(info: transfer.StepInfo) -> None:
        infos.append(info)
        last_losses.append(stats.last_loss)

    transfer.optimize(model, style_losses, content_losses, image.clone(), 3,
                      settings=TransferSettings.of(progress=progress), stats=stats, hooks=[recorder])
    evaluations = len(infos)
    assert evaluations == stats.evaluations == reads[0] > 1
    assert recorder.points[:2] == ["start_step", "switches_arithmetic"]
    per_evaluation = [p for p in recorder.points if p not in ("start_step", "switches_arithmetic")]
    assert per_evaluation == ["before_evaluation", "after_backward", "after_evaluation"] * evaluations
    assert recorder.losses == last_losses  # the one float: stats', the hooks'


def test_scores_are_read_as_floats_in_one_go() -> None:
    from style_transfer.core.evaluation import Losses, Scores

    """Terms that are tensors (in the graph, or bfloat16) and plain numbers, each the float ``float(term)`` gives."""
    style = torch.tensor(1.5, requires_grad=True) * 2
    read = Scores(style, 0, 0.0, torch.tensor(float("nan"))).read()
    assert isinstance(read, Losses) and read[:3] == (3.0, 0.0, 0.0) and read.loss != read.loss  # NaN passes through
    read = Scores(torch.tensor(0.1), torch.tensor(0.2, dtype=torch.bfloat16), 0.0, torch.tensor(0.3)).read()
    assert read == (float(torch.tensor(0.1)), float(torch.tensor(0.2, dtype=torch.bfloat16)), 0.0,
                    float(torch.tensor(0.3)))
