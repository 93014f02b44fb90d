"""The tutorial's functions: the style model (losses inserted into VGG19), its LBFGS loop, ``stylize()``.

A whole run (sizes, events, previews, checkpoints) is ``run.Run``; ``stylize()`` here calls it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass, field

import torch
from PIL import Image
from torch import nn, optim

from . import masks
from .backward import check_backward, per_module_backward, weighted_scores
from ..config import TILING_REFUSAL, TUTORIAL_CONTENT_LAYERS, TUTORIAL_STYLE_LAYERS
from ..speed import tiling
from ..speed.fast import TORCH_LBFGS_HISTORY, Speed, accelerate
from .stats import RunStats, keeps_image_on_interrupt
from ..layers import resolve_layers, swap_pooling
from .loss_terms import TotalVariationLoss, make_content_loss, make_style_loss, normalized_blend
from .losses import ContentLoss, StyleLoss
from .statistics import SlicedStyleLoss, make_statistics_loss
from .vgg import Normalization
from .steps import planned_evaluations


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


def _layer_name(layer: nn.Module, i: int) -> str:
    if isinstance(layer, nn.Conv2d):
        return f"conv_{i}"
    if isinstance(layer, nn.ReLU):
        return f"relu_{i}"
    if isinstance(layer, (nn.MaxPool2d, nn.AvgPool2d)):
        return f"pool_{i}"
    if isinstance(layer, nn.BatchNorm2d):
        return f"bn_{i}"
    raise RuntimeError(f"Unrecognized layer: {layer.__class__.__name__}")


def layer_names(cnn: nn.Sequential) -> list[str]:
    """The tutorial's names of a VGG ``features`` block: ``conv_N``, ``relu_N``, ``pool_N``."""
    names, i = [], 0
    for layer in cnn.children():
        i += isinstance(layer, nn.Conv2d)
        names.append(_layer_name(layer, i))
    return names


