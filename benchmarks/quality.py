"""Whole runs of the product measured for quality and time: shared by benchmark.py and fast_budgets.py.

A run goes through ``stylize()`` (the product's path, coarse-to-fine included) on the sample cat and
stain, with a recording callback; an image is scored by the default path's fp32 loss at the final size
(``Scorer``), so the default and ``--fast`` are compared with one yardstick whatever their own loss
computes in (bf16 on ``--fast`` where the device has it). Importing it needs torch and the package on
the path.
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from style_transfer import NonFiniteLoss, RunStats, StyleConfig, stylize
from style_transfer.io.images import load_image, pil_to_tensor
from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD, freeze, random_vgg_features
from style_transfer.core.style_model import get_style_model_and_losses

ROOT = Path(__file__).resolve().parent.parent
CONTENT = ROOT / "images" / "chelsea.png"
STYLE = ROOT / "images" / "ihc.png"
WITHIN = 1.05  # "the default's quality": the best image's fp32 loss at most 5 % above the default's best


class Scorer:
    """The default path's fp32 loss of an image at the final size (the benchmark's yardstick)."""

    def __init__(self, cnn: torch.nn.Sequential, size: int, weights: tuple[float, float],
                 device: torch.device | str = "cpu", normalization: torch.nn.Module | None = None) -> None:
        """``normalization``: the network's preprocessing module (``Network.normalization()``; None: the
        tutorial's ImageNet mean and std)."""
        self.content = load_image(CONTENT, size, device)
        style = load_image(STYLE, size, device)
        self.model, self.style_losses, self.content_losses = get_style_model_and_losses(
            cnn, IMAGENET_MEAN, IMAGENET_STD, style, self.content, normalization=normalization)
        self.style_weight, self.content_weight = weights

    @property
    def shape(self) -> tuple[int, int]:
        """(H, W) of the final size: the images a run's last size evaluates."""
        return tuple(self.content.shape[-2:])  # type: ignore[return-value]

    def __call__(self, image: torch.Tensor) -> float:
        with torch.no_grad():
            self.model(image.to(self.content.device).clamp(0, 1))
            return float(self.style_weight * sum(sl.loss for sl in self.style_losses)
                         + self.content_weight * sum(cl.loss for cl in self.content_losses))


def random_network(seed: int, folder: Path, device: torch.device | str = "cpu",
                   model: str = "vgg19") -> tuple[torch.nn.Sequential, Path]:
    """VGG features (``model``) with seeded random weights, and a state dict file of them for
    ``stylize(weights=FILE)`` (its own ``weights="random"`` is always seed 0)."""
    cnn = freeze(random_vgg_features(model, seed))
    path = folder / f"{model}-random-{seed}.pth"
    torch.save(cnn.state_dict(), path)
    return cnn.to(device), path


def _seen(stats: RunStats) -> torch.Tensor:
    """The image the last evaluation saw (the copy the loop keeps of it)."""
    last_image = getattr(stats, "last_image", None)
    image = last_image() if last_image is not None else stats._last_good
    assert image is not None  # called from the progress callback: an evaluation was counted
    return image


def timed_run(config: StyleConfig, final_shape: tuple[int, int], keep_below: float | None = None) -> dict[str, Any]:
    """``stylize()`` with a recording callback, timed from the call to its return.

    Evaluations whose image has ``final_shape`` (the last size of a coarse-to-fine run; every
    evaluation of a single-size run) are recorded: ``trace`` holds ``(seconds from the start, step,
    loss)`` of each (the path's own loss), ``best`` the row with the lowest loss plus a copy of its
    image, and ``candidates`` the rows with a loss at most ``keep_below``, each with a copy of its
    image (for ``first_within``). ``image`` is what the user gets (the returned picture, 8 bits
    per channel; the last good image when the loss went non-finite).
    """
    stats, trace, candidates = RunStats(), [], []
    best: dict[str, Any] = {"loss": math.inf, "step": None, "seconds": None, "image": None}
    device = torch.device(config.device) if config.device != "auto" else None

    def on_step(info: Any) -> None:
        seconds = time.perf_counter() - start
        image = _seen(stats)
        if tuple(image.shape[-2:]) != final_shape:
            return
        trace.append((seconds, info.step, info.loss))
        if info.loss < best["loss"]:
            best.update(loss=info.loss, step=info.step, seconds=seconds, image=image.clone())
        if keep_below is not None and info.loss <= keep_below:
            candidates.append((seconds, info.step, info.loss, image.clone()))

    start, cpu = time.perf_counter(), time.process_time()
    stopped = None
    try:
        result = pil_to_tensor(stylize(CONTENT, STYLE, config, progress=on_step, stats=stats))
    except NonFiniteLoss as exc:  # the user keeps the last good image; so does this measurement
        stopped, result = exc.step, exc.image
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"wall_s": wall, "cpu_s": cpu, "evaluations": stats.evaluations, "final_size_evaluations": len(trace),
            "trace": trace, "best": best, "candidates": candidates, "image": result, "non_finite_after": stopped}


def first_within(run: dict[str, Any], target: float, score: Scorer) -> dict[str, Any] | None:
    """The first recorded evaluation whose loss was at most ``target``, confirmed by ``score`` (fp32) of
    the image it evaluated: its time, step and fp32 loss, or None when none was."""
    for seconds, step, loss, image in run["candidates"]:
        fp32 = score(image)
        if fp32 <= target:
            return {"seconds": seconds, "step": step, "loss": loss, "fp32_loss": fp32}
    return None


def spread(values: list[float], key: str) -> dict[str, float | None]:
    """``KEY_median``, ``KEY_min`` and ``KEY_max`` of ``values`` (None for an infinite one: 'never')."""
    finite = [None if math.isinf(v) else v for v in (statistics.median(values), min(values), max(values))]
    return dict(zip((f"{key}_median", f"{key}_min", f"{key}_max"), finite))
