"""The tutorial's loop: ``get_input_optimizer``, the LBFGS loop (``optimize``) and ``run_style_transfer`` with its
one ``TransferSettings``; the style model it optimises through is ``core.style_model``.

A whole run (sizes, events, previews, checkpoints) is ``run.Run``; ``stylize()`` is in ``run.run``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch
from PIL import Image
from torch import nn, optim

from ..losses import masks
from .backward import check_backward, per_module_backward, weighted_scores
from ..config.choices import TILING_REFUSAL
from ..presets import TUTORIAL_CONTENT_LAYERS, TUTORIAL_STYLE_LAYERS
from ..config.style import StyleConfig
from .run_stats import RunStats, keeps_image_on_interrupt
from ..losses.terms import TotalVariationLoss
from ..losses.tutorial import ContentLoss, StyleLoss
from .parametrization import (FOURIER_EXPONENT, KEEP_WITHIN, LATE_EXPONENT, LATE_SHARE, BasisImage, Jumped,
                              make_basis)
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


ProgressCallback = Callable[[StepInfo], None]


OPTIMIZER_LR = {"lbfgs": 1.0, "adam": 0.02}  # learning rates when none is given (LBFGS: torch's)
# torch.optim.Optimizer's methods that torch wraps in torch._disable_dynamo (a guard for torch.compile, which no run
# here uses): the wrapper's first call imports torch._dynamo, 1.3 to 1.5 s of every run's start on a 2-core CPU.
DYNAMO_GUARDED = ("add_param_group", "zero_grad", "state_dict", "load_state_dict")


def _unguarded(cls: type[optim.Optimizer]) -> type[optim.Optimizer]:
    """``cls`` with the ``DYNAMO_GUARDED`` methods as torch wrote them, without the guard's wrapper (the same code:
    the wrapper only hands the call to ``torch._dynamo.disable(method)``). A method torch no longer wraps is left
    as it is."""
    methods = {name: getattr(getattr(optim.Optimizer, name), "__wrapped__", getattr(optim.Optimizer, name))
               for name in DYNAMO_GUARDED}
    return type(cls.__name__, (cls,), {**methods, "__module__": __name__, "__qualname__": cls.__name__,
                                       "__doc__": f"torch's {cls.__name__}, unchanged but for ``_unguarded``."})


LBFGS = _unguarded(optim.LBFGS)  # the tutorial's optimiser (isinstance of optim.LBFGS), started without torch._dynamo


def get_input_optimizer(input_img: torch.Tensor, *, optimizer_name: str = "lbfgs",
                        lr: float | None = None, history_size: int = TORCH_LBFGS_HISTORY) -> optim.Optimizer:
    """The tutorial's optimiser: LBFGS over the image's pixels, torch's defaults.

    ``optimizer_name="adam"`` gives Adam instead (lr 0.02 unless given: 2 % of the [0, 1]
    range per step at most); ``lr`` sets either's learning rate. ``history_size``: LBFGS's
    curvature pairs (docs/speed.md; torch's default 100 is the tutorial's).
    """
    if optimizer_name == "adam":
        return optim.Adam([input_img], lr=OPTIMIZER_LR["adam"] if lr is None else lr)
    if optimizer_name != "lbfgs":
        raise ValueError(f"optimizer must be lbfgs or adam, got {optimizer_name!r}")
    if history_size != TORCH_LBFGS_HISTORY:
        return LBFGS([input_img], lr=OPTIMIZER_LR["lbfgs"] if lr is None else lr, history_size=history_size)
    return LBFGS([input_img]) if lr is None else LBFGS([input_img], lr=lr)


@keeps_image_on_interrupt
def optimize(
    model: nn.Module,
    style_losses: Sequence[StyleLoss],
    content_losses: Sequence[ContentLoss],
    input_img: torch.Tensor,
    num_steps: int = 300,
    style_weight: float = 1000000,
    content_weight: float = 1,
    progress: ProgressCallback | None = None,
    *,
    optimizer_name: str = "lbfgs",
    lr: float | None = None,
    extra_losses: Sequence[nn.Module] = (),
    stats: RunStats,
    backward: str = "combined",
    history_size: int = TORCH_LBFGS_HISTORY,
    resume: Resume | None = None,
    on_step_end: StepEndCallback | None = None,
    tiled: TiledEvaluation | None = None,
    parametrization: str = "pixels",
    keep_best: float | None = None,
) -> torch.Tensor:
    """The tutorial's loop: LBFGS steps until more than ``num_steps`` closure evaluations ran.

    Optimises ``input_img`` in place (clamped to [0, 1]) and returns it. ``optimizer_name``
    and ``lr`` choose the optimiser (``get_input_optimizer``; Adam runs one evaluation per
    step); ``extra_losses`` are modules of the model whose ``.loss`` (weighted already, such
    as total variation) is added to the loss. ``stats`` (made by the decorator when not
    given) counts evaluations, stops the run on a NaN/inf loss (``NonFiniteLoss``), notes
    LBFGS stopping early, and turns Ctrl-C into ``Interrupted``. ``backward`` is ``combined``
    (one backward of the summed loss, the tutorial's) or ``per-module`` (one backward per loss
    module, retaining the graph: the 2017 tutorial's; the same objective).

    Beyond the tutorial, for the run API's checkpoints (``run.py``): ``resume`` continues a loop
    from the optimiser state and evaluation count it had after one of its ``optimizer.step()``
    calls (``input_img`` then holds that step's image), and ``on_step_end(optimizer, input_img,
    evaluations)`` is called after every ``optimizer.step()``, where the state is whole. Neither
    changes a number the loop computes.

    ``tiled`` (docs/print-size.md): each evaluation runs over crops (``tiling.tiling.TiledStyleModel.evaluate``) and
    gives the same loss and ``input_img.grad`` up to rounding; ``model`` is then not run.

    ``parametrization`` (core/parametrization.py): ``pixels`` moves the image's pixels (the tutorial's); ``fourier``
    moves its scaled Fourier coefficients. Either way each evaluation scores the clamped image in ``input_img`` with
    the same model and loss; the basis only changes the path the optimiser takes.

    ``keep_best`` (not the tutorial's, which hands back LBFGS's last update): a tolerance ``t``; the run hands back
    the image of its lowest evaluated loss (``stats.best_evaluation``) unless its last evaluation's loss is below
    ``(1 + t)`` times that lowest. 0: always the best evaluated image. None: the pixels' run hands back its last
    update (the tutorial's), a run in another basis keeps its best within ``KEEP_WITHIN``.
    """
    check_backward(backward)
    if tiled is not None and backward == "per-module":
        raise ValueError("backward 'per-module' cannot be combined with tiling (tile): a tiled evaluation "
                         "backpropagates once per crop; use backward 'combined'")
    input_img.requires_grad_(True)
    model.eval()
    model.requires_grad_(False)
    # The Fourier basis's scale: 1/f**0.5, flat from LATE_SHARE of the planned evaluations on (LBFGS only; a
    # checkpoint's optimiser state says which it had, older ones the first).
    exponent = FOURIER_EXPONENT
    if keep_best is None and parametrization != "pixels":  # not the tutorial's path: its best within KEEP_WITHIN
        keep_best = KEEP_WITHIN
    if resume is not None and resume.optimizer_state.get("param_groups"):
        exponent = resume.optimizer_state["param_groups"][0].get("exponent", FOURIER_EXPONENT)
        if resume.optimizer_state["param_groups"][0].get("gave_up_basis"):  # the run had fallen back to the pixels
            parametrization = "pixels"
    basis = make_basis(parametrization, input_img, exponent)
    moved = BasisImage(basis, input_img) if basis is not None else None
    variable = input_img if moved is None else moved.coefficients  # what the optimiser moves
    optimizer = get_input_optimizer(variable, optimizer_name=optimizer_name, lr=lr, history_size=history_size)
    planned = planned_evaluations(num_steps, optimizer_name)
    late_from = round(LATE_SHARE * planned) if moved is not None and optimizer_name == "lbfgs" else None
    run = [0]
    base_lr = OPTIMIZER_LR[optimizer_name] if lr is None else lr
    if keep_best is not None:
        stats.keep_best()
    if resume is not None:
        optimizer.load_state_dict(resume.optimizer_state)
        run[0] = resume.evaluations
        kept = optimizer.param_groups[0].get("best_image")
        if keep_best is not None and kept is not None:  # the best image so far, as the checkpoint kept it
            group = optimizer.param_groups[0]
            stats.keep_best_from(group["best_loss"], group["best_evaluation"], kept.to(input_img.device))
        if moved is not None:  # the jump guard's damped learning rate and restarts continue as the checkpoint left them
            moved.damping = optimizer.param_groups[0]["lr"] / base_lr
            moved.in_a_row = optimizer.param_groups[0].get("restarts_in_a_row", 0)
    while run[0] <= num_steps:

        def closure() -> torch.Tensor:
            if moved is None:
                with torch.no_grad():
                    input_img.clamp_(0, 1)
            else:  # the coefficients' image, clamped, evaluated like the pixels
                moved.show(input_img)
                input_img.grad = None
            optimizer.zero_grad()
            if tiled is not None:  # two passes over crops, the same loss and gradient (tiling/tiling.py)
                style_score, content_score, extra_score = tiled.evaluate(input_img, style_weight, content_weight,
                                                                         extra_losses)
                loss = style_score + content_score + extra_score
                stats.check_finite(loss, input_img)
                if moved is not None:
                    moved.backward(input_img)
                run[0] += 1
                if progress is not None:
                    progress(StepInfo(run[0], planned, _value(style_score), _value(content_score),
                                      _value(extra_score)))
                if moved is not None:
                    moved.observe(_value(loss))
                return style_score + content_score if not extra_losses else loss
            model(input_img)
            # The tutorial's sums in its order: style_weight * Σ style losses, content_weight * Σ content losses.
            style_score, content_score = weighted_scores(style_losses, content_losses, style_weight, content_weight)
            loss = style_score + content_score
            extra_score = 0.0
            for extra in extra_losses:  # terms beyond the tutorial's two (total variation)
                extra_score = extra_score + extra.loss
                loss = loss + extra.loss
            stats.check_finite(loss, input_img)  # departure: a NaN/inf loss stops the run, keeping the last image
            if backward == "per-module":  # the 2017 tutorial's structure, kept to compare: docs/retain_graph.md
                style_score, content_score, extra_score = per_module_backward(  # the sum above is not backpropagated
                    style_losses, content_losses, style_weight, content_weight, extra_losses=extra_losses)
                loss = style_score + content_score + extra_score
            else:
                loss.backward()
            if moved is not None:
                moved.backward(input_img)
            run[0] += 1
            if progress is not None:
                progress(StepInfo(run[0], planned, _value(style_score), _value(content_score), _value(extra_score)))
            if moved is not None:  # a loss that jumped ends the step (Jumped): back to the step's best
                moved.observe(_value(loss))
            return style_score + content_score if not extra_losses else loss

        iterations = optimizer.state[variable].get("n_iter", 0)
        for module in style_losses:  # losses that draw at random (sliced) hold one draw for the whole step
            if hasattr(module, "start_step"):
                module.start_step(run[0])
        restarted = False
        if moved is not None:
            moved.begin_step()
        # A model whose arithmetic changes with this step (a bf16 run's float32 finish, fast/fast.py): LBFGS would
        # pair this step's first gradient with the last one in the other arithmetic; a last step of length 0 skips
        # that pair (LBFGS keeps a pair only where y·s > 1e-10), the rest of its memory is kept. A model that
        # finishes in its last ``finish_evaluations`` gets the run's last LBFGS step as two: the rest, then those.
        starts = getattr(model, "step_starts", None)
        last = run[0] + LBFGS_MAX_ITER > num_steps
        finish = getattr(model, "finish_evaluations", 0) if last and optimizer_name == "lbfgs" else 0
        try:
            if starts is not None and 0 < finish < LBFGS_MAX_ITER:
                _one_step(optimizer, variable, closure, LBFGS_MAX_ITER - finish, starts(last=False))
                _one_step(optimizer, variable, closure, finish, starts(last=True))
            else:
                _one_step(optimizer, variable, closure, None,
                            starts is not None and starts(last=last) and optimizer_name == "lbfgs")
        except Jumped:  # the Fourier path's guard: the step's best coefficients, a fresh LBFGS from there, damped
            assert moved is not None
            moved.restart()
            restarted = True
            if moved.exhausted:  # damping did not help: the rest of the run moves the pixels, from the best image
                moved.settle(input_img)
                with torch.no_grad():
                    input_img.clamp_(0, 1)
                moved = None
                variable = input_img
                optimizer = get_input_optimizer(variable, optimizer_name=optimizer_name, lr=lr,
                                                history_size=history_size)
                optimizer.param_groups[0]["gave_up_basis"] = True  # kept by a checkpoint's state_dict
            else:
                optimizer = get_input_optimizer(variable, optimizer_name=optimizer_name, lr=moved.damped(base_lr),
                                                history_size=history_size)
                optimizer.param_groups[0]["restarts_in_a_row"] = moved.in_a_row  # kept by a checkpoint's state_dict
        else:
            if moved is not None:  # a step without a jump: the damping eases off
                moved.clean_step()
                optimizer.param_groups[0]["restarts_in_a_row"] = 0
                if moved.damping < 1:
                    optimizer.param_groups[0]["lr"] = moved.ease(base_lr)
        if moved is not None:  # the image of the step's last update, and coefficients a checkpoint restores exactly
            if late_from is not None and run[0] >= late_from and moved.basis.exponent != LATE_EXPONENT:
                moved.rebase(LATE_EXPONENT, optimizer.state[variable])  # the rest of the run in the flat scale
            moved.settle(input_img)
            optimizer.param_groups[0]["exponent"] = moved.basis.exponent  # kept by a checkpoint's state_dict
        if keep_best is not None and stats.best_image() is not None:  # kept by a checkpoint's state_dict
            optimizer.param_groups[0].update(best_image=stats.best_image(), best_loss=stats.best_loss,
                                             best_evaluation=stats.best_evaluation)
        if on_step_end is not None:
            on_step_end(optimizer, input_img, run[0])
        # Departure: once LBFGS returns at once (gradient below tolerance) the tutorial re-evaluates the same
        # image until num_steps; we stop, with the same image, and say so.
        if not restarted and stats.stopped_early(optimizer, variable, iterations, unfinished=run[0] <= num_steps):
            break
    with torch.no_grad():
        best = stats.best_image() if keep_best is not None else None
        if best is not None and not stats.last_loss < (1 + keep_best) * stats.best_loss:  # type: ignore[operator]
            input_img.copy_(best)
            stats.handed_back = stats.best_evaluation
        elif moved is not None:
            input_img.copy_(moved.basis.decode(moved.coefficients))
        input_img.clamp_(0, 1)
    input_img.requires_grad_(False)
    stats.check_final(input_img)  # LBFGS's last update is never evaluated: it must be finite too
    return input_img


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
        optimizer.step(closure)
    finally:
        if iterations is not None:
            group["max_iter"] = whole


@dataclass(frozen=True)
class Resume:
    """Where ``optimize`` continues: the optimiser's ``state_dict()`` after one of its steps, and the
    closure evaluations the loop had run by then."""

    optimizer_state: dict
    evaluations: int


# Called after every optimizer.step() with the optimiser, the image and the evaluations so far.
StepEndCallback = Callable[[optim.Optimizer, torch.Tensor, int], None]


def _value(score: torch.Tensor | float) -> float:
    return float(score.detach()) if isinstance(score, torch.Tensor) else float(score)


class TiledEvaluation(Protocol):
    """One closure evaluation over crops, with the untiled loss and ``image.grad`` up to rounding
    (``tiling.tiling.TiledStyleModel``)."""

    def evaluate(self, image: torch.Tensor, style_weight: float, content_weight: float,
                 extra_losses: Sequence[nn.Module] = ()) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]: ...


class Tiles(Protocol):
    """Evaluations over crops (``tiling.tiling.Tiles``): the style model is built on small stand-ins for the
    images and its targets are then computed over crops, so no whole-image feature map is held."""

    def stand_ins(self, images: torch.Tensor | Sequence[torch.Tensor]) -> torch.Tensor | list[torch.Tensor]: ...

    def stand_in_guides(self, guides: masks.Guides | None) -> masks.Guides | None: ...

    def evaluation(self, model: nn.Sequential, content_img: torch.Tensor, style_imgs: Sequence[torch.Tensor],
                   style_blend: Sequence[float] | None, guides: masks.Guides | None = None) -> TiledEvaluation: ...


# fast.fast.accelerator's: the style model in its fast form, given the evaluations a resumed run has done and the
# evaluations the run plans.
Accelerate = Callable[[nn.Sequential, list[StyleLoss], list[ContentLoss], int, int],
                      tuple[nn.Module, list[StyleLoss], list[ContentLoss]]]


@dataclass(frozen=True, eq=False)
class TransferSettings:
    """Everything ``run_style_transfer`` takes beyond the tutorial's arguments. The defaults are the tutorial's;
    ``TransferSettings.from_config`` takes the maths from a ``StyleConfig``."""

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
    backward: str = "combined"  # or per-module (optimize)
    parametrization: str = "pixels"  # or fourier (optimize; core/parametrization.py)
    keep_best: float | None = None  # hand back the best evaluated image (optimize); None: optimize's own choice
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
    # The opt-in paths of speed/, handed in by the run (core imports none of them); None: the tutorial's path.
    accelerate: Accelerate | None = None  # bf16 / channels_last / fused Gram (fast.fast.accelerator)
    tiles: Tiles | None = None  # evaluate over crops (tiling.tiling.tiles_for; docs/print-size.md)

    @classmethod
    def from_config(cls, config: StyleConfig, **objects: object) -> TransferSettings:
        """The maths of ``config`` (layers, loss forms, optimiser, backward, style statistics), then ``objects``
        (any field: normalization, progress, a history size resolved by speed/, ...)."""
        maths = dict(content_layers=config.content_layers, style_layers=config.style_layers,
                     style_layer_weights=config.style_layer_weights, style_blend=config.style_blend,
                     loss_form=config.loss_form, pooling=config.pooling, tv_weight=config.tv_weight,
                     style_loss=config.style_loss, seed=config.seed, optimizer_name=config.optimizer, lr=config.lr,
                     history_size=config.history_size, backward=config.backward,
                     parametrization=config.parametrization or "pixels")  # --fast's fourier: run.Run's speed
        return cls(**{**maths, **objects})  # type: ignore[arg-type]


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
        tiled = tiles.evaluation(model, content_img, style_img if isinstance(style_img, (list, tuple)) else [style_img],
                                 s.style_blend, s.guides)
    extra_losses = []
    if s.tv_weight > 0:  # a smoothness term on the image itself, first in the model
        tv_loss = TotalVariationLoss(s.tv_weight)
        model = nn.Sequential(OrderedDict([("tv_loss", tv_loss), *model.named_children()]))
        extra_losses.append(tv_loss)
    for i, image_loss in enumerate(s.image_losses):  # beyond the tutorial: the caller's terms (video/temporal.py)
        model = nn.Sequential(OrderedDict([(f"image_loss_{i}", image_loss), *model.named_children()]))
        extra_losses.append(image_loss)
    if s.accelerate is not None:  # bf16 / channels_last / fused Gram (fast/fast.py)
        model, style_losses, content_losses = s.accelerate(model, style_losses, content_losses,
                                                           0 if s.resume is None else s.resume.evaluations)
    return optimize(model, style_losses, content_losses, input_img, num_steps, style_weight, content_weight,
                    s.progress, optimizer_name=s.optimizer_name, lr=s.lr, extra_losses=extra_losses,
                    stats=s.stats, backward=s.backward, history_size=s.history_size, resume=s.resume,
                    on_step_end=s.on_step_end, tiled=tiled, parametrization=s.parametrization, keep_best=s.keep_best)