def get_style_model_and_losses(
    cnn: nn.Sequential,
    normalization_mean: torch.Tensor | Sequence[float],
    normalization_std: torch.Tensor | Sequence[float],
    style_img: torch.Tensor | Sequence[torch.Tensor],
    content_img: torch.Tensor,
    content_layers: Sequence[str] = TUTORIAL_CONTENT_LAYERS,
    style_layers: Sequence[str] = TUTORIAL_STYLE_LAYERS,
    *,
    style_layer_weights: Sequence[float] | None = None,
    style_blend: Sequence[float] | None = None,
    loss_form: str = "tutorial",
    pooling: str = "max",
    style_targets: MutableMapping[str, torch.Tensor] | None = None,
    normalization: nn.Module | None = None,
    guides: masks.Guides | None = None,
    style_loss: str = "gram",
    seed: int = 0,
) -> tuple[nn.Sequential, list[StyleLoss], list[ContentLoss]]:
    """Copy ``cnn`` into a new ``nn.Sequential`` with loss modules after the named layers.

    As in the tutorial: ``Normalization`` first; layers renamed ``conv_N``/``relu_N``/``pool_N``
    by a running conv counter; ReLUs out of place (an in-place ReLU would overwrite the
    features a loss module just saw); the network cut after the last loss module.

    Beyond the tutorial (keyword-only; the defaults are the tutorial's): layers may be given by
    the paper's names (``conv4_2``); ``style_img`` may be a sequence of style images whose Gram
    targets are blended by ``style_blend``; ``style_layer_weights`` weigh each style layer;
    ``loss_form="paper"`` uses the paper's loss definitions; ``pooling="avg"`` swaps the pools.
    ``style_targets`` (batch runs): a mapping of style layer name -> Gram target shared by runs with
    the same style images, network and settings; filled in when empty, used (the style images'
    forward passes skipped) when it holds every style layer. The caller owns what it keys it by.
    ``normalization``: the module put first in place of ``Normalization(mean, std)`` (then not used), such as
    ``models.CaffeNormalization`` for Caffe-converted weights (``models.Network.normalization()``).
    ``guides`` (docs/usage.md, ``core/masks.py``): masks over the content at its size, followed through the layers;
    with style masks each style layer gets a guided loss (``GuidedStyleLoss``, or for the other statistics
    ``statistics.GuidedWassersteinLoss`` / ``GuidedSlicedLoss``; no shared ``style_targets``), with a content
    mask each content layer a ``MaskedContentLoss``.
    ``style_loss``: ``gram`` (the tutorial's), or ``wasserstein`` / ``sliced`` (``core/statistics.py``; their
    targets blend as that module says; ``loss_form`` is the Gram's and the content's); ``seed`` seeds the sliced
    loss's directions.

    Raises:
        ValueError: a requested layer is not in the network (the message lists valid names).
    """
    if normalization is None:  # the tutorial's: torchvision's weights take ImageNet's mean and std
        normalization = Normalization(normalization_mean, normalization_std)
    normalization = normalization.to(content_img.device)
    style_loss_kind = style_loss
    valid = layer_names(cnn)
    content_layers = resolve_layers(content_layers, valid)  # paper names (conv2_2) become conv_4
    style_layers = resolve_layers(style_layers, valid)
    wanted = set(content_layers) | set(style_layers)
    style_imgs = list(style_img) if isinstance(style_img, (list, tuple)) else [style_img]
    normalized_blend(style_blend, len(style_imgs))  # checks the blend before any work
    layer_weights = [1.0] * len(style_layers) if style_layer_weights is None else list(style_layer_weights)
    if len(layer_weights) != len(style_layers):
        raise ValueError(f"{len(layer_weights)} style layer weight(s) for {len(style_layers)} style layer(s)")

    content_losses: list[ContentLoss] = []
    style_losses: list[StyleLoss] = []
    model = nn.Sequential(normalization)
    if guides is not None and guides.styles is not None:
        style_targets = None  # guided losses keep one target per style, not the blend a cache holds
    cached = style_targets is not None and all(name in style_targets for name in style_layers)
    style_count = len(style_imgs)
    if cached:  # the style images' targets are known: only the content passes through the network
        style_imgs = []
    # Departure from the tutorial: the targets come from one no_grad pass that follows the model
    # as it is built (the tutorial re-runs the partial model per loss); same operations, same values.
    with torch.no_grad():
        content_x = normalization(content_img)
        style_xs = [normalization(img) for img in style_imgs]
    for layer, name in zip(cnn.children(), valid):
        if not wanted:
            break  # the tutorial builds the rest and cuts it off; skipping it is the same model
        if isinstance(layer, nn.ReLU):
            layer = nn.ReLU(inplace=False)
        layer = swap_pooling(layer, pooling)
        model.add_module(name, layer)
        with torch.no_grad():
            content_x = layer(content_x)
            style_xs = [layer(x) for x in style_xs]
        if guides is not None:  # the masks follow the features' resolution
            guides = guides.follow(layer, tuple(content_x.shape[-2:]))
        index = name.split("_")[1]
        if name in content_layers:
            content_loss = (make_content_loss(content_x, form=loss_form) if guides is None or guides.content is None
                            else masks.MaskedContentLoss(content_x, guides.content, form=loss_form))
            model.add_module(f"content_loss_{index}", content_loss)
            content_losses.append(content_loss)
        if name in style_layers:
            # With cached targets, stand-ins of the right channel count make a loss of the same class.
            features = style_xs if not cached else [content_x[..., :1, :1]] * style_count
            guided = guides.styles if guides is not None else None  # one masked region per style
            if guided is not None and style_loss_kind == "gram":
                style_loss = masks.GuidedStyleLoss(features, guided, style_blend,
                                                   weight=layer_weights[style_layers.index(name)], form=loss_form)
            elif style_loss_kind == "gram":
                style_loss = make_style_loss(features, style_blend, weight=layer_weights[style_layers.index(name)],
                                             form=loss_form)
            else:  # other style statistics (core/statistics.py), guided or not
                style_loss = make_statistics_loss(style_loss_kind, features, style_blend, seed=seed,
                                                  weight=layer_weights[style_layers.index(name)],
                                                  layer=style_layers.index(name), masks=guided)
            if cached:
                style_loss.target = style_targets[name].clone()
            elif style_targets is not None:
                style_targets[name] = style_loss.target.detach().clone()
            model.add_module(f"style_loss_{index}", style_loss)
            style_losses.append(style_loss)
        wanted.discard(name)
    return model, style_losses, content_losses


