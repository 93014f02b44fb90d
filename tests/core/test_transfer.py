"""The optimisation loop: equivalence with the tutorial, loss decrease, determinism, counts."""

from __future__ import annotations

import copy

import pytest
import torch

from style_transfer import StyleConfig, stylize
from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD
from style_transfer.fast.fast import Speed, accelerator

from ..helpers import transfer

from .. import tutorial_reference as tutorial


def run_product(cnn, content, style, steps, **kwargs):
    infos = []
    out = transfer(cnn, content, style, content.clone(), steps, progress=infos.append, **kwargs)
    return out, infos


def test_equals_the_tutorial_code(cnn, content_32, style_32) -> None:
    """Same weights, same 32 px inputs, same steps: the tutorial's own loop gives the same image."""
    style_32 = style_32[..., 5:26, :].contiguous()  # the tutorial needs both images the same size
    steps = 25  # two LBFGS steps of 20 evaluations each
    ours, infos = run_product(cnn, content_32, style_32, steps)
    theirs, evaluations = tutorial.run_style_transfer(copy.deepcopy(cnn), list(IMAGENET_MEAN),
                                                      list(IMAGENET_STD), content_32, style_32,
                                                      content_32.clone(), num_steps=steps)
    assert len(infos) == evaluations == 40
    # Same operations in the same order: equal to float rounding (observed bit-identical on CPU).
    torch.testing.assert_close(ours, theirs.detach(), rtol=0, atol=1e-6)
    assert not torch.equal(ours, content_32)  # the image did move


def test_evaluation_count_follows_tutorial_loop(cnn, content_32, style_32) -> None:
    # while evaluations <= steps: one LBFGS step (20 evaluations by default)
    for steps, expected in [(1, 20), (19, 20), (20, 40)]:
        _, infos = run_product(cnn, content_32, style_32, steps)
        assert [i.step for i in infos] == list(range(1, expected + 1))
        assert all(i.total == expected for i in infos)  # the plan, set once, is what ran (whole LBFGS steps)


def test_loss_decreases_and_output_valid(cnn, content_32, style_32) -> None:
    # Both loss weights x1000: with random weights and the tutorial's weights LBFGS often stores no
    # curvature pairs; scaled, it behaves as with pretrained weights, where it makes loss spikes
    # (10x to 1000x) from about the 30th evaluation on. So one LBFGS step of 20 evaluations, before
    # them: the last loss measured 0.0107 of the first on AVX-512, AVX2 and scalar kernels alike. The control:
    # the same run in channels_last (another summation order); 0.5 is widened by 3x the two orders' difference
    # (one pair's difference understates how far rounding can move a figure, as in test_fast.py).
    out, infos = run_product(cnn, content_32, style_32, 1, style_weight=1e9, content_weight=1e3)
    _, control = run_product(cnn, content_32, style_32, 1, style_weight=1e9, content_weight=1e3,
                             accelerate=accelerator(Speed(channels_last=True)))
    assert len(infos) == len(control) == 20
    ours, theirs = infos[-1].loss / infos[0].loss, control[-1].loss / control[0].loss
    print(f"last loss / first: {ours:.5f}, in channels_last {theirs:.5f}")
    assert ours < 0.5 + 3 * abs(ours - theirs), (ours, theirs)
    assert out.shape == content_32.shape
    assert out.min() >= 0 and out.max() <= 1
    assert not out.requires_grad


def test_stylize_same_seed_same_image(content_32, style_32) -> None:
    config = StyleConfig(size=32, steps=5, weights="random", init="noise", seed=7, device="cpu")
    first = stylize(content_32, style_32, config)
    second = stylize(content_32, style_32, config)
    other = stylize(content_32, style_32, StyleConfig(size=32, steps=5, weights="random", init="noise",
                                                      seed=8, device="cpu"))
    assert first.size == (32, 21)
    assert first.tobytes() == second.tobytes()
    assert first.tobytes() != other.tobytes()


