"""One evaluation of the loss at the image, as the loop's closure runs it (``Evaluation``): the whole image through
the style model (the tutorial's), or over crops (``tiling/``, handed in as a ``TiledEvaluation``); its weighted terms
(``Scores``), read to the host once an evaluation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol, cast

import torch
from torch import nn

from ..losses.tutorial import ContentLoss, StyleLoss
from .backward import check_backward, per_module_backward, weighted_scores


class Losses(NamedTuple):
    """One evaluation's terms as Python floats, read from the device together (``Scores.read``)."""

    style: float
    content: float
    extra: float
    loss: float


class Scores(NamedTuple):
    """One evaluation's weighted terms, and the loss the loop checks and LBFGS sees."""

    style: torch.Tensor | float  # style_weight * Σ style losses
    content: torch.Tensor | float  # content_weight * Σ content losses
    extra: torch.Tensor | float  # Σ extra losses (weighted already; 0.0 without any)
    loss: torch.Tensor

    def read(self) -> Losses:
        """The terms as floats, the tensors among them in one transfer: each read of its own waits for the device
        (a GPU's) again. Each is the value ``float(term)`` gives: float64 holds every float32, bfloat16 and float16
        exactly."""
        terms = (self.style, self.content, self.extra, self.loss)
        tensors = [term.detach().reshape(()).to(torch.float64) for term in terms if isinstance(term, torch.Tensor)]
        values = iter(torch.stack(tensors).tolist())  # the loss is a tensor: never empty
        return Losses(*(next(values) if isinstance(term, torch.Tensor) else float(term) for term in terms))


class Evaluation(Protocol):
    """How the loop's closure evaluates the loss at the image: the forward's scores, then the backward that sets
    ``image.grad``, whose scores the loop reads."""

    def forward(self, image: torch.Tensor) -> Scores: ...

    def backward(self, scores: Scores) -> Scores: ...


class TiledEvaluation(Protocol):
    """One closure evaluation over crops, with the untiled loss and ``image.grad`` up to rounding
    (``tiling.tiling.TiledStyleModel``)."""

    def evaluate(self, image: torch.Tensor, style_weight: float, content_weight: float,
                 extra_losses: Sequence[nn.Module] = ()) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]: ...


def evaluation_of(model: nn.Module, style_losses: Sequence[StyleLoss], content_losses: Sequence[ContentLoss],
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
