"""The Fourier basis (fast/basis.py): what it promises, checked at 32 px against plain second computations."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import pytest
import torch

from style_transfer import StyleConfig
from style_transfer.core.image import PIXELS, RESCUED
from style_transfer.core.guard import DAMPING, JUMP, RESTARTS_IN_A_ROW, Jumped
from style_transfer.fast.basis import (ARM_BELOW, FOURIER, FOURIER_EXPONENT, KEEP_WITHIN, LATE_EXPONENT, LATE_SHARE,
                                       BasisImage, FourierBasis, FourierImage, PixelGuard, basis_named, basis_of,
                                       inward)
from style_transfer.core.run_stats import RunStats
from style_transfer.core.style_model import get_style_model_and_losses
from style_transfer.core.lbfgs import StackedLBFGS
from style_transfer.core.transfer import TransferSettings, get_input_optimizer, optimize
from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD
from style_transfer.fast.speed import FAST_FOURIER_HISTORY_SIZE, resolve_speed

from ..core.test_lbfgs import FLOAT64_TOLERANCE

STYLE_WEIGHT = 1e6


@pytest.mark.parametrize("shape", [(21, 32), (32, 32), (17, 9)])
def test_the_basis_maps_an_image_to_itself(shape: tuple[int, int]) -> None:
    """decode(encode(x)) is x up to float32 rounding (odd and even sides: irfft2 needs the size to invert)."""
    image = torch.rand(1, 3, *shape, generator=torch.Generator().manual_seed(1))
    basis = FourierBasis(*shape)
    assert basis.encode(image).shape == (1, 3, shape[0], shape[1] // 2 + 1, 2)
    assert torch.allclose(basis.decode(basis.encode(image)), image, rtol=0, atol=2e-6)


def test_the_scale_by_hand() -> None:
    """4x4: frequencies fy in (0, 1/4, -1/2, -1/4), fx in (0, 1/4, 1/2), floored at 1/4; scale f**-0.5, mean 1."""
    scale = FourierBasis(4, 4).scale.double()
    assert scale.shape == (4, 3)
    assert math.isclose(float(scale.mean()), 1.0, rel_tol=1e-6)
    # (0, 0) is floored to f = 1/4, the same as (0, 1); (1, 1) has f = sqrt(2)/4; (2, 2) has f = sqrt(2)/2.
    assert math.isclose(float(scale[0, 0] / scale[0, 1]), 1.0, rel_tol=1e-6)
    assert math.isclose(float(scale[0, 1] / scale[1, 1]), 2 ** 0.25, rel_tol=1e-6)
    assert math.isclose(float(scale[0, 1] / scale[2, 2]), 2 ** 0.75, rel_tol=1e-6)


def basis_matrix(basis: FourierBasis) -> torch.Tensor:
    """The decoding as a plain matrix (pixels x coefficients of one channel), one unit coefficient at a time."""
    height, width = basis.shape
    count = height * (width // 2 + 1) * 2
    units = torch.eye(count).reshape(count, 1, height, width // 2 + 1, 2)
    return basis.decode(units).reshape(count, height * width).T


@pytest.mark.parametrize("stretch", [1.0, 1.6], ids=["inside", "clamped"])
def test_the_coefficients_gradient_is_the_pixels_gradient_times_the_basis(cnn, content_32, style_32,
                                                                          stretch: float) -> None:
    """BasisImage's gradient = Aᵀ (m ⊙ g): g the model's gradient at the image it shows (autograd through the
    pixels), A the decoding as a plain matrix, m 1 where the decoded pixel lies in [0, 1] or where it lies outside
    and the descent step moves it back in, else 0. "clamped": the start stretched so that some pixels fall outside
    [0, 1]; the model sees the clamped image, as the tutorial clamps its pixels before an evaluation, and the
    coefficients LBFGS holds stay those of the stretched start."""
    model, style_losses, content_losses = get_style_model_and_losses(cnn, IMAGENET_MEAN, IMAGENET_STD, style_32,
                                                                     content_32)
    start = (content_32 - 0.5) * stretch + 0.5
    basis = FourierBasis.like(start)
    moved = BasisImage(basis, start)
    image = torch.zeros_like(start, requires_grad=True)
    moved.show(image)
    model(image)
    loss = STYLE_WEIGHT * sum(s.loss for s in style_losses) + sum(c.loss for c in content_losses)
    loss.backward()
    moved.backward(image)
    got = moved.coefficients.grad

    clamped = start.clamp(0, 1)
    assert torch.allclose(image, clamped, rtol=0, atol=2e-6)  # what the model saw: the clamped start
    assert torch.equal(moved.coefficients.detach(), basis.encode(start))  # LBFGS's variable untouched
    matrix = basis_matrix(basis).double()
    # The image the coefficients decode to (float32, as the path decodes): the start up to rounding. The gradient
    # reaches the coefficients where a decoded pixel lies in [0, 1], or outside where the descent step -g points back.
    decoded = basis.decode(moved.coefficients.detach())
    g = image.grad
    inside = (((decoded >= 0) & (decoded <= 1)) | ((decoded > 1) & (g > 0)) | ((decoded < 0) & (g < 0))).double()
    outside = float(1 - ((start > -1e-6) & (start < 1 + 1e-6)).double().mean())
    assert outside == 0 if stretch == 1.0 else 0.02 < outside < 0.5  # "clamped" cuts off some pixels, not most
    assert stretch == 1.0 or 0 < float(inside.mean()) < 1  # some pixels outside pass no gradient
    masked = g.double() * inside
    expected = torch.stack([matrix.T @ masked[0, c].reshape(-1) for c in range(3)]).reshape(got.shape)
    assert torch.allclose(got.double(), expected, rtol=1e-4, atol=1e-6 * float(expected.abs().max()))


def test_fourier_evaluates_the_pixels_loss_and_keeps_the_result_in_the_box(cnn, content_32, style_32) -> None:
    """The same loss at the same start (its first evaluation equals the pixel path's), a lower one later (random
    weights: LBFGS may stop early, and how far it gets says nothing of real features), and a result in [0, 1]."""
    losses: dict[str, list[float]] = {"pixels": [], "fourier": []}
    for name in losses:
        model, style_losses, content_losses = get_style_model_and_losses(cnn, IMAGENET_MEAN, IMAGENET_STD,
                                                                         style_32, content_32)
        image = content_32.clone()
        settings = TransferSettings.of(progress=lambda info, name=name: losses[name].append(info.loss),
                                    basis=basis_named(name))
        result = optimize(model, style_losses, content_losses, image, 39, 1e9, 1e3, settings, stats=RunStats())
        assert float(result.min()) >= 0 and float(result.max()) <= 1
    assert math.isclose(losses["fourier"][0], losses["pixels"][0], rel_tol=1e-5)
    assert min(losses["fourier"][1:]) < losses["fourier"][0]
    # Random weights make LBFGS jump in its first step (here about 10x at the third evaluation, far above JUMP on any
    # CPU): the guard ends the step, and the next evaluation is the step's lowest-loss image again (re-clamped: to
    # rounding).
    fourier = losses["fourier"]
    jump = next(i for i in range(1, len(fourier)) if fourier[i] > JUMP * min(fourier[:i]))
    assert jump < 20 and math.isclose(fourier[jump + 1], min(fourier[:jump]), rel_tol=1e-6)


def test_a_jump_goes_back_to_the_steps_best_and_damps_the_steps() -> None:
    moved = BasisImage(FourierBasis(8, 8), torch.rand(1, 3, 8, 8, generator=torch.Generator().manual_seed(2)))
    moved.observe(10.0)
    best = moved.coefficients.detach().clone()
    with torch.no_grad():
        moved.coefficients.add_(1)
    moved.observe(0.99 * JUMP * 10.0)  # higher, but not a jump: not kept either
    with torch.no_grad():
        moved.coefficients.add_(1)
    with pytest.raises(Jumped):
        moved.observe(1.01 * JUMP * 10.0)
    moved.restart()
    assert torch.equal(moved.coefficients.detach(), best) and moved.restarts == 1
    assert moved.best_loss == math.inf  # a new step: the guard starts again
    assert moved.damped(1.0) == 1 / DAMPING and moved.damped(2.0) == 2 / DAMPING ** 2
    assert moved.ease(2.0) == 2 * 2 / DAMPING ** 2 and moved.ease(1.0) == 4 / DAMPING ** 2  # doubles each step
    for _ in range(8):
        moved.ease(1.0)
    assert moved.damping == 1.0
    # RESTARTS_IN_A_ROW restarts with no clean step between: the basis is exhausted (optimize gives it up for the
    # pixels); a clean step between them starts the count again
    for _ in range(RESTARTS_IN_A_ROW - 1):
        assert not moved.exhausted
        moved.observe(10.0)
        with pytest.raises(Jumped):
            moved.observe(1.01 * JUMP * 10.0)
        moved.restart()
    assert moved.exhausted  # the first restart above and RESTARTS_IN_A_ROW - 1 more
    moved.clean_step()
    assert not moved.exhausted
    moved.begin_step()
    moved.observe(10.0)
    with pytest.raises(Jumped):  # the guard never switches off
        moved.observe(100 * JUMP * 10.0)


def test_the_bases_by_name_and_what_fast_moves() -> None:
    assert basis_named("pixels") is PIXELS and basis_named("fourier") is FOURIER
    assert (PIXELS.keep_within, FOURIER.keep_within) == (None, KEEP_WITHIN)  # the tutorial hands back its last update
    with pytest.raises(ValueError, match="parametrization must be one of pixels, fourier"):
        basis_named("wavelets")
    # the default's pixels are rescued where a step fails (core/image.py); --unguarded is the tutorial's loop as written
    default, fast, fast_pixels = (resolve_speed(StyleConfig(fast=f, parametrization=p))
                                  for f, p in ((False, None), (True, None), (True, "pixels")))
    assert basis_of(default) is RESCUED and basis_of(fast) is FOURIER
    assert basis_of(default, unguarded=True) is PIXELS and basis_of(fast, unguarded=True) is FOURIER
    assert basis_of(fast_pixels) is RESCUED
    assert (default.parametrization, fast.parametrization, fast_pixels.parametrization) == ("pixels", "fourier", "pixels")
    assert fast.history_size == FAST_FOURIER_HISTORY_SIZE == 50  # in the Fourier basis: half torch's
    assert fast_pixels.history_size == 20
    with pytest.raises(ValueError, match="parametrization"):
        StyleConfig(parametrization="wavelets")


def test_inward_by_hand() -> None:
    """The gradient reaches a pixel inside [0, 1] (edges included) whatever its sign, and one outside only when the
    descent step -grad moves it back towards the box (above 1: grad > 0; below 0: grad < 0)."""
    decoded = torch.tensor([-0.1, -0.1, 0.0, 0.5, 0.5, 1.0, 1.1, 1.1])
    grad = torch.tensor([1.0, -1.0, 1.0, 1.0, -1.0, -1.0, -1.0, 1.0])
    assert inward(decoded, grad).tolist() == [False, True, True, True, True, True, False, True]


def _lbfgs_in_the_basis(cnn, content, style, steps: int) -> tuple[BasisImage, torch.optim.LBFGS, Callable]:
    """An LBFGS of torch's defaults moving a BasisImage at 1/f**0.5 through ``steps`` steps of 4 iterations, and
    the closure that evaluates the model at its coefficients (the gradient into ``coefficients.grad``)."""
    moved = BasisImage(FourierBasis.like(content), content)
    optimizer = torch.optim.LBFGS([moved.coefficients], max_iter=4)
    closure = _closure_in_the_basis(cnn, content, style, moved)
    for _ in range(steps):
        optimizer.step(closure)
    return moved, optimizer, closure


def _closure_in_the_basis(cnn, content, style, moved: BasisImage) -> Callable[[], torch.Tensor]:
    """The closure that evaluates the model at ``moved``'s coefficients (the gradient into ``coefficients.grad``)."""
    model, style_losses, content_losses = get_style_model_and_losses(cnn, IMAGENET_MEAN, IMAGENET_STD, style, content)
    model.requires_grad_(False)
    image = torch.zeros_like(content, requires_grad=True)

    def closure() -> torch.Tensor:
        moved.show(image)
        image.grad = None
        moved.coefficients.grad = None
        model(image)
        loss = STYLE_WEIGHT * sum(s.loss for s in style_losses) + sum(c.loss for c in content_losses)
        loss.backward()
        moved.backward(image)
        return loss

    return closure


