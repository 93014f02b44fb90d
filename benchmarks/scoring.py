"""A candidate against the default, scored by the default's float32 loss (``Scorer``): the one yardstick, so ratios
compare pictures, not arithmetics. ``timed_run`` runs ``stylize()`` recording each evaluation."""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from style_transfer import NonFiniteLoss, RunStats, StyleConfig, stylize
from style_transfer.io.images import load_image, pil_to_tensor

from . import ROOT, network as networks

IMAGES = ROOT / "images"
CONTENT, STYLE = IMAGES / "chelsea.png", IMAGES / "ihc.png"
WITHIN = 1.05  # "the default's quality": a loss at most 5 % above the default's
# Photo and style pairs of images/: 0-3 are the ones --fast's Fourier scale was chosen on, 4 and 5 never tuned on.
PAIRS = (("chelsea.png", "ihc.png"), ("coffee.png", "hubble_deep_field.jpg"), ("astronaut.png", "ihc.png"),
         ("chelsea.png", "brick.png"), ("rocket.jpg", "gravel.png"), ("astronaut.png", "grass.png"))


class Scorer:
    """The default path's float32 loss of a picture at the final size (``size``, ``device``)."""

    def __init__(self, network: Any, size: int, weights: tuple[float, float], device: torch.device | str = "cpu",
                 content: Path | str = CONTENT, style: Path | str = STYLE) -> None:
        self.content = load_image(content, size, device)
        self.shape = tuple(self.content.shape[-2:])  # (H, W) of the final size: what a run's last size evaluates
        self.model, self.style_losses, self.content_losses = networks.style_model(
            network, load_image(style, size, device), self.content)
        self.style_weight, self.content_weight = weights

    def parts(self, image: torch.Tensor) -> dict[str, float]:
        """The weighted style and content losses of ``image`` and their sum (``loss``)."""
        if image.shape[-2:] != self.content.shape[-2:]:
            raise ValueError(f"picture {tuple(image.shape)} is not the final size {tuple(self.content.shape)}")
        with torch.no_grad():
            self.model(image.to(self.content.device).clamp(0, 1))
        style = self.style_weight * float(sum(s.loss for s in self.style_losses))
        content = self.content_weight * float(sum(c.loss for c in self.content_losses))
        return {"loss": style + content, "style": style, "content": content}

    def __call__(self, image: torch.Tensor) -> float:
        return self.parts(image)["loss"]


def timed_run(config: StyleConfig, final_shape: tuple[int, int], keep_below: float | None = None) -> dict[str, Any]:
    """``stylize()`` on the cat and stain, timed from the call to its return; at the final size ``trace`` (seconds,
    step, own loss), ``best`` (with its image) and ``candidates`` (own loss at most ``keep_below``, with images);
    ``image``: what the user gets (8 bits a channel; the last good one after a non-finite loss)."""
    stats, trace, candidates = RunStats(), [], []
    best: dict[str, Any] = {"loss": math.inf, "step": None, "seconds": None, "image": None}

    def on_step(info: Any) -> None:
        seconds = time.perf_counter() - start
        image = stats.last_image()  # the copy the loop keeps of what it evaluated
        if tuple(image.shape[-2:]) != final_shape:
            return
        trace.append((seconds, info.step, info.loss))
        if info.loss < best["loss"]:
            best.update(loss=info.loss, step=info.step, seconds=seconds, image=image.clone())
        if keep_below is not None and info.loss <= keep_below:
            candidates.append((seconds, info.step, info.loss, image.clone()))

    start, cpu, stopped = time.perf_counter(), time.process_time(), None
    try:
        result = pil_to_tensor(stylize(CONTENT, STYLE, config, progress=on_step, stats=stats))
    except NonFiniteLoss as exc:  # the user keeps the last good image; so does this measurement
        stopped, result = exc.step, exc.image
    if config.device != "auto" and torch.device(config.device).type == "cuda":
        torch.cuda.synchronize(config.device)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"wall_s": wall, "cpu_s": cpu, "evaluations": stats.evaluations, "final_size_evaluations": len(trace),
            "trace": trace, "best": best, "candidates": candidates, "image": result, "non_finite_after": stopped}


def first_within(run: dict[str, Any], target: float, score: Scorer) -> dict[str, Any] | None:
    """The first kept evaluation whose image ``score`` puts at most ``target``: time, step, own and fp32 loss."""
    for seconds, step, loss, image in run["candidates"]:
        fp32 = score(image)
        if fp32 <= target:
            return {"seconds": seconds, "step": step, "loss": loss, "fp32_loss": fp32}
    return None


def spread(values: list[float], key: str) -> dict[str, float | None]:
    """``KEY_median``, ``KEY_min`` and ``KEY_max`` of ``values`` (None for an infinite one: 'never')."""
    finite = [None if math.isinf(v) else v for v in (statistics.median(values), min(values), max(values))]
    return dict(zip((f"{key}_median", f"{key}_min", f"{key}_max"), finite))
