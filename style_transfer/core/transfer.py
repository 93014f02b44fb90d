"""The tutorial's loop: ``get_input_optimizer``, the LBFGS loop (``optimize``) and ``run_style_transfer`` with its
one ``TransferSettings``; the style model it optimises through is ``core.style_model``, what it moves ``core.image``.
A ``StyleConfig``'s ``TransferSettings`` are ``run.settings.transfer_settings``.

A whole run (sizes, events, previews, checkpoints) is ``run.Run``; ``stylize()`` is in ``run.run``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol, cast, overload

import torch
from PIL import Image
from torch import nn, optim

from ..losses import masks
from .backward import check_backward, per_module_backward, weighted_scores
from ..config.choices import TILING_REFUSAL
from ..presets import TUTORIAL_CONTENT_LAYERS, TUTORIAL_STYLE_LAYERS
from .run_stats import RunStats, keeps_image_on_interrupt
from ..losses.terms import TotalVariationLoss
from ..losses.tutorial import ContentLoss, StyleLoss
from ..step_hooks import StepHooks
from .hooks import HookedModel
from .lbfgs import LBFGS, StackedLBFGS, loss_value
from .image import PIXELS, Basis, ImageBasis
from ..losses.statistics import SlicedStyleLoss
from .style_model import get_style_model_and_losses
from .steps import LBFGS_MAX_ITER, TORCH_LBFGS_HISTORY, planned_evaluations


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

    @property
    def loss(self) -> float:
        return self.style_loss + self.content_loss + self.tv_loss

    @property
    def time_left(self) -> float | None:
        """Seconds the run's planned evaluations still take at its rate so far (None: no time measured yet, as in the
        tutorial's loop, which leaves ``elapsed`` at 0)."""
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
    the optimiser (``optimizer_name``, ``lr``, ``history_size``: ``get_input_optimizer``; Adam runs one evaluation
    per step), the ``backward`` form, what the optimiser moves (``basis``: ``core/image.py``) and which image the
    run hands back (``keep_best``), the ``progress`` callback, and for checkpoints (``run/run.py``) ``resume`` and
    ``on_step_end(optimizer, input_img, evaluations)``, called after each step, where the state is whole.
    ``stats`` (``settings.stats`` through ``run_style_transfer``; made by the decorator when None) counts
    evaluations, stops the run on a NaN/inf loss (``NonFiniteLoss``), notes LBFGS stopping early, and turns Ctrl-C
    into ``Interrupted``. ``extra_losses``: modules of the model whose ``.loss`` (weighted already: total variation)
    is added. ``tiled``: each evaluation over crops (``tiling.tiling``; ``model`` is not run). ``hooks``
    (``step_hooks.StepHooks``): what an option adds at the loop's points (a bf16 model's float32 start and finish);
    the image's basis and the style losses that are ``StepHooks`` join them.
    """
    s = settings or TransferSettings()
    evaluation = _evaluation(model, style_losses, content_losses, style_weight, content_weight, extra_losses,
                             s.backward, tiled)
    input_img.requires_grad_(True)
    model.eval()
    model.requires_grad_(False)
    planned = planned_evaluations(num_steps, s.optimizer_name)
    image = _image_basis(s, input_img, planned, stats)  # departure: the optimiser may move another basis (image.py)
    hooks = [image, *hooks, *(module for module in style_losses if isinstance(module, StepHooks))]
    keep_best = s.basis.keep_within if s.keep_best is None else s.keep_best
    _keep_best(stats, keep_best, image.optimizer, input_img.device)
    run = [0 if s.resume is None else s.resume.evaluations]
    while run[0] <= num_steps:

        def closure() -> torch.Tensor:
            image.before_evaluation(input_img)  # the tutorial's clamp (or the basis's image, clamped)
            image.optimizer.zero_grad()
            scores = evaluation.forward(input_img)
            # Departure: a NaN/inf loss stops the run, keeping the last image.
            stats.check_finite(scores.loss, input_img)
            scores = evaluation.backward(scores)
            for hook in hooks:
                hook.after_backward(input_img)
            run[0] += 1
            if s.progress is not None:
                s.progress(StepInfo(run[0], planned, loss_value(scores.style), loss_value(scores.content),
                                    loss_value(scores.extra)))
            for hook in hooks:
                hook.after_evaluation(loss_value(scores.loss))
            # A tensor, as Scores.loss: a model has a loss module (checks.py).
            return cast(torch.Tensor, scores.style + scores.content) if not extra_losses else scores.loss

        iterations = image.optimizer.state[image.variable].get("n_iter", 0)
        last = run[0] + LBFGS_MAX_ITER > num_steps
        for hook in hooks:
            hook.start_step(run[0])
        restarted = image.run_step(lambda: _step(image, closure, hooks, last, s.optimizer_name == "lbfgs"))
        image.end_step(run[0])
        _keep_best_in_state(stats, keep_best, image.optimizer)
        if s.on_step_end is not None:
            s.on_step_end(image.optimizer, input_img, run[0])
        # Departure: once LBFGS returns at once (gradient below tolerance) the tutorial re-evaluates the same
        # image until num_steps; we stop, with the same image, and say so.
        if not restarted and stats.stopped_early(image.optimizer, image.variable, iterations,
                                                 unfinished=run[0] <= num_steps):
            break
    with torch.no_grad():
        if not _hand_back_best(stats, keep_best, input_img):
            image.hand_back(input_img)
        input_img.clamp_(0, 1)
    input_img.requires_grad_(False)
    stats.check_final(input_img)  # LBFGS's last update is never evaluated: it must be finite too
    return input_img


def _image_basis(s: TransferSettings, input_img: torch.Tensor, planned: int, stats: RunStats) -> ImageBasis:
    """What the loop moves to change ``input_img`` (``s.basis``), its optimiser made and a resumed state loaded."""

    def new_optimizer(variable: torch.Tensor, rate: float | None, two_loop: str | None = None) -> optim.Optimizer:
        return get_input_optimizer(variable, optimizer_name=s.optimizer_name, lr=s.lr if rate is None else rate,
                                   history_size=s.history_size, two_loop=s.two_loop if two_loop is None else two_loop)

    return s.basis.image(input_img, new_optimizer, None if s.resume is None else s.resume.optimizer_state,
                         lr=OPTIMIZER_LR[s.optimizer_name] if s.lr is None else s.lr,
                         optimizer_name=s.optimizer_name, planned=planned, stats=stats)


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


def _step(image: ImageBasis, closure: Callable[[], torch.Tensor], hooks: Sequence[StepHooks], last: bool,
          lbfgs: bool) -> None:
    """One step of the loop: ``optimizer.step(closure)``; the run's ``last`` LBFGS step as two where a hook finishes
    in its own arithmetic (a bf16 run's float32 finish, fast/fast.py): the rest, then its ``finish_evaluations``.

    Where the arithmetic changes at a step's start LBFGS would pair that step's first gradient with the last one in
    the other arithmetic; a last step length of 0 skips that pair (LBFGS keeps a pair only where y·s > 1e-10), the
    rest of its memory is kept."""
    finish = max(hook.finish_evaluations() for hook in hooks) if last and lbfgs else 0
    if 0 < finish < LBFGS_MAX_ITER:
        _one_step(image.optimizer, image.variable, closure, LBFGS_MAX_ITER - finish, _switches(hooks, False))
        _one_step(image.optimizer, image.variable, closure, finish, _switches(hooks, True))
    else:
        _one_step(image.optimizer, image.variable, closure, None, _switches(hooks, last) and lbfgs)


def _switches(hooks: Sequence[StepHooks], last: bool) -> bool:
    return any([hook.switches_arithmetic(last) for hook in hooks])  # a list: every hook is told


def _one_step(optimizer: optim.Optimizer, variable: torch.Tensor, closure: Callable[[], torch.Tensor],
                iterations: int | None, switched: bool) -> None:
    """One ``optimizer.step(closure)``: for LBFGS of at most ``iterations`` iterations (None: its own ``max_iter``,
    which is kept either way), with its last step length set to 0 first where ``switched`` (the arithmetic changed,
    so LBFGS keeps no pair across the change); Adam's with both left at None and False."""
    if switched:
        optimizer.state[variable]["t"] = 0.0
    group = optimizer.param_groups[0]
    whole = group.get("max_iter")
    if iterations is not None:
        group["max_iter"] = iterations
    try:
        # torch types a closure as returning float; LBFGS takes the tensor it returns (the tutorial's closure).
        optimizer.step(cast(Callable[[], float], closure))
    finally:
        if iterations is not None:
            group["max_iter"] = whole


class Scores(NamedTuple):
    """One evaluation's weighted terms, and the loss the loop checks and LBFGS sees."""

    style: torch.Tensor | float  # style_weight * Σ style losses
    content: torch.Tensor | float  # content_weight * Σ content losses
    extra: torch.Tensor | float  # Σ extra losses (weighted already; 0.0 without any)
    loss: torch.Tensor


class Evaluation(Protocol):
    """How ``optimize``'s closure evaluates the loss at the image: the forward's scores, then the backward that
    sets ``image.grad`` (the loop checks the loss is finite between the two)."""

    def forward(self, image: torch.Tensor) -> Scores: ...

    def backward(self, scores: Scores) -> Scores: ...


def _evaluation(model: nn.Module, style_losses: Sequence[StyleLoss], content_losses: Sequence[ContentLoss],
                style_weight: float, content_weight: float, extra_losses: Sequence[nn.Module], backward: str,
                tiled: TiledEvaluation | None) -> Evaluation:
    """The loop's evaluation: the whole image through ``model`` (the tutorial's), or ``tiled`` over crops."""
    check_backward(backward)
    if tiled is None:
        return _WholeImage(model, style_losses, content_losses, style_weight, content_weight, extra_losses, backward)
    if backward == "per-module":
        raise ValueError("backward 'per-module' cannot be combined with tiling (tile): a tiled evaluation "
                         "backpropagates once per crop; use backward 'combined'")
    return _OverCrops(tiled, style_weight, content_weight, extra_losses)


@dataclass(frozen=True)
class _WholeImage:
    """The tutorial's evaluation: the image through the style model, the weighted sum backpropagated."""

    model: nn.Module
    style_losses: Sequence[StyleLoss]
    content_losses: Sequence[ContentLoss]
    style_weight: float
    content_weight: float
    extra_losses: Sequence[nn.Module]
    backward_form: str

    def forward(self, image: torch.Tensor) -> Scores:
        self.model(image)
        # The tutorial's sums in its order: style_weight * Σ style losses, content_weight * Σ content losses.
        style_score, content_score = weighted_scores(self.style_losses, self.content_losses, self.style_weight,
                                                     self.content_weight)
        # A tensor: checks.py refuses a config with neither content nor style layers, so a loss module is summed.
        loss = cast(torch.Tensor, style_score + content_score)
        extra_score: torch.Tensor | float = 0.0
        for extra in self.extra_losses:  # terms beyond the tutorial's two (total variation)
            term = cast(torch.Tensor, extra.loss)  # an extra loss module's .loss is its forward's tensor
            extra_score = extra_score + term
            loss = loss + term
        return Scores(style_score, content_score, extra_score, loss)

    def backward(self, scores: Scores) -> Scores:
        if self.backward_form == "per-module":  # the 2017 tutorial's structure, kept to compare: docs/retain_graph.md
            style_score, content_score, extra_score = per_module_backward(  # the forward's sum is not backpropagated
                self.style_losses, self.content_losses, self.style_weight, self.content_weight,
                extra_losses=self.extra_losses)
            return Scores(style_score, content_score, extra_score, style_score + content_score + extra_score)
        scores.loss.backward()
        return scores


@dataclass(frozen=True)
class _OverCrops:
    """Two passes over crops (tiling/tiling.py): the same loss and gradient up to rounding, the backward included."""

    tiled: TiledEvaluation
    style_weight: float
    content_weight: float
    extra_losses: Sequence[nn.Module]

    def forward(self, image: torch.Tensor) -> Scores:
        style_score, content_score, extra_score = self.tiled.evaluate(image, self.style_weight, self.content_weight,
                                                                      self.extra_losses)
        return Scores(style_score, content_score, extra_score, style_score + content_score + extra_score)

    def backward(self, scores: Scores) -> Scores:
        return scores  # the second pass over crops set image.grad


@dataclass(frozen=True)
class Resume:
    """Where ``optimize`` continues: the optimiser's ``state_dict()`` after one of its steps, and the
    closure evaluations the loop had run by then."""

    optimizer_state: dict
    evaluations: int


# Called after every optimizer.step() with the optimiser, the image and the evaluations so far.
StepEndCallback = Callable[[optim.Optimizer, torch.Tensor, int], None]


class TiledEvaluation(Protocol):
    """One closure evaluation over crops, with the untiled loss and ``image.grad`` up to rounding
    (``tiling.tiling.TiledStyleModel``)."""

    def evaluate(self, image: torch.Tensor, style_weight: float, content_weight: float,
                 extra_losses: Sequence[nn.Module] = ()) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]: ...


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


