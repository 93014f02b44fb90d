"""The memory estimate counts what the W2 and sliced losses keep (memory.py ``StyleLossPlan``), checked
against the sizes of the tensors the loss modules really hold and save for backward."""

from __future__ import annotations

import pytest
import torch

from style_transfer import StyleConfig
from style_transfer.losses import masks
from style_transfer.core.style_model import get_style_model_and_losses
from style_transfer.errors import ResourceError
from style_transfer import memory
from style_transfer.tiling import plans as tile_plans
from style_transfer.fast.fast import Speed

LAYERS = ("conv_1", "conv_2", "conv_3", "conv_4", "conv_5")  # the tutorial's (two pools' worth of sizes)
CONTENT_HW, STYLE_HW = (41, 58), (37, 45)  # odd sizes: the pools round down


def build(cnn, kind: str, styles: int, masked: bool):
    content = torch.rand(1, 3, *CONTENT_HW, generator=torch.Generator().manual_seed(0))
    style_imgs = [torch.rand(1, 3, *STYLE_HW, generator=torch.Generator().manual_seed(1 + k)) for k in range(styles)]
    guides = None
    if masked:
        left = torch.zeros(1, 1, *CONTENT_HW)
        left[..., : CONTENT_HW[1] // 2] = 0.7
        guides = masks.Guides(masks.fill_masks([left] + [None] * (styles - 1)) if styles > 1 else [left])
    return get_style_model_and_losses(cnn, [0.5] * 3, [0.2] * 3, style_imgs, content, (), LAYERS, guides=guides,
                                      style_loss=kind), content


def saved_by_losses(model, style_losses, content: torch.Tensor) -> int:
    """Bytes the style loss modules save for backward in one forward (their input's storage excepted)."""
    inputs = []
    hooks = [m.register_forward_pre_hook(lambda mod, args: inputs.append(args[0])) for m in style_losses]
    with torch.no_grad():
        model(content)
    for hook in hooks:
        hook.remove()
    return sum(_saved_by(module, features.clone().requires_grad_(True)) for module, features in zip(style_losses, inputs))


def _saved_by(module: torch.nn.Module, x: torch.Tensor) -> int:
    """Bytes of the distinct storages ``module``'s forward on ``x`` saves for backward, ``x``'s own excepted."""
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.untyped_storage().data_ptr() != x.untyped_storage().data_ptr():
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        module(x)
    return sum(storages.values())


CASES = [(kind, styles, masked) for kind in ("gram", "wasserstein", "sliced")
         for styles, masked in ((1, False), (2, False), (1, True), (2, True))]


@pytest.mark.parametrize("kind, styles, masked", CASES)
def test_the_plan_counts_the_targets_exactly_and_what_backward_saves(cnn, kind: str, styles: int,
                                                                     masked: bool) -> None:
    (model, style_losses, _), content = build(cnn, kind, styles, masked)
    plan = memory.StyleLossPlan(kind, LAYERS, "vgg19", styles, masked)
    assert plan.target_bytes(STYLE_HW) == sum(m.target.nbytes for m in style_losses)
    measured = saved_by_losses(model, style_losses, content)
    assert plan.saved_bytes(CONTENT_HW) == pytest.approx(measured, rel=0.01), (measured, plan.saved_bytes(CONTENT_HW))
    if kind == "sliced":  # its sort's peak: 16 bytes a value of the widest target's projections
        assert plan.sort_bytes(STYLE_HW) == max(16 * (m.target.shape[0] - 1) * m.target.shape[1] for m in style_losses)
        # The sorted projections kept for the step (after the forward above): exact where the order is not kept (one
        # style, or masks); for an unmasked blend the plan counts the order, which equal masses (these) do without.
        kept = sum(t.nbytes for m in style_losses for pair in m._sorted_targets[1] for t in pair if t is not None)
        values = sum((m.target.shape[0] - 1) * m.target.shape[1] for m in style_losses)
        assert kept == 4 * values
        assert plan.kept_bytes(STYLE_HW) == (12 if styles > 1 and not masked else 4) * values
    else:
        assert plan.kept_bytes(STYLE_HW) == 0


def test_the_layer_shapes_are_the_networks(cnn) -> None:
    (_, style_losses, _), _ = build(cnn, "gram", 1, True)
    assert memory.layer_shapes(LAYERS, "vgg19", CONTENT_HW) == [
        (m.target.shape[-1], *m.masks.shape[-2:]) for m in style_losses]


def test_the_plan_of_a_config_resolves_the_paper_names() -> None:
    config = StyleConfig(style_loss="sliced", style_layers=("conv1_1", "conv2_1"), style_masks=(torch.ones(4, 4),))
    assert memory.StyleLossPlan.of(config, 2) == memory.StyleLossPlan("sliced", ("conv_1", "conv_3"), "vgg19", 2, True)


def test_the_unmasked_gram_adds_nothing_to_the_measured_figures() -> None:
    plan = memory.StyleLossPlan("gram", LAYERS)
    assert memory.estimate_bytes((256, 256), (256, 256), None, plan) == memory.estimate_bytes((256, 256), (256, 256))


def squares(size: int) -> tuple[tuple[int, int], tuple[int, int]]:
    return (size, size), (size, size)


def test_a_size_that_fits_the_gram_loss_is_refused_for_the_sliced_one() -> None:
    """At 512 px the sliced loss keeps every style position at five layers (about 0.2 GiB) and saves about 0.3 GiB
    for backward: with free memory just above the Gram's estimate the sliced run is refused, naming a smaller size."""
    gram_need = memory.estimate_bytes((512, 512), (512, 512))
    sliced = StyleConfig(style_loss="sliced", size=512, device="cpu")
    plan = memory.StyleLossPlan.of(sliced)
    assert plan.bytes((512, 512), (512, 512)) > 0.3 * 2**30
    available = gram_need + 2**20
    assert tile_plans.plan_tiles([512], squares, StyleConfig(size=512, device="cpu"), Speed(), torch.device("cpu"),
                             available) == [None]
    with pytest.raises(ResourceError, match="size 512 px needs about") as info:
        tile_plans.plan_tiles([512], squares, sliced, Speed(), torch.device("cpu"), available)
    assert "the largest size that fits is about" in str(info.value)
