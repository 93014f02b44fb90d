"""The style model (losses inserted into VGG19) and the tutorial's LBFGS loop; ``stylize()``."""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn, optim

from .backward import check_backward, per_module_backward, weighted_scores
from .config import CPU_DEFAULT_SIZE, GPU_DEFAULT_SIZE, TUTORIAL_CONTENT_LAYERS, TUTORIAL_STYLE_LAYERS, StyleConfig
from . import colors
from .fast import (FAST_SCALE_SHARES, LBFGS_MAX_ITER, TORCH_LBFGS_HISTORY, Speed, accelerate, scale_budgets,
                   scale_sizes, speed_from_config)
from .guards import RunStats, SizeFn, check_memory, keeps_image_on_interrupt, out_of_memory
from .images import MIN_SIDE, ImageSource, load_image, tensor_to_pil, working_size
from .layers import resolve_layers, swap_pooling
from .loss_terms import TotalVariationLoss, make_content_loss, make_style_loss, normalized_blend
from .losses import ContentLoss, StyleLoss
from .models import IMAGENET_MEAN, IMAGENET_STD, DownloadProgress, Normalization, load_vgg19_features


@dataclass(frozen=True)
class StepInfo:
    """Progress after one closure evaluation (one forward and backward pass)."""

    step: int  # closure evaluations so far, from 1
    total: int  # evaluations the run plans: whole LBFGS steps past --steps (planned_evaluations); fixed for a run
    style_loss: float  # style_weight * sum of style losses
    content_loss: float  # content_weight * sum of content losses
    tv_loss: float = 0.0  # tv_weight * total variation (0 without --tv-weight)

    @property
    def loss(self) -> float:
        return self.style_loss + self.content_loss + self.tv_loss


