"""The style model (losses inserted into VGG19) and the tutorial's LBFGS loop; ``stylize()``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from PIL import Image
from torch import nn, optim

from .config import CPU_DEFAULT_SIZE, GPU_DEFAULT_SIZE, TUTORIAL_CONTENT_LAYERS, TUTORIAL_STYLE_LAYERS, StyleConfig
from .images import ImageSource, load_image, tensor_to_pil
from .losses import ContentLoss, StyleLoss
from .models import IMAGENET_MEAN, IMAGENET_STD, DownloadProgress, Normalization, load_vgg19_features


@dataclass(frozen=True)
class StepInfo:
    """Progress after one closure evaluation (one forward and backward pass)."""

    step: int  # closure evaluations so far, from 1
    total: int  # evaluations asked for (the run ends with the LBFGS step that passes it)
    style_loss: float  # style_weight * sum of style losses
    content_loss: float  # content_weight * sum of content losses

    @property
    def loss(self) -> float:
        return self.style_loss + self.content_loss


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
    style_img: torch.Tensor,
    content_img: torch.Tensor,
    content_layers: Sequence[str] = TUTORIAL_CONTENT_LAYERS,
    style_layers: Sequence[str] = TUTORIAL_STYLE_LAYERS,
) -> tuple[nn.Sequential, list[StyleLoss], list[ContentLoss]]:
    """Copy ``cnn`` into a new ``nn.Sequential`` with loss modules after the named layers.

    As in the tutorial: ``Normalization`` first; layers renamed ``conv_N``/``relu_N``/``pool_N``
    by a running conv counter; ReLUs out of place (an in-place ReLU would overwrite the
    features a loss module just saw); the network cut after the last loss module.

    Raises:
        ValueError: a requested layer is not in the network (the message lists valid names).
    """
    normalization = Normalization(normalization_mean, normalization_std).to(content_img.device)
    wanted = set(content_layers) | set(style_layers)
    valid = layer_names(cnn)
    missing = [name for name in [*content_layers, *style_layers] if name not in valid]
    if missing:
        raise ValueError(f"unknown layer {missing[0]!r}; valid layers: {', '.join(valid)}")

    content_losses: list[ContentLoss] = []
    style_losses: list[StyleLoss] = []
    model = nn.Sequential(normalization)
    # Departure from the tutorial: the targets come from one no_grad pass that follows the model
    # as it is built (the tutorial re-runs the partial model per loss); same operations, same values.
    with torch.no_grad():
        content_x = normalization(content_img)
        style_x = normalization(style_img)
    for layer, name in zip(cnn.children(), valid):
        if not wanted:
            break  # the tutorial builds the rest and cuts it off; skipping it is the same model
        if isinstance(layer, nn.ReLU):
            layer = nn.ReLU(inplace=False)
        model.add_module(name, layer)
        with torch.no_grad():
            content_x = layer(content_x)
            style_x = layer(style_x)
        index = name.split("_")[1]
        if name in content_layers:
            content_loss = ContentLoss(content_x)
            model.add_module(f"content_loss_{index}", content_loss)
            content_losses.append(content_loss)
        if name in style_layers:
            style_loss = StyleLoss(style_x)
            model.add_module(f"style_loss_{index}", style_loss)
            style_losses.append(style_loss)
        wanted.discard(name)
    return model, style_losses, content_losses


def get_input_optimizer(input_img: torch.Tensor) -> optim.LBFGS:
    """The tutorial's optimiser: LBFGS over the image's pixels, torch's defaults."""
    return optim.LBFGS([input_img])


def optimize(
    model: nn.Module,
    style_losses: Sequence[StyleLoss],
    content_losses: Sequence[ContentLoss],
    input_img: torch.Tensor,
    num_steps: int = 300,
    style_weight: float = 1000000,
    content_weight: float = 1,
    progress: ProgressCallback | None = None,
) -> torch.Tensor:
    """The tutorial's loop: LBFGS steps until more than ``num_steps`` closure evaluations ran.

    Optimises ``input_img`` in place (clamped to [0, 1]) and returns it.
    """
    input_img.requires_grad_(True)
    model.eval()
    model.requires_grad_(False)
    optimizer = get_input_optimizer(input_img)
    run = [0]
    while run[0] <= num_steps:

        def closure() -> torch.Tensor:
            with torch.no_grad():
                input_img.clamp_(0, 1)
            optimizer.zero_grad()
            model(input_img)
            style_score = 0
            content_score = 0
            for sl in style_losses:
                style_score += sl.loss
            for cl in content_losses:
                content_score += cl.loss
            style_score *= style_weight
            content_score *= content_weight
            loss = style_score + content_score
            loss.backward()
            run[0] += 1
            if progress is not None:
                progress(StepInfo(run[0], num_steps, _value(style_score), _value(content_score)))
            return style_score + content_score

        optimizer.step(closure)
    with torch.no_grad():
        input_img.clamp_(0, 1)
    input_img.requires_grad_(False)
    return input_img