def test_a_rebase_keeps_the_image_and_lbfgs_memory_describes_the_same_steps(cnn, content_32, style_32) -> None:
    """After ``rebase`` to a flat scale the coefficients decode to the same image; LBFGS's steps s decode to the same
    image changes; its last gradient is the gradient evaluated afresh in the new basis at the point it was taken
    (the coefficients minus the last step t·d, in the new basis); each pair's s·y is kept; and the scale of its
    first matrix is y·s / y·y of the newest pair, by hand. In float64: the point the last gradient was taken at is
    found again by subtracting the last step, exact to 1e-16 rather than float32's rounding amplified by the network."""
    cnn, content_32, style_32 = copy.deepcopy(cnn).double(), content_32.double(), style_32.double()
    moved, optimizer, closure = _lbfgs_in_the_basis(cnn, content_32, style_32, steps=3)
    memory = optimizer.state[moved.coefficients]
    assert len(memory["old_dirs"]) >= 3  # pairs were stored (random weights: checked, not assumed)
    old = moved.basis
    image = old.decode(moved.coefficients.detach())
    steps_before = [old.decode(s.reshape(moved.coefficients.shape)) for s in memory["old_stps"]]
    sy_before = [float(s.dot(y)) for s, y in zip(memory["old_stps"], memory["old_dirs"])]
    moved.rebase(0.0, memory)
    new = moved.basis
    assert new.exponent == 0.0 and torch.equal(new.scale, FourierBasis.like(content_32, exponent=0.0).scale)
    assert torch.allclose(new.decode(moved.coefficients.detach()), image, rtol=0, atol=2e-6)
    for before, s in zip(steps_before, memory["old_stps"]):
        assert torch.allclose(new.decode(s.reshape(moved.coefficients.shape)), before, rtol=0,
                              atol=1e-5 * float(before.abs().max()))
    for before, s, y in zip(sy_before, memory["old_stps"], memory["old_dirs"]):
        assert math.isclose(float(s.dot(y)), before, rel_tol=1e-4)
    y, s = memory["old_dirs"][-1].double(), memory["old_stps"][-1].double()
    assert math.isclose(float(memory["H_diag"]), float(y.dot(s) / y.dot(y)), rel_tol=1e-5)
    # The last gradient, evaluated again where it was taken: the coefficients less the last step, in the new basis.
    with torch.no_grad():
        moved.coefficients.sub_(memory["t"] * memory["d"].reshape(moved.coefficients.shape))
    closure()
    fresh = moved.coefficients.grad.reshape(-1)
    assert float((memory["prev_flat_grad"] - fresh).abs().max()) < FLOAT64_TOLERANCE * float(fresh.abs().max())


