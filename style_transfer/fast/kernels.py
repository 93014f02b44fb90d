"""The Gram matrix's cheaper backward (``--fused-gram``): one matmul added into the next ReLU's gradient, and a
bf16 Gram over chunks of pixels added in float32; the loss modules that use it (``fast.fast.accelerate``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..losses.tutorial import ContentLoss, StyleLoss


Pool = tuple[list[int], list[int], list[int], list[int], bool]  # kernel, stride, padding, dilation, ceil mode


class _Gram(torch.autograd.Function):
    """``G = F Fᵀ / n`` in float32 for features ``F`` of shape ``(C, M)``, with a one-matmul backward.

    ``F`` is passed as ``(C, M)``, or as ``Fᵀ`` of shape ``(M, C)`` with ``rows_last=True``
    (the free view of a channels_last feature map); the gradient comes back in the same layout.

    Autograd's ``mm`` backward runs two matrix products (one per operand, ``dG F`` and
    ``(Fᵀ dG)ᵀ``) and adds them; ``dF = F (dG + dGᵀ) / n`` is the same gradient in one product.
    The Gram comes out in float32 whatever ``F``'s dtype (for a bf16 ``F`` see ``_gram_forward``);
    the backward runs in ``F``'s dtype, which is the dtype its gradient must have anyway.
    """

    # ctx carries n and rows_last to backward, and saved_tensors: names FunctionCtx does not declare.
    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, features: torch.Tensor,
                n: int, rows_last: bool) -> torch.Tensor:
        ctx.save_for_backward(features)
        ctx.n, ctx.rows_last = n, rows_last  # type: ignore[attr-defined]
        return _gram_forward(features, rows_last, n)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx,
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
    """``(relu(x), G)`` for a feature map ``x`` that feeds both a style loss and the next ReLU, or with ``pool`` (a
    max-pool's kernel, stride, padding, dilation and ceil mode) ``(relu(maxpool(x)), G)``.

    Autograd would compute the ReLU's input gradient and the Gram's separately and then add them
    (one more pass over a full-size feature map); here the Gram's part is added inside the matrix
    product itself (``addmm_``), into the ReLU's gradient. The same gradient up to rounding.

    ReLU and a max-pool commute (the max of a window is positive exactly where its ReLU's is, at the same place), so
    with ``pool`` the ReLU runs on the pooled map, a quarter of the size, forward and backward: the same values and
    gradient bit for bit, two passes over the full-size map fewer each way.
    """

    # ctx carries n and pool to backward, and saved_tensors: names FunctionCtx does not declare.
    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor, n: int,
                pool: Pool | None = None,
                ) -> tuple[torch.Tensor, torch.Tensor]:
        features, rows_last = _feature_matrix(x)
        saved: tuple[torch.Tensor, ...] = ()
        if pool is None:
            out = torch.relu(x)
        else:
            pooled, indices = _max_pool(x, pool, _pool_bands(x, pool))
            out, saved = torch.relu_(pooled), (indices,)
        ctx.save_for_backward(x, out, *saved)
        ctx.n, ctx.pool = n, pool  # type: ignore[attr-defined]
        return out, _gram_forward(features, rows_last, n)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx,
                 grad_out: torch.Tensor, grad_gram: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        x, out, *indices = ctx.saved_tensors  # type: ignore[attr-defined]
        features, rows_last = _feature_matrix(x)
        both = _symmetric_grad(grad_gram, ctx.n, x.dtype)  # type: ignore[attr-defined]
        grad = torch.ops.aten.threshold_backward(grad_out, out, 0)  # the ReLU's own backward
        if indices:  # then the pool's, to the full-size map
            grad = _max_pool_backward(grad, x, ctx.pool, indices[0])  # type: ignore[attr-defined]
        view, view_rows_last = _feature_matrix(grad)
        if view_rows_last != rows_last or view.data_ptr() != grad.data_ptr():  # another layout: no shared view
            grad = grad.contiguous(memory_format=torch.channels_last if rows_last else torch.contiguous_format)
            view, _ = _feature_matrix(grad)
        if rows_last:
            view.addmm_(features, both)
        else:
            view.addmm_(both, features)
        return grad, None, None


def _pool_bands(x: torch.Tensor, pool: Pool, threads: int | None = None) -> int:
    """How many bands of rows a max-pool of ``x`` runs as, each band a batch entry of one view: ATen's channels_last
    max-pool backward on the CPU shares out its work by batch entry, so one image ran on one thread. The smallest count
    from ``threads`` (torch's) to 4x that divides the pooled rows; 1 (the plain call) where windows overlap, pad,
    dilate or end past the map, or ``x`` is not one channels_last image on the CPU. The values and gradient are the
    same bit for bit: each input pixel is in one window, and each window is whole in one band."""
    kernel, stride, padding, dilation, ceil_mode = pool
    threads = torch.get_num_threads() if threads is None else threads
    if (threads < 2 or x.device.type != "cpu" or x.size(0) != 1 or kernel != stride or any(padding)
            or any(d != 1 for d in dilation) or (ceil_mode and x.size(2) % stride[0]) or not _feature_matrix(x)[1]):
        return 1
    rows = x.size(2) // stride[0]
    return next((bands for bands in range(threads, min(4 * threads, rows) + 1) if rows % bands == 0), 1)


def _as_bands(x: torch.Tensor, bands: int, rows: int) -> torch.Tensor:
    """The first ``rows`` rows of a channels_last ``(1, C, H, W)`` map as ``(bands, C, rows // bands, W)``: a view
    where ``x`` is channels_last (a copy otherwise)."""
    _, channels, _, width = x.size()
    return x.permute(0, 2, 3, 1)[:, :rows].reshape(bands, rows // bands, width, channels).permute(0, 3, 1, 2)


def _max_pool(x: torch.Tensor, pool: Pool, bands: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``aten.max_pool2d_with_indices(x, *pool)`` run as ``bands`` bands of rows (``_pool_bands``); the indices are
    the bands' own, for ``_max_pool_backward``."""
    if bands == 1:
        return torch.ops.aten.max_pool2d_with_indices(x, *pool)
    rows = x.size(2) // pool[1][0] * pool[1][0]  # the rows the windows read
    pooled, indices = torch.ops.aten.max_pool2d_with_indices(_as_bands(x, bands, rows), *pool)
    _, channels, band_rows, width = pooled.size()
    whole = pooled.permute(0, 2, 3, 1).reshape(1, bands * band_rows, width, channels).permute(0, 3, 1, 2)
    return whole, indices


def _max_pool_backward(grad: torch.Tensor, x: torch.Tensor, pool: Pool, indices: torch.Tensor) -> torch.Tensor:
    """The gradient to ``x`` of ``_max_pool`` whose ``indices`` these are (their batch is its bands) from ``grad``,
    the pooled map's."""
    bands = indices.size(0)
    if bands == x.size(0):  # not in bands
        return torch.ops.aten.max_pool2d_with_indices_backward(grad, x, *pool, indices)
    rows = x.size(2) // pool[1][0] * pool[1][0]
    grad_x = torch.empty_like(x)  # x's layout: channels_last
    grad_x[:, :, rows:].zero_()  # the rows no window reads (the bands' backward zeroes its own)
    torch.ops.aten.max_pool2d_with_indices_backward.grad_input(
        _as_bands(grad, bands, grad.size(2)), _as_bands(x, bands, rows), *pool, indices,
        grad_input=_as_bands(grad_x, bands, rows))
    return grad_x


def _feature_matrix(x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """A feature map ``(1, C, H, W)`` as a matrix view: ``(H*W, C)`` if channels_last (``True``), else ``(C, H*W)``."""
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