def test_stylize_accepts_paths_and_pil(tmp_path, content_32, style_32) -> None:
    from style_transfer.io.images import load_image, tensor_to_pil

    content_pil = tensor_to_pil(content_32)
    style_path = tmp_path / "style.png"
    tensor_to_pil(style_32).save(style_path)
    # The fixtures hold 8-bit values and already have the working size: a PIL image or a PNG file of
    # them loads back to the very same tensors, so the runs compute the same numbers on any CPU.
    assert torch.equal(load_image(content_pil, 32), content_32) and torch.equal(load_image(style_path, 32), style_32)
    config = StyleConfig(size=32, steps=1, weights="random", device="cpu")
    from_mixed = stylize(content_pil, str(style_path), config)
    from_tensors = stylize(content_32, style_32, config)
    assert from_mixed.size == (32, 21)
    assert from_mixed.tobytes() == from_tensors.tobytes()
    assert from_mixed.tobytes() != content_pil.tobytes()  # the run did something


def test_bad_layer_in_stylize(content_32, style_32) -> None:
    with pytest.raises(ValueError, match="unknown layer"):
        stylize(content_32, style_32, StyleConfig(size=32, steps=1, weights="random", device="cpu",
                                                  style_layers=("conv_17",)))


def _rosenbrock_steps(optimizer: torch.optim.Optimizer, x: torch.Tensor, steps: int) -> None:
    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()
        loss.backward()
        return loss

    for _ in range(steps):
        optimizer.step(closure)


def test_the_optimiser_is_torchs_lbfgs_step_for_step() -> None:
    """get_input_optimizer's LBFGS skips torch's torch._dynamo guard on four methods (the start-up's 1.4 s):
    against torch.optim.LBFGS on the Rosenbrock function, the same iterates and state bit for bit, and a state
    handed across either way continues the same."""
    from style_transfer import get_input_optimizer

    start = torch.tensor([-1.2, 1.0, -0.5, 0.8], dtype=torch.float64)
    ours_x, theirs_x = start.clone().requires_grad_(True), start.clone().requires_grad_(True)
    ours, theirs = get_input_optimizer(ours_x, history_size=3), torch.optim.LBFGS([theirs_x], history_size=3)
    assert isinstance(ours, torch.optim.LBFGS) and type(ours) is not torch.optim.LBFGS
    _rosenbrock_steps(ours, ours_x, 3)
    _rosenbrock_steps(theirs, theirs_x, 3)
    assert torch.equal(ours_x, theirs_x) and not torch.equal(ours_x, start)
    ours_state, theirs_state = ours.state_dict(), theirs.state_dict()
    assert ours_state["param_groups"] == theirs_state["param_groups"]
    for key, value in theirs_state["state"][0].items():
        mine = ours_state["state"][0][key]
        if isinstance(value, list):
            assert len(mine) == len(value) == 3 and all(map(torch.equal, mine, value)), key
        elif isinstance(value, torch.Tensor):
            assert torch.equal(mine, value), key
        else:
            assert mine == value, key
    # Each continues from the other's state as from its own (copies: a loaded state shares the tensors and lists).
    swapped_x, again_x = ours_x.detach().clone().requires_grad_(True), ours_x.detach().clone().requires_grad_(True)
    swapped, again = get_input_optimizer(swapped_x, history_size=3), torch.optim.LBFGS([again_x], history_size=3)
    swapped.load_state_dict(copy.deepcopy(theirs.state_dict()))
    again.load_state_dict(copy.deepcopy(ours.state_dict()))
    for optimizer, x in ((ours, ours_x), (swapped, swapped_x), (again, again_x)):
        _rosenbrock_steps(optimizer, x, 1)
    assert torch.equal(swapped_x, ours_x) and torch.equal(again_x, ours_x)


@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.slow
def test_a_run_never_imports_torch_dynamo_torchvision_or_sympy(fast: bool) -> None:
    """Importing either of the first two costs about 1.4 s of every run's start (torchvision imports torch._dynamo;
    torch's optimisers import it on their first add_param_group and zero_grad), sympy 0.5 s (torch imports it to check
    the shape of a gradient handed to backward, which --fast's Fourier basis did): a run whose weights need no download
    imports none of them. In a fresh process, since the suite's own process has long imported all three."""
    import subprocess
    import sys

    script = ("import sys, numpy as np; from PIL import Image; from style_transfer import StyleConfig, stylize; "
              "im = Image.fromarray((np.random.default_rng(0).random((24, 32, 3)) * 255).astype('uint8')); "
              f"stylize(im, im, StyleConfig(size=32, steps=1, weights='random', fast={fast})); "
              "print(sorted(m for m in ('torch._dynamo', 'torchvision', 'sympy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
