"""Tiled evaluation (issue 16): crops give the untiled loss and gradient; halos and alignment are computed.

Exactness is checked in float64 (relative error below 1e-10, where a wrong halo or alignment gives 1e-3 or
more: the negative controls), and in float32 against the untiled path's own float32 rounding measured in the
same test. The issue's 517x771 float64 check with VGG19's full widths takes minutes on this CPU; the paper's
layers are checked on VGG19's geometry with an eighth of its channels instead, at a size with 9 crops.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from torch import nn

from style_transfer import memory
from style_transfer.tiling import crops, plans as tile_plans, tiling
from style_transfer.core.backward import weighted_scores
from style_transfer.config.style import StyleConfig
from style_transfer.errors import ResourceError
from style_transfer.fast.fast import Speed, accelerator
from style_transfer.losses.terms import TotalVariationLoss
from style_transfer.losses.tutorial import gram_matrix
from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD, VGG19_LAYOUT
from style_transfer.presets import preset_values
from style_transfer.run.run import Run
from style_transfer.core.style_model import get_style_model_and_losses
from style_transfer.run.prepare import sizes_from

from ..core.test_lbfgs import FLOAT64_TOLERANCE
from ..helpers import transfer

EXACT = 1e-10  # float64: the tiled and untiled sums differ only in their order


def narrow_vgg19(divisor: int = 8, seed: int = 0) -> nn.Sequential:
    """VGG19's layer layout (so its geometry) with ``1/divisor`` of its channels, seeded Kaiming weights."""
    generator = torch.Generator().manual_seed(seed)
    layers: list[nn.Module] = []
    channels = 3
    for item in VGG19_LAYOUT:
        if item == "M":
            layers.append(nn.MaxPool2d(2, 2))
            continue
        conv = nn.Conv2d(channels, int(item) // divisor, 3, padding=1)
        nn.init.kaiming_normal_(conv.weight, mode="fan_out", nonlinearity="relu", generator=generator)
        nn.init.uniform_(conv.bias, -0.1, 0.1, generator=generator)
        layers += [conv, nn.ReLU(inplace=True)]
        channels = int(item) // divisor
    return nn.Sequential(*layers).requires_grad_(False).eval()


def rand(*shape: int, seed: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.rand(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def untiled(model: nn.Sequential, style_losses, content_losses, extras, image, style_weight, content_weight):
    """The closure's own arithmetic (transfer.optimize): loss, gradient, each module's loss."""
    x = image.clone().requires_grad_(True)
    model(x)
    style, content = weighted_scores(style_losses, content_losses, style_weight, content_weight)
    loss = style + content
    for extra in extras:
        loss = loss + extra.loss
    loss.backward()
    return float(loss.detach()), x.grad, [float(m.loss.detach()) for m in [*style_losses, *content_losses]]


def tiled(tiler: tiling.TiledStyleModel, style_losses, content_losses, extras, image, style_weight,
          content_weight):
    x = image.clone().requires_grad_(True)
    style, content, extra = tiler.evaluate(x, style_weight, content_weight, extras)
    return float(style + content + extra), x.grad, [float(m.loss) for m in [*style_losses, *content_losses]]


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


def build(cnn, content, styles, *, tv: float = 0.0, **options):
    model, style_losses, content_losses = get_style_model_and_losses(
        cnn, IMAGENET_MEAN, IMAGENET_STD, styles, content, **options)
    extras = []
    if tv:
        extras = [TotalVariationLoss(tv)]
        model = nn.Sequential(extras[0], *model.children())
    return model, style_losses, content_losses, extras


@pytest.fixture(scope="module")
def cnn64(cnn: nn.Sequential) -> nn.Sequential:
    return copy.deepcopy(cnn).double()


# --- geometry -------------------------------------------------------------------------------------------------

def test_vgg19_halos_by_hand() -> None:
    """Up to conv_5 (conv3_1): 2 convs at stride 1, 2 at stride 2, 1 at stride 4: 2*1 + 2*2 + 1*4 = 10 px each
    side, origins on multiples of 4. Up to conv5_1: 2*1 + 2*2 + 4*4 + 4*8 + 1*16 = 70 px, multiples of 16."""
    tutorial = crops.vgg19_geometry(["conv_4", "conv_1", "conv_2", "conv_3", "conv_5"])
    assert (tutorial.before, tutorial.after, tutorial.align) == (10, 10, 4)
    assert tutorial.minimum_tile == 12 + 10 + 4
    paper = crops.vgg19_geometry(["conv_10", "conv_1", "conv_3", "conv_5", "conv_9", "conv_13"])
    assert (paper.before, paper.after, paper.align) == (70, 70, 16)
    assert crops.vgg19_geometry(["conv_1"]).before == 1
    # The same numbers from the modules themselves (layer_spec), as TiledStyleModel computes them.
    model, *_ = build(narrow_vgg19(), torch.rand(1, 3, 32, 32), torch.rand(1, 3, 32, 32))
    assert tiling.TiledStyleModel(model, 64).geometry.before == 10


@pytest.mark.parametrize("layer", [1, 3, 5, 6, 8, 10, 11])
def test_receptive_field_matches_a_perturbed_pixel(layer: int) -> None:
    """Independent check of the reach: change one input pixel and see which positions of a layer change.

    All-positive weights and inputs keep every ReLU open and average pools pass every input on, so a
    position changes exactly when the pixel lies in its receptive field."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 4, 3, padding=1), nn.ReLU(),
                        nn.AvgPool2d(2, 2), nn.Conv2d(4, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 4, 3, padding=1),
                        nn.AvgPool2d(2, 2), nn.Conv2d(4, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 4, 5, padding=2))
    net = net.double().requires_grad_(False)
    for module in net:
        if isinstance(module, nn.Conv2d):
            module.weight.abs_()
            module.bias.abs_()
    fields = crops.receptive_fields([crops.layer_spec(m) for m in net])
    image = rand(1, 3, 64, 64, seed=1) + 0.5
    y, x = 29, 34
    bumped = image.clone()
    bumped[..., y, x] += 1.0
    before, after = net[:layer + 1](image), net[:layer + 1](bumped)
    changed = (after - before).abs().amax(dim=(0, 1)) > 0
    field = fields[layer]
    rows = [i for i in range(changed.shape[0]) if i * field.stride + field.offset <= y
            < i * field.stride + field.offset + field.size]
    cols = [i for i in range(changed.shape[1]) if i * field.stride + field.offset <= x
            < i * field.stride + field.offset + field.size]
    assert changed.nonzero()[:, 0].unique().tolist() == rows
    assert changed.nonzero()[:, 1].unique().tolist() == cols


@pytest.mark.parametrize("length,tile", [(64, 30), (61, 26), (200, 57), (517, 100), (771, 512), (40, 64)])
def test_spans_partition_aligned_with_their_halos(length: int, tile: int) -> None:
    geometry = crops.vgg19_geometry(["conv_1", "conv_5"])
    spans = crops.plan_spans(length, tile, geometry)
    assert [s.core[0] for s in spans[1:]] == [s.core[1] for s in spans[:-1]]  # cores tile [0, length)
    assert spans[0].core[0] == 0 and spans[-1].core[1] == length
    for span in spans:
        assert span.core[0] % geometry.align == 0 and span.crop[0] % geometry.align == 0
        assert span.crop[0] <= max(0, span.core[0] - geometry.before)
        assert span.crop[1] >= min(length, span.core[1] + geometry.after)
        assert span.crop[1] - span.crop[0] <= tile and span.crop[1] <= length
    assert (len(spans) == 1) == (length <= tile)


def test_tile_below_the_halos_is_refused_naming_the_minimum() -> None:
    with pytest.raises(ValueError, match="tile 25 px is too small .* give at least 26 px"):
        crops.plan_spans(100, 25, crops.vgg19_geometry(["conv_5"]))


# --- exactness ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("pooling", ["max", "avg"])
def test_tiled_equals_untiled_in_float64(cnn64: nn.Sequential, pooling: str) -> None:
    """The tutorial's layers at 64x48 in 3x2 crops (and one crop): loss, every module's loss, gradient,
    targets computed over crops (two styles, blended), with total variation on the whole image."""
    content, image = rand(1, 3, 48, 64, seed=2), rand(1, 3, 48, 64, seed=3)
    styles = [rand(1, 3, 40, 56, seed=4), rand(1, 3, 52, 36, seed=5)]
    model, sl, cl, extras = build(cnn64, content, styles, tv=0.3, style_blend=(1, 3), pooling=pooling)
    reference = untiled(model, sl, cl, extras, image, 1e6, 1)
    for tile in (46, 64):
        tiler = tiling.TiledStyleModel(model, tile)
        assert len(tiler.crops(48, 64)) == (6 if tile == 46 else 1)
        result = tiled(tiler, sl, cl, extras, image, 1e6, 1)
        assert abs(result[0] - reference[0]) <= EXACT * reference[0]
        assert result[2] == pytest.approx(reference[2], rel=EXACT)
        assert relative(result[1], reference[1]) < EXACT
    # Targets over crops: build the same model on stand-ins, then set_targets.
    twin, twin_sl, twin_cl, _ = build(cnn64, tiling.stand_ins(content), tiling.stand_ins(styles),
                                      style_blend=(1, 3), pooling=pooling)
    tiling.TiledStyleModel(twin, 46).set_targets(content, styles, (1, 3))
    for ours, theirs in zip([*twin_sl, *twin_cl], [*sl, *cl]):
        assert relative(ours.target, theirs.target) < EXACT


def test_tiled_equals_untiled_with_the_papers_layers() -> None:
    """The paper's preset (conv4_2 content, conv1_1..conv5_1 style, average pools, its loss form): a 70 px
    halo, origins on multiples of 16; 320x316 px in 2x2 crops, VGG19's geometry with 1/8 of its channels."""
    net = narrow_vgg19().double()
    paper = preset_values("paper")
    options = dict(content_layers=paper["content_layers"], style_layers=paper["style_layers"],
                   style_layer_weights=(0.2,) * 5, loss_form="paper", pooling="avg")
    content, image, style = rand(1, 3, 316, 320, seed=6), rand(1, 3, 316, 320, seed=7), rand(1, 3, 90, 90, seed=8)
    model, sl, cl, extras = build(net, content, style, **options)
    reference = untiled(model, sl, cl, extras, image, 1e3, 1e-2)
    tiler = tiling.TiledStyleModel(model, 310)
    assert (tiler.geometry.before, tiler.geometry.align, len(tiler.crops(316, 320))) == (70, 16, 4)
    result = tiled(tiler, sl, cl, extras, image, 1e3, 1e-2)
    assert abs(result[0] - reference[0]) <= EXACT * reference[0]
    assert result[2] == pytest.approx(reference[2], rel=EXACT)
    assert relative(result[1], reference[1]) < EXACT
    # Every layer's Gram over the crops' cores equals the whole image's.
    grams = tiler.grams(image)
    x = model[0](image)
    for index, layer in enumerate(tiler.layers[1:], start=1):
        x = layer(x)
        if index in grams:
            assert relative(grams[index], gram_matrix(x)) < EXACT


@pytest.fixture
def float64_case(cnn64: nn.Sequential):
    content, image, style = rand(1, 3, 48, 64, seed=2), rand(1, 3, 48, 64, seed=3), rand(1, 3, 40, 56, seed=4)
    model, sl, cl, extras = build(cnn64, content, style)
    return model, sl, cl, image, untiled(model, sl, cl, extras, image, 1e6, 1)


def test_negative_control_halo_one_step_too_small(float64_case, monkeypatch: pytest.MonkeyPatch) -> None:
    """Crops that end one pixel short of the halo: the check above can fail."""
    model, sl, cl, image, reference = float64_case
    plan = crops.plan_spans

    def short(length: int, tile: int, geometry: crops.Geometry) -> list[crops.Span]:
        return [crops.Span(s.core, (s.crop[0], s.crop[1] - (s.crop[1] < length)))
                for s in plan(length, tile, geometry)]

    monkeypatch.setattr(crops, "plan_spans", short)
    result = tiled(tiling.TiledStyleModel(model, 46), sl, cl, [], image, 1e6, 1)
    assert relative(result[1], reference[1]) > 1e6 * EXACT


def test_negative_control_origins_misaligned_by_half(float64_case, monkeypatch: pytest.MonkeyPatch) -> None:
    """Interior crops starting 2 px later (half the alignment of 4; the halo still covers the reach)."""
    model, sl, cl, image, reference = float64_case
    plan = crops.plan_spans

    def shifted(length: int, tile: int, geometry: crops.Geometry) -> list[crops.Span]:
        spans = plan(length, tile, geometry)
        half = geometry.align // 2
        moved = [crops.Span(s.core, (s.crop[0] + half, s.crop[1])) if 0 < s.crop[0] and s.crop[1] < length
                 else s for s in spans]
        # The halo still covers the reach: only the alignment is wrong.
        assert all(s.core[0] - s.crop[0] >= geometry.before for s in moved if s.crop[0])
        return moved

    monkeypatch.setattr(crops, "plan_spans", shifted)
    tiler = tiling.TiledStyleModel(model, 46)
    assert len(tiler.crops(48, 64)) == 6  # 3 across: the middle one is moved
    result = tiled(tiler, sl, cl, [], image, 1e6, 1)
    assert relative(result[1], reference[1]) > 1e6 * EXACT


@pytest.mark.parametrize("pooling", ["max", "avg"])
def test_float32_tiled_gradient_within_the_untiled_rounding(cnn: nn.Sequential, pooling: str) -> None:
    """In float32 (the working precision), 64x48 in 3x2 crops and a non-square 40x72 in crops too: tiled and
    untiled differ by no more than 4x the untiled float32 gradient's own error (against float64)."""
    for (height, width), tile in (((48, 64), 46), ((72, 40), 34)):
        content, image, style = (rand(1, 3, height, width, seed=s) for s in (9, 10, 11))
        exact = untiled(*build(copy.deepcopy(cnn).double(), content, style, pooling=pooling), image, 1e6, 1)
        model, sl, cl, extras = build(cnn, content.float(), style.float(), pooling=pooling)
        single = untiled(model, sl, cl, extras, image.float(), 1e6, 1)
        tiler = tiling.TiledStyleModel(model, tile)
        assert len(tiler.crops(height, width)) > 2
        result = tiled(tiler, sl, cl, extras, image.float(), 1e6, 1)
        control = float((single[1].double() - exact[1]).abs().max())
        assert control > 0
        assert float((result[1].double() - exact[1]).abs().max()) <= 4 * control
        assert abs(result[0] - exact[0]) <= 4 * max(abs(single[0] - exact[0]), 1e-6 * exact[0])


# --- the run --------------------------------------------------------------------------------------------------

def run_images(config: StyleConfig, content: torch.Tensor | None = None, style=None) -> tuple[list, object]:
    """A run of ``config`` on seeded random images (or the ones given), with its events."""
    if content is None:
        content, style = (rand(1, 3, 42, 64, seed=12, dtype=torch.float32),
                          rand(1, 3, 48, 48, seed=13, dtype=torch.float32))
    events: list = []
    result = Run(content, style, config).execute(events.append)
    return events, result


def test_run_with_tiles_gives_the_untiled_first_evaluations() -> None:
    base = dict(size=64, steps=1, weights="random", device="cpu", tv_weight=1.0, optimizer="adam",
                style_blend=(1.0,))
    plain_events, _ = run_images(StyleConfig(**base))
    tiled_events, result = run_images(StyleConfig(**base, tile=46))
    assert len(tiled_events) == len(plain_events) == 2
    for plain, ours in zip(plain_events, tiled_events):
        for name in ("style_loss", "content_loss", "tv_loss"):
            assert getattr(ours, name) == pytest.approx(getattr(plain, name), rel=1e-5, abs=1e-12)
    assert result.record["settings"]["tile"] == 46


@pytest.mark.slow
def test_lbfgs_trajectory_tiled_is_the_untiled_one_in_float64(cnn: nn.Sequential) -> None:
    """One LBFGS step (20 evaluations, weights x1000 so that LBFGS keeps curvature pairs, as the suite's trajectory
    tests do) tiled in 3x2 crops against untiled, both in float64: tiles sum the same terms in another order, which
    float64 rounds at 1e-16, so 20 evaluations leave the two within FLOAT64_TOLERANCE of the image on any CPU and
    thread count, where the run itself moves the image by a large share of it. This is also the seam check: a seam
    would add structure far above that."""
    network = copy.deepcopy(cnn).double()
    content, style = rand(1, 3, 42, 64, seed=12), rand(1, 3, 48, 48, seed=13)

    def result(**options) -> torch.Tensor:
        events: list = []
        image = transfer(network, content, style, content.clone(), 3, 1e9, 1e3, progress=events.append,
                         tv_weight=1.0, **options)
        assert len(events) == 20 and image.dtype == torch.float64
        return image

    plain = result()
    ours = float((result(tiles=tiling.tiles_for(content, 46)) - plain).abs().max())
    moved = float((plain - content).abs().max())  # the run did move the image: the comparison could fail
    assert moved > 0.05 and ours < FLOAT64_TOLERANCE, (ours, moved)


def test_image_within_one_tile_runs_the_untiled_path(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(tiling.TiledStyleModel, "evaluate", lambda *a, **k: calls.append(1))
    base = dict(size=64, steps=1, weights="random", device="cpu", optimizer="adam")
    _, plain = run_images(StyleConfig(**base))
    _, within = run_images(StyleConfig(**base, tile=64))
    assert calls == [] and within.image.tobytes() == plain.image.tobytes()


def test_a_size_that_does_not_fit_runs_tiled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Coarse-to-fine 64 then 128 px with the free memory between the tiled and untiled estimates at 128 px:
    64 px runs untiled, 128 px in tiles of 64 px, and the run finishes."""
    content, style = rand(1, 3, 85, 128, seed=12, dtype=torch.float32), rand(1, 3, 128, 128, seed=13,
                                                                           dtype=torch.float32)
    speed = Speed()
    free = tile_plans.tiled_estimate_bytes((85, 128), (128, 128), 64, speed, crops.vgg19_target_bytes(["conv_4"]))
    assert free < memory.estimate_bytes((85, 128), (128, 128), speed)
    monkeypatch.setattr(memory, "available_bytes", lambda device: free)
    evaluate, sizes = tiling.TiledStyleModel.evaluate, []

    def spy(self, image, *args, **kwargs):
        sizes.append((tuple(image.shape[-2:]), self.tile))
        return evaluate(self, image, *args, **kwargs)

    monkeypatch.setattr(tiling.TiledStyleModel, "evaluate", spy)
    events: list = []
    config = StyleConfig(size=128, scales=2, steps=4, weights="random", device="cpu", optimizer="adam")
    result = Run(content, style, config).execute(events.append)
    small = [e for e in events if e.size[0] == 64]
    large = [e for e in events if e.size == (128, 85)]
    assert small and large and len(small) + len(large) == len(events)
    assert sizes == [((85, 128), 64)] * len(large) and result.image.size == (128, 85)


@pytest.mark.slow
def test_lbfgs_keeps_at_most_ten_pairs_at_a_tiled_size_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """LBFGS's history is the largest part a tiled run keeps per pixel (24 B a pair): 10 pairs there, the
    settings' own elsewhere (here 32 px fits in the tile of 46 and runs untiled, 64 px is tiled: the sizes of
    run_images, a quarter of the pixels of 64 and 128 px with the same untiled and tiled sizes)."""
    from style_transfer.core import transfer

    real, histories = transfer.get_input_optimizer, []

    def spy(image, **kwargs):
        histories.append((tuple(image.shape[-2:]), kwargs.get("history_size")))
        return real(image, **kwargs)

    monkeypatch.setattr(transfer, "get_input_optimizer", spy)
    for history, expected in ((100, 10), (6, 6)):
        histories.clear()
        config = StyleConfig(size=64, scales=2, steps=2, weights="random", device="cpu", tile=46,
                             history_size=history)
        run_images(config)
        assert histories == [((21, 32), history), ((42, 64), expected)]


def test_the_loop_refuses_what_tiling_cannot_run(cnn: nn.Sequential) -> None:
    content, style = torch.rand(1, 3, 40, 64), torch.rand(1, 3, 32, 32)
    for options in (dict(backward="per-module"), dict(accelerate=accelerator(Speed(fused_gram=True)))):
        with pytest.raises(ValueError, match="cannot be combined with tiling"):
            transfer(cnn, content, style, content.clone(), 1, tiles=tiling.tiles_for(content, 32), **options)


# --- memory and settings --------------------------------------------------------------------------------------

def sizes_of(content_hw=(85, 128), style_hw=(128, 128)):
    return sizes_from(content_hw[1], content_hw[0], [(style_hw[1], style_hw[0])], 1.0)


def test_tiles_are_chosen_only_where_a_size_does_not_fit() -> None:
    config = StyleConfig(size=128, scales=2)
    speed = Speed()
    untiled_need = memory.estimate_bytes((85, 128), (128, 128), speed)
    tiled_need = tile_plans.tiled_estimate_bytes((85, 128), (128, 128), 64, tile_plans.tiled_speed(speed),
                                             crops.vgg19_target_bytes(["conv_4"]))  # 10 LBFGS pairs there
    assert tiled_need < untiled_need
    cpu = torch.device("cpu")
    assert tile_plans.plan_tiles([64, 128], sizes_of(), config, speed, cpu, available=untiled_need) == [None, None]
    assert tile_plans.plan_tiles([64, 128], sizes_of(), config, speed, cpu, available=tiled_need) == [None, 64]
    with pytest.raises(ResourceError, match="size 128 px needs about"):
        tile_plans.plan_tiles([128], sizes_of(), config, speed, cpu, available=tiled_need - 1)
    per_module = StyleConfig(size=128, backward="per-module")
    with pytest.raises(ResourceError, match="tiles of 64 px would fit, but tiling cannot run with backward"):
        tile_plans.plan_tiles([128], sizes_of(), per_module, speed, cpu, available=tiled_need)
    explicit = StyleConfig(size=128, tile=40)
    assert tile_plans.plan_tiles([64, 128], sizes_of(), explicit, speed, cpu, available=None) == [40, 40]
    with pytest.raises(ValueError, match="give at least 26 px"):
        tile_plans.plan_tiles([128], sizes_of(), StyleConfig(size=128, tile=20), speed, cpu, available=None)


def test_tiled_estimate_by_hand() -> None:
    """BASE + crop px x 3072 + content px x (24 B per LBFGS pair + 10 image copies + targets) + style px x 12."""
    content, style, crop = 1000 * 2000, 500 * 600, 256 * 256
    targets = crops.vgg19_target_bytes(["conv_4"])
    assert targets == 128 * 4 / 4  # conv_4: 128 channels at half the side
    assert tile_plans.tiled_estimate_bytes((1000, 2000), (500, 600), 256, Speed(history_size=20), targets) == (
        memory.BASE_BYTES + crop * 3072 + content * (480 + 120 + 128) + style * 12)


@pytest.mark.parametrize("options,words", [
    (dict(tile=8), "tile must be an integer >= 16"),
    (dict(tile=64.0), "tile must be an integer"),
    (dict(tile=64, backward="per-module"), "tile cannot be combined with backward 'per-module'"),
    (dict(tile=64, precision="bf16"), "tile cannot be combined with precision bf16"),
    (dict(tile=64, channels_last=True, fused_gram=True), "tile cannot be combined with channels_last and fused_gram"),
])
def test_config_refuses_what_tiling_cannot_honour(options: dict, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        StyleConfig(**options)
    assert StyleConfig(tile=64, fast=True).tile == 64  # --fast's levers apply at the untiled sizes only


@pytest.mark.slow
def test_the_command_takes_tile(tmp_path) -> None:
    """--tile reaches the run (its record says so) and a combination tiling refuses is one line, exit 2."""
    from click.testing import CliRunner

    from style_transfer.cli.stylize import main
    from style_transfer.io.metadata import read_record

    images = Path(__file__).resolve().parents[2] / "images"
    out = tmp_path / "tiled.png"
    common = [str(images / "chelsea.png"), str(images / "ihc.png"), "--weights", "random", "--size", "48",
              "--steps", "1", "--device", "cpu", "-q"]
    done = CliRunner().invoke(main, [*common, "-o", str(out), "--tile", "32"])
    assert done.exit_code == 0, done.output
    assert read_record(out)["settings"]["tile"] == 32
    refused = CliRunner().invoke(main, [*common, "-o", str(tmp_path / "no.png"), "--tile", "32",
                                        "--backward", "per-module"])
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.exit_code == 2 and len(lines) == 1 and "tile" in lines[0], refused.output
    assert not (tmp_path / "no.png").exists()
