"""The tutorial's style model: ``get_style_model_and_losses`` copies VGG's layers into a new model with
``ContentLoss`` and ``StyleLoss`` modules after the chosen layers (the tutorial's layer names: ``layer_names``)."""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence

import torch
from torch import nn

from ..losses import masks
from ..presets import TUTORIAL_CONTENT_LAYERS, TUTORIAL_STYLE_LAYERS
from ..layers import resolve_layers, swap_pooling
from ..losses.terms import make_content_loss, make_style_loss, normalized_blend, style_alphas
from ..losses.tutorial import ContentLoss, StyleLoss
from ..losses.statistics import make_statistics_loss
from ..networks.vgg import Normalization


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
    ``networks.vgg.CaffeNormalization`` for Caffe-converted weights (``networks.vgg.Network.normalization()``).
    ``guides`` (docs/usage.md, ``losses/masks.py``): masks over the content at its size, followed through the layers;
    with style masks each style layer gets a guided loss (``GuidedStyleLoss``, or for the other statistics
    ``statistics.GuidedWassersteinLoss`` / ``GuidedSlicedLoss``; no shared ``style_targets``), with a content
    mask each content layer a ``MaskedContentLoss``. ``guides.style_alphas`` (each style image's transparency at its
    size, ``io.images.load_style``) follow the style images' features and weigh their positions in the targets
    (``losses.terms.style_gram``, ``statistics``' ``alphas``): transparent pixels are left out of the style.
    ``style_loss``: ``gram`` (the tutorial's), or ``wasserstein`` / ``sliced`` (``losses/statistics.py``; their
    targets blend as that module says; ``loss_form`` is the Gram's and the content's); ``seed`` seeds the sliced
    loss's directions.

    Raises:
        ValueError: a requested layer is not in the network (the message lists valid names); style alphas of
            another count or size than the style images, or one whose opaque pixels vanish at a style layer.
    """
    if normalization is None:  # the tutorial's: torchvision's weights take ImageNet's mean and std
        normalization = Normalization(normalization_mean, normalization_std)
    normalization = normalization.to(content_img.device)
    style_loss_kind = style_loss
    valid = layer_names(cnn)
    content_layers = resolve_layers(content_layers, valid)  # paper names (conv2_2) become conv_4
    style_layers = resolve_layers(style_layers, valid)
    wanted = set(content_layers) | set(style_layers)
    style_imgs = [style_img] if isinstance(style_img, torch.Tensor) else list(style_img)
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
    alphas = None if guides is None or guides.style_alphas is None or cached else guides.style_alphas
    if alphas is not None:
        for k, (alpha, img) in enumerate(zip(style_alphas(alphas, len(style_imgs)), style_imgs)):
            if alpha is not None and alpha.shape[-2:] != img.shape[-2:]:
                raise ValueError(f"style image {k + 1} is {tuple(img.shape[-2:])}, "
                                 f"its alpha {tuple(alpha.shape[-2:])}")
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
        if guides is not None:  # the masks follow the features' resolution; the style alphas the style's
            guides = guides.follow(layer, tuple(content_x.shape[-2:]),
                                   None if alphas is None else [tuple(x.shape[-2:]) for x in style_xs])
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
            visible = guides.style_alphas if guides is not None else None  # each style's opaque part, or None
            if visible is not None:
                masks.check_alphas(visible, name)
            if guided is not None and style_loss_kind == "gram":
                loss: StyleLoss = masks.GuidedStyleLoss(features, guided, style_blend,
                                                        weight=layer_weights[style_layers.index(name)],
                                                        form=loss_form, alphas=visible)
            elif style_loss_kind == "gram":
                loss = make_style_loss(features, style_blend, weight=layer_weights[style_layers.index(name)],
                                       form=loss_form, alphas=visible)
            else:  # other style statistics (losses/statistics.py), guided or not
                loss = make_statistics_loss(style_loss_kind, features, style_blend, seed=seed,
                                            weight=layer_weights[style_layers.index(name)],
                                            layer=style_layers.index(name), masks=guided, alphas=visible)
            if cached and style_targets is not None:  # cached: style_targets holds every layer
                loss.target = style_targets[name].clone()
            elif style_targets is not None:
                style_targets[name] = loss.target.detach().clone()
            model.add_module(f"style_loss_{index}", loss)
            style_losses.append(loss)
        wanted.discard(name)
    return model, style_losses, content_losses
