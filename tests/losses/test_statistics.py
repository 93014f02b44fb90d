"""The style statistics of issue 26 (losses/statistics.py): W2 of Gaussian fits and sliced Wasserstein.

Each loss's value and gradient against a plain second computation in float64, its invariances, the blend of
several styles, the mask hook, the seeded directions, and the settings it refuses.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from style_transfer.config.style import StyleConfig
from style_transfer.losses.statistics import (SlicedStyleLoss, WassersteinStyleLoss, gaussian_statistics,
                                              random_directions, sliced_target, sliced_wasserstein,
                                              wasserstein_distance, wasserstein_target)
from style_transfer.presets import STYLE_LOSS_WEIGHTS

from ..helpers import transfer


def features(c: int = 6, h: int = 5, w: int = 7, seed: int = 0, shift: float = 0.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    mixing = torch.randn((c, c), generator=g, dtype=torch.float64)
    flat = mixing @ torch.randn((c, h * w), generator=g, dtype=torch.float64) + shift
    return flat.reshape(1, c, h, w)


def eig_sqrt(m: torch.Tensor) -> torch.Tensor:
    values, vectors = torch.linalg.eigh(m)
    return vectors @ torch.diag(values.clamp(min=0).sqrt()) @ vectors.t()


def plain_w2(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """W2^2 per channel written out the other way round: sqrt(C_x) C_y sqrt(C_x), both roots by eigh."""
    c = x.shape[1]
    fx, fy = x.reshape(c, -1), y.reshape(c, -1)
    mx, my = fx.mean(1), fy.mean(1)
    cx = (fx - mx[:, None]) @ (fx - mx[:, None]).t() / fx.shape[1]
    cy = (fy - my[:, None]) @ (fy - my[:, None]).t() / fy.shape[1]
    root = eig_sqrt(cx)
    cross = torch.trace(eig_sqrt(root @ cy @ root))
    return ((mx - my) ** 2).sum() + torch.trace(cx) + torch.trace(cy) - 2 * cross


class TestWasserstein:
    def test_value_and_gradient_match_a_plain_eigh_computation(self) -> None:
        x = features(seed=1).requires_grad_(True)
        y = features(seed=2, h=4, w=9)  # another size: the statistics do not care
        target = wasserstein_target([y])
        ours = wasserstein_distance(x, target[0], target[1:])
        plain = plain_w2(x, y) / x.shape[1]
        assert ours.item() == pytest.approx(plain.item(), rel=1e-9)
        (grad,) = torch.autograd.grad(ours, x)
        (plain_grad,) = torch.autograd.grad(plain, x)
        assert torch.allclose(grad, plain_grad, rtol=1e-6, atol=1e-9)

    def test_gradient_matches_finite_differences(self) -> None:
        x = features(c=4, h=3, w=4, seed=3).requires_grad_(True)
        target = wasserstein_target([features(c=4, seed=4)])
        assert torch.autograd.gradcheck(lambda v: wasserstein_distance(v, target[0], target[1:]), (x,))

    def test_zero_for_the_same_features_and_the_mean_shift_for_shifted_ones(self) -> None:
        y = features(seed=5)
        target = wasserstein_target([y])
        assert abs(wasserstein_distance(y, target[0], target[1:]).item()) < 1e-9
        shift = torch.tensor([0.5, -1.0, 2.0, 0.0, 0.25, 3.0], dtype=torch.float64)
        moved = y + shift[None, :, None, None]
        assert wasserstein_distance(moved, target[0], target[1:]).item() == pytest.approx(
            (shift ** 2).sum().item() / 6, rel=1e-8)

    def test_fewer_positions_than_channels_gives_a_finite_gradient(self) -> None:
        x = features(c=16, h=2, w=3, seed=6).requires_grad_(True)  # rank 6 covariance of 16 channels
        target = wasserstein_target([features(c=16, seed=7)])
        (grad,) = torch.autograd.grad(wasserstein_distance(x, target[0], target[1:]), x)
        assert torch.isfinite(grad).all() and grad.abs().sum() > 0

    def test_two_styles_blend_into_the_fit_of_their_mixture(self) -> None:
        a, b = features(seed=8, shift=1.0), features(seed=9, shift=-2.0)
        both = torch.cat([a, b], dim=3)  # the same number of positions each: equal shares
        packed = wasserstein_target([a, b], (1.0, 1.0))
        mean, cov = gaussian_statistics(both)
        assert torch.allclose(packed[0], mean, atol=1e-10)
        assert torch.allclose(packed[1:] @ packed[1:], cov, atol=1e-9)

    def test_weights_take_the_statistics_of_the_weighted_positions(self) -> None:
        x = features(seed=10)
        mask = torch.zeros(1, 1, 5, 7, dtype=torch.float64)
        mask[..., :3] = 1.0
        mean, cov = gaussian_statistics(x, mask)
        left_mean, left_cov = gaussian_statistics(x[..., :3].contiguous())
        assert torch.allclose(mean, left_mean) and torch.allclose(cov, left_cov)
        target = wasserstein_target([features(seed=11)])
        assert wasserstein_distance(x, target[0], target[1:], weights=mask).item() == pytest.approx(
            wasserstein_distance(x[..., :3].contiguous(), target[0], target[1:]).item(), rel=1e-9)

    @pytest.mark.parametrize("weights, needle", [(torch.ones(1, 1, 2, 2), "shape"), (torch.zeros(1, 1, 5, 7), "zero"),
                                                 (torch.full((1, 1, 5, 7), 2.0), "[0, 1]")])
    def test_bad_weights_are_refused_by_name(self, weights: torch.Tensor, needle: str) -> None:
        with pytest.raises(ValueError, match=None) as info:
            gaussian_statistics(features(), weights)
        assert needle in str(info.value)


def plain_sliced(x: torch.Tensor, y: torch.Tensor, directions: torch.Tensor) -> tuple[float, np.ndarray]:
    """The sliced loss and its gradient, one direction at a time with numpy (np.interp resamples the target)."""
    c = x.shape[1]
    fx, fy = x.reshape(c, -1).numpy(), y.reshape(c, -1).numpy()
    m, n = fx.shape[1], fy.shape[1]
    loss, grad = 0.0, np.zeros_like(fx)
    for d in directions.numpy():
        px, py = d @ fx, np.sort(d @ fy)
        order = np.argsort(px, kind="stable")
        matched = np.interp((np.arange(m) + 0.5) / m, (np.arange(n) + 0.5) / n, py)
        diff = px[order] - matched
        loss += (diff ** 2).mean()
        grad[:, order] += 2 * d[:, None] * diff[None, :] / m
    count = len(directions)
    return loss / count, grad.reshape(x.shape) / count


class TestSliced:
    @pytest.mark.parametrize("style_hw", [(5, 7), (4, 9), (3, 3)])
    def test_value_and_gradient_match_a_plain_loop_over_directions(self, style_hw: tuple[int, int]) -> None:
        x = features(seed=12).requires_grad_(True)
        y = features(seed=13, h=style_hw[0], w=style_hw[1])
        directions = random_directions(6, 9, torch.Generator().manual_seed(0))
        ours = sliced_wasserstein(x, sliced_target([y]), directions)
        loss, grad = plain_sliced(x.detach(), y, directions)
        assert ours.item() == pytest.approx(loss, rel=1e-9)
        (our_grad,) = torch.autograd.grad(ours, x)
        assert np.allclose(our_grad.numpy(), grad, rtol=1e-7, atol=1e-12)

    def test_zero_for_the_same_features_whatever_the_directions(self) -> None:
        y = features(seed=14)
        for seed in range(3):
            directions = random_directions(6, 6, torch.Generator().manual_seed(seed))
            assert sliced_wasserstein(y, sliced_target([y]), directions).item() < 1e-20

    def test_a_shift_along_a_direction_costs_its_square(self) -> None:
        y = features(seed=15)
        direction = torch.zeros(1, 6, dtype=torch.float64)
        direction[0, 2] = 1.0
        moved = y.clone()
        moved[:, 2] += 1.5
        assert sliced_wasserstein(moved, sliced_target([y]), direction).item() == pytest.approx(1.5 ** 2)

    def test_weights_match_the_weighted_positions_only(self) -> None:
        x, y = features(seed=16), features(seed=17, h=4, w=4)
        mask = torch.zeros(1, 1, 5, 7, dtype=torch.float64)
        mask[..., 2:5, :] = 1.0
        directions = random_directions(6, 6, torch.Generator().manual_seed(1))
        weighted = sliced_wasserstein(x, sliced_target([y]), directions, weights=mask)
        inside = sliced_wasserstein(x[..., 2:5, :].contiguous(), sliced_target([y]), directions)
        assert weighted.item() == pytest.approx(inside.item(), rel=1e-9)

    def test_two_styles_are_matched_as_their_mixture(self) -> None:
        a, b = features(seed=18, shift=1.0), features(seed=19, shift=-1.0)
        x = features(seed=20, h=10, w=7)
        directions = random_directions(6, 6, torch.Generator().manual_seed(2))
        mixed = sliced_wasserstein(x, sliced_target([a, b], (1.0, 1.0)), directions)
        together = sliced_wasserstein(x, sliced_target([torch.cat([a, b], dim=2)]), directions)
        assert mixed.item() == pytest.approx(together.item(), rel=1e-9)

    def test_directions_are_seeded_by_seed_layer_and_evaluation(self) -> None:
        y = [features(seed=21)]
        first, again = SlicedStyleLoss(y, seed=3), SlicedStyleLoss(y, seed=3)
        assert torch.equal(first.draw(0), again.draw(0))
        assert not torch.equal(first.draw(0), first.draw(1))
        assert not torch.equal(first.draw(0), SlicedStyleLoss(y, seed=4).draw(0))
        assert not torch.equal(first.draw(0), SlicedStyleLoss(y, seed=3, layer=1).draw(0))
        x = features(seed=22)
        first(x)
        again(x)
        assert first.loss.item() == again.loss.item() and first.evaluations == 1
        first(x)
        assert first.loss.item() != again.loss.item()  # the second evaluation drew other directions

    @pytest.mark.parametrize("optimizer, steps, draws", [
        ("lbfgs", 20, [0] * 20 + [20] * 20),  # two LBFGS steps of 20 evaluations: one draw each
        ("adam", 3, [0, 1, 2, 3]),  # Adam: a step is one evaluation, a draw each
    ])
    def test_the_loop_holds_one_draw_for_each_optimiser_step(self, cnn, content_32, style_32, optimizer: str,
                                                             steps: int, draws: list[int]) -> None:
        """LBFGS's curvature pairs are gradient differences within a step: its directions stay for the step."""
        seen: list[int] = []
        draw = SlicedStyleLoss.draw

        def spy(module, evaluation: int) -> torch.Tensor:
            seen.append(evaluation)
            return draw(module, evaluation)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(SlicedStyleLoss, "draw", spy)
            transfer(cnn, content_32, style_32, content_32.clone(), steps, 1e3, 1e3, style_loss="sliced",
                     style_layers=("conv_1",), optimizer_name=optimizer)
        assert seen == draws


    @pytest.mark.parametrize("guided", [False, True])
    def test_the_style_projections_are_sorted_once_per_held_draw(self, guided: bool) -> None:
        """Within a held step only the input is sorted again; a new step, or a new target, sorts the style again; the
        loss and gradient are those of ``sliced_wasserstein`` itself (a plain second computation) at every evaluation."""
        from style_transfer.losses import statistics

        styles = [features(seed=40), features(seed=41, h=6, w=10)]
        halves = torch.zeros(2, 1, 8, 12, dtype=torch.float64)
        halves[0, ..., :6], halves[1, ..., 6:] = 1.0, 1.0
        module = (statistics.GuidedSlicedLoss(styles, list(halves.split(1)), seed=5) if guided
                  else SlicedStyleLoss(styles, (1.0, 2.0), seed=5))  # a blend: unequal masses, the order is kept
        sorts: list[int] = []
        real = statistics._sorted

        def counting(values: torch.Tensor):
            sorts.append(values.shape[1])
            return real(values)

        def expected(x: torch.Tensor, step: int) -> tuple[float, torch.Tensor]:
            x = x.detach().clone().requires_grad_(True)
            directions = module.draw(step)
            if guided:
                loss = sum(sliced_wasserstein(x, sliced_target([y]), directions, weights=m[None])
                           for y, m in zip(styles, halves))
            else:
                loss = sliced_wasserstein(x, sliced_target(styles, (1.0, 2.0)), directions)
            loss.backward()
            return float(loss.detach()), x.grad

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(statistics, "_sorted", counting)
            for step, evaluations in ((0, 3), (3, 2)):
                module.start_step(step)
                for e in range(evaluations):
                    x = features(seed=50 + step + e, h=8, w=12).requires_grad_(True)
                    module(x)
                    module.loss.backward()
                    with patch.context() as plain:
                        plain.setattr(statistics, "_sorted", real)
                        loss, grad = expected(x, step)
                    assert module.loss.item() == pytest.approx(loss, rel=1e-12)
                    assert torch.allclose(x.grad, grad, rtol=1e-10, atol=1e-14)
            module.target = module.target.clone()  # a new target: sorted again with the held draw
            module(features(seed=60, h=8, w=12))
        # Three draws (two steps, then the new target): each style image sorted once a draw when guided, the blend's
        # one target of both images (35 + 60 positions) else; the input (96 positions) once an evaluation.
        assert sorts.count(8 * 12) == 3 + 2 + 1
        assert sorted(n for n in sorts if n != 8 * 12) == (sorted([35, 60] * 3) if guided else [95] * 3)
        orders = [order for _, order in module._sorted_targets[1]]
        assert all(order is None for order in orders) if guided else orders[0] is not None  # kept only for a blend


