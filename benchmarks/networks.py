"""The network a measurement ran on: the benchmarks' ``--model``, ``--weights`` and ``--preprocess``, as the command's.

Every script of benchmarks/ that builds a network takes the three options (``add_options``), loads the network
through ``models.load_network`` (``load``) and records it beside its machine block (``block``, and ``summary``
for printouts and Markdown: "Network: ..."). Loss weights: a script that scales the preset's for random weights
(LBFGS then stores curvature pairs as with pretrained ones) keeps that scale for random weights only; real weights
get the preset's for their input scale (``preset_weights``: 300 and 1 for the tutorial at Caffe's 0-255 input).
Importing it needs the package on the path; ``load`` needs torch.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from style_transfer.config.choices import PREPROCESSINGS
from style_transfer.config.style import StyleConfig
from style_transfer.layers import MODELS

RANDOM_LOSS_SCALE = 1000.0  # both loss weights times this with random weights, in the scripts that scale them


def add_options(parser: argparse.ArgumentParser, *, weights: str = "random", weights_help: str | None = None) -> None:
    """``--model`` (default vgg19), ``--weights`` (default ``weights``) and ``--preprocess`` (default: what the
    weights tell), as the command's."""
    parser.add_argument("--model", choices=MODELS, default="vgg19",
                        help="the network: vgg19 (the tutorial's, default) or vgg16")
    parser.add_argument("--weights", default=weights,
                        help=weights_help or f"random (seeded), imagenet (torchvision's, from the torch hub cache or "
                                             f"downloaded), or a FILE (a state dict .pth or an ONNX file of a VGG); "
                                             f"default {weights}")
    parser.add_argument("--preprocess", choices=PREPROCESSINGS, default=None,
                        help="what the weights expect: torchvision, caffe or caffe256 (default: what the weights "
                             "tell, as the command)")


def is_random(args: argparse.Namespace) -> bool:
    return args.weights == "random"


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
    return RANDOM_LOSS_SCALE if is_random(args) else 1.0


def load(args: argparse.Namespace) -> Any:
    """``models.load_network(model, weights, preprocess=...)``: frozen, on the CPU (a ``models.Network``).

    Raises:
        WeightsError: the weights cannot be read or do not fit; ValueError: a bad model or preprocessing.
    """
    from style_transfer.networks.vgg import load_network

    return load_network(args.model, args.weights, preprocess=args.preprocess)


def block(model: str, weights: str, preprocess: str | None, **extra: Any) -> dict[str, Any]:
    """The network block of a report: model, the weights' base name (never a folder) and the preprocessing."""
    return {"model": model, "weights": os.path.basename(str(weights)), "preprocess": preprocess or "torchvision",
            **extra}


def block_of(network: Any, weights: str, **extra: Any) -> dict[str, Any]:
    """``block`` of a loaded ``models.Network`` and the weights it was loaded from."""
    return block(network.model, weights, network.preprocess, **extra)


def summary(network: dict[str, Any] | None, fallback_weights: str | None = None) -> str:
    """One line naming the network ("Network: ..."), a random one labelled so; a report from before the
    network block (VGG19 always) says so, with its top-level ``weights`` where it has one."""
    if not network:
        weights = fallback_weights or "random"
        kind = "seeded random weights (no artistic result)" if weights == "random" else f"weights {weights}"
        return f"Network: VGG19, {kind}, torchvision preprocessing (no network block in this report)"
    weights = network.get("weights")
    kind = "seeded random weights (no artistic result)" if weights == "random" else f"weights {weights}"
    extra = f"; {network['note']}" if network.get("note") else ""
    model = str(network.get("model", "vgg19")).upper()
    return f"Network: {model}, {kind}, {network.get('preprocess')} preprocessing{extra}"
