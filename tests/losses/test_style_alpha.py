"""A style's transparency (issue 47.3): left out of its statistics, its alpha a weight as a style mask is one.

What is exact and what is not. Transparent pixels are still fed to the network (composited over white, the colour
under them being undefined), so a 3x3 convolution's features within its reach of the cut-out's edge see them: no
weighting of positions can undo that. So the padded style is checked against the unpadded one where the network has
no reach (1x1 convolutions, the pad on the pools' grid): there the two give the same targets and scores up to
float32 summation order. On the tutorial's VGG19 the targets are checked against the tutorial's statistics of the
padded style's feature maps cropped to the visible region by hand (stride by stride), which is what the weights
promise. The weighted statistics themselves are checked on hand-made features in float64.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from PIL import Image
from torch import nn

from style_transfer import ImageError, StyleConfig, stylize
from style_transfer.core import colors
from style_transfer.losses import masks
from style_transfer.losses.terms import blended_gram, style_gram
from style_transfer.losses.tutorial import gram_matrix
from style_transfer.losses.statistics import SlicedStyleLoss, gaussian_statistics, sliced_target, wasserstein_target
from style_transfer.core.style_model import get_style_model_and_losses
from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD, Normalization
from style_transfer.io.images import load_image, load_style, pil_to_tensor
from style_transfer.run.run import Run

from ..conftest import IMAGES
from ..helpers import FAST, invoke_stylize, one_error_line, plain_conv_outputs

KINDS = ("gram", "wasserstein", "sliced")
# float32 sums of the same terms in another order (the padded map adds exact zeros, and its matmul blocks differ):
# targets measured 1.3e-7 (Gram) and 2.8e-7 (W2) off, the W2 score 1.6e-6 (its eigenvalues' square roots amplify
# them), sliced exact; 1e-5 is six times the largest. A padding that reached the statistics moves them 5 % or more.
FLOAT32 = 1e-5
FLOAT64 = 1e-12


def rand(*shape: int, seed: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.rand(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


def padded(features: torch.Tensor, top: int, left: int, height: int, width: int, fill: float = 50.0
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """``features`` inside a larger map of junk (``fill`` plus noise), and the alpha marking where they are."""
    c, h, w = features.shape[1:]
    out = fill + rand(1, c, height, width, seed=99, dtype=features.dtype)
    out[..., top:top + h, left:left + w] = features
    alpha = torch.zeros(1, 1, height, width, dtype=features.dtype)
    alpha[..., top:top + h, left:left + w] = 1
    return out, alpha


class TestWeightedStatistics:
    """The targets' weighted statistics in float64, against the unweighted ones of hand-made features."""

    def test_a_padded_style_gives_the_unpadded_targets(self) -> None:
        f = rand(1, 5, 6, 7, seed=1) - 0.3
        big, alpha = padded(f, 2, 3, 11, 12)
        assert relative(style_gram(big, alpha), gram_matrix(f)) < FLOAT64
        assert relative(wasserstein_target([big], weights=[alpha]), wasserstein_target([f])) < 1e-10  # eigh
        assert torch.equal(sliced_target([big], weights=[alpha]), sliced_target([f]))  # the same columns, in order
        assert relative(blended_gram([big, f], (1, 3), alphas=[alpha, None]), gram_matrix(f)) < FLOAT64

    def test_a_soft_weight_counts_like_repeated_pixels(self) -> None:
        """Weights 1 and 1/2 over two halves X | Y. The Gram target weighs a pixel by alpha^2 (features times alpha,
        as ``guided_gram`` does for masks): the Gram of X, X, X, X, Y. The moments weigh it by alpha: those of
        X, X, Y. The sliced target keeps every position, its share alpha / sum(alpha)."""
        x, y = rand(1, 4, 5, 3, seed=2), rand(1, 4, 5, 2, seed=3) + 0.5
        f = torch.cat([x, y], dim=3)
        alpha = torch.cat([torch.ones(1, 1, 5, 3), torch.full((1, 1, 5, 2), 0.5)], dim=3).double()
        assert relative(style_gram(f, alpha), gram_matrix(torch.cat([x, x, x, x, y], dim=3))) < FLOAT64
        mean, cov = gaussian_statistics(f, alpha)
        repeated = torch.cat([x, x, y], dim=3).reshape(4, -1)
        assert relative(mean, repeated.mean(1)) < FLOAT64
        assert relative(cov, torch.cov(repeated, correction=0)) < FLOAT64
        target = sliced_target([f], weights=[alpha])
        assert torch.equal(target[1:], f.reshape(4, -1))
        expected = alpha.reshape(-1) / alpha.sum()
        assert relative(target[0], expected) < FLOAT64 and float(target[0].sum()) == pytest.approx(1, rel=FLOAT64)

    def test_a_constant_alpha_is_no_weight(self) -> None:
        """A uniformly half-transparent style weighs every pixel alike: its statistics are the unweighted ones (the
        Gram exactly as guided_gram normalises; W2 and sliced as the weights fall back to none)."""
        f = rand(1, 3, 4, 4, seed=4)
        half = torch.full((1, 1, 4, 4), 0.5, dtype=torch.float64)
        assert relative(style_gram(f, half), gram_matrix(f)) < FLOAT64
        assert torch.equal(wasserstein_target([f], weights=[half]), wasserstein_target([f]))
        assert torch.equal(sliced_target([f], weights=[half]), sliced_target([f]))


