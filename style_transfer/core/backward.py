"""The two ways to backpropagate the style model's losses: combined (one pass) or per module.

``combined`` is today's tutorial: sum the weighted losses, one ``backward()``. ``per-module``
is the 2017 tutorial's structure: every loss module backpropagates its own weighted loss, so
the shared trunk of VGG is traversed once per module and the graph must be retained between
the passes. Both minimise the same objective; see ``docs/retain_graph.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import torch
from torch import nn

from ..config.choices import BACKWARDS
from ..losses.tutorial import ContentLoss, StyleLoss, backward_weighted


def combined_backward(
    style_losses: Sequence[StyleLoss],
    content_losses: Sequence[ContentLoss],
    style_weight: float,
    content_weight: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One backward of ``style_weight * Σ style + content_weight * Σ content`` (today's tutorial).

    The closure of ``transfer.optimize`` computes its scores with the same ``weighted_scores``.

    Returns:
        The weighted style and content scores, detached.
    """
    style_score, content_score = weighted_scores(style_losses, content_losses, style_weight, content_weight)
    loss = style_score + content_score
    if isinstance(loss, torch.Tensor):  # a plain 0 without loss modules: nothing to backpropagate
        loss.backward()
    return _detached(style_score), _detached(content_score)


def weighted_scores(
    style_losses: Sequence[StyleLoss],
    content_losses: Sequence[ContentLoss],
    style_weight: float,
    content_weight: float,
) -> tuple[torch.Tensor | float, torch.Tensor | float]:
    """The tutorial's closure arithmetic, in its order: each sum of losses, then its weight.

    Returns:
        ``(style_weight * Σ style losses, content_weight * Σ content losses)``, in the graph
        (a plain 0 where there are no modules of a kind).
    """
    style_score: torch.Tensor | float = 0
    content_score: torch.Tensor | float = 0
    for sl in style_losses:
        style_score += sl.loss
    for cl in content_losses:
        content_score += cl.loss
    style_score *= style_weight
    content_score *= content_weight
    return style_score, content_score


def per_module_backward(
    style_losses: Sequence[StyleLoss],
    content_losses: Sequence[ContentLoss],
    style_weight: float,
    content_weight: float,
    *,
    extra_losses: Sequence[nn.Module] = (),
    retain_graph: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Call every loss module's ``backward()`` in turn (the 2017 tutorial's closure).

    Style modules first, then content modules, as in the 2017 code, then the ``extra_losses``
    (modules whose ``.loss`` is weighted already, such as total variation). Every call but the last
    retains the graph, because the next pass runs through the same trunk; the last frees what
    it traverses, as one should. Gradients of the passes accumulate in ``.grad``.

    Args:
        retain_graph: False frees the graph at the first call, so the second call raises
            PyTorch's "Trying to backward through the graph a second time" (for the demo and
            tests; the working path is True).

    Returns:
        The sums of what the style, the content and the extra modules returned (weighted
        losses), detached.

    Raises:
        RuntimeError: from PyTorch, when ``retain_graph`` is False and there are several modules.
    """
    passes_left = len(style_losses) + len(content_losses) + len(extra_losses)
    style_score: torch.Tensor | float = 0
    content_score: torch.Tensor | float = 0
    extra_score: torch.Tensor | float = 0
    for sl in style_losses:
        passes_left -= 1
        style_score += sl.backward(style_weight, retain_graph=retain_graph and passes_left > 0)
    for cl in content_losses:
        passes_left -= 1
        content_score += cl.backward(content_weight, retain_graph=retain_graph and passes_left > 0)
    for extra in extra_losses:
        passes_left -= 1
        # nn.Module's attribute lookup is typed Tensor | Module; an extra module's .loss is its tensor (above).
        extra_score += backward_weighted(cast(torch.Tensor, extra.loss), retain_graph=retain_graph and passes_left > 0)
    return _detached(style_score), _detached(content_score), _detached(extra_score)


def run_backward(
    backward: str,
    style_losses: Sequence[StyleLoss],
    content_losses: Sequence[ContentLoss],
    style_weight: float,
    content_weight: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Backpropagate the losses the way ``backward`` names (``combined`` or ``per-module``).

    Raises:
        ValueError: an unknown ``backward``.
    """
    check_backward(backward)
    if backward == "combined":
        return combined_backward(style_losses, content_losses, style_weight, content_weight)
    style_score, content_score, _ = per_module_backward(style_losses, content_losses, style_weight, content_weight)
    return style_score, content_score  # as combined's: no extra modules here


def check_backward(backward: str) -> None:
    """Raise ``ValueError`` naming the value unless ``backward`` is one of ``BACKWARDS``."""
    if backward not in BACKWARDS:
        raise ValueError(f"backward must be one of {', '.join(BACKWARDS)}, got {backward!r}")


def _detached(score: torch.Tensor | float) -> torch.Tensor:
    return score.detach() if isinstance(score, torch.Tensor) else torch.tensor(float(score))
