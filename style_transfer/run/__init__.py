"""One run: ``Run`` (sizes, events, previews, checkpoints) and ``stylize()`` (``run``); what it hands back,
``RunResult``, defined here (``from style_transfer.run import RunResult``, without torch); whether it fits, from its
images' headers (``fits``); its content read once and its images at each size (``inputs``), its progress and stages
(``progress``), saved and resumed state and a resume's settings reconciled (``checkpoints``), the device, sizes, start
image and colours (``prepare``), sizes and budgets without torch (``plans``), the loop's settings for a config
(``settings``), the backward paths compared (``compare``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from PIL import Image

# Why a run ended (RunResult.stopped): it ran its evaluations; LBFGS converged; a cancel() (the web app's
# button, the command's Ctrl-C and SIGTERM pass their own reason); the loss stopped improving (plateau).
STOP_REASONS = ("done", "converged", "cancelled", "interrupted", "terminated", "plateau")


@dataclass(frozen=True)
class Unfinished:
    """Where a run of several sizes stopped before its last: the picture it hands back is the working image of size
    ``scale`` (from 1) of ``scales``, ``working`` (width, height) px, upscaled to the size asked for."""

    working: tuple[int, int]
    scale: int
    scales: int

    def text(self) -> str:
        """As the command says it: ``the 375x250 working image of size 1 of 3, upscaled``."""
        return f"the {self.working[0]}x{self.working[1]} working image of size {self.scale} of {self.scales}, upscaled"


@dataclass
class RunResult:
    """What a run made: the image (final colours and alpha) and how it went."""

    image: Image.Image
    evaluations: int  # closure evaluations run (resumed runs: counted from the start)
    stopped: str  # one of STOP_REASONS
    losses: dict[str, float]  # the weighted terms of the image handed back (the last evaluation's, or kept's)
    seconds: float  # time spent optimising (resumed runs: the earlier part included)
    record: dict[str, Any] = field(repr=False)  # provenance.make_record: embed it in every file written
    kept: int | None = None  # the evaluation whose image was handed back, its lowest loss (Run's keep_best); None: the last
    start_loss: float | None = None  # the loss of the last size's first evaluation (its start image)
    unfinished: Unfinished | None = None  # a run of several sizes stopped before its last: which size the picture is

    @property
    def ended_above_start(self) -> bool:
        """The image handed back scores worse than the start did: LBFGS diverged, the picture is probably noise."""
        return self.start_loss is not None and self.losses.get("loss", 0.0) > self.start_loss
