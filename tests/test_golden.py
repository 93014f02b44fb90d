"""Golden regression: the default path on a 32 px pair with seeded random weights."""

from __future__ import annotations

import torch
from PIL import Image

from style_transfer import stylize
from style_transfer.images import pil_to_tensor

from .golden.make_golden import CONFIG, CONTENT, GOLDEN, STYLE


def test_matches_golden_image() -> None:
    result = pil_to_tensor(stylize(CONTENT, STYLE, CONFIG))
    with Image.open(GOLDEN) as image:
        golden = pil_to_tensor(image.convert("RGB"))
    assert result.shape == golden.shape == (1, 3, 21, 32)
    # Stored as 8-bit PNG. With the thread count it was made with (torch's default) the match
    # is exact; another thread count sums in another order, and 20 evaluations amplify that to
    # a few levels on 0.1 % of the values (measured with 1 thread: max 3/255, mean 0.04/255).
    diff = (result - golden).abs()
    assert diff.max().item() <= 4 / 255 + 1e-6
    assert diff.mean().item() <= 0.25 / 255
    # The run changed the content image (else the golden check would prove nothing).
    from style_transfer.images import load_image

    assert (load_image(CONTENT, 32) - golden).abs().mean().item() > 0.02
