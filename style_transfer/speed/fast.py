"""Opt-in fast paths: bf16 autocast, channels_last, a cheaper Gram backward, coarse-to-fine sizes.

Nothing here runs on the default path: ``StyleConfig()`` computes exactly what the tutorial
computes. Each option trades something, stated on its ``StyleConfig`` field and in the README.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..config import StyleConfig
from ..core.losses import ContentLoss, StyleLoss
from ..core.steps import LBFGS_MAX_ITER
from ..run.plans import fast_levers  # what --fast turns on, worked out without torch

TORCH_LBFGS_HISTORY = 100  # torch.optim.LBFGS's default history_size, the tutorial's


class _Gram(torch.autograd.Function):
    """``G = F Fᵀ / n`` in float32 for features ``F`` of shape ``(C, M)``, with a one-matmul backward.

    ``F`` is passed as ``(C, M)``, or as ``Fᵀ`` of shape ``(M, C)`` with ``rows_last=True``
    (the free view of a channels_last feature map); the gradient comes back in the same layout.

    Autograd's ``mm`` backward runs two matrix products (one per operand, ``dG F`` and
    ``(Fᵀ dG)ᵀ``) and adds them; ``dF = F (dG + dGᵀ) / n`` is the same gradient in one product.
    The Gram comes out in float32 whatever ``F``'s dtype (for a bf16 ``F`` see ``_gram_forward``);
    the backward runs in ``F``'s dtype, which is the dtype its gradient must have anyway.
    """

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, features: torch.Tensor,  # type: ignore[override]
                n: int, rows_last: bool) -> torch.Tensor:
        ctx.save_for_backward(features)
        ctx.n, ctx.rows_last = n, rows_last  # type: ignore[attr-defined]
        return _gram_forward(features, rows_last, n)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx,  # type: ignore[override]
                 grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (features,) = ctx.saved_tensors  # type: ignore[attr-defined]
        both = _symmetric_grad(grad, ctx.n, features.dtype)  # type: ignore[attr-defined]
        if ctx.rows_last:  # type: ignore[attr-defined]
            return torch.mm(features, both), None, None
        return torch.mm(both, features), None, None


BF16_GRAM_CHUNKS = 16  # at most this many pixel chunks in a bf16 Gram (see _gram_forward)
BF16_GRAM_CHUNK_ROWS = 1024  # and at least this many pixels per chunk: smaller chunks cost more than they save


def _gram_forward(features: torch.Tensor, rows_last: bool, n: int) -> torch.Tensor:
    """``F Fᵀ / n`` in float32 for ``F`` or, ``rows_last``, ``Fᵀ``.

    A float32 ``F`` runs one float32 product. A bf16 ``F`` runs bf16 products on the matrix
    units, which accumulate in float32 but round their result to bf16, so the pixels are split
    into up to ``BF16_GRAM_CHUNKS`` chunks whose Grams are added in float32: each entry is then
    within ``2⁻⁸ Σ_m |F_im F_jm| / n`` of the exact Gram of ``F`` (bf16 rounding of each chunk),
    and the independent roundings shrink the typical error with more chunks (about 4e-4 relative
    with 16, a sixth of what bf16 feature maps already put into the Gram). Widening ``F`` to
    float32 instead costs a copy of the feature map and a float32 product, 3 to 12x the time.
    """
    if features.dtype != torch.bfloat16:
        wide = features.float()
        return (torch.mm(wide.t(), wide) if rows_last else torch.mm(wide, wide.t())).div(n)
    pixels = features if rows_last else features.t()  # (pixels, channels); a free view either way
    rows = pixels.size(0)
    chunks = max(1, min(BF16_GRAM_CHUNKS, rows // BF16_GRAM_CHUNK_ROWS))
    whole = rows - rows % chunks
    batched = pixels[:whole].view(chunks, whole // chunks, pixels.size(1))
    gram = torch.bmm(batched.transpose(1, 2), batched).float().sum(0)
    if whole < rows:  # the last rows % chunks pixels (fewer than 16)
        rest = pixels[whole:]
        gram += torch.mm(rest.t(), rest).float()
    return gram.div_(n)


def _symmetric_grad(grad_gram: torch.Tensor, n: int, dtype: torch.dtype) -> torch.Tensor:
    """``(dG + dGᵀ) / n`` in ``dtype``: what multiplies ``F`` in the Gram's backward."""
    grad_gram = grad_gram.div(n)
    return (grad_gram + grad_gram.t()).to(dtype)


