"""The tutorial's loop: ``get_input_optimizer``, the LBFGS loop (``optimize``, its closure an object) and
``run_style_transfer`` with its ``TransferSettings`` (by role: ``Maths``, ``Parts``, ``Watchers``); the style model it
optimises through is ``core.style_model``, what it moves ``core.image``, one evaluation ``core.evaluation``. A
``StyleConfig``'s ``TransferSettings`` are ``run.settings.transfer_settings``.

A whole run (sizes, events, previews, checkpoints) is ``run.Run``; ``stylize()`` is in ``run.run``.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast, overload

import torch
from PIL import Image
from torch import nn, optim

from ..losses import masks
from ..config.choices import TILING_REFUSAL
from ..presets import TUTORIAL_CONTENT_LAYERS, TUTORIAL_STYLE_LAYERS
from .run_stats import RunStats, keeps_image_on_interrupt
from ..losses.terms import TotalVariationLoss
from ..losses.tutorial import ContentLoss, StyleLoss
from ..step_hooks import StepHooks
from .evaluation import Evaluation, TiledEvaluation, evaluation_of
from .hooks import HookedModel
from .lbfgs import LBFGS, StackedLBFGS
from .image import PIXELS, Basis, ImageBasis
from ..losses.statistics import SlicedStyleLoss
from .style_model import get_style_model_and_losses
from .steps import TORCH_LBFGS_HISTORY, OptimizerStep, planned_evaluations, step_parts


@dataclass(frozen=True)
class StepInfo:
    """Progress after one closure evaluation (one forward and backward pass)."""

    step: int  # closure evaluations so far, from 1
    total: int  # evaluations the run plans: whole LBFGS steps past --steps (planned_evaluations); fixed for a run
    style_loss: float  # style_weight * sum of style losses
    content_loss: float  # content_weight * sum of content losses
    tv_loss: float = 0.0  # tv_weight * total variation (0 without --tv-weight)
    # Filled in by the run API (run.Run); the tutorial's loop leaves them at these defaults.
    elapsed: float = 0.0  # seconds since the run started (its images loaded), resumed runs included
    size: tuple[int, int] = (0, 0)  # (width, height) of the image being optimised
    scale: int = 0  # which coarse-to-fine size, from 0 (the smallest)
    scales: int = 1  # how many sizes the run has
    preview: Image.Image | None = field(default=None, repr=False)  # the image of this evaluation, when asked for
    # the run's seconds left by its planned work at its rate so far, each size's megapixels counted (run.timing)
    planned_left: float | None = None

    @property
    def loss(self) -> float:
        return self.style_loss + self.content_loss + self.tv_loss

    @property
    def time_left(self) -> float | None:
        """Seconds the run's planned evaluations still take at its rate so far: ``planned_left`` where the run API
        gave it (a larger size's evaluations take longer), else the seconds per evaluation so far (None: no time
        measured yet, as in the tutorial's loop, which leaves ``elapsed`` at 0)."""
        if self.planned_left is not None:
            return self.planned_left
        if self.step <= 0 or self.elapsed <= 0:
            return None
        return self.elapsed / self.step * max(0, self.total - self.step)


ProgressCallback = Callable[[StepInfo], None]


OPTIMIZER_LR = {"lbfgs": 1.0, "adam": 0.02}  # learning rates when none is given (LBFGS: torch's)
TWO_LOOPS = {"torch": LBFGS, "stacked": StackedLBFGS}  # how LBFGS finds its direction (core/lbfgs.py)


def get_input_optimizer(input_img: torch.Tensor, *, optimizer_name: str = "lbfgs", lr: float | None = None,
                        history_size: int = TORCH_LBFGS_HISTORY, two_loop: str = "torch") -> optim.Optimizer:
    """The tutorial's optimiser: LBFGS over the image's pixels, torch's defaults.

    ``optimizer_name="adam"`` gives Adam instead (lr 0.02 unless given: 2 % of the [0, 1]
    range per step at most); ``lr`` sets either's learning rate. ``history_size``: LBFGS's
    curvature pairs (docs/speed.md; torch's default 100 is the tutorial's). ``two_loop="stacked"``: the same LBFGS
    with its history stacked (``core.lbfgs.StackedLBFGS``, --fast's), the same directions up to rounding
    (but for the step after a first pair it could not keep, scaled by that pair's ``|s|/|y|``: core/lbfgs.py).
    """
    if optimizer_name == "adam":
        return optim.Adam([input_img], lr=OPTIMIZER_LR["adam"] if lr is None else lr)
    if optimizer_name != "lbfgs":
        raise ValueError(f"optimizer must be lbfgs or adam, got {optimizer_name!r}")
    if two_loop not in TWO_LOOPS:
        raise ValueError(f"two_loop must be one of {', '.join(TWO_LOOPS)}, got {two_loop!r}")
    lbfgs = TWO_LOOPS[two_loop]
    if history_size != TORCH_LBFGS_HISTORY:
        return lbfgs([input_img], lr=OPTIMIZER_LR["lbfgs"] if lr is None else lr, history_size=history_size)
    return lbfgs([input_img]) if lr is None else lbfgs([input_img], lr=lr)


@keeps_image_on_interrupt
def optimize(model: nn.Module, style_losses: Sequence[StyleLoss], content_losses: Sequence[ContentLoss],
             input_img: torch.Tensor, num_steps: int = 300, style_weight: float = 1000000, content_weight: float = 1,
             settings: TransferSettings | None = None, *, stats: RunStats, extra_losses: Sequence[nn.Module] = (),
             tiled: TiledEvaluation | None = None, hooks: Sequence[StepHooks] = ()) -> torch.Tensor:
    """The tutorial's loop: LBFGS steps until more than ``num_steps`` closure evaluations ran.

    Optimises ``input_img`` in place (clamped to [0, 1]) and returns it. ``settings`` (None: the tutorial's) gives
    the optimiser (``Maths``: ``optimizer_name``, ``lr``, ``history_size``, ``two_loop``: ``get_input_optimizer``;
    Adam runs one evaluation per step) and the ``backward`` form, what the optimiser moves (``Parts.basis``:
    ``core/image.py``) and which image the run hands back (``Parts.keep_best``), and what watches (``Watchers``): the
    ``progress`` callback, and for checkpoints (``run/run.py``) ``resume`` and ``on_step_end(optimizer, input_img,
    evaluations)``, called after each step, where the state is whole. ``stats`` (``Watchers.stats`` through
    ``run_style_transfer``; made by the decorator when None) counts evaluations, stops the run on a NaN/inf loss
    (``NonFiniteLoss``), notes LBFGS stopping early, and turns Ctrl-C into ``Interrupted``. ``extra_losses``: modules
    of the model whose ``.loss`` (weighted already: total variation) is added. ``tiled``: each evaluation over crops
    (``tiling.tiling``; ``model`` is not run). ``hooks`` (``step_hooks.StepHooks``): what an option adds at the
    loop's points (a bf16 model's float32 start and finish); the image's basis, first, and the style losses that are
    ``StepHooks`` join them.
    """
    s = settings or TransferSettings()
    maths, parts, watchers = s.maths, s.parts, s.watchers
    input_img.requires_grad_(True)
    model.eval()
    model.requires_grad_(False)
    planned = planned_evaluations(num_steps, maths.optimizer_name)
    image = _image_basis(s, input_img, planned, stats)  # departure: the optimiser may move another basis (image.py)
    hooks = [image, *hooks, *(module for module in style_losses if isinstance(module, StepHooks))]
    keep_best = parts.basis.keep_within if parts.keep_best is None else parts.keep_best
    _keep_best(stats, keep_best, image.optimizer, input_img.device)
    closure = _Closure(evaluation_of(model, style_losses, content_losses, style_weight, content_weight, extra_losses,
                                     maths.backward, tiled),
                       image, input_img, hooks, stats, watchers.progress, planned,
                       0 if watchers.resume is None else watchers.resume.evaluations, tutorial_sum=not extra_losses)
    finish = max(hook.finish_evaluations() for hook in hooks)  # a bf16 run's float32 finish (fast/fast.py)
    while closure.count <= num_steps:
        iterations = image.optimizer.state[image.variable].get("n_iter", 0)
        done = closure.count
        for hook in hooks:
            hook.start_step(done)
        plan = step_parts(done, num_steps, finish, maths.optimizer_name)
        restarted = image.run_step(lambda: _step(image, closure, hooks, plan))
        image.end_step(closure.count)
        _keep_best_in_state(stats, keep_best, image.optimizer)
        if watchers.on_step_end is not None:
            watchers.on_step_end(image.optimizer, input_img, closure.count)
        # Departure: once LBFGS returns at once (gradient below tolerance) the tutorial re-evaluates the same
        # image until num_steps; we stop, with the same image, and say so.
        if not restarted and stats.stopped_early(image.optimizer, image.variable, iterations,
                                                 unfinished=closure.count <= num_steps):
            break
    with torch.no_grad():
        if not _hand_back_best(stats, keep_best, input_img):
            image.hand_back(input_img)
        input_img.clamp_(0, 1)
    input_img.requires_grad_(False)
    stats.check_final(input_img)  # LBFGS's last update is never evaluated: it must be finite too
    return input_img


class _Closure:
    """The tutorial's closure as an object: one evaluation of the loss at the image each call (what
    ``optimizer.step`` calls), counted (``count``: a resumed run's from its evaluations), reported to ``progress``,
    and every hook told at each of its points, in order (the image's basis first).

    The loss and its terms are read from the device once an evaluation (``Scores.read``); the finite check, the
    ``StepInfo`` and every hook's ``after_evaluation`` share those floats. LBFGS gets the loss tensor, the
    tutorial's."""

    def __init__(self, evaluation: Evaluation, basis: ImageBasis, image: torch.Tensor, hooks: Sequence[StepHooks],
                 stats: RunStats, progress: ProgressCallback | None, planned: int, count: int, *,
                 tutorial_sum: bool) -> None:
        self.evaluation, self.basis, self.image, self.hooks = evaluation, basis, image, hooks
        self.stats, self.progress, self.planned, self.count = stats, progress, planned, count
        self.tutorial_sum = tutorial_sum  # no extra losses: LBFGS gets style + content, as the tutorial's closure

    def __call__(self) -> torch.Tensor:
        image = self.image
        for hook in self.hooks:
            hook.before_evaluation(image)  # the basis's: the tutorial's clamp (or the basis's image, clamped)
        self.basis.optimizer.zero_grad()  # the basis may have a new optimiser since the last step (image.py)
        scores = self.evaluation.backward(self.evaluation.forward(image))
        losses = scores.read()
        # Departure: a NaN/inf loss stops the run, keeping the last image.
        self.stats.check_finite(losses.loss, image)
        for hook in self.hooks:
            hook.after_backward(image)
        self.count += 1
        if self.progress is not None:
            self.progress(StepInfo(self.count, self.planned, losses.style, losses.content, losses.extra))
        for hook in self.hooks:
            hook.after_evaluation(losses.loss)
        # A tensor, as Scores.loss: a model has a loss module (checks.py).
        return cast(torch.Tensor, scores.style + scores.content) if self.tutorial_sum else scores.loss


def _image_basis(s: TransferSettings, input_img: torch.Tensor, planned: int, stats: RunStats) -> ImageBasis:
    """What the loop moves to change ``input_img`` (``s.parts.basis``), its optimiser made and a resumed state
    loaded."""
    maths, resume = s.maths, s.watchers.resume

    def new_optimizer(variable: torch.Tensor, rate: float | None, two_loop: str | None = None) -> optim.Optimizer:
        return get_input_optimizer(variable, optimizer_name=maths.optimizer_name,
                                   lr=maths.lr if rate is None else rate, history_size=maths.history_size,
                                   two_loop=maths.two_loop if two_loop is None else two_loop)

    return s.parts.basis.image(input_img, new_optimizer, None if resume is None else resume.optimizer_state,
                               lr=OPTIMIZER_LR[maths.optimizer_name] if maths.lr is None else maths.lr,
                               optimizer_name=maths.optimizer_name, planned=planned, stats=stats)


def _keep_best(stats: RunStats, keep_best: float | None, optimizer: optim.Optimizer, device: torch.device) -> None:
    """Have ``stats`` keep the best evaluated image, from the one a resumed optimiser's state kept."""
    if keep_best is None:
        return
    stats.keep_best()
    group = optimizer.param_groups[0]
    if group.get("best_image") is not None:  # the best image so far, as the checkpoint kept it
        stats.keep_best_from(group["best_loss"], group["best_evaluation"], group["best_image"].to(device))


def _keep_best_in_state(stats: RunStats, keep_best: float | None, optimizer: optim.Optimizer) -> None:
    """Put the best evaluated image so far into the optimiser's state, where a checkpoint's state_dict keeps it."""
    if keep_best is not None and stats.best_image() is not None:
        optimizer.param_groups[0].update(best_image=stats.best_image(), best_loss=stats.best_loss,
                                         best_evaluation=stats.best_evaluation)


def _hand_back_best(stats: RunStats, keep_best: float | None, image: torch.Tensor) -> bool:
    """Put the best evaluated image into ``image`` where ``keep_best`` says to; whether it did."""
    best = stats.best_image() if keep_best is not None else None
    if best is None or stats.last_loss < (1 + keep_best) * stats.best_loss:  # type: ignore[operator]
        return False
    image.copy_(best)
    stats.handed_back = stats.best_evaluation
    return True


def _step(image: ImageBasis, closure: _Closure, hooks: Sequence[StepHooks], plan: Sequence[OptimizerStep]) -> None:
    """One step of the loop: an ``optimizer.step(closure)`` for each of its ``plan`` (``steps.step_parts``: the run's
    last LBFGS step is two where a hook finishes in its own arithmetic). Before each, every hook is told whether it
    runs the run's last evaluations; where one says its arithmetic changes there, LBFGS makes no curvature pair
    across the change (``LBFGS.planned_step``)."""
    for planned in plan:
        switched = any([hook.switches_arithmetic(planned.last) for hook in hooks])  # a list: every hook is told
        optimizer = image.optimizer  # read at each: the basis may have started a fresh one (image.py)
        if isinstance(optimizer, LBFGS):  # ours (get_input_optimizer's), both two-loops
            optimizer.planned_step(closure, planned.iterations, switched=switched)
        else:  # Adam: one evaluation a step
            # torch types a closure as returning float; an optimiser takes the tensor it returns (the tutorial's).
            optimizer.step(cast(Callable[[], float], closure))


@dataclass(frozen=True)
class Resume:
    """Where ``optimize`` continues: the optimiser's ``state_dict()`` after one of its steps, and the
    closure evaluations the loop had run by then."""

    optimizer_state: dict
    evaluations: int


# Called after every optimizer.step() with the optimiser, the image and the evaluations so far.
StepEndCallback = Callable[[optim.Optimizer, torch.Tensor, int], None]


class Tiles(Protocol):
    """Evaluations over crops (``tiling.tiling.Tiles``): the style model is built on small stand-ins for the
    images and its targets are then computed over crops, so no whole-image feature map is held."""

    @overload
    def stand_ins(self, images: torch.Tensor) -> torch.Tensor: ...

    @overload
    def stand_ins(self, images: Sequence[torch.Tensor]) -> list[torch.Tensor]: ...

    def stand_in_guides(self, guides: masks.Guides | None) -> masks.Guides | None: ...

    def evaluation(self, model: nn.Sequential, content_img: torch.Tensor, style_imgs: Sequence[torch.Tensor],
                   style_blend: Sequence[float] | None, guides: masks.Guides | None = None) -> TiledEvaluation: ...


# fast.fast.accelerator's: the style model in its fast form, given the evaluations a resumed run has done; the model
# takes part in the loop's steps (its float32 start and finish: core/hooks.py).
Accelerate = Callable[[nn.Sequential, list[StyleLoss], list[ContentLoss], int],
                      tuple[HookedModel, list[StyleLoss], list[ContentLoss]]]


@dataclass(frozen=True)
class Maths:
    """What the run minimises and how the optimiser moves (``get_style_model_and_losses``, ``get_input_optimizer``,
    ``optimize``): what ``run.settings.transfer_settings`` reads from a ``StyleConfig``. The defaults are the
    tutorial's."""

    content_layers: Sequence[str] = TUTORIAL_CONTENT_LAYERS
    style_layers: Sequence[str] = TUTORIAL_STYLE_LAYERS
    style_layer_weights: Sequence[float] | None = None
    style_blend: Sequence[float] | None = None  # with several style images: one weight each (normalised)
    loss_form: str = "tutorial"
    pooling: str = "max"
    tv_weight: float = 0.0  # a total variation term on the image (0: none, as in the tutorial)
    style_loss: str = "gram"  # or wasserstein, sliced (losses/statistics.py)
    seed: int = 0  # the sliced loss's directions
    optimizer_name: str = "lbfgs"
    lr: float | None = None
    history_size: int = TORCH_LBFGS_HISTORY
    two_loop: str = "torch"  # or stacked: LBFGS's history as two matrices (get_input_optimizer; --fast's)
    backward: str = "combined"  # or per-module: the same objective, backpropagated module by module


@dataclass(frozen=True, eq=False)
class Parts:
    """What runs beside the tutorial's network and images: what they come with, what the optimiser moves and which
    image the run hands back, and the opt-in paths of ``fast/`` and ``tiling/``, handed in by the run (core imports
    none of them). The defaults are the tutorial's."""

    normalization: nn.Module | None = None  # the preprocessing module, in place of Normalization(mean, std)
    guides: masks.Guides | None = None  # masks over the content (losses/masks.py)
    image_losses: Sequence[nn.Module] = ()  # the caller's loss modules on the image itself (video's temporal loss)
    style_targets: MutableMapping[str, torch.Tensor] | None = None  # targets shared across runs (batch)
    basis: Basis = PIXELS  # what the optimiser moves (core/image.py; fast.basis.FOURIER)
    keep_best: float | None = None  # hand back the best evaluated image (optimize); None: the basis's keep_within
    accelerate: Accelerate | None = None  # bf16 / channels_last / fused Gram (fast.fast.accelerator)
    tiles: Tiles | None = None  # evaluate over crops (tiling.tiling.tiles_for; docs/print-size.md)


@dataclass(frozen=True, eq=False)
class Watchers:
    """What watches the run and keeps it: its progress, its stats and its checkpoints."""

    progress: ProgressCallback | None = None  # called after every closure evaluation with a StepInfo
    stats: RunStats | None = None  # filled in with the evaluations run and whether LBFGS converged
    resume: Resume | None = None  # checkpoints: where the run continues (optimize)
    on_step_end: StepEndCallback | None = None  # checkpoints: after every optimiser step (optimize)


_Group = TypeVar("_Group", Maths, Parts, Watchers)


@dataclass(frozen=True, eq=False)
class TransferSettings:
    """Everything ``run_style_transfer`` takes beyond the tutorial's arguments, by role; ``TransferSettings()`` is the
    tutorial's run. ``of`` and ``changed`` take the fields by name, each to its group."""

    maths: Maths = field(default_factory=Maths)
    parts: Parts = field(default_factory=Parts)
    watchers: Watchers = field(default_factory=Watchers)

    @classmethod
    def of(cls, **fields: Any) -> TransferSettings:
        """The tutorial's settings with ``fields`` (any field of ``Maths``, ``Parts`` or ``Watchers``, by name)."""
        return cls().changed(**fields)

    def changed(self, **fields: Any) -> TransferSettings:
        """These settings with ``fields`` (any field of ``Maths``, ``Parts`` or ``Watchers``, by name) replaced.

        Raises:
            TypeError: a name that is no group's field.
        """
        left = dict(fields)

        def replaced(group: _Group) -> _Group:
            names = {f.name for f in dataclasses.fields(group)}
            return dataclasses.replace(group, **{name: left.pop(name) for name in list(left) if name in names})

        settings = TransferSettings(replaced(self.maths), replaced(self.parts), replaced(self.watchers))
        if left:
            raise TypeError(f"no transfer setting named {', '.join(sorted(left))} (the fields of Maths, Parts and "
                            f"Watchers)")
        return settings


def run_style_transfer(
    cnn: nn.Sequential,
    normalization_mean: torch.Tensor | Sequence[float],
    normalization_std: torch.Tensor | Sequence[float],
    content_img: torch.Tensor,
    style_img: torch.Tensor | Sequence[torch.Tensor],
    input_img: torch.Tensor,
    num_steps: int = 300,
    style_weight: float = 1000000,
    content_weight: float = 1,
    settings: TransferSettings | None = None,
) -> torch.Tensor:
    """The tutorial's ``run_style_transfer``: build the style model, optimise ``input_img``.

    Args:
        cnn: a VGG ``features`` block (frozen), on the images' device.
        content_img, style_img, input_img: ``(1, 3, H, W)`` tensors in [0, 1]; the style image may have another
            size, or be a sequence of style images (blended by ``Maths.style_blend``). ``input_img`` is
            optimised in place.
        num_steps: closure evaluations (the run ends at the end of the LBFGS step passing it).
        settings: everything beyond the tutorial (``TransferSettings``: ``Maths``, ``Parts``, ``Watchers``); None:
            the tutorial's run.

    Returns:
        ``input_img``, clamped to [0, 1].
    """
    s = settings or TransferSettings()
    maths, parts, resume = s.maths, s.parts, s.watchers.resume
    tiles = parts.tiles
    if tiles is not None and (parts.accelerate is not None or maths.backward != "combined"):  # before the targets
        raise ValueError("precision bf16, channels_last, fused_gram and backward per-module cannot be combined "
                         "with tiling (tile): tiled evaluations run in float32 with one backward per crop")
    if tiles is not None and maths.style_loss in TILING_REFUSAL:  # wasserstein tiles: its moments add up over crops
        raise ValueError(f"tile cannot be combined with style_loss {maths.style_loss!r}: "
                         f"{TILING_REFUSAL[maths.style_loss]}")
    model, style_losses, content_losses = get_style_model_and_losses(  # tiled: the targets come below
        cnn, normalization_mean, normalization_std, tiles.stand_ins(style_img) if tiles else style_img,
        tiles.stand_ins(content_img) if tiles else content_img, maths.content_layers, maths.style_layers,
        style_layer_weights=maths.style_layer_weights, style_blend=maths.style_blend, loss_form=maths.loss_form,
        pooling=maths.pooling, style_targets=None if tiles else parts.style_targets,
        normalization=parts.normalization, guides=tiles.stand_in_guides(parts.guides) if tiles else parts.guides,
        style_loss=maths.style_loss, seed=maths.seed)
    if resume is not None:  # the sliced directions of a resumed run continue from the evaluations it had done
        for module in style_losses:
            if isinstance(module, SlicedStyleLoss):
                module.evaluations = resume.evaluations
    tiled = None
    if tiles is not None:  # evaluations and targets over crops, the untiled numbers up to rounding
        tiled = tiles.evaluation(model, content_img, [style_img] if isinstance(style_img, torch.Tensor) else style_img,
                                 maths.style_blend, parts.guides)
    extra_losses: list[nn.Module] = []
    if maths.tv_weight > 0:  # a smoothness term on the image itself, first in the model
        tv_loss = TotalVariationLoss(maths.tv_weight)
        model = nn.Sequential(OrderedDict([("tv_loss", tv_loss), *model.named_children()]))
        extra_losses.append(tv_loss)
    for i, image_loss in enumerate(parts.image_losses):  # beyond the tutorial: the caller's terms (video/temporal.py)
        model = nn.Sequential(OrderedDict([(f"image_loss_{i}", image_loss), *model.named_children()]))
        extra_losses.append(image_loss)
    loop_model: nn.Module = model
    hooks: list[StepHooks] = []
    if parts.accelerate is not None:  # bf16 / channels_last / fused Gram (fast/fast.py)
        fast_model, style_losses, content_losses = parts.accelerate(model, style_losses, content_losses,
                                                                    0 if resume is None else resume.evaluations)
        loop_model, hooks = fast_model, [fast_model]  # its float32 start and finish join the loop's hooks
    return optimize(loop_model, style_losses, content_losses, input_img, num_steps, style_weight, content_weight,
                    s, stats=s.watchers.stats, extra_losses=extra_losses, tiled=tiled, hooks=hooks)