OPTIMIZER_LR = {"lbfgs": 1.0, "adam": 0.02}  # learning rates when none is given (LBFGS: torch's)


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
        return optim.LBFGS([input_img], lr=OPTIMIZER_LR["lbfgs"] if lr is None else lr, history_size=history_size)
    return optim.LBFGS([input_img]) if lr is None else optim.LBFGS([input_img], lr=lr)


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
    tiled: tiling.TiledStyleModel | None = None,
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

    ``tiled`` (docs/print-size.md): each evaluation runs over crops (``tiling.TiledStyleModel.evaluate``) and
    gives the same loss and ``input_img.grad`` up to rounding; ``model`` is then not run.
    """
    check_backward(backward)
    if tiled is not None and backward == "per-module":
        raise ValueError("backward 'per-module' cannot be combined with tiling (tile): a tiled evaluation "
                         "backpropagates once per crop; use backward 'combined'")
    input_img.requires_grad_(True)
    model.eval()
    model.requires_grad_(False)
    optimizer = get_input_optimizer(input_img, optimizer_name=optimizer_name, lr=lr, history_size=history_size)
    planned = planned_evaluations(num_steps, optimizer_name)
    run = [0]
    if resume is not None:
        optimizer.load_state_dict(resume.optimizer_state)
        run[0] = resume.evaluations
    while run[0] <= num_steps:

        def closure() -> torch.Tensor:
            with torch.no_grad():
                input_img.clamp_(0, 1)
            optimizer.zero_grad()
            if tiled is not None:  # two passes over crops, the same loss and gradient (tiling.py)
                style_score, content_score, extra_score = tiled.evaluate(input_img, style_weight, content_weight,
                                                                         extra_losses)
                loss = style_score + content_score + extra_score
                stats.check_finite(loss, input_img)
                run[0] += 1
                if progress is not None:
                    progress(StepInfo(run[0], planned, _value(style_score), _value(content_score),
                                      _value(extra_score)))
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
            run[0] += 1
            if progress is not None:
                progress(StepInfo(run[0], planned, _value(style_score), _value(content_score), _value(extra_score)))
            return style_score + content_score if not extra_losses else loss

        iterations = optimizer.state[input_img].get("n_iter", 0)
        optimizer.step(closure)
        if on_step_end is not None:
            on_step_end(optimizer, input_img, run[0])
        # Departure: once LBFGS returns at once (gradient below tolerance) the tutorial re-evaluates the same
        # image until num_steps; we stop, with the same image, and say so.
        if stats.stopped_early(optimizer, input_img, iterations, unfinished=run[0] <= num_steps):
            break
    with torch.no_grad():
        input_img.clamp_(0, 1)
    input_img.requires_grad_(False)
    stats.check_final(input_img)  # LBFGS's last update is never evaluated: it must be finite too
    return input_img


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
    *,
    content_layers: Sequence[str] = TUTORIAL_CONTENT_LAYERS,
    style_layers: Sequence[str] = TUTORIAL_STYLE_LAYERS,
    progress: ProgressCallback | None = None,
    style_layer_weights: Sequence[float] | None = None,
    style_blend: Sequence[float] | None = None,
    loss_form: str = "tutorial",
    pooling: str = "max",
    tv_weight: float = 0.0,
    optimizer_name: str = "lbfgs",
    lr: float | None = None,
    stats: RunStats | None = None,
    backward: str = "combined",
    speed: Speed | None = None,
    resume: Resume | None = None,
    on_step_end: StepEndCallback | None = None,
    image_losses: Sequence[nn.Module] = (),
    tile: int | None = None,
    style_targets: MutableMapping[str, torch.Tensor] | None = None,
    normalization: nn.Module | None = None,
    guides: masks.Guides | None = None,
    style_loss: str = "gram",
    seed: int = 0,
) -> torch.Tensor:
    """The tutorial's ``run_style_transfer``: build the style model, optimise ``input_img``.

    Args:
        cnn: a VGG ``features`` block (frozen), on the images' device.
        content_img, style_img, input_img: ``(1, 3, H, W)`` tensors in [0, 1]; the style
            image may have another size. ``input_img`` is optimised in place.
        num_steps: closure evaluations (the run ends at the end of the LBFGS step passing it).
        progress: called after every closure evaluation with a ``StepInfo``.
        style_layer_weights, style_blend, loss_form, pooling: see ``get_style_model_and_losses``
            (``style_img`` may be a sequence of style images, blended by ``style_blend``).
        tv_weight: weight of a total variation term on ``input_img`` (0: none, as in the tutorial).
        optimizer_name, lr: see ``get_input_optimizer``.
        stats: filled in with the evaluations run and whether LBFGS converged.
        backward: ``combined`` (the tutorial's) or ``per-module`` (see ``optimize``).
        speed: the opt-in fast path (``fast.Speed``); None computes exactly what the tutorial does.
        resume, on_step_end: checkpoints (see ``optimize``).
        image_losses: the caller's loss modules on the image itself (video's temporal loss): put first in the
            model, each stores its weighted ``.loss``, added like total variation; none by default.
        tile: evaluate over crops of at most this side (docs/print-size.md, ``tiling.py``) when ``input_img`` is
            larger; the targets are computed over crops too. None: the whole image at once.
        style_targets: Gram targets shared across runs (see ``get_style_model_and_losses``); not used
            when tiled (the crops compute their own).
        normalization: the preprocessing module in place of ``Normalization(mean, std)`` (Caffe's for
            Caffe-converted weights; see ``get_style_model_and_losses``).
        guides: masks over the content (docs/usage.md, ``core/masks.py``; see ``get_style_model_and_losses``).
        style_loss, seed: the style statistics and the sliced loss's seed (``get_style_model_and_losses``);
            tiling runs the Gram loss only.

    Returns:
        ``input_img``, clamped to [0, 1].
    """
    speed = speed or Speed()
    tiled = tiling.needs_tiles(*input_img.shape[-2:], tile)
    if tiled and (speed.changes_model or backward != "combined"):  # refused before the targets' passes
        raise ValueError("precision bf16, channels_last, fused_gram and backward per-module cannot be combined "
                         "with tiling (tile): tiled evaluations run in float32 with one backward per crop")
    if tiled and guides is not None:
        raise ValueError("style or content masks cannot be combined with tiling (tile, or a size that does not fit "
                         "untiled): give a smaller size, or no masks")
    if tiled and style_loss in TILING_REFUSAL:  # wasserstein tiles: its means and covariances add up over crops
        raise ValueError(f"tile cannot be combined with style_loss {style_loss!r}: {TILING_REFUSAL[style_loss]}")
    model, style_losses, content_losses = get_style_model_and_losses(  # tiled: the targets come below
        cnn, normalization_mean, normalization_std, tiling.stand_ins(style_img) if tiled else style_img,
        tiling.stand_ins(content_img) if tiled else content_img, content_layers, style_layers,
        style_layer_weights=style_layer_weights, style_blend=style_blend, loss_form=loss_form, pooling=pooling,
        style_targets=None if tiled else style_targets, normalization=normalization, guides=guides,
        style_loss=style_loss, seed=seed)
    if resume is not None:  # the sliced directions of a resumed run continue from the evaluations it had done
        for module in style_losses:
            if isinstance(module, SlicedStyleLoss):
                module.evaluations = resume.evaluations
    tiled_model = None
    if tiled:  # evaluations and targets over crops, the untiled numbers up to rounding
        tiled_model = tiling.TiledStyleModel(model, tile)
        tiled_model.set_targets(content_img, style_img if isinstance(style_img, (list, tuple)) else [style_img],
                                style_blend)
    extra_losses = []
    if tv_weight > 0:  # a smoothness term on the image itself, first in the model
        tv_loss = TotalVariationLoss(tv_weight)
        model = nn.Sequential(OrderedDict([("tv_loss", tv_loss), *model.named_children()]))
        extra_losses.append(tv_loss)
    for i, image_loss in enumerate(image_losses):  # beyond the tutorial: the caller's terms (video/temporal.py)
        model = nn.Sequential(OrderedDict([(f"image_loss_{i}", image_loss), *model.named_children()]))
        extra_losses.append(image_loss)
    if speed.changes_model:  # bf16 / channels_last / fused Gram (fast.py)
        model, style_losses, content_losses = accelerate(model, style_losses, content_losses, speed)
        if resume is not None:  # a bf16 model's float32 start counts evaluations: continue its count
            model.exact_left = max(0, model.exact_left - resume.evaluations)
    return optimize(model, style_losses, content_losses, input_img, num_steps, style_weight, content_weight,
                    progress, optimizer_name=optimizer_name, lr=lr, extra_losses=extra_losses,
                    stats=stats, backward=backward, history_size=speed.history_size, resume=resume,
                    on_step_end=on_step_end, tiled=tiled_model)
