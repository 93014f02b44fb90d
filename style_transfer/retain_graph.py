"""``python -m style_transfer.retain_graph``: what ``retain_graph`` does, shown step by step.

A program (it prints): first on a toy graph a -> b = a² -> c = 2b -> d = mean(c), e = sum(c),
then on the style model, the per-module backward with and without retention. The work is
done by ``toy_demo()`` and ``style_model_demo()``, which return what they saw; ``main()``
prints it. See ``docs/retain_graph.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .core.backward import combined_backward, per_module_backward
from .config.checks import filled
from .config.style import StyleConfig
from .networks.vgg import IMAGENET_MEAN, IMAGENET_STD, freeze, random_vgg19_features
from .core.style_model import get_style_model_and_losses

# Both paths' gradients agree to float32 rounding (the sums run in another order): we call
# them equal when the largest difference is below this fraction of the largest gradient.
GRAD_RTOL = 1e-5


@dataclass(frozen=True)
class ToyDemo:
    """What the toy graph showed."""

    a: tuple[float, ...]  # the leaf's values
    error: str  # PyTorch's message for e.backward() after d.backward() without retention
    grad_after_d: tuple[float, ...]  # a.grad after d.backward(retain_graph=True)
    grad_after_d_and_e: tuple[float, ...]  # a.grad after e.backward() as well: the sum of both
    grad_of_sum: tuple[float, ...]  # a.grad of (d + e).backward() alone, on a fresh leaf


@dataclass(frozen=True)
class StyleModelDemo:
    """What the style model showed."""

    modules: tuple[str, ...]  # loss modules in the order their backward() is called
    failed_module: str  # the module whose backward() raised without retention
    error: str  # PyTorch's message there
    passes_retained: int  # backward passes that reached the image with retention
    passes_combined: int  # the same for the combined path (1)
    max_abs_diff: float  # max |per-module gradient - combined gradient| on the image
    max_abs_grad: float  # max |combined gradient|: the scale of max_abs_diff
    error_after: str  # message of a further backward after the per-module evaluation

    @property
    def equal(self) -> bool:
        """The two gradients agree within ``GRAD_RTOL`` of the largest gradient."""
        return self.max_abs_diff <= GRAD_RTOL * self.max_abs_grad


def toy_graph(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """d = mean(2a²) and e = sum(2a²): two results sharing the part a -> b -> c."""
    b = a**2  # saves a for its backward (db/da = 2a)
    c = 2 * b
    return c.mean(), c.sum()


def toy_demo(values: Sequence[float] = (1.0, 2.0, 3.0)) -> ToyDemo:
    """Backward twice through the toy graph: without, then with ``retain_graph``."""
    a = torch.tensor(values, requires_grad=True)
    d, e = toy_graph(a)
    d.backward()
    try:
        e.backward()
        error = ""
    except RuntimeError as exc:
        error = str(exc)

    a = torch.tensor(values, requires_grad=True)
    d, e = toy_graph(a)
    d.backward(retain_graph=True)
    grad_after_d = _floats(a.grad)
    e.backward()  # the last backward: no need to retain any more
    grad_after_d_and_e = _floats(a.grad)

    fresh = torch.tensor(values, requires_grad=True)
    d, e = toy_graph(fresh)
    (d + e).backward()
    return ToyDemo(tuple(values), error, grad_after_d, grad_after_d_and_e, _floats(fresh.grad))


def style_model_demo(size: int = 32, seed: int = 0) -> StyleModelDemo:
    """The per-module backward on the tutorial's style model, with and without retention.

    VGG19 with seeded random weights and seeded noise images (``size`` x ``size``): the
    mechanics do not depend on the pictures, and nothing is downloaded.
    """
    config = StyleConfig()
    style_weight, content_weight = filled(config.style_weight), filled(config.content_weight)
    generator = torch.Generator().manual_seed(seed)
    content = torch.rand(1, 3, size, size, generator=generator)
    style = torch.rand(1, 3, size, size, generator=generator)
    cnn = freeze(random_vgg19_features(seed))
    model, style_losses, content_losses = get_style_model_and_losses(cnn, IMAGENET_MEAN, IMAGENET_STD, style,
                                                                     content)
    names = {id(module): name for name, module in model.named_children()}
    modules = [(m, style_weight) for m in style_losses] + [(m, content_weight) for m in content_losses]
    image = content.clone().requires_grad_(True)
    passes = [0]
    image.register_hook(lambda grad: passes.__setitem__(0, passes[0] + 1))

    image.grad = None
    model(image)
    combined_backward(style_losses, content_losses, style_weight, content_weight)
    combined, passes_combined = _grad(image), passes[0]

    image.grad, passes[0] = None, 0
    model(image)
    failed, error = "", ""
    for module, weight in modules:
        try:
            module.backward(weight, retain_graph=False)
        except RuntimeError as exc:
            failed, error = names[id(module)], str(exc)
            break

    image.grad, passes[0] = None, 0
    model(image)
    per_module_backward(style_losses, content_losses, style_weight, content_weight)
    per_module, passes_retained = _grad(image), passes[0]
    try:
        style_losses[0].loss.backward()
        error_after = ""
    except RuntimeError as exc:
        error_after = str(exc)

    return StyleModelDemo(
        modules=tuple(names[id(m)] for m, _ in modules), failed_module=failed, error=error,
        passes_retained=passes_retained, passes_combined=passes_combined,
        max_abs_diff=float((per_module - combined).abs().max()), max_abs_grad=float(combined.abs().max()),
        error_after=error_after)


def _grad(image: torch.Tensor) -> torch.Tensor:
    """A copy of the gradient the backward passes left in ``image.grad``."""
    if image.grad is None:
        raise RuntimeError("no gradient reached the image")
    return image.grad.clone()


def _floats(tensor: torch.Tensor | None) -> tuple[float, ...]:
    return tuple(float(v) for v in tensor) if tensor is not None else ()


def _vector(values: Sequence[float]) -> str:
    return "[" + ", ".join(f"{v:.6g}" for v in values) + "]"


def main() -> None:
    """Print the demonstration."""
    toy = toy_demo()
    n = len(toy.a)
    print("retain_graph, step by step (see docs/retain_graph.md)")
    print()
    print(f"1. A small graph: a = {_vector(toy.a)} (requires_grad), b = a**2, c = 2*b, d = c.mean(), e = c.sum().")
    print("   d and e share a -> b -> c; b = a**2 saved a, which its backward needs (db/da = 2a).")
    print()
    print("2. d.backward(), then e.backward(). The first backward freed what the graph saved, so the second fails:")
    print(f"   RuntimeError: {toy.error}")
    print()
    print("3. Again with d.backward(retain_graph=True), then e.backward() (the last backward need not retain):")
    print(f"   a.grad after d.backward(retain_graph=True): {_vector(toy.grad_after_d)}   (dd/da = 4a/{n})")
    print(f"   a.grad after e.backward() as well:          {_vector(toy.grad_after_d_and_e)}   "
          f"(+ de/da = 4a: gradients add up in .grad)")
    print(f"   a.grad of (d + e).backward() alone:         {_vector(toy.grad_of_sum)}   "
          f"(one backward of the sum: the same, no retention needed)")
    print()
    print("4. The style model (VGG19 with seeded random weights, 32x32 seeded noise images). Its loss modules, "
          "in the order the per-module path calls their backward():")
    style = style_model_demo()
    print(f"   {', '.join(style.modules)}")
    print(f"   per-module without retain_graph: {style.modules[0]}.backward() ran, "
          f"{style.failed_module}.backward() raised")
    print(f"   RuntimeError: {style.error}")
    print(f"   per-module, retaining the graph in every call but the last: {style.passes_retained} backward passes "
          f"reached the image")
    print(f"   combined (one backward of the weighted sum): {style.passes_combined} backward pass")
    print(f"   max |per-module gradient - combined gradient| = {style.max_abs_diff:.3g}, "
          f"max |gradient| = {style.max_abs_grad:.3g}: "
          f"{'equal' if style.equal else 'NOT equal'} within {GRAD_RTOL:g} of the largest gradient")
    print(f"   after the last pass the graph is freed; a further backward raises RuntimeError: "
          f"{style.error_after.split('(')[0].strip()}")


if __name__ == "__main__":
    main()