class TestModules:
    @pytest.mark.parametrize("cls", [WassersteinStyleLoss, SlicedStyleLoss])
    def test_a_module_is_transparent_weighs_its_loss_and_keeps_its_target_as_a_buffer(self, cls: type) -> None:
        y, x = features(seed=23), features(seed=24)
        plain, weighted = cls([y]), cls([y], weight=0.5)
        assert plain(x) is x
        weighted(x)
        assert weighted.loss.item() == pytest.approx(0.5 * plain.loss.item())
        assert "target" in dict(plain.named_buffers())

    @pytest.mark.parametrize("cls", [WassersteinStyleLoss, SlicedStyleLoss])
    def test_the_per_module_backward_gives_the_combined_gradient(self, cls: type) -> None:
        y = features(seed=25)
        grads = []
        for per_module in (False, True):
            x = features(seed=26).requires_grad_(True)
            module = cls([y], weight=2.0)
            module(x * 1.0)
            if per_module:
                module.backward(3.0)
            else:
                (module.loss * 3.0).backward()
            grads.append(x.grad)
        assert torch.allclose(grads[0], grads[1]) and grads[0].abs().sum() > 0

    def test_a_mask_on_the_module_is_resized_to_each_feature_map(self) -> None:
        y, x = features(seed=27), features(seed=28, h=4, w=6)
        mask = torch.zeros(1, 1, 8, 12, dtype=torch.float64)
        mask[..., :6] = 1.0
        masked = WassersteinStyleLoss([y], weights=mask)
        masked(x)
        target = masked.target
        left = wasserstein_distance(x[..., :3].contiguous(), target[0], target[1:])
        assert masked.loss.item() == pytest.approx(left.item(), rel=1e-9)


