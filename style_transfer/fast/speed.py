"""What ``--fast`` turns on, resolved in one place and without torch: a ``StyleConfig`` and what its device can do
(``cpuinfo.Bf16``) become one ``Speed``. The loop's settings (``run.settings``), the plan (``run.plans``), the tiles'
memory plan (``tiling``) and ``stylize --print-config`` read the ``Speed``; nothing else reads ``config.fast``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config.style import StyleConfig
from ..core.steps import TORCH_LBFGS_HISTORY
from .cpuinfo import Bf16

# What --fast moves when --parametrization is not given: the image's scaled Fourier coefficients (fast/basis.py).
FAST_PARAMETRIZATION = "fourier"
# --fast's LBFGS history when it moves the pixels (--fast --parametrization pixels): its schedule was measured with 20.
FAST_HISTORY_SIZE = 20
# In the Fourier basis: 50 pairs, half torch's 100 and half the memory LBFGS reads twice an iteration (210 MB a sweep
# at 512 px), for 1 to 2 % more loss after 240 evaluations (benchmarks/NOTEBOOK.md, 2026-12-08).
FAST_FOURIER_HISTORY_SIZE = 50
# --fast at one size runs this share of --steps (300 steps: 240 evaluations): 240 brought the untuned pairs within 5 %
# of the default's loss at about 0.4x its time, where 180 did not.
FAST_STEPS_SHARE = 0.8


@dataclass(frozen=True)
class Speed:
    """How a run computes what its config asks: the precision (and why), the layout and Gram kernel, what LBFGS moves
    and remembers, and the share of ``--steps`` it runs. ``resolve_speed`` makes one; the defaults: the tutorial's."""

    precision: str = "fp32"
    channels_last: bool = False
    fused_gram: bool = False
    history_size: int = TORCH_LBFGS_HISTORY
    parametrization: str = "pixels"  # what the optimiser moves (fast/basis.py)
    two_loop: str = "torch"  # which LBFGS: torch's or the stacked one (core/lbfgs.py)
    steps_share: float | None = None  # the share of --steps one size plans, or a coarse-to-fine run's first (None: all)
    levers_optional: bool = False  # the model's levers are --fast's, dropped at a tiled size (not asked one by one)
    reason: str = field(default="", compare=False)  # why this precision, where --fast chose it ("on this CPU (AMX)...")

    @property
    def changes_model(self) -> bool:
        """Whether the style model has anything to change (the history, two-loop and parametrization are the
        optimiser's): ``fast.fast.accelerator``."""
        return self.precision != "fp32" or self.channels_last or self.fused_gram


def resolve_speed(config: StyleConfig, device_kind: str = "cpu", bf16: Bf16 | None = None) -> Speed:
    """The ``Speed`` of ``config`` on a device of ``device_kind`` (``cpu``, ``cuda``, ...) that runs bf16 as ``bf16``
    says (``hardware.device_bf16`` for a device in hand, ``cpuinfo.cpu_bf16`` from the flags; None: no bf16).

    ``--fast`` takes bf16 where the device runs it natively (a CPU with AMX or AVX512-BF16 that oneDNN may use, a GPU
    with native bf16): there it nearly halves an evaluation's time for a few per cent of loss (docs/speed.md); float32
    elsewhere. An explicit ``precision`` stands (``hardware.check_bf16`` refuses bf16 a device cannot run).
    """
    fast = config.fast
    precision, reason = config.precision, ""
    if fast and precision == "fp32":
        native = bf16 is not None and bf16.native
        precision = "bf16" if native else "fp32"
        reason = _reason(device_kind, bf16)
    if config.parametrization is not None:
        parametrization = config.parametrization
    else:
        parametrization = FAST_PARAMETRIZATION if fast else "pixels"
    history = config.history_size
    if fast:
        history = min(history, FAST_HISTORY_SIZE if parametrization == "pixels" else FAST_FOURIER_HISTORY_SIZE)
    return Speed(precision=precision,
                 channels_last=True if fast else config.channels_last,
                 # the fused Gram is the Gram loss's own backward: the other style losses run without it
                 fused_gram=config.style_loss == "gram" if fast else config.fused_gram,
                 history_size=history, parametrization=parametrization,
                 # the stacked LBFGS also keeps its first steps in scale where torch's would not (core/lbfgs.py)
                 two_loop="stacked" if fast and config.optimizer == "lbfgs" else "torch",
                 steps_share=FAST_STEPS_SHARE if fast else None,
                 levers_optional=fast, reason=reason)


def _reason(device_kind: str, bf16: Bf16 | None) -> str:
    """Why --fast runs the precision it runs on this device, as ``--print-config`` says it after the precision."""
    if device_kind == "cpu":
        if bf16 is None:
            return "on this CPU (its flags cannot be read; bf16 needs AMX or AVX512-BF16)"
        return f"on this CPU ({bf16.why})" + (", where torch's oneDNN has bf16" if bf16.native else "")
    if device_kind == "cuda":
        if bf16 is not None and bf16.native:
            return "on a GPU with native bf16"
        return f"on this GPU ({bf16.why if bf16 is not None else 'no native bf16'})"
    return f"on {device_kind} (bf16 is not used there)"