class _ReluGram(torch.autograd.Function):
    """``(relu(x), G)`` for a feature map ``x`` that feeds both a style loss and the next ReLU.

    Autograd would compute the ReLU's input gradient and the Gram's separately and then add them
    (one more pass over a full-size feature map); here the Gram's part is added inside the matrix
    product itself (``addmm_``), into the ReLU's gradient. The same gradient up to rounding.
    """

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor,  # type: ignore[override]
                n: int) -> tuple[torch.Tensor, torch.Tensor]:
        out = torch.relu(x)
        features, rows_last = _feature_matrix(x)
        ctx.save_for_backward(x, out)
        ctx.n = n  # type: ignore[attr-defined]
        return out, _gram_forward(features, rows_last, n)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx,  # type: ignore[override]
                 grad_out: torch.Tensor, grad_gram: torch.Tensor) -> tuple[torch.Tensor, None]:
        x, out = ctx.saved_tensors  # type: ignore[attr-defined]
        features, rows_last = _feature_matrix(x)
        both = _symmetric_grad(grad_gram, ctx.n, x.dtype)  # type: ignore[attr-defined]
        grad = torch.ops.aten.threshold_backward(grad_out, out, 0)  # the ReLU's own backward
        view, view_rows_last = _feature_matrix(grad)
        if view_rows_last != rows_last or view.data_ptr() != grad.data_ptr():  # another layout: no shared view
            grad = grad.contiguous(memory_format=torch.channels_last if rows_last else torch.contiguous_format)
            view, _ = _feature_matrix(grad)
        if rows_last:
            view.addmm_(features, both)
        else:
            view.addmm_(both, features)
        return grad, None


