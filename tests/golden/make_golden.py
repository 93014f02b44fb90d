"""Regenerate the golden data of tests/core/test_golden.py: ``python tests/golden/make_golden.py``.

Run it only when a change is meant to alter the default path's numbers, and say why in
the commit. Pinned on the CPU (golden numbers are CPU-only). Two files:

- the image ``stylize`` makes with ``CONFIG`` (one LBFGS step, 20 evaluations), as 8-bit PNG;
- the loss and the image gradient at the run's first evaluation, as a tensor file
  (``{"loss": float64 scalar, "grad": (1, 3, 21, 32) float32}``, read with ``weights_only=True``).
"""

from __future__ import annotations

from pathlib import Path

import torch

from style_transfer import StyleConfig, TransferSettings, run_style_transfer, stylize
from style_transfer.io.images import load_image
from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD, load_vgg19_features

HERE = Path(__file__).resolve().parent
IMAGES = HERE.parent.parent / "images"
CONTENT = IMAGES / "chelsea.png"
STYLE = IMAGES / "ihc.png"
CONFIG = StyleConfig(size=32, steps=10, weights="random", device="cpu")
GOLDEN = HERE / "chelsea_ihc_32px_random_10steps.png"
GOLDEN_FIRST = HERE / "chelsea_ihc_32px_random_first_evaluation.pt"


class _Stop(Exception):
    """Ends a run after its first evaluation."""


def first_evaluation() -> tuple[float, torch.Tensor]:
    """The loss and the image gradient at the first closure evaluation of ``stylize(CONTENT, STYLE, CONFIG)``:
    the same weights, images and loop (``stylize`` calls ``run_style_transfer`` with these)."""
    content = load_image(CONTENT, CONFIG.size)
    style = load_image(STYLE, CONFIG.size)
    image = content.clone()
    seen: list[tuple[float, torch.Tensor]] = []

    def stop(info) -> None:  # type: ignore[no-untyped-def]
        seen.append((info.loss, image.grad.detach().clone()))
        raise _Stop

    try:
        run_style_transfer(load_vgg19_features(CONFIG.weights), IMAGENET_MEAN, IMAGENET_STD,
                           content, style, image, CONFIG.steps, CONFIG.style_weight, CONFIG.content_weight,
                           TransferSettings.of(progress=stop))
    except _Stop:
        pass
    return seen[0]


def main() -> None:
    stylize(CONTENT, STYLE, CONFIG).save(GOLDEN)
    print(f"wrote {GOLDEN}")
    loss, grad = first_evaluation()
    torch.save({"loss": torch.tensor(loss, dtype=torch.float64), "grad": grad}, GOLDEN_FIRST)
    print(f"wrote {GOLDEN_FIRST}")


if __name__ == "__main__":
    main()