def planned_evaluations(num_steps: int, optimizer_name: str = "lbfgs") -> int:
    """The evaluations the tutorial's loop runs for ``num_steps`` when every LBFGS step runs in full.

    The loop calls ``optimizer.step`` while at most ``num_steps`` evaluations ran, and each LBFGS step
    runs up to ``LBFGS_MAX_ITER`` (20): 300 steps run 320. A step that ends early (its loss stops
    changing) makes the run end sooner or, rarely, one step later. Adam: one evaluation a step.
    """
    if optimizer_name == "adam":
        return num_steps + 1
    return LBFGS_MAX_ITER * (num_steps // LBFGS_MAX_ITER + 1)


ProgressCallback = Callable[[StepInfo], None]


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` picks CUDA, then MPS, then the CPU; other names are checked to exist.

    Raises:
        ValueError: the device is not available on this machine.
    """
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {name!r} is not available: this machine has no usable CUDA GPU")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"device {name!r} is not available: only {torch.cuda.device_count()} CUDA GPU(s)")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {name!r} is not available on this machine")
    return device


def default_size(device: torch.device) -> int:
    """The working size when none is given: 512 px on a GPU, ``CPU_DEFAULT_SIZE`` on a CPU."""
    return CPU_DEFAULT_SIZE if device.type == "cpu" else GPU_DEFAULT_SIZE


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
) -> tuple[nn.Sequential, list[StyleLoss], list[ContentLoss]]:
    """Copy ``cnn`` into a new ``nn.Sequential`` with loss modules after the named layers.

    As in the tutorial: ``Normalization`` first; layers renamed ``conv_N``/``relu_N``/``pool_N``
    by a running conv counter; ReLUs out of place (an in-place ReLU would overwrite the
    features a loss module just saw); the network cut after the last loss module.

    Beyond the tutorial (keyword-only; the defaults are the tutorial's): layers may be given by
    the paper's names (``conv4_2``); ``style_img`` may be a sequence of style images whose Gram
    targets are blended by ``style_blend``; ``style_layer_weights`` weigh each style layer;
    ``loss_form="paper"`` uses the paper's loss definitions; ``pooling="avg"`` swaps the pools.

    Raises:
        ValueError: a requested layer is not in the network (the message lists valid names).
    """
    normalization = Normalization(normalization_mean, normalization_std).to(content_img.device)
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
        index = name.split("_")[1]
        if name in content_layers:
            content_loss = make_content_loss(content_x, form=loss_form)
            model.add_module(f"content_loss_{index}", content_loss)
            content_losses.append(content_loss)
        if name in style_layers:
            style_loss = make_style_loss(style_xs, style_blend, weight=layer_weights[style_layers.index(name)],
                                         form=loss_form)
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
    curvature pairs (issue 6; torch's default 100 is the tutorial's).
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
    """
    check_backward(backward)
    input_img.requires_grad_(True)
    model.eval()
    model.requires_grad_(False)
    optimizer = get_input_optimizer(input_img, optimizer_name=optimizer_name, lr=lr, history_size=history_size)
    planned = planned_evaluations(num_steps, optimizer_name)
    run = [0]
    while run[0] <= num_steps:

        def closure() -> torch.Tensor:
            with torch.no_grad():
                input_img.clamp_(0, 1)
            optimizer.zero_grad()
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
        # Departure: once LBFGS returns at once (gradient below tolerance) the tutorial re-evaluates the same
        # image until num_steps; we stop, with the same image, and say so.
        if stats.stopped_early(optimizer, input_img, iterations, unfinished=run[0] <= num_steps):
            break
    with torch.no_grad():
        input_img.clamp_(0, 1)
    input_img.requires_grad_(False)
    stats.check_final(input_img)  # LBFGS's last update is never evaluated: it must be finite too
    return input_img


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

    Returns:
        ``input_img``, clamped to [0, 1].
    """
    model, style_losses, content_losses = get_style_model_and_losses(
        cnn, normalization_mean, normalization_std, style_img, content_img, content_layers, style_layers,
        style_layer_weights=style_layer_weights, style_blend=style_blend, loss_form=loss_form, pooling=pooling)
    extra_losses = []
    if tv_weight > 0:  # a smoothness term on the image itself, first in the model
        tv_loss = TotalVariationLoss(tv_weight)
        model = nn.Sequential(OrderedDict([("tv_loss", tv_loss), *model.named_children()]))
        extra_losses.append(tv_loss)
    speed = speed or Speed()
    if speed.changes_model:  # issue 6: bf16 / channels_last / fused Gram (fast.py)
        model, style_losses, content_losses = accelerate(model, style_losses, content_losses, speed)
    return optimize(model, style_losses, content_losses, input_img, num_steps, style_weight, content_weight,
                    progress, optimizer_name=optimizer_name, lr=lr, extra_losses=extra_losses,
                    stats=stats, backward=backward, history_size=speed.history_size)


def initial_image(content_img: torch.Tensor, init: str, seed: int, *,
                  style_img: torch.Tensor | None = None) -> torch.Tensor:
    """The start image: a copy of the content, or uniform noise in [0, 1] drawn on the CPU.

    Also ``"style"``: ``style_img`` stretched to the content's size; or the path of an image
    file, loaded and stretched to the content's size.

    Raises:
        ImageError: the init file cannot be read. ValueError: ``"style"`` without ``style_img``.
    """
    if init == "content":
        return content_img.clone()
    if init != "noise":
        if init == "style" and style_img is None:
            raise ValueError("init 'style' needs a style image")
        start = style_img if init == "style" else load_image(init, max(content_img.shape[-2:]))
        return _fit(start, content_img).to(content_img.device)
    # Departure from the tutorial: its commented-out randn noise lies mostly outside [0, 1]
    # and is clamped to black and white at once; uniform noise from a seeded CPU generator
    # is repeatable on every device.
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(content_img.shape, generator=generator).to(content_img.device)


def _memory_guarded(function: Callable[..., Image.Image]) -> Callable[..., Image.Image]:
    """Turn an allocator failure inside ``stylize`` into a one-line ``ResourceError``."""

    @functools.wraps(function)
    def guarded(content: ImageSource, style: ImageSource, config: StyleConfig | None = None,
                **kwargs: object) -> Image.Image:
        try:
            return function(content, style, config, **kwargs)
        except (RuntimeError, MemoryError) as exc:
            config = config or StyleConfig()
            device = resolve_device(config.device)
            error = out_of_memory(exc, config.size or default_size(device), device)
            if error is None:
                raise
            raise error from None

    return guarded


@_memory_guarded
def stylize(
    content: ImageSource,
    style: ImageSource | Sequence[ImageSource],
    config: StyleConfig | None = None,
    *,
    progress: ProgressCallback | None = None,
    download_progress: DownloadProgress | None = None,
    stats: RunStats | None = None,
) -> Image.Image:
    """Repaint ``content`` in the style of ``style``; the one-call API.

    Args:
        content, style: file paths, Pillow images or ``(1, 3, H, W)`` tensors in [0, 1];
            ``style`` may be a list of them (several styles, blended by ``config.style_blend``).
        config: every setting; ``StyleConfig()`` (the tutorial's) when None.
        progress: called after every closure evaluation with a ``StepInfo``.
        download_progress: called while the pretrained weights download (first run only).
        stats: filled in with the evaluations run and whether LBFGS converged.

    Returns:
        The result as an RGB Pillow image, long side ``config.size`` (RGBA with the content's
        alpha when ``config.keep_alpha`` and the content has one).

    Raises:
        ImageError: an input image cannot be read. WeightsError: weights cannot be had.
        ValueError: a bad setting (unknown layer, unavailable device).
        ResourceError: the size cannot fit in memory (checked before the model loads) or ran out.
        Interrupted, NonFiniteLoss: the run stopped early; the exception carries the last good image.
    """
    config = config or StyleConfig()
    device = resolve_device(config.device)
    size = config.size or default_size(device)
    speed = speed_from_config(config, device)  # issue 6: checks bf16 support before any work
    sizes = scale_sizes(size, config.scales, config.min_size)  # [size] unless coarse-to-fine
    budgets = scale_budgets(config.steps, len(sizes), config.scale_steps, FAST_SCALE_SHARES if config.fast else None)
    styles = list(style) if isinstance(style, (list, tuple)) else [style]
    normalized_blend(config.style_blend, len(styles))  # a blend that does not fit fails before any work
    # Images are read before the model loads, so a bad image fails fast.
    content_img = load_image(content, size, device)
    style_imgs = [load_image(s, style_size(size, config.style_scale), device) for s in styles]
    largest_style = max(style_imgs, key=lambda image: image.shape[-1] * image.shape[-2])
    check_memory(tuple(content_img.shape[-2:]), tuple(largest_style.shape[-2:]), device, size,
                 _working_sizes(content_img, largest_style, config.style_scale), speed=speed)
    alpha = colors.content_alpha(content, size) if config.keep_alpha else None
    transfer_content, style_imgs = prepare_colors(content_img, style_imgs, config.preserve_colors)
    input_img = initial_image(transfer_content, config.init, config.seed, style_img=style_imgs[0])
    if config.preserve_colors == "luminance" and config.init not in ("content", "noise", "style"):
        input_img = colors.gray(colors.luminance(input_img))  # a start file's luminance
    cnn = load_vgg19_features(config.weights, download_progress=download_progress).to(device)
    steps, report = config.steps, progress
    if len(sizes) > 1:  # issue 6: coarse-to-fine; the smaller sizes' result starts this one
        input_img, report = coarse_start(cnn, content, styles, config, device, sizes, budgets, speed, progress, stats)
        input_img, steps = _fit(input_img, transfer_content), budgets[-1] - 1  # -1: see coarse_start
    output = run_style_transfer(cnn, IMAGENET_MEAN, IMAGENET_STD, transfer_content,
                                style_imgs[0] if len(style_imgs) == 1 else style_imgs, input_img,
                                steps, config.style_weight, config.content_weight,
                                content_layers=config.content_layers, style_layers=config.style_layers,
                                progress=report, style_layer_weights=config.style_layer_weights,
                                style_blend=config.style_blend, loss_form=config.loss_form, pooling=config.pooling,
                                tv_weight=config.tv_weight, optimizer_name=config.optimizer, lr=config.lr,
                                stats=stats, backward=config.backward, speed=speed)
    if config.preserve_colors == "luminance":
        output = colors.keep_content_chroma(output, content_img)
    return colors.attach_alpha(tensor_to_pil(output), alpha)


def style_size(size: int, style_scale: float) -> int:
    """The long side of the style image(s): ``size * style_scale``, at least ``MIN_SIDE``."""
    return max(MIN_SIDE, round(size * style_scale))


def prepare_colors(content_img: torch.Tensor, style_imgs: Sequence[torch.Tensor],
                   preserve_colors: str = "none") -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The content and style images the transfer sees under a colour preservation mode.

    ``none``: as they are. ``histogram``: each style recoloured to the content's colour mean
    and covariance. ``luminance``: gray images of the luminance, the styles' matched to the
    content's mean and std (the result gets the content's chroma back, ``keep_content_chroma``).
    """
    if preserve_colors == "histogram":
        return content_img, [colors.match_color_histogram(s, content_img) for s in style_imgs]
    if preserve_colors == "luminance":
        return colors.gray(colors.luminance(content_img)), [colors.match_luminance(s, content_img)
                                                             for s in style_imgs]
    if preserve_colors != "none":
        raise ValueError(f"preserve_colors must be none, luminance or histogram, got {preserve_colors!r}")
    return content_img, list(style_imgs)


def _fit(image: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``image`` resized (stretched) to the height and width of ``like``."""
    if image.shape[-2:] == like.shape[-2:]:
        return image.clone()
    return F.interpolate(image, size=tuple(like.shape[-2:]), mode="bilinear", antialias=True,
                         align_corners=False).clamp(0, 1)


def _working_sizes(content_img: torch.Tensor, style_img: torch.Tensor, style_scale: float) -> SizeFn:
    """For ``check_memory``: the (height, width) of the working images at another long side."""
    (content_h, content_w), (style_h, style_w) = content_img.shape[-2:], style_img.shape[-2:]
    return lambda size: (working_size(content_w, content_h, size)[::-1],
                         working_size(style_w, style_h, style_size(size, style_scale))[::-1])


def coarse_start(cnn: nn.Sequential, content: ImageSource, styles: Sequence[ImageSource], config: StyleConfig,
                 device: torch.device, sizes: Sequence[int], budgets: Sequence[int], speed: Speed | None = None,
                 progress: ProgressCallback | None = None,
                 stats: RunStats | None = None) -> tuple[torch.Tensor, ProgressCallback | None]:
    """Coarse-to-fine (issue 6, not in the tutorial): run every size but the last, smallest first.

    Each size starts from the previous result, upsampled, with its own images and style targets;
    most evaluations thus run where they are cheap (a quarter of the pixels per halving). A
    size's budget counts evaluations rounded up to whole LBFGS steps (20), so the loop gets
    ``budget - 1`` (the tutorial's ``while evaluations <= steps`` would run one step more).

    Returns:
        The result at ``sizes[-2]`` (the images the transfer sees: gray under ``luminance``), and
        the progress callback for the last size, which continues the running count.
    """
    total = sum(planned_evaluations(budget - 1, config.optimizer) for budget in budgets)
    done: list[int] = [0]

    def report(info: StepInfo) -> None:
        done[0] += 1
        if progress is not None:
            progress(StepInfo(done[0], total, info.style_loss, info.content_loss, info.tv_loss))

    image: torch.Tensor | None = None
    for size, budget in zip(sizes[:-1], budgets):
        content_img = load_image(content, size, device)
        style_imgs = [load_image(s, style_size(size, config.style_scale), device) for s in styles]
        transfer_content, style_imgs = prepare_colors(content_img, style_imgs, config.preserve_colors)
        if image is None:
            image = initial_image(transfer_content, config.init, config.seed, style_img=style_imgs[0])
            if config.preserve_colors == "luminance" and config.init not in ("content", "noise", "style"):
                image = colors.gray(colors.luminance(image))
        else:
            image = _fit(image, transfer_content)
        image = run_style_transfer(cnn, IMAGENET_MEAN, IMAGENET_STD, transfer_content,
                                   style_imgs[0] if len(style_imgs) == 1 else style_imgs, image, budget - 1,
                                   config.style_weight, config.content_weight,
                                   content_layers=config.content_layers, style_layers=config.style_layers,
                                   progress=report, style_layer_weights=config.style_layer_weights,
                                   style_blend=config.style_blend, loss_form=config.loss_form,
                                   pooling=config.pooling, tv_weight=config.tv_weight,
                                   optimizer_name=config.optimizer, lr=config.lr, stats=stats,
                                   backward=config.backward, speed=speed)
    if image is None:
        raise ValueError("coarse_start needs at least two sizes")
    return image, report
