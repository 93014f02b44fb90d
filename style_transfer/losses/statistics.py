"""Style statistics beyond the Gram matrix: the Wasserstein-2 distance of Gaussian fits, and sliced Wasserstein.

``--style-loss wasserstein`` compares the features' means and covariances (the W2 distance between their
Gaussian fits, as crowsonkb's ``StyleLossW2``); ``--style-loss sliced`` compares their whole distributions
along random directions (Heitz, Vanhoey, Chambon and Belcour, "A Sliced Wasserstein Loss for Neural Texture
Synthesis", CVPR 2021). ``gram`` (``losses.StyleLoss``, the tutorial's) stays the default.

Both are quadratic in the features, like the content loss, so their balance with it does not depend on the
input's scale (torchvision's normalised inputs or Caffe's 0-255): ``presets.STYLE_LOSS_WEIGHTS``.

Each statistic takes an optional ``weights`` tensor ``(1, 1, H, W)`` in [0, 1] over the feature positions
(a weighted mean and covariance; a weighted 1-D matching); the guided losses (``--style-mask``:
``GuidedWassersteinLoss``, ``GuidedSlicedLoss``) give each style its own region through them, as
``masks.GuidedStyleLoss`` does for the Gram matrices. The targets take a style image's transparency the same way
(``alphas``): its transparent positions are left out of its statistics.
"""

from __future__ import annotations

from collections.abc import Sequence

from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from ..step_hooks import StepHooks
from .terms import normalized_blend, style_alphas
from .tutorial import StyleLoss

# Each sliced evaluation draws this many directions per channel (Heitz et al. use as many as channels).
SLICED_DIRECTIONS_PER_CHANNEL = 1


def _check_features(features: torch.Tensor, name: str = "features") -> None:
    if features.dim() != 4 or features.shape[0] != 1:
        raise ValueError(f"{name} must have shape (1, C, H, W), got {tuple(features.shape)}")


def _position_weights(weights: torch.Tensor | None, features: torch.Tensor) -> torch.Tensor | None:
    """``weights`` as ``(H*W,)`` of the features' dtype, divided by their sum; None stays None, and so does a
    constant mask (every position weighed alike), so that an all-white mask gives the unmasked statistic exactly.

    Raises:
        ValueError: a shape other than ``(1, 1, H, W)``, values outside [0, 1], or all zero.
    """
    if weights is None:
        return None
    h, w = features.shape[-2:]
    if weights.shape != (1, 1, h, w):
        raise ValueError(f"weights must have shape (1, 1, {h}, {w}) (the features' positions), "
                         f"got {tuple(weights.shape)}")
    flat = weights.reshape(-1).to(features.dtype)
    if bool((flat < 0).any()) or bool((flat > 1).any()):
        raise ValueError("weights must lie in [0, 1]")
    total = flat.sum()
    if not bool(total > 0):
        raise ValueError("weights are all zero: no position to take statistics from")
    if bool((flat == flat[0]).all()):  # a constant mask (all white) weighs every position alike: the unmasked sums
        return None
    return flat / total


def _wide(x: torch.Tensor) -> torch.Tensor:
    """``x`` in float64 for the eigendecompositions (on the CPU where the device has no float64: MPS)."""
    return x.cpu().double() if x.device.type == "mps" else x.double()