class TestSettings:
    @pytest.mark.parametrize("kind", ["wasserstein", "sliced"])
    def test_each_loss_has_its_preset_weight_at_every_input_scale(self, kind: str) -> None:
        for preprocess in ("torchvision", "caffe"):
            config = StyleConfig(style_loss=kind, weights="random", preprocess=preprocess)
            assert config.style_weight == STYLE_LOSS_WEIGHTS[kind]["tutorial"]
        assert StyleConfig(style_loss=kind, style_weight=7.0).style_weight == 7.0
        assert StyleConfig(style_loss=kind, preset="paper").style_weight == STYLE_LOSS_WEIGHTS[kind]["paper"]
        assert StyleConfig().style_weight == 1e6 and StyleConfig().style_loss == "gram"

    @pytest.mark.parametrize("fields, needle", [
        ({"style_loss": "moments"}, "style_loss must be one of gram, wasserstein, sliced"),
        ({"style_loss": "sliced", "tile": 64}, "tile cannot be combined with style_loss 'sliced'"),
        ({"style_loss": "wasserstein", "fused_gram": True}, "fused_gram applies to style_loss gram only"),
    ])
    def test_refused_settings_name_the_problem(self, fields: dict, needle: str) -> None:
        with pytest.raises(ValueError) as info:
            StyleConfig(**fields)
        assert needle in str(info.value)

    def test_fast_leaves_the_fused_gram_off_for_the_other_losses(self) -> None:
        from style_transfer.fast.speed import resolve_speed

        assert resolve_speed(StyleConfig(fast=True)).fused_gram is True
        assert resolve_speed(StyleConfig(fast=True, style_loss="sliced")).fused_gram is False
