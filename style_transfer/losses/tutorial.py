"""The tutorial's losses: ``gram_matrix``, ``ContentLoss`` and ``StyleLoss``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def gram_matrix(input: torch.Tensor) -> torch.Tensor:
    """Normalised Gram matrix of feature maps, as in the tutorial.

    With the features reshaped to ``F`` of shape ``(a*b, c*d)``::

        G = F @ F.T / (a * b * c * d)

    Args:
        input: feature maps of shape ``(a, b, c, d)`` = (batch, channels, height, width).

    Returns:
        ``(a*b, a*b)`` tensor: the inner products between every pair of feature maps,
        divided by the number of elements of ``input``.
    """
    a, b, c, d = input.size()
    features = input.reshape(a * b, c * d)
    gram = torch.mm(features, features.t())
    return gram.div(a * b * c * d)


def backward_weighted(loss: torch.Tensor, weight: float = 1.0, *, retain_graph: bool = False) -> torch.Tensor:
    """Backpropagate ``weight * loss`` on its own and return it, detached.

    The per-module backward of the 2017 tutorial (there ``retain_variables=True``). Our weight
    multiplies the loss, as in the combined path; the 2017 code multiplied input and target
    inside the MSE, so its effective weight was ``weight ** 2``.

    Args:
        loss: a scalar loss whose graph is still held.
        weight: the loss weight (style or content weight).
        retain_graph: keep the graph's saved tensors after this pass, so that another backward
            through a shared part can follow. The last backward of an evaluation should not.

    Returns:
        ``weight * loss``, detached (its graph is used up, or kept only for the other modules).
    """
    weighted = loss * weight
    weighted.backward(retain_graph=retain_graph)
    return weighted.detach()


class ContentLoss(nn.Module):
    """Transparent module: stores ``mse_loss(input, target)`` in ``self.loss``, returns ``input``.

    Departure from the tutorial: the target is a buffer, so it follows ``.to(device)``.
    """

    target: torch.Tensor

    def __init__(self, target: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("target", target.detach().clone())
        self.loss = torch.zeros(())

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        self.loss = F.mse_loss(input, self.target)
        return input

    def backward(self, weight: float = 1.0, *, retain_graph: bool = False) -> torch.Tensor:
        """Backpropagate ``weight * self.loss`` and return it (``--backward per-module``).

        See ``backward_weighted``; every call of an evaluation but the last needs ``retain_graph=True``.
        """
        return backward_weighted(self.loss, weight, retain_graph=retain_graph)


class StyleLoss(nn.Module):
    """Transparent module: stores ``mse_loss(gram(input), gram(target))`` in ``self.loss``.

    Args:
        target_feature: the style image's features at this layer, ``(1, C, H, W)``; only its
            Gram matrix is kept (a buffer), so the style image may differ in size.
    """

    target: torch.Tensor

    def __init__(self, target_feature: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("target", gram_matrix(target_feature).detach().clone())
        self.loss = torch.zeros(())

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        G = gram_matrix(input)
        self.loss = F.mse_loss(G, self.target)
        return input

    def backward(self, weight: float = 1.0, *, retain_graph: bool = False) -> torch.Tensor:
        """Backpropagate ``weight * self.loss`` and return it (``--backward per-module``).

        See ``backward_weighted``; every call of an evaluation but the last needs ``retain_graph=True``.
        """
        return backward_weighted(self.loss, weight, retain_graph=retain_graph)
