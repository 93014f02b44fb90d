"""gram_matrix, ContentLoss and StyleLoss against hand-computed values."""

from __future__ import annotations

import pytest
import torch

from style_transfer import ContentLoss, StyleLoss, gram_matrix


class TestGramMatrix:
    def test_hand_computed(self) -> None:
        # Two 2x2 feature maps: F = [[1, 2, 3, 4], [0, 1, 0, -1]]; F F^T = [[30, -2], [-2, 2]];
        # divided by a*b*c*d = 1*2*2*2 = 8.
        x = torch.tensor([[[[1.0, 2.0], [3.0, 4.0]], [[0.0, 1.0], [0.0, -1.0]]]])
        expected = torch.tensor([[30.0, -2.0], [-2.0, 2.0]]) / 8
        torch.testing.assert_close(gram_matrix(x), expected, rtol=0, atol=1e-7)

    def test_symmetric_and_shape(self) -> None:
        x = torch.randn(1, 5, 3, 4, generator=torch.Generator().manual_seed(1))
        g = gram_matrix(x)
        assert g.shape == (5, 5)
        torch.testing.assert_close(g, g.t())

    def test_channels_last_input(self) -> None:
        x = torch.randn(1, 4, 3, 5, generator=torch.Generator().manual_seed(2))
        torch.testing.assert_close(gram_matrix(x.to(memory_format=torch.channels_last)), gram_matrix(x))


class TestContentLoss:
    def test_value_and_transparency(self) -> None:
        target = torch.zeros(1, 1, 2, 2)
        module = ContentLoss(target)
        x = torch.tensor([[[[1.0, -1.0], [2.0, 0.0]]]])
        assert module(x) is x
        # mean of squared differences: (1 + 1 + 4 + 0) / 4
        assert module.loss.item() == pytest.approx(1.5, abs=1e-7)

    def test_target_is_detached_buffer(self) -> None:
        target = torch.ones(1, 2, 2, 2, requires_grad=True)
        module = ContentLoss(target)
        assert "target" in dict(module.named_buffers())
        assert not module.target.requires_grad
        moved = module.to(torch.float64)  # buffers follow .to(); a device move works the same way
        assert moved.target.dtype == torch.float64

    def test_gradcheck(self) -> None:
        target = torch.randn(1, 2, 3, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
        module = ContentLoss(target)
        x = torch.randn(1, 2, 3, 3, dtype=torch.float64, requires_grad=True)

        def f(inp: torch.Tensor) -> torch.Tensor:
            module(inp)
            return module.loss

        assert torch.autograd.gradcheck(f, (x,))


class TestStyleLoss:
    def test_value_against_plain_computation(self) -> None:
        gen = torch.Generator().manual_seed(4)
        style = torch.randn(1, 3, 4, 4, generator=gen)
        x = torch.randn(1, 3, 5, 2, generator=gen)  # another spatial size than the style: allowed
        module = StyleLoss(style)
        assert module(x) is x

        def gram(t: torch.Tensor) -> torch.Tensor:  # written out element by element
            f = t[0].reshape(t.shape[1], -1)
            n = t.numel()
            return torch.tensor([[float((f[i] * f[j]).sum()) / n for j in range(f.shape[0])]
                                 for i in range(f.shape[0])])

        expected = ((gram(x) - gram(style)) ** 2).mean()
        assert module.loss.item() == pytest.approx(expected.item(), rel=1e-5)

    def test_zero_on_own_target(self) -> None:
        style = torch.rand(1, 3, 4, 4)
        module = StyleLoss(style)
        module(style.clone())
        assert module.loss.item() == 0.0

    def test_target_is_buffer(self) -> None:
        module = StyleLoss(torch.rand(1, 3, 4, 4))
        assert dict(module.named_buffers())["target"].shape == (3, 3)
        assert module.to(torch.float64).target.dtype == torch.float64

    def test_gradcheck(self) -> None:
        gen = torch.Generator().manual_seed(5)
        module = StyleLoss(torch.randn(1, 2, 3, 3, dtype=torch.float64, generator=gen))
        x = torch.randn(1, 2, 3, 3, dtype=torch.float64, generator=gen, requires_grad=True)

        def f(inp: torch.Tensor) -> torch.Tensor:
            module(inp)
            return module.loss

        assert torch.autograd.gradcheck(f, (x,))
