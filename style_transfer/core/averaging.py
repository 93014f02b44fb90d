"""Iterate averaging: the bias-corrected exponential moving average of the images a run evaluates.

As in crowsonkb's style-transfer (``avg_decay``): after each closure evaluation ``n``,
``avg = decay * avg + (1 - decay) * x_n`` from ``avg = 0``, and the picture is ``avg / (1 - decay ** n)``
(the bias correction: without it the first images would be pulled towards black). Averaging smooths the
high-frequency jitter the optimiser leaves from one evaluation to the next; it changes no gradient.
"""

from __future__ import annotations

from typing import Any

import torch


class IterateAverage:
    """The running average of a run's iterates at one working size (``Run`` restarts it at each size).

    Args:
        decay: in (0, 1); 0.99 weighs about the last 100 evaluations.

    Raises:
        ValueError: a decay outside (0, 1).
    """

    def __init__(self, decay: float) -> None:
        if isinstance(decay, bool) or not isinstance(decay, (int, float)) or not 0 < decay < 1:
            raise ValueError(f"average (decay) must be a number between 0 and 1, got {decay!r}")
        self.decay = float(decay)
        self.count = 0
        self.average: torch.Tensor | None = None  # the biased sum, avg; value() corrects it

    def reset(self) -> None:
        """Forget every iterate (a new working size starts)."""
        self.count, self.average = 0, None

    def update(self, image: torch.Tensor) -> None:
        """Take in the image of one evaluation: ``avg = decay * avg + (1 - decay) * image``."""
        image = image.detach().float()
        if self.average is None or self.average.shape != image.shape:
            self.average = torch.zeros_like(image)
        self.average = self.average * self.decay + image * (1 - self.decay)
        self.count += 1

    def value(self) -> torch.Tensor | None:
        """The bias-corrected average ``avg / (1 - decay ** n)``, in [0, 1]; None before the first update."""
        if self.average is None or self.count == 0:
            return None
        return (self.average / (1 - self.decay ** self.count)).clamp(0, 1)

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps: the decay, the count and the biased average (a CPU copy)."""
        return {"decay": self.decay, "count": self.count,
                "average": None if self.average is None else self.average.detach().to("cpu", copy=True)}

    def load_state_dict(self, state: dict[str, Any], device: torch.device | str = "cpu") -> None:
        """Continue from ``state_dict()``'s contents.

        Raises:
            ValueError: a state of another decay, or damaged.
        """
        try:
            decay, count, average = float(state["decay"]), int(state["count"]), state["average"]
        except (KeyError, TypeError, ValueError):
            raise ValueError("damaged iterate average (fields missing)") from None
        if decay != self.decay:
            raise ValueError(f"the saved iterate average has decay {decay:g}, this run {self.decay:g}")
        self.count = count
        self.average = None if average is None else average.float().to(device)