def test_a_rebase_in_a_stacked_lbfgs_continues_as_torchs(cnn, content_32, style_32,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """--fast moves the basis with core/lbfgs.py's StackedLBFGS, whose products of the pairs ``rebase`` changes in
    place (``pairs_changed``): from the same state (torch's after 3 steps), a step, the rebase and a step land where
    torch's LBFGS lands. In float64, so that the two recursions' summation orders differ at 1e-16 and 8 iterations
    amplify that far below FLOAT64_TOLERANCE on any CPU and thread count; the control, the products left stale,
    lands far off (the comparison could fail)."""
    network, content, style = copy.deepcopy(cnn).double(), content_32.double(), style_32.double()
    moved, optimizer, _ = _lbfgs_in_the_basis(network, content, style, steps=3)
    assert moved.coefficients.dtype == torch.float64
    state = copy.deepcopy(optimizer.state_dict())

    def continued(cls: type) -> torch.Tensor:
        twin = BasisImage(FourierBasis.like(content), content)
        with torch.no_grad():
            twin.coefficients.copy_(moved.coefficients)
        other = cls([twin.coefficients], max_iter=4)
        other.load_state_dict(copy.deepcopy(state))
        closure = _closure_in_the_basis(network, content, style, twin)
        other.step(closure)  # the stacked one works its products out here
        twin.rebase(LATE_EXPONENT, other.state[twin.coefficients])
        other.step(closure)
        return twin.basis.decode(twin.coefficients.detach())

    theirs, ours = continued(torch.optim.LBFGS), continued(StackedLBFGS)
    monkeypatch.setattr("style_transfer.fast.basis.pairs_changed", lambda memory: None)
    stale = continued(StackedLBFGS)
    scale = float(theirs.abs().max())
    difference, control = float((ours - theirs).abs().max()) / scale, float((stale - theirs).abs().max()) / scale
    assert difference < FLOAT64_TOLERANCE and control > 1e-4, (difference, control)


def test_an_lbfgs_run_in_the_basis_goes_flat_once_halfway(cnn, content_32, style_32, monkeypatch) -> None:
    """``optimize`` rebases to LATE_EXPONENT at the end of the first LBFGS step that reaches LATE_SHARE of the
    planned evaluations (39 steps: 40 planned, so 20), once, and says so in LBFGS's state (a checkpoint keeps it);
    Adam keeps 1/f**0.5 throughout."""
    seen: list[tuple[float, int]] = []
    original = BasisImage.rebase

    def spy(self, exponent, memory):
        seen.append((exponent, evaluations[-1]))
        original(self, exponent, memory)

    monkeypatch.setattr(BasisImage, "rebase", spy)
    # Random weights jump at every restart: the basis must not be given up for the pixels before halfway here.
    monkeypatch.setattr("style_transfer.core.guard.RESTARTS_IN_A_ROW", 10 ** 6)
    for name in ("lbfgs", "adam"):
        seen.clear()
        evaluations: list[int] = [0]
        ends: list[tuple[int, float]] = []
        model, style_losses, content_losses = get_style_model_and_losses(cnn, IMAGENET_MEAN, IMAGENET_STD,
                                                                         style_32, content_32)
        settings = TransferSettings.of(
            progress=lambda info: evaluations.append(info.step), basis=FOURIER, optimizer_name=name,
            on_step_end=lambda optimizer, image, n: ends.append((n, optimizer.param_groups[0]["exponent"])))
        optimize(model, style_losses, content_losses, content_32.clone(), 39, 1e9, 1e3, settings, stats=RunStats())
        late = round(LATE_SHARE * 40)
        if name == "adam":
            assert seen == [] and {e for _, e in ends} == {FOURIER_EXPONENT}
            continue
        first = next(n for n, _ in ends if n >= late)
        assert seen == [(LATE_EXPONENT, first)]
        assert all(e == (FOURIER_EXPONENT if n < late else LATE_EXPONENT) for n, e in ends)


def test_the_pixel_guards_arming_travels_in_the_optimisers_state() -> None:
    """After the basis is given up, a checkpoint's optimiser state carries the pixels' first and lowest loss: the
    resumed guard is unarmed where the run's was (lowest 50 against a first of 100, above ``ARM_BELOW`` times it),
    arms at the same loss, and a step's end writes the new values back; an older state without them is armed."""
    def new_optimizer(variable: torch.Tensor, lr: float | None) -> torch.optim.Optimizer:
        return get_input_optimizer(variable, lr=lr)

    image = torch.rand(1, 3, 8, 8)
    saved = new_optimizer(image.clone(), None)
    saved.param_groups[0].update(gave_up_basis=True, pixels_start=100.0, pixels_lowest=50.0)
    resumed = FourierImage(image, new_optimizer, saved.state_dict(), base_lr=1.0, late_from=None)
    guard = resumed.guard
    assert isinstance(guard, PixelGuard) and (guard.start, guard.lowest) == (100.0, 50.0) and not guard.armed
    guard.observe(ARM_BELOW * 100.0 * 0.99)
    assert guard.armed
    resumed.end_step(40)
    assert resumed.optimizer.param_groups[0]["pixels_lowest"] == ARM_BELOW * 100.0 * 0.99
    older = new_optimizer(image.clone(), None)
    older.param_groups[0].update(gave_up_basis=True)
    old_guard = FourierImage(image, new_optimizer, older.state_dict(), base_lr=1.0, late_from=None).guard
    old_guard.observe(1e9)
    assert isinstance(old_guard, PixelGuard) and old_guard.armed
