"""``margin``: the picture optimised inside a mirrored border, cut out at the end (docs/usage.md, "Edges").

VGG19 with seeded random weights, tiny images. The first evaluation is checked against the tutorial's losses
computed by hand on the border made by numpy's own mirror (``np.pad(mode="reflect")``), the picture against
the start image it must be cut back to.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from style_transfer import StyleConfig
from style_transfer.config.run_options import RunOptions
from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD, load_network
from style_transfer.errors import ImageError
from style_transfer.io.images import MIN_SIDE, load_image, pil_to_tensor
from style_transfer.run.run import Run

from ..conftest import small_image
from ..helpers import pixels, plain_conv_outputs, plain_gram

MARGIN = 5


@pytest.fixture(scope="module")
def images() -> tuple:
    return small_image("chelsea.png", (32, 21)), small_image("ihc.png", (32, 32))


def config(**fields) -> StyleConfig:
    return StyleConfig(**{"size": 32, "steps": 30, "weights": "random", "device": "cpu", "margin": MARGIN, **fields})


def mirrored(image: torch.Tensor, margin: int) -> torch.Tensor:
    """numpy's mirror without the edge repeated (d c b | a b c d | c b a), on a (1, 3, H, W) tensor."""
    return torch.from_numpy(np.pad(image.numpy(), ((0, 0), (0, 0), (margin, margin), (margin, margin)),
                                   mode="reflect"))


def tutorial_losses(features: torch.nn.Sequential, image: torch.Tensor, content: torch.Tensor,
                    style: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The tutorial's style (conv_1..conv_5, Gram mse) and content (conv_4 mse) losses, by a plain forward."""
    def convs(x: torch.Tensor) -> list[torch.Tensor]:
        mean, std = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
        return plain_conv_outputs(features, (x - mean) / std, 5)

    with torch.no_grad():
        styles, targets, ours = convs(style), convs(content), convs(image)
    style_loss = sum(F.mse_loss(plain_gram(o), plain_gram(s)) for o, s in zip(ours, styles))
    return style_loss, F.mse_loss(ours[3], targets[3])


def test_the_first_evaluation_scores_the_picture_in_its_mirrored_border(images) -> None:
    content_image, style_image = images
    settings = config()
    start = torch.rand(1, 3, 21, 32, generator=torch.Generator().manual_seed(4))
    events = []
    run = Run(content_image, style_image, settings, init=start)
    result = run.execute(lambda e: (events.append(e), run.cancel()))
    assert events[0].size == (32, 21)  # the picture's size, as without a border

    content = load_image(content_image, 32)
    style = load_image(style_image, 32)
    features = load_network("vgg19", "random").features
    x = mirrored(start, MARGIN)
    assert x.shape[-2:] == (21 + 2 * MARGIN, 32 + 2 * MARGIN)
    style_loss, content_loss = tutorial_losses(features, x, mirrored(content, MARGIN), style)
    assert events[0].style_loss == pytest.approx(settings.style_weight * float(style_loss), rel=1e-4)
    assert events[0].content_loss == pytest.approx(settings.content_weight * float(content_loss), rel=1e-4)
    # the control: the same losses without the border are other numbers (the border is scored)
    plain_style, _ = tutorial_losses(features, start, content, style)
    assert abs(float(plain_style) - float(style_loss)) > 1e-3 * float(style_loss)

    # the picture is cut back out where it was put: cancelled at the first evaluation it is the start image
    assert result.image.size == (32, 21)
    expected = np.round(start[0].permute(1, 2, 0).numpy() * 255).astype(np.uint8)
    assert np.abs(pixels(result.image).astype(int) - expected.astype(int)).max() <= 1


def test_coarse_to_fine_sizes_and_previews_are_the_picture(images) -> None:
    """Each size runs in its own border (scaled: 5 px at 32, about 2 at 16); what a user sees has the picture's
    size, and the picture moved: the run optimised it."""
    events = []
    result = Run(*images, config(scales=2, steps=20), RunOptions(preview_every=5)).execute(events.append)
    assert {e.size for e in events if e.scale == 1} == {(32, 21)}
    assert {e.size for e in events if e.scale == 0} == {(16, max(MIN_SIDE, 11))}  # the short side's floor
    previews = [e for e in events if e.preview is not None]
    assert previews and all(e.preview.size == e.size for e in previews)
    assert result.image.size == (32, 21)
    start = pil_to_tensor(images[0].resize((32, 21)))
    assert float((pil_to_tensor(result.image) - start).abs().mean()) > 0.01


def test_a_border_wider_than_the_picture_is_refused_in_one_line(images) -> None:
    with pytest.raises(ImageError, match=r"margin 40 px: the picture is 32x21 px") as caught:
        Run(*images, config(margin=40)).execute()
    assert "\n" not in str(caught.value)


def test_margin_is_a_count_of_pixels() -> None:
    with pytest.raises(ValueError, match="margin must be an integer >= 0"):
        config(margin=-1)


def test_masks_are_mirrored_with_the_picture(images) -> None:
    """A style mask over the picture gets the same border: an all-white one scores as no mask does (the masked
    losses' documented identity), a left-half one another number (the mask is followed, border included)."""
    from PIL import Image

    content, style = images
    losses = {}
    left = Image.fromarray(np.where(np.arange(32) < 16, 255, 0).astype(np.uint8)[None].repeat(21, 0))
    for name, mask in (("none", None), ("white", Image.new("L", (32, 21), 255)), ("left", left)):
        events = []
        run = Run(content, style, config(style_masks=() if mask is None else (mask,)))
        run.execute(lambda e: (events.append(e), run.cancel()))
        losses[name] = events[0].style_loss
    assert losses["white"] == pytest.approx(losses["none"], rel=1e-5)
    assert abs(losses["left"] - losses["none"]) > 1e-3 * losses["none"]
