"""Opt-in fast paths: the style model with bf16 autocast, channels_last and the fused Gram (``accelerate``).

Nothing here runs on the default path: ``StyleConfig()`` computes exactly what the tutorial
computes. Each option trades something, stated on its ``StyleConfig`` field and in docs/speed.md. The Gram
kernels are ``fast.kernels``, what the device can do ``fast.hardware``, what --fast turns on ``fast.speed``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import TypeVar, cast

import torch
from torch import nn
from torch.nn.modules.utils import _pair

from ..config.style import StyleConfig
from ..core.hooks import HookedModel
from ..losses.tutorial import ContentLoss, StyleLoss
from ..core.steps import LBFGS_MAX_ITER
from .hardware import check_bf16, device_bf16
from .kernels import FastContentLoss, FusedStyleLoss, Pool, _ReluGram
from .speed import Speed, resolve_speed


def speed_from_config(config: StyleConfig, device: torch.device) -> Speed:
    """The ``Speed`` of ``config`` on ``device`` (``speed.resolve_speed``, with what the device can do in bf16).

    Raises:
        ValueError: bf16 asked for explicitly where the device cannot run it fast.
    """
    if config.precision == "bf16":
        check_bf16(device)
    return resolve_speed(config, device.type, device_bf16(device))


BF16_EXACT_START = LBFGS_MAX_ITER  # evaluations a bf16 model runs in float32 first: LBFGS's first step
# In the Fourier basis (--fast): 4 evaluations in float32 first, and the run's last evaluations in float32 again
# (FastStyleModel.switches_arithmetic), so the picture ends at the float32 loss's minimum, not bf16's
# (benchmarks/NOTEBOOK.md, 2026-12-03 "A float32 finish" and "(late)").
BF16_EXACT_START_FOURIER = 4
# The finish is the last BF16_FINISH_EVALUATIONS of the last LBFGS step, run as an LBFGS step of their own after the
# step's first 10 in bf16 (transfer.optimize): 0.3 % more loss than a whole float32 step for about 4 % less time.
BF16_FINISH_EVALUATIONS = 10


class FastStyleModel(HookedModel):
    """Runs a style model's layers in bf16 and/or channels_last; its loss modules stay float32.

    The loss modules see float32 feature maps outside autocast, so losses, targets and the
    image gradient's dtype are float32; only the VGG layers' arithmetic is in bfloat16.

    A bf16 model runs its first ``exact_until`` evaluations (``BF16_EXACT_START``, LBFGS's first
    step) in float32, with the caller's float32 convolution weights. That step builds LBFGS's
    curvature history from nothing while the image moves the most: its first pair is the gradient
    difference across a step of ``lr / Σ|g|``, far below what bf16 feature maps resolve, and
    bf16's rounding in the pairs after it steered whole runs off the default's path (two
    evaluations in float32 mended the first, a whole step the rest; README, Speed). In the Fourier
    basis the start is ``BF16_EXACT_START_FOURIER`` evaluations, and the run's last
    ``finish_evaluations`` (``BF16_FINISH_EVALUATIONS``) run in float32 too, as an LBFGS step of their own
    (the float32 finish); its ``StepHooks`` (core/hooks.py) tell the loop so. ``done`` counts the evaluations run (a
    resumed run's included); the float32 start is the first ``exact_until`` of them.
    """

    def __init__(self, body: nn.Sequential, speed: Speed, device_type: str,
                 exact_weights: dict[int, tuple[torch.Tensor, torch.Tensor | None]] | None = None) -> None:
        super().__init__()
        self.body = body
        self.speed = speed
        self.device_type = device_type
        # Body index -> the float32 (weight, bias) of a bf16 convolution: detached views of the caller's.
        self.exact_weights = exact_weights or {}
        fourier = speed.parametrization == "fourier"
        bf16 = speed.precision == "bf16"
        self.exact_until = (BF16_EXACT_START_FOURIER if fourier else BF16_EXACT_START) if bf16 else 0
        self.finishes = bf16 and fourier  # the run's last evaluations in float32 (switches_arithmetic)
        self.finishing = False
        self.done = 0
        modules = list(body)
        # A fused style loss right before a ReLU runs with it as one step (_ReluGram): ReLU index -> loss.
        self._relu_gram = {i + 1: m for i, m in enumerate(modules[:-1])
                           if type(m) is FusedStyleLoss and isinstance(modules[i + 1], nn.ReLU)}
        self._deferred = {i - 1 for i in self._relu_gram}  # those style losses' own indices
        # A max-pool right after such a ReLU runs in the same step, before the ReLU (_ReluGram): ReLU index -> pool.
        self._pools = {i: _pool_arguments(pool) for i in self._relu_gram
                       if i + 1 < len(modules) and type(pool := modules[i + 1]) is nn.MaxPool2d}
        self._deferred |= {i + 1 for i in self._pools}

    def finish_evaluations(self) -> int:
        """The float32 finish's evaluations (0: none): ``optimize`` runs the run's last LBFGS step as two, the
        second of this many."""
        return BF16_FINISH_EVALUATIONS if self.finishes else 0

    @property
    def exact_left(self) -> int:
        """Evaluations of the float32 start still to run (setting it moves the start's end)."""
        return max(0, self.exact_until - self.done)

    @exact_left.setter
    def exact_left(self, left: int) -> None:
        self.exact_until = self.done + left

    def switches_arithmetic(self, last: bool) -> bool:
        """Called before each optimiser step (``transfer.optimize``), ``last`` when it is the run's last one: a bf16 run
        in the Fourier basis runs its last step in float32 (the float32 finish; ``optimize`` makes that step the
        last ``finish_evaluations`` of the planned ones).

        Returns:
            whether this step's first evaluation runs in another arithmetic than the evaluation before it, so the
            optimiser must not pair their gradients: LBFGS's pair across the switch to the finish had the gradients'
            change between bf16 and float32 in it, and late in a run that is larger than the change a step makes
            (the jump guard restarted on two of four pairs at 256 px two evaluations into the finish, docs/speed.md).
        """
        before = self._exact(self.done - 1)  # the evaluation before this step (a resumed run's: not in a finish)
        self.finishing = self.finishes and last
        return self.done > 0 and self._exact(self.done) != before

    def _exact(self, evaluation: int) -> bool:
        """Whether the run's evaluation ``evaluation`` (from 0) runs in float32, with the finish as this step has it."""
        return evaluation < self.exact_until or self.finishing

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        x = img.contiguous(memory_format=torch.channels_last) if self.speed.channels_last else img
        exact = self._exact(self.done)
        self.done += 1
        bf16 = self.speed.precision == "bf16" and not exact
        with torch.autocast(self.device_type, dtype=torch.bfloat16, enabled=bf16):
            for i, module in enumerate(self.body):
                if i in self._relu_gram:  # this ReLU and the style loss before it, in one step
                    with torch.autocast(self.device_type, enabled=False):
                        x, gram = _ReluGram.apply(x, x.numel(), self._pools.get(i))
                        self._relu_gram[i].score(gram)
                elif i in self._deferred:
                    continue  # scored by the ReLU step that follows, or pooled by the one before
                elif isinstance(module, (FusedStyleLoss, FastContentLoss)):
                    with torch.autocast(self.device_type, enabled=False):
                        module(x)  # widens to float32 itself
                elif hasattr(module, "loss"):  # any other loss module: float32, outside autocast
                    with torch.autocast(self.device_type, enabled=False):
                        module(x.float())
                elif exact and i in self.exact_weights:
                    # exact_weights holds convolutions' indices only (accelerate).
                    x = cast(nn.Conv2d, module)._conv_forward(x, *self.exact_weights[i])  # this conv, in float32
                else:
                    x = module(x)
        return x


def _pool_arguments(pool: nn.MaxPool2d) -> Pool:
    """A max-pool's kernel, stride, padding, dilation and ceil mode as ``aten.max_pool2d_with_indices`` takes them."""
    kernel, stride, padding, dilation = (list(_pair(v)) for v in (pool.kernel_size, pool.stride or pool.kernel_size,
                                                                   pool.padding, pool.dilation))
    return kernel, stride, padding, dilation, pool.ceil_mode


def accelerator(speed: Speed) -> Callable[..., tuple[nn.Module, list[StyleLoss], list[ContentLoss]]] | None:
    """``run_style_transfer``'s ``TransferSettings.accelerate`` for ``speed``: None where it changes nothing.

    The function takes the style model, its loss modules and the evaluations a resumed run has done (a bf16
    model's float32 start, ``BF16_EXACT_START``, counts them: a resumed run continues its count).
    """
    if not speed.changes_model:
        return None

    def fast_form(model: nn.Sequential, style_losses: Sequence[StyleLoss], content_losses: Sequence[ContentLoss],
                  evaluations: int = 0) -> tuple[nn.Module, list[StyleLoss], list[ContentLoss]]:
        fast, new_style, new_content = accelerate(model, style_losses, content_losses, speed)
        fast.done = evaluations  # a resumed run's float32 start counts from where it stopped
        return fast, new_style, new_content

    return fast_form


def accelerate(model: nn.Sequential, style_losses: Sequence[StyleLoss], content_losses: Sequence[ContentLoss],
               speed: Speed) -> tuple[FastStyleModel, list[StyleLoss], list[ContentLoss]]:
    """Turn a model from ``get_style_model_and_losses`` into its fast form.

    Convolutions are copied before their layout changes (the caller's ``cnn`` is never changed);
    loss modules become ``FusedStyleLoss`` / ``FastContentLoss`` sharing the same targets.

    Returns:
        ``(model, style_losses, content_losses)`` to hand to ``transfer.optimize``.

    Raises:
        ValueError: bf16 on a device without native bf16.
    """
    device = next((b.device for b in model.buffers()), torch.device("cpu"))
    if speed.precision == "bf16":
        check_bf16(device)
    body = nn.Sequential()
    new_style: list[StyleLoss] = []
    new_content: list[ContentLoss] = []
    exact_weights: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = {}
    for name, module in model.named_children():
        # Only the tutorial's own loss classes are swapped; other loss modules (weighted, paper
        # form, total variation) run as they are, in float32 (see FastStyleModel).
        if isinstance(module, StyleLoss):
            if speed.fused_gram and type(module) is StyleLoss:
                module = _recast(module, FusedStyleLoss)
            new_style.append(module)
        elif isinstance(module, ContentLoss):
            if type(module) is ContentLoss:
                module = _recast(module, FastContentLoss)
                if speed.channels_last:
                    # The target in the features' layout: a mixed-layout mse_loss is several times slower.
                    module.target = module.target.contiguous(memory_format=torch.channels_last)
            new_content.append(module)
        elif isinstance(module, nn.Conv2d) and (speed.channels_last or speed.precision == "bf16"):
            original, module = module, copy.deepcopy(module)
            if speed.channels_last:
                module = module.to(memory_format=torch.channels_last)
            if speed.precision == "bf16":
                # Cast once: autocast would cast the float32 weights at every forward (and oneDNN
                # would reorder the fresh copy each time); the arithmetic is the same.
                exact_weights[len(body)] = (original.weight.detach(),  # shares the caller's storage
                                            None if original.bias is None else original.bias.detach())
                module = module.to(torch.bfloat16)
        body.add_module(name, module)
    return FastStyleModel(body, speed, device.type, exact_weights), new_style, new_content


_Loss = TypeVar("_Loss", bound=nn.Module)


def _recast(module: nn.Module, cls: type[_Loss]) -> _Loss:
    """A shallow copy of a loss module as ``cls``, sharing its target tensors."""
    new = cls.__new__(cls)
    new.__dict__.update(module.__dict__)
    new._buffers = dict(module._buffers)  # its own buffer dict: a new target leaves the old module alone
    return new