def gaussian_statistics(features: torch.Tensor, weights: torch.Tensor | None = None
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean vector and covariance of feature maps over their positions.

    ``mu = sum_p w_p f_p``, ``C = sum_p w_p (f_p - mu)(f_p - mu)^T`` with ``w_p = 1/(H W)`` (or ``weights``
    divided by their sum): the population covariance, the features centred before the product.

    Args:
        features: ``(1, C, H, W)``.
        weights: optional ``(1, 1, H, W)`` in [0, 1]: how much each position counts (a mask).

    Returns:
        ``(C,)`` mean and ``(C, C)`` covariance, in the features' dtype.
    """
    _check_features(features)
    c = features.shape[1]
    flat = features.reshape(c, -1)
    p = _position_weights(weights, features)
    mean = flat.mean(dim=1) if p is None else flat @ p
    centred = flat - mean[:, None]
    cov = (centred @ centred.t()) / flat.shape[1] if p is None else (centred * p) @ centred.t()
    return mean, cov


def psd_sqrt(matrix: torch.Tensor) -> torch.Tensor:
    """The symmetric square root of a symmetric positive semi-definite matrix, in float64.

    By eigendecomposition (``eigh``), negative eigenvalues (rounding) clamped to 0. For targets: no gradient.
    """
    m = _wide(matrix)
    values, vectors = torch.linalg.eigh((m + m.t()) / 2)
    return (vectors * values.clamp(min=0).sqrt()) @ vectors.t()


def wasserstein_target(features: Sequence[torch.Tensor], blend: Sequence[float] | None = None, *,
                       weights: Sequence[torch.Tensor | None] | None = None) -> torch.Tensor:
    """The W2 target of one or more style images' features at one layer: ``(C + 1, C)``, mean and sqrt packed.

    Row 0 is the mean, rows 1.. the square root of the covariance (``psd_sqrt``), so that one tensor holds
    the target (a buffer; batch runs share it by layer name like a Gram target). Several styles: the
    Gaussian fit of their mixture (``blend``'s weights): ``mu = sum_k b_k mu_k`` and
    ``C = sum_k b_k (C_k + mu_k mu_k^T) - mu mu^T`` -- the blended second moments, as the Gram blend blends
    Gram matrices.
    """
    if not features:
        raise ValueError("wasserstein_target needs the features of at least one style image")
    masks = list(weights) if weights is not None else [None] * len(features)
    return wasserstein_target_of([gaussian_statistics(f, m) for f, m in zip(features, masks)], blend)


def wasserstein_target_of(stats: Sequence[tuple[torch.Tensor, torch.Tensor]], blend: Sequence[float] | None = None
                          ) -> torch.Tensor:
    """``wasserstein_target`` from each style image's ``(mean, covariance)`` (``gaussian_statistics``'s, or the
    same sums added up over crops: ``tiling/tiling.py``), in their dtype and device."""
    shares = normalized_blend(blend, len(stats))
    # Sums of one tensor or more (stats[0] is read below), never sum()'s empty 0.
    mean = cast(torch.Tensor, sum(b * _wide(mu) for b, (mu, _) in zip(shares, stats)))
    second = cast(torch.Tensor, sum(b * (_wide(cov) + torch.outer(_wide(mu), _wide(mu)))
                                    for b, (mu, cov) in zip(shares, stats)))
    cov = second - torch.outer(mean, mean)
    packed = torch.cat([mean[None], psd_sqrt(cov)])
    return packed.to(device=stats[0][0].device, dtype=stats[0][0].dtype)


def wasserstein_distance(features: torch.Tensor, target_mean: torch.Tensor, target_sqrt: torch.Tensor, *,
                         weights: torch.Tensor | None = None) -> torch.Tensor:
    """The squared W2 distance between the Gaussian fits of ``features`` and a target, per channel.

    ``(|mu - mu_t|^2 + tr(C) + tr(C_t) - 2 tr((S C S)^(1/2))) / n`` with ``S = C_t^(1/2)`` given and ``n`` the
    channels (so a wider layer does not weigh more, as the Gram loss's mean over its n^2 entries).
    ``tr((S C S)^(1/2))`` is the sum of the square roots of the eigenvalues of ``S C S`` (``eigvalsh`` in float64):
    its backward is ``U diag(1 / (2 sqrt(lambda))) U^T``, with no division by eigenvalue gaps (eigenvalues only),
    so it stays finite where eigenvalues repeat. Eigenvalues below the features' dtype's machine epsilon times the
    largest count as 0: that is rounding noise (a covariance with fewer positions than channels, a float32 one),
    and their derivative ``1/(2 sqrt(lambda))`` would be noise too.

    Args:
        features: ``(1, C, H, W)``.
        target_mean: ``(C,)``; target_sqrt: ``(C, C)``, the target covariance's square root.
        weights: optional ``(1, 1, H, W)`` in [0, 1] over the positions (``gaussian_statistics``).

    Returns:
        A scalar in the features' dtype.
    """
    mean, cov = gaussian_statistics(features, weights)
    return wasserstein_of(mean, cov, target_mean, target_sqrt)


def wasserstein_of(mean: torch.Tensor, cov: torch.Tensor, target_mean: torch.Tensor, target_sqrt: torch.Tensor
                   ) -> torch.Tensor:
    """``wasserstein_distance`` from the features' ``(C,)`` mean and ``(C, C)`` covariance (``gaussian_statistics``'s,
    or sums over crops), in their dtype: differentiable in both."""
    n = cov.shape[0]
    s = _wide(target_sqrt)
    product = s @ _wide(cov) @ s
    eigen = torch.linalg.eigvalsh((product + product.t()) / 2)
    floor = torch.finfo(cov.dtype).eps * eigen.detach().abs().max().clamp(min=torch.finfo(eigen.dtype).tiny)
    cross = torch.where(eigen > floor, eigen.clamp(min=floor).sqrt(), torch.zeros_like(eigen)).sum()
    distance = (_wide(mean) - _wide(target_mean)).pow(2).sum() + _wide(cov).trace() + s.pow(2).sum() - 2 * cross
    return (distance / n).to(device=cov.device, dtype=cov.dtype)


def sliced_target(features: Sequence[torch.Tensor], blend: Sequence[float] | None = None, *,
                  weights: Sequence[torch.Tensor | None] | None = None) -> torch.Tensor:
    """The sliced target of one or more style images' features at one layer: ``(C + 1, M)``.

    Row 0 holds each position's share of the target distribution, rows 1.. the features at the ``M``
    positions of all the style images. Several styles: their mixture, each image's positions sharing its
    ``blend`` weight (the distribution the blended statistics describe). ``weights``: per style image, None or
    ``(1, 1, H, W)`` in [0, 1] over its positions (its transparency): each position's share is its weight over
    their sum, and positions of weight 0 are left out (a zero-mass sample would still bend the interpolated
    quantiles between its neighbours).
    """
    if not features:
        raise ValueError("sliced_target needs the features of at least one style image")
    shares = normalized_blend(blend, len(features))
    columns, masses = [], []
    for share, f, w in zip(shares, features, weights if weights is not None else [None] * len(features)):
        _check_features(f)
        flat = f.reshape(f.shape[1], -1)
        p = _position_weights(w, f)
        if p is None:
            columns.append(flat)
            masses.append(torch.full((flat.shape[1],), share / flat.shape[1], dtype=f.dtype, device=f.device))
        else:
            kept = p > 0
            columns.append(flat[:, kept])
            masses.append(share * p[kept])
    return torch.cat([torch.cat(masses)[None], torch.cat(columns, dim=1)])


def random_directions(channels: int, count: int, generator: torch.Generator) -> torch.Tensor:
    """``count`` random unit vectors over ``channels`` (rows), drawn on the CPU from ``generator``."""
    directions = torch.randn((count, channels), generator=generator, dtype=torch.float64)
    return directions / directions.norm(dim=1, keepdim=True)


def _quantiles(levels: torch.Tensor, cumulative: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Linear interpolation of ``values`` at ``levels`` over increasing ``cumulative`` (rows: directions).

    ``levels`` ``(D, M)``; ``cumulative``, ``values`` ``(D, N)``; outside ``cumulative``'s range the end values.
    """
    if values.shape[1] == 1:
        return values.expand(-1, levels.shape[1])
    right = torch.searchsorted(cumulative, levels.contiguous()).clamp(1, values.shape[1] - 1)
    x0, x1 = cumulative.gather(1, right - 1), cumulative.gather(1, right)
    f0, f1 = values.gather(1, right - 1), values.gather(1, right)
    span = x1 - x0
    t = torch.where(span > 0, (levels - x0) / span.clamp(min=torch.finfo(span.dtype).tiny), torch.zeros_like(span))
    return f0 + t.clamp(0, 1) * (f1 - f0)


def _sorted(values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row of ``values`` sorted, and the order: ``values.sort(dim=1)``, the gradient through a gather.

    On the CPU the order comes from numpy's argsort, 4 to 20 times faster than torch's CPU sort on rows of
    10^4 to 10^5 projections (benchmarks/studies/style_losses.py; the sort is most of a sliced evaluation's time).
    """
    if values.device.type != "cpu":
        return values.sort(dim=1)
    import numpy as np

    order = torch.from_numpy(np.argsort(values.detach().numpy(), axis=1))
    return values.gather(1, order), order


def _resampled(values: torch.Tensor, count: int) -> torch.Tensor:
    """``_quantiles`` of equal-mass sorted ``values`` ``(D, N)`` at the levels ``(i + 1/2) / count``, without a search:
    the level of sorted position ``j`` is ``(j + 1/2) / N``, so level ``q`` lies at position ``q N - 1/2``."""
    n = values.shape[1]
    if n == count:
        return values
    if n == 1:
        return values.expand(-1, count)
    position = ((torch.arange(count, device=values.device, dtype=torch.float64) + 0.5) * n / count - 0.5).clamp(0, n - 1)
    low = position.floor().long().clamp(max=n - 2)
    t = (position - low).to(values.dtype)
    return values[:, low] + t * (values[:, low + 1] - values[:, low])


def _equal_mass_quantiles(levels: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """``_quantiles`` of equal-mass sorted ``values`` ``(D, N)`` at any ``levels`` ``(D, M)``, without a search (as
    ``_resampled``: level ``q`` lies at sorted position ``q N - 1/2``): a weighted input against one style image."""
    n = values.shape[1]
    if n == 1:
        return values.expand(-1, levels.shape[1])
    position = (levels * n - 0.5).clamp(0, n - 1)
    low = position.detach().floor().long().clamp(max=n - 2)
    t = position - low.to(position.dtype)
    f0, f1 = values.gather(1, low), values.gather(1, low + 1)
    return f0 + t * (f1 - f0)


def _midpoints(mass: torch.Tensor) -> torch.Tensor:
    """Each sample's quantile level: its cumulative mass up to its middle (``(i + 1/2) / M`` for equal masses)."""
    return mass.cumsum(dim=-1) - mass / 2


def sliced_wasserstein(features: torch.Tensor, target: torch.Tensor, directions: torch.Tensor, *,
                       weights: torch.Tensor | None = None,
                       target_sorted: tuple[torch.Tensor, torch.Tensor | None] | None = None) -> torch.Tensor:
    """The sliced Wasserstein loss: along each direction, the sorted projections matched, mean squared error.

    The input's ``M`` projections along a direction, sorted, are compared with the target's quantiles at the
    same levels ``(i + 1/2) / M``: the target's sorted projections when it has ``M`` equal-mass positions,
    else interpolated linearly between its sorted positions (another size, several styles). With ``weights``
    each input position carries its weight in the matching (its level is its weighted cumulative mass) and in
    the mean: the 1-D optimal transport of the weighted input distribution. Gradients flow through the sort.

    Args:
        features: ``(1, C, H, W)``.
        target: ``(C + 1, N)`` from ``sliced_target`` (row 0 the masses, rows 1.. the features).
        directions: ``(D, C)`` unit vectors (any dtype; used in the features').
        weights: optional ``(1, 1, H, W)`` in [0, 1] over the input's positions.
        target_sorted: the target's sorted projections along ``directions`` and their order, where already known
            (``SlicedStyleLoss.sorted_targets``); None: sorted here.

    Returns:
        A scalar: ``sum_d sum_i w_i (x_di - t_di)^2 / D`` (``w_i = 1/M`` without weights).
    """
    dirs = _check_sliced(features, target, directions)
    projected, order = _sorted(dirs @ features.reshape(features.shape[1], -1))
    return _matched_loss(projected, order, _position_weights(weights, features), target, dirs, target_sorted)


def _check_sliced(features: torch.Tensor, target: torch.Tensor, directions: torch.Tensor) -> torch.Tensor:
    """The directions in the features' device and dtype, once the shapes are checked."""
    _check_features(features)
    c = features.shape[1]
    if target.dim() != 2 or target.shape[0] != c + 1:
        raise ValueError(f"target must have shape ({c + 1}, N) for {c} channels, got {tuple(target.shape)}")
    return directions.to(device=features.device, dtype=features.dtype)


def _matched_loss(projected: torch.Tensor, order: torch.Tensor, p: torch.Tensor | None, target: torch.Tensor,
                  dirs: torch.Tensor, target_sorted: tuple[torch.Tensor, torch.Tensor | None] | None = None
                  ) -> torch.Tensor:
    """``sliced_wasserstein`` from the input's sorted projections ``(D, M)`` and their order (shared by the styles of
    a guided loss), its position weights ``p`` (``_position_weights``; None: equal) and a target; ``target_sorted``:
    the target's sorted projections along ``dirs`` and their order, where already known (``SlicedStyleLoss``)."""
    m = projected.shape[1]
    mass = projected.new_full((1, m), 1.0 / m).expand_as(projected) if p is None else p[order]
    target_projected, target_order = target_sorted or _sorted(dirs @ target[1:])
    equal = bool((target[0] == target[0][0]).all())  # one style image: equal masses, its levels by arithmetic
    if p is None and equal:
        matched = _resampled(target_projected, m)
    elif equal:
        matched = _equal_mass_quantiles(_midpoints(mass), target_projected)
    else:
        target_mass = target[0][target_order]
        target_mass = target_mass / target_mass.sum(dim=1, keepdim=True)
        matched = _quantiles(_midpoints(mass), _midpoints(target_mass), target_projected)
    return ((projected - matched).pow(2) * mass).sum() / dirs.shape[0]




class WassersteinStyleLoss(StyleLoss):
    """Transparent module: ``self.loss = weight * wasserstein_distance(input, target)`` (``--style-loss wasserstein``).

    A ``StyleLoss`` (so the run, ``--fast`` and ``--backward per-module`` treat it as one) whose target is the
    packed ``wasserstein_target``, a buffer.

    Args:
        target_features: each style image's features at this layer, ``(1, C, H, W)``.
        blend: weights of the style images (normalised; equal when None).
        weight: the layer's weight.
        weights: optional ``(1, 1, h, w)`` in [0, 1] over the input's positions (resized to each input's
            feature map, area-averaged); None: every position counts the same.
        alphas: each style image's transparency at this layer, ``(1, 1, H, W)`` in [0, 1], or None (opaque):
            weighs the style's positions in its target (``wasserstein_target``'s ``weights``).
    """

    def __init__(self, target_features: Sequence[torch.Tensor], blend: Sequence[float] | None = None, *,
                 weight: float = 1.0, weights: torch.Tensor | None = None,
                 alphas: Sequence[torch.Tensor | None] | None = None) -> None:
        nn.Module.__init__(self)  # not StyleLoss.__init__: the target is not a Gram matrix
        self.register_buffer("target", wasserstein_target(target_features, blend, weights=alphas).detach().clone())
        self.weight = float(weight)
        self.weights = weights
        self.loss = torch.zeros(())

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        loss = wasserstein_distance(input, self.target[0], self.target[1:], weights=_fit(self.weights, input))
        self.loss = loss * self.weight
        return input


class SlicedStyleLoss(StyleLoss, StepHooks):
    """Transparent module: ``self.loss = weight * sliced_wasserstein(input, target, directions)``.

    ``--style-loss sliced``. The directions are drawn from a CPU ``torch.Generator`` seeded with ``(seed, layer,
    evaluations)``, so a run is repeatable: afresh at every forward, or, once the loop calls ``start_step`` (its
    ``StepHooks`` point before each of its steps), held for the whole step, drawn by the evaluations done when it
    began. LBFGS builds its curvature pairs from gradient differences within a step; directions re-drawn
    between them made those pairs noise, and a run could blow up (a masked run at 128 px did at its third
    evaluation). Adam's steps are one evaluation each, so they draw afresh either way. A resumed run continues
    from the evaluations it had done.

    Args:
        target_features, blend, weight, weights, alphas: as ``WassersteinStyleLoss`` (``sliced_target``).
        seed: the run's seed. layer: this module's place among the style layers (each draws its own).
        directions: how many directions per evaluation (None: as many as channels).
    """

    def __init__(self, target_features: Sequence[torch.Tensor], blend: Sequence[float] | None = None, *,
                 weight: float = 1.0, weights: torch.Tensor | None = None, seed: int = 0, layer: int = 0,
                 directions: int | None = None, alphas: Sequence[torch.Tensor | None] | None = None) -> None:
        nn.Module.__init__(self)
        self.register_buffer("target", sliced_target(target_features, blend, weights=alphas).detach().clone())
        self.weight = float(weight)
        self.weights = weights
        self.seed, self.layer = int(seed), int(layer)
        self.directions = directions
        self.evaluations = 0
        self.held = False  # True once the loop calls start_step: the directions stay until the next call
        self.loss = torch.zeros(())
        self._sorted_targets: tuple[tuple, list[tuple[torch.Tensor, torch.Tensor | None]]] | None = None

    def start_step(self, evaluations: int) -> None:
        """Hold one draw of directions, ``draw(evaluations)``, for the optimiser step about to run."""
        self.evaluations, self.held = int(evaluations), True

    def next_directions(self) -> torch.Tensor:
        """This forward's directions: the held step's, or a fresh draw per forward."""
        directions = self.draw(self.evaluations)
        if not self.held:
            self.evaluations += 1
        return directions

    def draw(self, evaluation: int) -> torch.Tensor:
        """The directions of one evaluation, ``(D, C)`` float64 on the CPU (the same for the same numbers)."""
        channels = self.target.shape[0] - 1
        count = self.directions or channels * SLICED_DIRECTIONS_PER_CHANNEL
        generator = torch.Generator().manual_seed(_mix(self.seed, self.layer, evaluation))
        return random_directions(channels, count, generator)

    def sorted_targets(self, dirs: torch.Tensor, targets: Sequence[torch.Tensor]
                       ) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """Each target's projections along ``dirs`` (this evaluation's directions), sorted, and their order.

        The targets have no gradient and a held step's directions do not change, so the sort is done once per
        draw and kept: within an LBFGS step (up to 20 evaluations) only the input's projections are sorted.
        Kept by the draw, the directions' dtype and device and the target buffer itself (a new target, or one
        changed in place, is sorted again); the same tensors the sort gives, so the loss is unchanged. The order is
        kept only where ``_matched_loss`` reads it (a blend of styles' unequal masses), else None.
        """
        draw = self.evaluations - (0 if self.held else 1)  # the evaluation next_directions drew for
        key = (draw, dirs.dtype, dirs.device, self.target.data_ptr(), self.target._version, tuple(dirs.shape))
        if self._sorted_targets is None or self._sorted_targets[0] != key:
            self._sorted_targets = None  # the last draw's, freed before the new sort
            kept = []
            for target in targets:
                projected, order = _sorted(dirs @ target[1:])
                # The order is needed only for unequal masses (blended styles: _matched_loss); int64, so not kept else.
                kept.append((projected, order if not bool((target[0] == target[0][0]).all()) else None))
            self._sorted_targets = (key, kept)
        return self._sorted_targets[1]

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        dirs = _check_sliced(input, self.target, self.next_directions())
        (target_sorted,) = self.sorted_targets(dirs, [self.target])
        loss = sliced_wasserstein(input, self.target, dirs, weights=_fit(self.weights, input),
                                  target_sorted=target_sorted)
        self.loss = loss * self.weight
        return input


def _guided_blend(masks: Sequence[torch.Tensor], count: int, blend: Sequence[float] | None) -> torch.Tensor:
    """Each style's weight in a guided loss: its normalised blend weight times the number of styles (as the guided
    Gram's, ``masks.GuidedStyleLoss``: equal blends give 1 each, a region styled as strongly as a whole picture)."""
    if len(masks) != count:
        raise ValueError(f"{len(masks)} mask(s) for {count} style image(s)")
    return torch.tensor([w * count for w in normalized_blend(blend, count)], dtype=torch.float64)


class GuidedWassersteinLoss(StyleLoss):
    """The W2 style loss of a layer with one masked region per style (``--style-mask`` with ``--style-loss wasserstein``).

    ``self.loss = weight * sum_k w_k * wasserstein_distance(input, target_k, weights=m_k)``: style ``k``'s mean and
    covariance are taken over its own region of the input's features, each position weighted by the soft mask
    ``m_k`` (``gaussian_statistics``: weights divided by their sum, so a small region counts as much as a large
    one), against the Gaussian fit of its whole style image (no mask on the style, as for the guided Gram).
    ``w_k``: ``_guided_blend``. An all-white mask gives ``WassersteinStyleLoss``'s loss exactly.

    Args:
        target_features: each style image's features at this layer, ``(1, C, H_k, W_k)``.
        masks: each style's mask at this layer's resolution, ``(1, 1, H, W)`` in [0, 1].
        blend: the styles' weights (normalised; equal when None). weight: the layer's weight.
        alphas: each style image's transparency at this layer, or None (``WassersteinStyleLoss``).

    Buffers: ``target`` ``(K, C + 1, C)`` (``wasserstein_target`` per style), ``masks`` ``(K, 1, H, W)``, ``blend``
    ``(K,)``.
    """

    masks: torch.Tensor
    blend: torch.Tensor

    def __init__(self, target_features: Sequence[torch.Tensor], masks: Sequence[torch.Tensor],
                 blend: Sequence[float] | None = None, *, weight: float = 1.0,
                 alphas: Sequence[torch.Tensor | None] | None = None) -> None:
        nn.Module.__init__(self)
        shares = _guided_blend(masks, len(target_features), blend)
        alphas = style_alphas(alphas, len(target_features))
        self.register_buffer("target", torch.stack([wasserstein_target([f], weights=[a])
                                                    for f, a in zip(target_features, alphas)]).detach().clone())
        self.register_buffer("masks", torch.cat(list(masks)).detach().clone())
        self.register_buffer("blend", shares.to(device=self.target.device, dtype=self.target.dtype))
        self.weight = float(weight)
        self.loss = torch.zeros(())

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        present = _present(self.masks)
        self.loss = self.loss_of_moments([gaussian_statistics(input, self.masks[k:k + 1]) if k in present else None
                                          for k in range(self.masks.shape[0])], input)
        return input

    def loss_of_moments(self, moments: Sequence[tuple[torch.Tensor, torch.Tensor] | None], like: torch.Tensor
                        ) -> torch.Tensor:
        """The loss given each style's ``(mean, covariance)`` over its region (``forward``'s, or sums over crops:
        ``tiling/tiling.py``), None for a style whose region is empty at this layer; in ``like``'s dtype."""
        loss = like.new_zeros(())
        for k, pair in enumerate(moments):
            if pair is not None:
                distance = wasserstein_of(*pair, self.target[k, 0], self.target[k, 1:]).to(like.dtype)
                loss = loss + self.blend[k].to(like.dtype) * distance
        return loss * self.weight


class GuidedSlicedLoss(SlicedStyleLoss):
    """The sliced style loss of a layer with one masked region per style (``--style-mask`` with ``--style-loss sliced``).

    ``self.loss = weight * sum_k w_k * sliced_wasserstein(input, target_k, directions, weights=m_k)``: along each
    direction, a weighted 1-D Wasserstein distance. The input's projections carry the soft mask ``m_k`` as their
    mass (divided by its sum): sorted, each sits at the quantile level of its weighted cumulative mass up to its
    middle, and is matched to style ``k``'s sorted projections (its whole image, equal masses) at that level,
    linearly interpolated; the squared differences are summed with the same masses. So positions outside the
    region cost nothing, a region counts as much whatever its size, and an all-white mask gives
    ``SlicedStyleLoss``'s loss exactly (levels ``(i + 1/2)/M``, mean over positions). The directions are drawn
    as ``SlicedStyleLoss`` draws them, the same for every style of an evaluation. ``w_k``: ``_guided_blend``.

    Args:
        target_features, masks, blend, weight, alphas: as ``GuidedWassersteinLoss``.
        seed, layer, directions: as ``SlicedStyleLoss``.

    Buffers: ``target`` ``(C + 1, N_1 + ... + N_K)`` (each style's ``sliced_target`` side by side), ``columns``
    ``(K,)`` (its ``N_k``), ``masks`` ``(K, 1, H, W)``, ``blend`` ``(K,)``.
    """

    masks: torch.Tensor
    blend: torch.Tensor
    columns: torch.Tensor

    def __init__(self, target_features: Sequence[torch.Tensor], masks: Sequence[torch.Tensor],
                 blend: Sequence[float] | None = None, *, weight: float = 1.0, seed: int = 0, layer: int = 0,
                 directions: int | None = None, alphas: Sequence[torch.Tensor | None] | None = None) -> None:
        super().__init__(target_features[:1], weight=weight, seed=seed, layer=layer, directions=directions)
        shares = _guided_blend(masks, len(target_features), blend)
        alphas = style_alphas(alphas, len(target_features))
        targets = [sliced_target([f], weights=[a]) for f, a in zip(target_features, alphas)]
        self.register_buffer("target", torch.cat(targets, dim=1).detach().clone())
        self.register_buffer("columns", torch.tensor([t.shape[1] for t in targets]))
        self.register_buffer("masks", torch.cat(list(masks)).detach().clone())
        self.register_buffer("blend", shares.to(device=self.target.device, dtype=self.target.dtype))

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        directions = self.next_directions()
        targets = self.target.split([int(n) for n in self.columns], dim=1)
        dirs = _check_sliced(input, self.target, directions)
        projected, order = _sorted(dirs @ input.reshape(input.shape[1], -1))  # sorted once for every style
        sorted_targets = self.sorted_targets(dirs, targets)
        loss = input.new_zeros(())
        for k in _present(self.masks):
            p = _position_weights(self.masks[k:k + 1], input)
            loss = loss + self.blend[k] * _matched_loss(projected, order, p, targets[k], dirs, sorted_targets[k])
        self.loss = loss * self.weight
        return input


def _present(masks: torch.Tensor) -> list[int]:
    """The styles whose region is not empty at this layer (a region can vanish at a deep layer of a tiny image,
    in the rows a pool drops): an empty region has no statistics, so its style adds nothing there."""
    return [k for k in range(masks.shape[0]) if bool(masks[k].sum() > 0)]


def _mix(seed: int, layer: int, evaluation: int) -> int:
    """One generator seed for (run seed, layer, evaluation): distinct for every triple that occurs."""
    return (seed * 1_000_003 + evaluation) * 64 + layer % 64


def _fit(weights: torch.Tensor | None, features: torch.Tensor) -> torch.Tensor | None:
    """``weights`` at the features' height and width (area-averaged); None stays None."""
    if weights is None or weights.shape[-2:] == features.shape[-2:]:
        return weights
    return F.adaptive_avg_pool2d(weights.to(features.dtype), (features.shape[-2], features.shape[-1])).clamp(0, 1)


def make_statistics_loss(kind: str, target_features: Sequence[torch.Tensor], blend: Sequence[float] | None = None,
                         *, weight: float = 1.0, seed: int = 0, layer: int = 0,
                         masks: Sequence[torch.Tensor] | None = None,
                         alphas: Sequence[torch.Tensor | None] | None = None) -> StyleLoss:
    """The style loss module of ``kind`` (``wasserstein`` or ``sliced``; ``gram`` is ``losses.terms.make_style_loss``).

    ``masks``: one per style at this layer's resolution (``masks.Guides``): the guided loss (``GuidedWassersteinLoss``,
    ``GuidedSlicedLoss``), each style on its own region; None: the styles' blend everywhere. ``alphas``: each style
    image's transparency at this layer (None: opaque), left out of its target.

    Raises:
        ValueError: another ``kind``.
    """
    if kind == "wasserstein":
        return (WassersteinStyleLoss(target_features, blend, weight=weight, alphas=alphas) if masks is None
                else GuidedWassersteinLoss(target_features, masks, blend, weight=weight, alphas=alphas))
    if kind == "sliced":
        return (SlicedStyleLoss(target_features, blend, weight=weight, seed=seed, layer=layer, alphas=alphas)
                if masks is None else GuidedSlicedLoss(target_features, masks, blend, weight=weight, seed=seed,
                                                       layer=layer, alphas=alphas))
    raise ValueError(f"style_loss must be wasserstein or sliced here (gram: make_style_loss), got {kind!r}")