# --- through the style model --------------------------------------------------------------------------------------

def pointwise_net(seed: int = 0) -> nn.Sequential:
    """A VGG-like block whose convolutions are 1x1: no feature sees a neighbouring pixel, so a cut-out's features are
    the same wherever it is pasted, provided the pools' windows fall alike (the pad a multiple of their stride, 4)."""
    generator = torch.Generator().manual_seed(seed)
    layers: list[nn.Module] = []
    channels = 3
    for item in (8, 8, "M", 12, "M", 16):
        if item == "M":
            layers.append(nn.MaxPool2d(2, 2))
            continue
        conv = nn.Conv2d(channels, int(item), 1)
        nn.init.kaiming_normal_(conv.weight, nonlinearity="relu", generator=generator)
        nn.init.uniform_(conv.bias, -0.1, 0.1, generator=generator)
        layers += [conv, nn.ReLU()]
        channels = int(item)
    return nn.Sequential(*layers).requires_grad_(False).eval()


LAYERS = dict(content_layers=["conv_2"], style_layers=["conv_1", "conv_2", "conv_3", "conv_4"])


@pytest.fixture(scope="module")
def cut_out(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The stain, 24x16, as an RGB file and pasted at (8, 8) into a 40x32 RGBA file whose other pixels are
    transparent over saturated noise (a colour no one sees)."""
    folder = tmp_path_factory.mktemp("alpha")
    inner = Image.open(IMAGES / "ihc.png").convert("RGB").resize((24, 16), Image.Resampling.LANCZOS)
    noise = (rand(32, 40, 3, seed=5, dtype=torch.float32) * 255).round().to(torch.uint8)
    canvas = Image.fromarray(noise.numpy(), "RGB").convert("RGBA")
    canvas.putalpha(0)
    canvas.paste(inner.convert("RGBA"), (8, 8))
    inner_path, padded_path = folder / "inner.png", folder / "padded.png"
    inner.save(inner_path)
    canvas.save(padded_path)
    return inner_path, padded_path


def style_losses(cnn: nn.Sequential, style: torch.Tensor, alpha: torch.Tensor | None, kind: str,
                 content: torch.Tensor, **options):
    guides = None if alpha is None else masks.Guides(None, None, [alpha])
    return get_style_model_and_losses(cnn, IMAGENET_MEAN, IMAGENET_STD, style, content, guides=guides,
                                      style_loss=kind, **options)


def scores(model: nn.Sequential, losses, image: torch.Tensor) -> list[float]:
    model(image)
    return [float(m.loss) for m in losses]


def target_error(ours, theirs, kind: str) -> float:
    """The largest relative difference of two style loss modules' targets (W2: the mean, and the covariance the
    packed root squares back to, so eigenvector signs do not count)."""
    if kind == "wasserstein":
        return max(relative(ours.target[0], theirs.target[0]),
                   relative(ours.target[1:] @ ours.target[1:], theirs.target[1:] @ theirs.target[1:]))
    if ours.target.shape != theirs.target.shape:
        return float("inf")
    return relative(ours.target, theirs.target)


@pytest.mark.parametrize("kind", KINDS)
def test_a_style_padded_with_transparent_pixels_scores_as_the_unpadded_style(cut_out, kind: str) -> None:
    """From the files, through ``load_style``, the model's following of the alpha and each statistic: the targets and
    the loss of every style layer on an image are the cut-out's, within float32 summation order (``FLOAT32``). The
    same padded file without its alpha (today's white block) is far off: the comparison sees the padding."""
    inner_path, padded_path = cut_out
    net = pointwise_net()
    inner, none = load_style(inner_path, 24)
    style, alpha = load_style(padded_path, 40)
    assert none is None and alpha is not None and style.shape[-2:] == alpha.shape[-2:] == (32, 40)
    assert torch.equal(style[..., 8:24, 8:32], inner)  # the visible pixels are the cut-out's exactly
    assert torch.equal(alpha[..., 8:24, 8:32], torch.ones(1, 1, 16, 24)) and float(alpha.sum()) == 16 * 24
    content, image = rand(1, 3, 20, 28, seed=6, dtype=torch.float32), rand(1, 3, 20, 28, seed=7, dtype=torch.float32)

    reference_model, reference, _ = style_losses(net, inner, None, kind, content, **LAYERS)
    model, ours, _ = style_losses(net, style, alpha, kind, content, **LAYERS)
    for mine, theirs in zip(ours, reference):
        assert target_error(mine, theirs, kind) < FLOAT32
    expected = scores(reference_model, reference, image)
    assert min(expected) > 0
    assert scores(model, ours, image) == pytest.approx(expected, rel=FLOAT32)

    white_model, white, _ = style_losses(net, style, None, kind, content, **LAYERS)  # the alpha dropped
    assert max(target_error(mine, theirs, kind) for mine, theirs in zip(white, reference)) > 0.05
    assert scores(white_model, white, image) != pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize("kind", KINDS)
def test_the_tutorial_vgg19_takes_the_visible_regions_statistics(cnn, cut_out, kind: str) -> None:
    """On VGG19 (seeded random weights) at the tutorial's layers (conv_1..conv_5: strides 1, 1, 2, 2, 4), each target
    is the tutorial's statistic of the padded style's conv output cropped by hand to the cut-out's rows and columns
    at that stride: the alpha followed through the real layers leaves exactly the transparent positions out."""
    _, padded_path = cut_out
    style, alpha = load_style(padded_path, 40)
    content = rand(1, 3, 20, 28, seed=8, dtype=torch.float32)
    _, losses, _ = style_losses(cnn, style, alpha, kind, content)
    outputs = plain_conv_outputs(cnn, Normalization(IMAGENET_MEAN, IMAGENET_STD)(style), 5)
    for module, features, stride in zip(losses, outputs, (1, 1, 2, 2, 4)):
        crop = features[..., 8 // stride:24 // stride, 8 // stride:32 // stride]
        if kind == "gram":
            assert relative(module.target, gram_matrix(crop)) < FLOAT32
        elif kind == "wasserstein":
            mean, cov = gaussian_statistics(crop.double())
            assert relative(module.target[0], mean) < FLOAT32
            assert relative(module.target[1:].double() @ module.target[1:].double(), cov) < FLOAT32
        else:
            assert module.target.shape == (crop.shape[1] + 1, crop.shape[2] * crop.shape[3])
            assert relative(module.target[1:], crop.reshape(crop.shape[1], -1)) < FLOAT32


def test_guided_losses_take_each_styles_alpha(cut_out) -> None:
    """With style masks (two styles, one cut out), each style's own target is its visible pixels' statistic."""
    inner_path, padded_path = cut_out
    net = pointwise_net()
    inner, _ = load_style(inner_path, 24)
    style, alpha = load_style(padded_path, 40)
    other = rand(1, 3, 24, 24, seed=9, dtype=torch.float32)
    content = rand(1, 3, 20, 28, seed=10, dtype=torch.float32)
    left = torch.zeros(1, 1, 20, 28)
    left[..., :14] = 1
    region = masks.Guides(masks.fill_masks([left, None]))
    cut = masks.Guides(region.styles, None, [alpha, None])
    for kind in KINDS:
        _, reference, _ = get_style_model_and_losses(net, IMAGENET_MEAN, IMAGENET_STD, [inner, other], content,
                                                     guides=region, style_loss=kind, **LAYERS)
        _, ours, _ = get_style_model_and_losses(net, IMAGENET_MEAN, IMAGENET_STD, [style, other], content,
                                                guides=cut, style_loss=kind, **LAYERS)
        for mine, theirs in zip(ours, reference):
            if kind == "wasserstein":  # per style: the mean, and the covariance the root squares back to
                for k in range(2):
                    assert relative(mine.target[k, 0], theirs.target[k, 0]) < FLOAT32
                    assert relative(mine.target[k, 1:] @ mine.target[k, 1:],
                                    theirs.target[k, 1:] @ theirs.target[k, 1:]) < FLOAT32
            else:
                if kind == "sliced":  # the cut-out's positions only
                    assert torch.equal(mine.columns, theirs.columns)
                assert relative(mine.target, theirs.target) < FLOAT32


def test_opaque_pixels_that_a_pool_drops_are_one_line() -> None:
    """A style visible only in its last row, of an odd height: the first pool drops that row, and the style would have
    no statistics from there on. The model says which style and layer."""
    style = rand(1, 3, 17, 16, seed=11, dtype=torch.float32)
    alpha = torch.zeros(1, 1, 17, 16)
    alpha[..., -1, :] = 1
    content = rand(1, 3, 16, 16, seed=12, dtype=torch.float32)
    with pytest.raises(ValueError, match=r"^style image 1: its opaque pixels vanish at conv_3 "):
        style_losses(pointwise_net(), style, alpha, "gram", content, **LAYERS)
    with pytest.raises(ValueError, match="style image 1 is"):
        style_losses(pointwise_net(), style, alpha[..., 1:, :], "gram", content, **LAYERS)


# --- what a run does with it --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def opaque_rgba(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("opaque") / "ihc-rgba.png"
    Image.open(IMAGES / "ihc.png").convert("RGBA").save(path)
    return path


def test_a_fully_opaque_rgba_style_is_todays_style_exactly(opaque_rgba: Path) -> None:
    """An alpha of 255 everywhere is no alpha: the same tensor as the RGB file, no weights, and a run (the golden
    test's settings, two steps) gives the RGB style's image bit for bit."""
    style, alpha = load_style(opaque_rgba, 32)
    assert alpha is None and torch.equal(style, load_image(IMAGES / "ihc.png", 32))
    config = StyleConfig(size=32, steps=2, weights="random", device="cpu")
    ours = pil_to_tensor(stylize(IMAGES / "chelsea.png", opaque_rgba, config))
    assert torch.equal(ours, pil_to_tensor(stylize(IMAGES / "chelsea.png", IMAGES / "ihc.png", config)))


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_hands_the_alpha_to_its_targets(cut_out, kind: str) -> None:
    """``Run`` from the files, on the 1x1 network: the padded file's first evaluation scores the cut-out's style
    loss (``FLOAT32``), and without its alpha (the same pixels, composited over white, as a tensor) it does not."""
    inner_path, padded_path = cut_out
    net = pointwise_net()
    first: dict[str, float] = {}
    for name, style, long_side in (("inner", inner_path, 24), ("padded", padded_path, 40),
                                   ("white", load_image(padded_path, 40), 40)):
        config = StyleConfig(size=32, steps=1, device="cpu", optimizer="adam", style_loss=kind,
                             style_scale=long_side / 32, **LAYERS)
        events: list = []
        Run(IMAGES / "chelsea.png", style, config, cnn=net).execute(events.append)
        first[name] = events[0].style_loss
    assert first["inner"] > 0
    assert first["padded"] == pytest.approx(first["inner"], rel=FLOAT32)
    assert first["white"] != pytest.approx(first["inner"], rel=0.01)


def test_a_style_transparent_everywhere_is_one_line(tmp_path: Path) -> None:
    clear = tmp_path / "clear.png"
    Image.new("RGBA", (20, 20), (10, 200, 30, 0)).save(clear)
    with pytest.raises(ImageError, match=r"clear\.png: is transparent everywhere"):
        load_style(clear, 16)
    out = tmp_path / "out.png"
    result = invoke_stylize([IMAGES / "chelsea.png", clear, "-o", out, *FAST], exit_code=1)
    assert "clear.png: is transparent everywhere" in one_error_line(result)
    assert not out.exists()


def test_the_colour_statistics_leave_transparent_pixels_out() -> None:
    """``preserve_colors``: the style's colour mean and covariance (histogram) and its luminance's mean and std are
    the visible pixels'; the pixels recoloured are the cut-out's, recoloured as the cut-out alone would be."""
    inner = rand(1, 3, 6, 8, seed=13)
    style = torch.ones(1, 3, 10, 12, dtype=torch.float64)  # white under the transparent border
    style[..., 2:8, 2:10] = inner
    alpha = torch.zeros(1, 1, 10, 12, dtype=torch.float64)
    alpha[..., 2:8, 2:10] = 1
    content = rand(1, 3, 9, 9, seed=14)
    recoloured = colors.match_color_histogram(style, content, alpha=alpha)[..., 2:8, 2:10]
    assert relative(recoloured, colors.match_color_histogram(inner, content)) < 1e-10
    matched = colors.match_luminance(style, content, alpha)[..., 2:8, 2:10]
    assert relative(matched, colors.match_luminance(inner, content)) < 1e-10
    assert relative(colors.match_luminance(style, content)[..., 2:8, 2:10], matched) > 0.01  # the white counts


def test_load_style_resizes_the_alpha_with_the_image_and_reads_every_alpha_mode(tmp_path: Path) -> None:
    """The alpha is at the image's working size, in [0, 1], resized without ringing (no transparent pixel far from
    the edge gains weight); LA and a palette's transparent entry give one too; a plain RGB file none."""
    rgba = Image.new("RGBA", (160, 80), (200, 10, 10, 255))
    rgba.paste((0, 0, 0, 0), (0, 0, 80, 80))
    style, alpha = load_style(rgba, 40)
    assert style.shape == (1, 3, 20, 40) and alpha is not None and alpha.shape == (1, 1, 20, 40)
    # A quarter the size: each weight averages 8 px around its centre. Beyond them from the edge: exactly 0 and 1.
    assert float(alpha[..., :18].max()) == 0 and float(alpha[..., 22:].min()) == pytest.approx(1, abs=1e-6)
    assert float(alpha.min()) >= 0 and float(alpha.max()) <= 1
    grey = Image.new("LA", (16, 16), (128, 255))
    grey.putpixel((0, 0), (128, 0))
    assert float(load_style(grey, 16)[1][0, 0, 0, 0]) == 0
    palette = Image.new("P", (16, 16), 1)
    palette.putpixel((3, 3), 0)
    palette.info["transparency"] = 0
    weights = load_style(palette, 16)[1]
    assert weights is not None and float(weights.sum()) == 16 * 16 - 1
    assert load_style(Image.new("RGB", (16, 16)), 16)[1] is None
    assert load_style(torch.rand(1, 3, 16, 16), 16)[1] is None  # tensors carry no alpha


def test_sliced_target_leaves_zero_weight_positions_out() -> None:
    """The sliced loss of a padded style's target matches the cut-out's loss on an input exactly (float64): the pad
    positions, weight 0, are not in the target at all."""
    f = rand(1, 4, 5, 6, seed=15)
    big, alpha = padded(f, 1, 2, 8, 9)
    x = rand(1, 4, 7, 7, seed=16)
    plain, ours = SlicedStyleLoss([f], seed=3), SlicedStyleLoss([big], seed=3, alphas=[alpha])
    assert ours.target.shape == plain.target.shape == (5, 30)
    plain(x)
    ours(x)
    assert float(ours.loss) == pytest.approx(float(plain.loss), rel=FLOAT64)