@dataclass(frozen=True, eq=False)
class TransferSettings:
    """Everything ``run_style_transfer`` takes beyond the tutorial's arguments. The defaults are the tutorial's;
    ``run.settings.transfer_settings`` takes the maths and the basis from a ``StyleConfig``."""

    # The maths (see get_style_model_and_losses, get_input_optimizer and optimize).
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
    backward: str = "combined"  # or per-module (optimize)
    keep_best: float | None = None  # hand back the best evaluated image (optimize); None: the basis's keep_within
    # What the network and the images come with.
    normalization: nn.Module | None = None  # the preprocessing module, in place of Normalization(mean, std)
    guides: masks.Guides | None = None  # masks over the content (losses/masks.py)
    image_losses: Sequence[nn.Module] = ()  # the caller's loss modules on the image itself (video's temporal loss)
    style_targets: MutableMapping[str, torch.Tensor] | None = None  # targets shared across runs (batch)
    # Watching and keeping the run.
    progress: ProgressCallback | None = None  # called after every closure evaluation with a StepInfo
    stats: RunStats | None = None  # filled in with the evaluations run and whether LBFGS converged
    resume: Resume | None = None  # checkpoints (see optimize)
    on_step_end: StepEndCallback | None = None
    # The opt-in paths of fast/ and tiling/, handed in by the run (core imports none of them); defaults: the tutorial's.
    basis: Basis = PIXELS  # what the optimiser moves (core/image.py; fast.basis.FOURIER)
    accelerate: Accelerate | None = None  # bf16 / channels_last / fused Gram (fast.fast.accelerator)
    tiles: Tiles | None = None  # evaluate over crops (tiling.tiling.tiles_for; docs/print-size.md)


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
            size, or be a sequence of style images (blended by ``settings.style_blend``). ``input_img`` is
            optimised in place.
        num_steps: closure evaluations (the run ends at the end of the LBFGS step passing it).
        settings: everything beyond the tutorial (``TransferSettings``); None: the tutorial's run.

    Returns:
        ``input_img``, clamped to [0, 1].
    """
    s = settings or TransferSettings()
    tiles = s.tiles
    if tiles is not None and (s.accelerate is not None or s.backward != "combined"):  # before the targets' passes
        raise ValueError("precision bf16, channels_last, fused_gram and backward per-module cannot be combined "
                         "with tiling (tile): tiled evaluations run in float32 with one backward per crop")
    if tiles is not None and s.style_loss in TILING_REFUSAL:  # wasserstein tiles: its moments add up over crops
        raise ValueError(f"tile cannot be combined with style_loss {s.style_loss!r}: {TILING_REFUSAL[s.style_loss]}")
    model, style_losses, content_losses = get_style_model_and_losses(  # tiled: the targets come below
        cnn, normalization_mean, normalization_std, tiles.stand_ins(style_img) if tiles else style_img,
        tiles.stand_ins(content_img) if tiles else content_img, s.content_layers, s.style_layers,
        style_layer_weights=s.style_layer_weights, style_blend=s.style_blend, loss_form=s.loss_form,
        pooling=s.pooling, style_targets=None if tiles else s.style_targets, normalization=s.normalization,
        guides=tiles.stand_in_guides(s.guides) if tiles else s.guides, style_loss=s.style_loss, seed=s.seed)
    if s.resume is not None:  # the sliced directions of a resumed run continue from the evaluations it had done
        for module in style_losses:
            if isinstance(module, SlicedStyleLoss):
                module.evaluations = s.resume.evaluations
    tiled = None
    if tiles is not None:  # evaluations and targets over crops, the untiled numbers up to rounding
        tiled = tiles.evaluation(model, content_img, [style_img] if isinstance(style_img, torch.Tensor) else style_img,
                                 s.style_blend, s.guides)
    extra_losses: list[nn.Module] = []
    if s.tv_weight > 0:  # a smoothness term on the image itself, first in the model
        tv_loss = TotalVariationLoss(s.tv_weight)
        model = nn.Sequential(OrderedDict([("tv_loss", tv_loss), *model.named_children()]))
        extra_losses.append(tv_loss)
    for i, image_loss in enumerate(s.image_losses):  # beyond the tutorial: the caller's terms (video/temporal.py)
        model = nn.Sequential(OrderedDict([(f"image_loss_{i}", image_loss), *model.named_children()]))
        extra_losses.append(image_loss)
    loop_model: nn.Module = model
    hooks: list[StepHooks] = []
    if s.accelerate is not None:  # bf16 / channels_last / fused Gram (fast/fast.py)
        fast_model, style_losses, content_losses = s.accelerate(model, style_losses, content_losses,
                                                                0 if s.resume is None else s.resume.evaluations)
        loop_model, hooks = fast_model, [fast_model]  # its float32 start and finish join the loop's hooks
    return optimize(loop_model, style_losses, content_losses, input_img, num_steps, style_weight, content_weight,
                    s, stats=s.stats, extra_losses=extra_losses, tiled=tiled, hooks=hooks)
