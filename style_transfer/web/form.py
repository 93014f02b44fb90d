"""What a job's form may ask for: the server's limits and network, the form's settings parsed by ``config.text``
(the parser the command and batch manifests use), each refusal a 4xx with a one-line reason."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import HTTPException
from starlette.datastructures import UploadFile

from ..config.style import StyleConfig
from ..config.text import parse_settings, setting_of
from ..layers import MODELS
from ..presets import PRESET_NAMES, STYLE_LOSSES, preset_values
from ..networks.download import Notice, original_config, planned_weights

WEIGHTS_CHOICES = ("imagenet", "random")  # the built-in weights a job may choose, for any network of MODELS


@dataclass(frozen=True)
class Limits:
    """What one request may ask for."""

    max_body: int = 50_000_000  # bytes of one upload request (all files and fields)
    max_styles: int = 5  # style images per job
    max_size: int = 2048  # --size, px
    max_steps: int = 10_000  # --steps


@dataclass(frozen=True)
class ServerNetwork:
    """The server's network: its weights (a built-in word or a file only the server names), the model they
    are, and the preprocessing they expect (None: what they tell). ``fallback``: why the original VGG19 serves in
    place of torchvision's VGG19, which cannot be had (``server_network``); then a job's imagenet VGG19 runs it too."""

    weights: str = "imagenet"
    model: str = "vgg19"
    preprocess: str | None = None
    fallback: str | None = None

    def __post_init__(self) -> None:
        StyleConfig(weights=self.weights, model=self.model, preprocess=self.preprocess)  # ValueError when bad

    @property
    def is_file(self) -> bool:
        return self.weights not in WEIGHTS_CHOICES


class Refused(HTTPException):
    """A refused request, with its one-line reason."""


def _preset_weights(preprocess: str, model: str = "vgg19") -> dict[str, dict[str, Any]]:
    """Each preset's style and content weight for inputs preprocessed by ``preprocess``, and its style weight for
    each style loss (``style_weights``)."""
    return {name: {"style_weight": preset_values(name, preprocess, model=model)["style_weight"],
                   "content_weight": preset_values(name, preprocess, model=model)["content_weight"],
                   "style_weights": {kind: preset_values(name, preprocess, style_loss=kind, model=model)["style_weight"]
                                     for kind in STYLE_LOSSES}}
            for name in PRESET_NAMES}


def _check_masks(config: StyleConfig, content: Path, styles: int) -> None:
    """Refuse masks the run would refuse (empty, another aspect ratio than the content's), answering 422."""
    from ..losses.masks import load_guides

    try:
        load_guides(config.style_masks, config.content_mask, str(content), (16, 16), styles)
    except ValueError as exc:
        raise Refused(422, str(exc).replace(str(content.parent) + os.sep, "")) from None


def _form_settings(limits: Limits) -> dict[str, dict[str, Any]]:
    """What the form needs to know of each setting it offers (``FORM_SETTINGS``), from its declaration."""
    most = {"size": limits.max_size, "steps": limits.max_steps}
    described = {}
    for name in FORM_SETTINGS:
        declared = setting_of(name)
        assert declared is not None, name
        described[name] = {"kind": declared.kind, "choices": list(declared.choices), "minimum": declared.minimum,
                           "maximum": most.get(name, declared.maximum), "exclusive": declared.exclusive,
                           "default": declared.default if declared.default != () else None, "help": declared.short}
    return described


# The settings a job's form may give (the rest are the server's or the defaults), parsed by config.text as the
# command's options and batch manifests are.
FORM_SETTINGS = ("size", "steps", "seed", "style_weight", "content_weight", "average", "preset", "preserve_colors",
                 "style_loss", "style_blend", "fast", "parametrization")


def _config(form: Any, network: ServerNetwork, limits: Limits, styles: int) -> StyleConfig:
    """The job's settings from the form's fields; a bad one answers 422 naming it."""
    def field(name: str) -> str | None:
        value = form.get(name)
        if isinstance(value, UploadFile):
            raise Refused(422, f"{name} must be a value, not a file")
        return value.strip() if isinstance(value, str) and value.strip() else None

    try:
        values = parse_settings({name: field(name) for name in FORM_SETTINGS})
    except ValueError as exc:
        raise Refused(422, str(exc)) from None
    for name, most in (("size", limits.max_size), ("steps", limits.max_steps)):
        if values.get(name, 0) > most:
            raise Refused(422, f"{name} must be at most {most}{' px' if name == 'size' else ''} on this server, "
                            f"got {values[name]}")
    if "style_blend" in values and len(values["style_blend"]) != styles:
        raise Refused(422, f"style_blend has {len(values['style_blend'])} weight(s) for {styles} style image(s)")
    values.update(_network(field("weights"), field("model"), network))
    if field("preprocess") is not None:
        raise Refused(422, "preprocess is the server's setting, not a job's: imagenet and random weights take "
                        "torchvision's, the server's weights what the server says")
    try:
        config = StyleConfig(**values)
    except ValueError as exc:
        raise Refused(422, str(exc)) from None
    if network.fallback is not None and (config.weights, config.model) == ("imagenet", "vgg19"):
        return original_config(config)  # what the run would fall back to: said before it is queued, not after
    return config


def server_network(weights: str = "imagenet", model: str = "vgg19", preprocess: str | None = None,
                   on_notice: Notice | None = None) -> ServerNetwork:
    """The server's network as its jobs will run it: torchvision's VGG19 where it can be had, else the original
    VGG19 where installed (``networks.download.planned_weights``, asked once; ``on_notice`` is told why)."""
    if weights != "imagenet":
        return ServerNetwork(weights, model, preprocess)
    notes: list[str] = []
    planned = planned_weights(StyleConfig(weights=weights, model=model, preprocess=preprocess),
                              on_notice=notes.append)
    if planned.weights == weights:
        return ServerNetwork(weights, model, preprocess)
    if on_notice is not None:
        on_notice(notes[0])
    return ServerNetwork(planned.weights, model, planned.preprocess, fallback=notes[0])


def _network(chosen: str | None, model: str | None, server: ServerNetwork) -> dict[str, Any]:
    """The job's weights, model and preprocessing from the form's ``weights`` and ``model`` fields.

    ``server`` (or no choice on a server with a weights file) is the server's network: its file, model and
    preprocessing, and a different model is refused. ``imagenet`` and ``random`` run on the form's model
    (default: the server's); they are the server's network, preprocessing included, when they name its
    weights and model, and otherwise take what their weights tell (torchvision's).
    """
    if chosen is not None and chosen not in (*WEIGHTS_CHOICES, "server"):
        raise Refused(422, f"weights must be one of {', '.join(WEIGHTS_CHOICES)} or server, got {chosen[:40]!r}")
    if model is not None and model not in MODELS:
        raise Refused(422, f"model must be one of {', '.join(MODELS)}, got {model[:40]!r}")
    if chosen == "server" or (chosen is None and server.is_file):
        if model not in (None, server.model):
            raise Refused(422, f"the server's weights are a {server.model}: with weights server the model is "
                            f"{server.model} (or left out), got {model!r}; choose imagenet or random for {model}")
        return {"weights": server.weights, "model": server.model, "preprocess": server.preprocess}
    weights, model = chosen or server.weights, model or server.model
    same = (weights, model) == (server.weights, server.model)
    return {"weights": weights, "model": model, "preprocess": server.preprocess if same else None}