def _value(score: torch.Tensor | float) -> float:
    return float(score.detach()) if isinstance(score, torch.Tensor) else float(score)


def run_style_transfer(
    cnn: nn.Sequential,
    normalization_mean: torch.Tensor | Sequence[float],
    normalization_std: torch.Tensor | Sequence[float],
    content_img: torch.Tensor,
    style_img: torch.Tensor,
    input_img: torch.Tensor,
    num_steps: int = 300,
    style_weight: float = 1000000,
    content_weight: float = 1,
    *,
    content_layers: Sequence[str] = TUTORIAL_CONTENT_LAYERS,
    style_layers: Sequence[str] = TUTORIAL_STYLE_LAYERS,
    progress: ProgressCallback | None = None,
) -> torch.Tensor:
    """The tutorial's ``run_style_transfer``: build the style model, optimise ``input_img``.

    Args:
        cnn: a VGG ``features`` block (frozen), on the images' device.
        content_img, style_img, input_img: ``(1, 3, H, W)`` tensors in [0, 1]; the style
            image may have another size. ``input_img`` is optimised in place.
        num_steps: closure evaluations (the run ends at the end of the LBFGS step passing it).
        progress: called after every closure evaluation with a ``StepInfo``.

    Returns:
        ``input_img``, clamped to [0, 1].
    """
    model, style_losses, content_losses = get_style_model_and_losses(
        cnn, normalization_mean, normalization_std, style_img, content_img, content_layers, style_layers)
    return optimize(model, style_losses, content_losses, input_img, num_steps, style_weight, content_weight,
                    progress)


def initial_image(content_img: torch.Tensor, init: str, seed: int) -> torch.Tensor:
    """The start image: a copy of the content, or uniform noise in [0, 1] drawn on the CPU."""
    if init == "content":
        return content_img.clone()
    # Departure from the tutorial: its commented-out randn noise lies mostly outside [0, 1]
    # and is clamped to black and white at once; uniform noise from a seeded CPU generator
    # is repeatable on every device.
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(content_img.shape, generator=generator).to(content_img.device)


def stylize(
    content: ImageSource,
    style: ImageSource,
    config: StyleConfig | None = None,
    *,
    progress: ProgressCallback | None = None,
    download_progress: DownloadProgress | None = None,
) -> Image.Image:
    """Repaint ``content`` in the style of ``style``; the one-call API.

    Args:
        content, style: file paths, Pillow images or ``(1, 3, H, W)`` tensors in [0, 1].
        config: every setting; ``StyleConfig()`` (the tutorial's) when None.
        progress: called after every closure evaluation with a ``StepInfo``.
        download_progress: called while the pretrained weights download (first run only).

    Returns:
        The result as an RGB Pillow image, long side ``config.size``.

    Raises:
        ImageError: an input image cannot be read. WeightsError: weights cannot be had.
        ValueError: a bad setting (unknown layer, unavailable device).
    """
    config = config or StyleConfig()
    device = resolve_device(config.device)
    size = config.size or default_size(device)
    # Images are read before the model loads, so a bad image fails fast.
    content_img = load_image(content, size, device)
    style_img = load_image(style, size, device)
    cnn = load_vgg19_features(config.weights, download_progress=download_progress).to(device)
    input_img = initial_image(content_img, config.init, config.seed)
    output = run_style_transfer(cnn, IMAGENET_MEAN, IMAGENET_STD, content_img, style_img, input_img,
                                config.steps, config.style_weight, config.content_weight,
                                content_layers=config.content_layers, style_layers=config.style_layers,
                                progress=progress)
    return tensor_to_pil(output)
