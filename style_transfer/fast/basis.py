"""The image the optimiser moves, written in another basis: the same loss, a shorter path to it.

The tutorial's LBFGS moves the image's pixels. ``FourierBasis`` lets it move the image's 2-D Fourier coefficients
instead, each scaled by ``1 / f**exponent`` (``f`` the spatial frequency): a gradient step then moves coarse
structure more than fine noise, which is the direction the style loss's minimum lies in, and LBFGS reaches a given
loss in fewer evaluations. The loss as a function of the
image is unchanged: the image is decoded from the coefficients, clamped to [0, 1] as the tutorial's loop clamps its
pixels, and evaluated by the same model; the gradient is the pixels' gradient taken back through the decoding
(``backward``), except where a pixel lies outside [0, 1] and the step would move it further out (``inward``).
Halfway through an LBFGS run the scale goes flat (``LATE_EXPONENT``, ``BasisImage.rebase``): coarse first, then the
fine detail as fast.

``FOURIER`` is the ``core.image.Basis`` a run hands the loop as ``Parts.basis`` where it asks for this one
(``basis_of``: ``StyleConfig.parametrization``, fourier with --fast); the default path moves the pixels
(``core.image.PIXELS``), as the tutorial does.

The measurements behind each choice here are in benchmarks/NOTEBOOK.md (2026-12-02 "Time to quality", 2026-12-03
"Coarse first, then flat", 2026-12-04 "The guard on the pixels arms").
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import torch

from ..config.choices import PARAMETRIZATIONS
from ..core.guard import JumpGuard, Jumped
from ..core.image import PIXELS, RESCUED, Basis, ImageBasis, NewOptimizer
from ..core.run_stats import RunStats
from ..core.lbfgs import pairs_changed
from .speed import Speed

FOURIER_EXPONENT = 0.5  # the scale 1/f**0.5: 0.35, 0.75 and a Laplacian pyramid measured worse
# An LBFGS run in the Fourier basis moves to a flat scale (exponent 0) after this share of its planned evaluations,
# LBFGS's memory carried across (``BasisImage.rebase``): late in a run the loss is mostly content, fine detail that
# 1/f**0.5 moves slowly.
LATE_EXPONENT = 0.0
LATE_SHARE = 0.5
# Once the basis is given up, the guard over the pixels arms when the loss has come below this share of the pixels'
# first: before, a jump is LBFGS's early overshoot, which the tutorial's path comes back from (damped restarts crawled).
ARM_BELOW = 0.1
# A run in this basis is not the tutorial's path: it hands back its best evaluated image, unless its last evaluation
# is within this share of it (``Fourier.keep_within``). Not 0: bf16's loss of an image is up to 2.3 % below its
# float32 loss, and a strict best would hand back a bf16 image over the float32 finish's.
KEEP_WITHIN = 0.05


def inward(decoded: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """Where the pixels' gradient ``grad`` reaches the coefficients (``BasisImage.backward``): a pixel of ``decoded``
    in [0, 1] (its edges included), and one outside whose descent step (``-grad``) moves it back towards the box.

    The clamp's own gradient would stop every pixel outside: on the real VGG16 LBFGS's third evaluation put whole
    regions out, its gradient vanished there and the jump guard had to restart (the astronaut in the IHC stain at
    128 px: 3.5e10 at the third evaluation, 7.45e5 at the 180th; with this 8.2e8 and 7.07e5). On four pairs at 256 px
    it ended 2 to 16 % lower than the clamp's own gradient at 180 evaluations.
    """
    return ((decoded >= 0) & (decoded <= 1)) | ((decoded > 1) & (grad > 0)) | ((decoded < 0) & (grad < 0))


class FourierBasis:
    """An ``(N, C, H, W)`` image as the real and imaginary parts of its scaled orthonormal 2-D real FFT.

    ``decode(encode(image))`` is ``image`` up to float rounding. The scale is ``f**-exponent`` with ``f`` the
    radial frequency in cycles per pixel, floored at ``1 / max(H, W)`` (so the mean colour gets the largest
    coarse frequency's weight, not an infinite one), normalised to a mean of 1 over the coefficients.
    """

    def __init__(self, height: int, width: int, *, exponent: float = FOURIER_EXPONENT,
                 device: torch.device | str = "cpu") -> None:
        self.shape = (height, width)
        self.exponent = exponent
        fy = torch.fft.fftfreq(height, device=device, dtype=torch.float64)[:, None]
        fx = torch.fft.rfftfreq(width, device=device, dtype=torch.float64)[None, :]
        frequency = torch.sqrt(fx * fx + fy * fy).clamp(min=1.0 / max(height, width))
        scale = frequency ** -exponent
        self.scale = (scale / scale.mean()).to(torch.float32)  # (H, W // 2 + 1)

    @classmethod
    def like(cls, image: torch.Tensor, **kwargs: float) -> FourierBasis:
        return cls(image.shape[-2], image.shape[-1], device=image.device, **kwargs)

    def encode(self, image: torch.Tensor) -> torch.Tensor:
        """The coefficients of ``image``: a real tensor ``(N, C, H, W // 2 + 1, 2)``."""
        # float32 at least (a bf16 image is encoded in float32); float64 stays float64, for the tests' exact paths
        spectrum = torch.fft.rfft2(image.detach().to(torch.promote_types(image.dtype, torch.float32)), norm="ortho")
        spectrum = spectrum / self.scale
        return torch.view_as_real(spectrum).contiguous()

    def decode(self, coefficients: torch.Tensor) -> torch.Tensor:
        """The image of ``coefficients`` (differentiable), not clamped."""
        return torch.fft.irfft2(torch.view_as_complex(coefficients) * self.scale, s=self.shape, norm="ortho")


class PixelGuard(JumpGuard):
    """The jump guard over the pixels, once the basis is given up: it acts only after the loss has come below
    ``ARM_BELOW`` times the pixels' first (``armed``); before, every evaluation is left to LBFGS, whose lowest is
    still kept for a restart. ``start`` and ``lowest`` (the pixels' first and lowest losses so far) resume it."""

    def __init__(self, variable: torch.Tensor, start: float | None = None, lowest: float = float("inf")) -> None:
        super().__init__(variable)
        self.start, self.lowest = start, lowest

    @property
    def armed(self) -> bool:
        return self.start is not None and self.lowest < ARM_BELOW * self.start

    def observe(self, loss: float) -> None:
        if self.start is None:
            self.start = loss
        super().observe(loss)  # unarmed: no jump, but the step's lowest is kept for a later restart
        self.lowest = min(self.lowest, loss)


class BasisImage(JumpGuard):
    """The loop's bridge between the coefficients LBFGS moves and the image the model evaluates.

    ``show`` does what the tutorial's loop does to its pixels before each evaluation: it decodes the coefficients
    and clamps that image to [0, 1], writing it into the loop's image, a leaf the evaluation backpropagates into as
    on the pixel path. ``backward`` takes that image's gradient back to the coefficients through the decoding, where
    ``inward`` lets it through: inside the box, and outside it only where the descent step leads back in. The
    coefficients LBFGS holds are never changed behind its back: projecting them onto the box after each update made
    LBFGS's curvature pairs describe steps it had not taken. ``settle`` ends an
    optimiser step: the coefficients are re-encoded from the (unclamped) image they decode to, which is what a
    checkpoint keeps, so a resumed run continues from the very coefficients it stopped at.
    """

    def __init__(self, basis: FourierBasis, image: torch.Tensor) -> None:
        self.basis = basis
        self.coefficients = basis.encode(image).requires_grad_(True)
        self._decoded: torch.Tensor | None = None
        super().__init__(self.coefficients)

    def show(self, image: torch.Tensor) -> None:
        decoded = self.basis.decode(self.coefficients)
        with torch.no_grad():
            image.copy_(decoded.clamp(0, 1))  # the tutorial's clamp, on the decoded image
        self._decoded = decoded

    def backward(self, image: torch.Tensor) -> None:
        decoded, self._decoded = self._decoded, None
        if decoded is not None and image.grad is not None:
            # The gradient of sum(decoded * g) at decoded is g bit for bit; decoded.backward(g) would give the same,
            # but torch's check of an explicit gradient's shape imports torch.fx's symbolic shapes and with them
            # sympy, 0.5 s of a --fast run's start on a 2-core EPYC (5 s with a cold disk cache).
            (decoded * (image.grad * inward(decoded.detach(), image.grad))).sum().backward()

    def rebase(self, exponent: float, memory: MutableMapping[str, Any]) -> None:
        """Move to the basis of scale exponent ``exponent`` between two optimiser steps, the image unchanged.

        Coefficients in the new basis are the old ones times ``r = old scale / new scale``, each frequency's own, so
        LBFGS's memory (``memory``: torch's LBFGS state for the coefficients) goes across exactly: its steps and its
        direction scale by ``r`` like the coefficients, its gradients and their changes by ``1 / r``. Each pair's
        ``s·y`` is unchanged, and so its ``1 / s·y``; the scale of LBFGS's first matrix is worked out again from
        the newest pair, as LBFGS does when it stores one. The coefficients a step ends at are re-encoded by
        ``settle`` in the new basis, so call this before ``settle``.
        """
        new = FourierBasis(*self.basis.shape, exponent=exponent, device=self.coefficients.device)
        ratio = (self.basis.scale / new.scale)[:, :, None].expand(self.coefficients.shape[-3:])
        flat = ratio.expand(self.coefficients.shape).reshape(-1)
        self.basis = new
        with torch.no_grad():  # in place: LBFGS's memory is up to 100 pairs of image-sized vectors, held nowhere else
            self.coefficients.mul_(ratio)
            if "d" in memory:  # LBFGS has run an iteration: its direction and last gradient
                memory["d"].mul_(flat)
                memory["prev_flat_grad"].div_(flat)
            for y, s in zip(memory.get("old_dirs", ()), memory.get("old_stps", ())):  # its pairs: y and s
                y.div_(flat)
                s.mul_(flat)
            if memory.get("old_dirs"):
                y, s = memory["old_dirs"][-1], memory["old_stps"][-1]
                memory["H_diag"] = y.dot(s) / y.dot(y)
        pairs_changed(memory)  # a stacked LBFGS works its pairs' products out again

    def settle(self, image: torch.Tensor) -> None:
        with torch.no_grad():
            image.copy_(self.basis.decode(self.coefficients))
            self.coefficients.copy_(self.basis.encode(image))


class FourierImage(ImageBasis):
    """The optimiser moves the image's scaled Fourier coefficients (``BasisImage``), with the jump guard: a loss
    that jumped ends the step, LBFGS starts again from the step's best, damped, and after ``RESTARTS_IN_A_ROW``
    restarts the rest of the run moves the pixels, guarded once their loss has fallen (``PixelGuard``; there each
    jump damps further, with no limit: LBFGS on the pixels diverged late in a run, 1e3x its best). Its state (scale,
    damping, restarts, giving up, the pixels' first and lowest loss) goes into the optimiser's ``param_groups``, so a
    checkpoint's ``state_dict`` keeps it and a resumed run continues it."""

    def __init__(self, image: torch.Tensor, new_optimizer: NewOptimizer, state: dict[str, Any] | None, *,
                 base_lr: float, late_from: int | None) -> None:
        group = state["param_groups"][0] if state is not None and state.get("param_groups") else {}
        basis = FourierBasis.like(image, exponent=group.get("exponent", FOURIER_EXPONENT))  # older ones: the first
        self.moved: BasisImage | None = None if group.get("gave_up_basis") else BasisImage(basis, image)
        # Once the basis is given up, a guard over the pixels: LBFGS on them can diverge late as well.
        self.guard: JumpGuard = self.moved if self.moved is not None else PixelGuard(
            image, group.get("pixels_start"), group.get("pixels_lowest", 0.0))  # older ones: armed
        self.image, self.new_optimizer, self.base_lr = image, new_optimizer, base_lr
        self.late_from = late_from if self.moved is not None else None
        self.variable = image if self.moved is None else self.moved.coefficients
        self.optimizer = new_optimizer(self.variable, None)
        if state is not None:
            self.optimizer.load_state_dict(state)
            self.guard.resume(self.optimizer, base_lr)  # the damping and restarts as the checkpoint left them

    def start_step(self, evaluations: int) -> None:
        self.guard.begin_step()

    def before_evaluation(self, image: torch.Tensor) -> None:
        if self.moved is None:  # given up: the pixels, as the tutorial moves them
            with torch.no_grad():
                image.clamp_(0, 1)
        else:  # the coefficients' image, clamped, evaluated like the pixels
            self.moved.show(image)
            image.grad = None

    def after_backward(self, image: torch.Tensor) -> None:
        if self.moved is not None:
            self.moved.backward(image)

    def after_evaluation(self, loss: float) -> None:
        self.guard.observe(loss)  # a loss that jumped ends the step (Jumped): back to the step's best

    def run_step(self, step: Callable[[], None]) -> bool:
        moved, guard = self.moved, self.guard
        try:
            step()
        except Jumped:  # the step's best (coefficients or pixels), a fresh LBFGS from there, damped
            guard.restart()
            if moved is not None and moved.exhausted:  # damping did not help: the rest of the run moves the pixels
                moved.settle(self.image)  # from the best image
                with torch.no_grad():
                    self.image.clamp_(0, 1)
                self.moved, self.variable, self.guard = None, self.image, PixelGuard(self.image)
                self._fresh_optimizer(None)
            else:  # on the pixels no limit: each jump damps further, down to steps too small to jump
                self._fresh_optimizer(guard.damped(self.base_lr))
                guard.restarted(self.optimizer)
            return True
        guard.ended_clean(self.optimizer, self.base_lr)
        return False

    def _fresh_optimizer(self, lr: float | None) -> None:
        """A new LBFGS over what is moved now, at ``lr`` (None: the run's); once on the pixels its state says so."""
        self.optimizer = self.new_optimizer(self.variable, lr)
        if self.moved is None:
            self.optimizer.param_groups[0]["gave_up_basis"] = True  # kept by a checkpoint's state_dict

    def end_step(self, evaluations: int) -> None:
        moved = self.moved
        if moved is None:
            guard = self.guard
            assert isinstance(guard, PixelGuard)
            self.optimizer.param_groups[0].update(pixels_start=guard.start, pixels_lowest=guard.lowest)  # as above
            return
        # The image of the step's last update, and coefficients a checkpoint restores exactly; from late_from
        # evaluations on, the rest of the run in the flat scale.
        late = self.late_from is not None and evaluations >= self.late_from
        if late and moved.basis.exponent != LATE_EXPONENT:
            moved.rebase(LATE_EXPONENT, self.optimizer.state[self.variable])
        moved.settle(self.image)
        self.optimizer.param_groups[0]["exponent"] = moved.basis.exponent  # kept by a checkpoint's state_dict

    def hand_back(self, image: torch.Tensor) -> None:
        if self.moved is not None:
            image.copy_(self.moved.basis.decode(self.moved.coefficients))


@dataclass(frozen=True)
class Fourier:
    """The ``core.image.Basis`` of the scaled Fourier coefficients (``FourierImage``), ``FOURIER`` with the defaults:
    an LBFGS run goes to the flat scale after ``late_share`` of its planned evaluations."""

    name: str = "fourier"
    keep_within: float | None = KEEP_WITHIN
    late_share: float = LATE_SHARE

    def image(self, image: torch.Tensor, new_optimizer: NewOptimizer, state: dict[str, Any] | None, *,
              lr: float, optimizer_name: str, planned: int, stats: RunStats) -> ImageBasis:
        late_from = round(self.late_share * planned) if optimizer_name == "lbfgs" else None
        return FourierImage(image, new_optimizer, state, base_lr=lr, late_from=late_from)


FOURIER = Fourier()


def basis_named(name: str) -> Basis:
    """The basis ``StyleConfig.parametrization`` names: ``pixels`` (``core.image.PIXELS``) or ``fourier``."""
    bases: dict[str, Basis] = {"pixels": PIXELS, "fourier": FOURIER}
    if name not in bases:
        raise ValueError(f"parametrization must be one of {', '.join(PARAMETRIZATIONS)}, got {name!r}")
    return bases[name]


def basis_of(speed: Speed, unguarded: bool = False) -> Basis:
    """What the optimiser moves at ``speed`` (``speed.parametrization``: ``StyleConfig.parametrization``, else fourier
    with --fast and the pixels without); the pixels rescued where a step ends in a jump (``core.image.RESCUED``)
    unless ``unguarded`` (``StyleConfig.unguarded``) asks for the tutorial's loop as written."""
    basis = basis_named(speed.parametrization)
    return RESCUED if basis is PIXELS and not unguarded else basis