def _feature_matrix(x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """A feature map ``(1, C, H, W)`` as a matrix view: ``(H*W, C)`` when channels_last (``True``), else ``(C, H*W)``."""
    a, b, c, d = x.size()
    if a == 1 and x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous():
        return x.permute(0, 2, 3, 1).reshape(c * d, b), True
    return x.reshape(a * b, c * d), False


def fused_gram_matrix(input: torch.Tensor) -> torch.Tensor:
    """The tutorial's normalised Gram matrix, in float32, with a one-matmul backward.

    Equals ``losses.gram_matrix(input.float())`` up to float32 rounding for a float32 ``input``
    (the product runs on the transposed layout, which is a free view of a channels_last tensor),
    and within the bound of ``_gram_forward`` for a bf16 one.

    Args:
        input: feature maps ``(a, b, c, d)``, float32 or bfloat16, NCHW or channels_last.

    Returns:
        ``(a*b, a*b)`` float32 tensor ``F Fᵀ / (a*b*c*d)``.
    """
    features, rows_last = _feature_matrix(input)  # a view: no copy of the feature maps
    return _Gram.apply(features, input.numel(), rows_last)


class FusedStyleLoss(StyleLoss):
    """``StyleLoss`` with the Gram matrix of ``fused_gram_matrix``: same loss, cheaper backward."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        self.score(fused_gram_matrix(input))
        return input

    def score(self, gram: torch.Tensor) -> None:
        """Store the loss of a Gram matrix computed elsewhere (``FastStyleModel``'s ReLU + Gram step)."""
        self.loss = F.mse_loss(gram, self.target)


class FastContentLoss(ContentLoss):
    """``ContentLoss`` in float32 on a feature map of any dtype and layout; same loss.

    On channels_last maps the mean runs over ``(N, H, W, C)`` views (a free permutation):
    ``mse_loss``'s backward on channels_last tensors is several times slower on the CPU.
    """

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        x, target = input.float(), self.target
        if x.is_contiguous(memory_format=torch.channels_last) and x.dim() == 4:
            target = target.contiguous(memory_format=torch.channels_last)  # a no-op once accelerate() ran
            x, target = x.permute(0, 2, 3, 1), target.permute(0, 2, 3, 1)
        self.loss = F.mse_loss(x, target)
        return input


@dataclass(frozen=True)
class Speed:
    """The speed settings of a run, resolved from a ``StyleConfig`` (see its fields)."""

    precision: str = "fp32"
    channels_last: bool = False
    fused_gram: bool = False
    history_size: int = TORCH_LBFGS_HISTORY

    @property
    def changes_model(self) -> bool:
        """Whether ``accelerate`` has anything to do (the history size is the optimiser's)."""
        return self.precision != "fp32" or self.channels_last or self.fused_gram


def speed_from_config(config: StyleConfig, device: torch.device) -> Speed:
    """Resolve the speed fields of ``config`` for ``device`` (``fast`` turns on the fast set).

    Raises:
        ValueError: bf16 asked for explicitly where the device cannot run it fast.
    """
    precision = config.precision
    if precision == "bf16":
        check_bf16(device)
    if config.fast and precision == "fp32" and bf16_pays_off(device):
        precision = "bf16"
    return Speed(precision, **fast_levers(config))  # type: ignore[arg-type]


def bf16_pays_off(device: torch.device) -> bool:
    """Whether --fast runs bf16 on ``device``: a GPU with native bf16, or a CPU with AMX (bf16 matrix units).

    On the real VGG16 (Sapphire Rapids, 256 px, benchmarks/levers_real.py) bf16 took --fast's levers from 0.74 to
    0.42 of the default's CPU time at 1.5 % more loss after 100 evaluations (docs/speed.md); AVX512-BF16 without
    AMX is not measured.
    """
    if device.type == "cpu":
        return "amx_bf16" in (_cpu_flags() or set()) and bf16_supported(device)
    return device.type == "cuda" and bf16_supported(device)


def bf16_supported(device: torch.device) -> bool:
    """Whether ``device`` runs bfloat16 convolutions natively (CPU: AVX512-BF16 or AMX; CUDA: Ampere+)."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    if device.type == "cpu":
        check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
        if not (torch.backends.mkldnn.is_available() and check is not None and check()):
            return False
        # oneDNN also says yes on AVX-512 CPUs without bf16 instructions (it converts, slower than
        # fp32), so on x86 Linux ask the CPU itself and honour a cap set by ONEDNN_MAX_CPU_ISA.
        flags = _cpu_flags()
        if flags is None:  # not x86 Linux: oneDNN's answer stands
            return True
        cap = os.environ.get("ONEDNN_MAX_CPU_ISA")
        return bool(flags & {"avx512_bf16", "amx_bf16"}) and _onednn_cap_allows_bf16(cap)
    return False  # MPS: autocast to bf16 is not tested here


def _cpu_flags(path: str = "/proc/cpuinfo") -> set[str] | None:
    """The first CPU's flags on x86 Linux, or None where there are none to read."""
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return set(value.split())
    except OSError:
        pass
    return None


def _onednn_cap_allows_bf16(cap: str | None) -> bool:
    """Whether oneDNN may use bf16 instructions under ``ONEDNN_MAX_CPU_ISA=cap`` (unset or ALL: yes)."""
    if not cap or cap.strip().upper() in ("ALL", "DEFAULT"):
        return True
    cap = cap.strip().upper()
    return "BF16" in cap or "AMX" in cap or cap.startswith("AVX10")  # AVX10 and AVX512_CORE_FP16 include bf16


def check_bf16(device: torch.device) -> None:
    """Raise ``ValueError`` when ``device`` cannot run the bf16 path natively."""
    if not bf16_supported(device):
        what = {"cpu": "this CPU has no native bfloat16 (AVX512-BF16/AMX) through oneDNN",
                "cuda": "this GPU has no native bfloat16 (needs compute capability 8.0+)"}.get(
                    device.type, f"bf16 autocast is not supported on {device.type}")
        raise ValueError(f"precision 'bf16' is not available: {what}; use --precision fp32")


BF16_EXACT_START = LBFGS_MAX_ITER  # evaluations a bf16 model runs in float32 first: LBFGS's first step


class FastStyleModel(nn.Module):
    """Runs a style model's layers in bf16 and/or channels_last; its loss modules stay float32.

    The loss modules see float32 feature maps outside autocast, so losses, targets and the
    image gradient's dtype are float32; only the VGG layers' arithmetic is in bfloat16.

    A bf16 model runs its first ``exact_left`` evaluations (``BF16_EXACT_START``, LBFGS's first
    step) in float32, with the caller's float32 convolution weights. That step builds LBFGS's
    curvature history from nothing while the image moves the most: its first pair is the gradient
    difference across a step of ``lr / Σ|g|``, far below what bf16 feature maps resolve, and
    bf16's rounding in the pairs after it steered whole runs off the default's path (two
    evaluations in float32 mended the first, a whole step the rest; README, Speed).
    """

    def __init__(self, body: nn.Sequential, speed: Speed, device_type: str,
                 exact_weights: dict[int, tuple[torch.Tensor, torch.Tensor | None]] | None = None) -> None:
        super().__init__()
        self.body = body
        self.speed = speed
        self.device_type = device_type
        # Body index -> the float32 (weight, bias) of a bf16 convolution: detached views of the caller's.
        self.exact_weights = exact_weights or {}
        self.exact_left = BF16_EXACT_START if speed.precision == "bf16" else 0
        modules = list(body)
        # A fused style loss right before a ReLU runs with it as one step (_ReluGram): ReLU index -> loss.
        self._relu_gram = {i + 1: m for i, m in enumerate(modules[:-1])
                           if type(m) is FusedStyleLoss and isinstance(modules[i + 1], nn.ReLU)}
        self._deferred = {i - 1 for i in self._relu_gram}  # those style losses' own indices

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        x = img.contiguous(memory_format=torch.channels_last) if self.speed.channels_last else img
        exact = self.exact_left > 0
        if exact:
            self.exact_left -= 1
        bf16 = self.speed.precision == "bf16" and not exact
        with torch.autocast(self.device_type, dtype=torch.bfloat16, enabled=bf16):
            for i, module in enumerate(self.body):
                if i in self._relu_gram:  # this ReLU and the style loss before it, in one step
                    with torch.autocast(self.device_type, enabled=False):
                        x, gram = _ReluGram.apply(x, x.numel())
                        self._relu_gram[i].score(gram)
                elif i in self._deferred:
                    continue  # scored by the ReLU step that follows
                elif isinstance(module, (FusedStyleLoss, FastContentLoss)):
                    with torch.autocast(self.device_type, enabled=False):
                        module(x)  # widens to float32 itself
                elif hasattr(module, "loss"):  # any other loss module: float32, outside autocast
                    with torch.autocast(self.device_type, enabled=False):
                        module(x.float())
                elif exact and i in self.exact_weights:
                    x = module._conv_forward(x, *self.exact_weights[i])  # this conv, in float32
                else:
                    x = module(x)
        return x


def accelerate(model: nn.Sequential, style_losses: Sequence[StyleLoss], content_losses: Sequence[ContentLoss],
               speed: Speed) -> tuple[nn.Module, list[StyleLoss], list[ContentLoss]]:
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


def _recast(module: nn.Module, cls: type) -> nn.Module:
    """A shallow copy of a loss module as ``cls``, sharing its target tensors."""
    new = cls.__new__(cls)
    new.__dict__.update(module.__dict__)
    new._buffers = dict(module._buffers)  # its own buffer dict: a new target leaves the old module alone
    return new


def physical_cores() -> int:
    """Physical CPU cores available to this process (hyper-threads not counted)."""
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return available
    cores = set()
    physical = core = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "physical id":
            physical = value.strip()
        elif key == "core id":
            core = value.strip()
        elif not line.strip():
            if core is not None:
                cores.add((physical, core))
            physical = core = None
    if core is not None:
        cores.add((physical, core))
    return max(1, min(available, len(cores))) if cores else available
