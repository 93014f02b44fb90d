"""Controls for comparisons after many evaluations: how far rounding alone moves a run on this CPU.

Two float32 paths that compute the same numbers in another summation order (another CPU's
kernels, another thread count, channels_last, per-module backward) agree to about 1e-7 at their
first evaluation. LBFGS amplifies that: after 20 evaluations two such runs at 32 px can differ by
0.004 of a pixel (scaled weights) or by 13/255 (the tutorial's weights), and the amount jumps
between runs as small discrete events (a pixel clamped or not, a step accepted or not) happen or
not. A bound on such a difference tuned on one CPU fails on the next.

So a test that compares two runs after many evaluations also runs controls in the same test, on
the same CPU: the first run again from inputs moved by one float32 rounding step. How far those
land from the first run is what rounding alone does to it here; the test bounds its own
difference by a stated multiple of the largest control difference. Several controls, because one
alone can by chance land very close (9e-6 where the others gave 4e-3, measured).
"""

from __future__ import annotations

import torch


def one_step_up(x: torch.Tensor) -> torch.Tensor:
    """``x`` with every value moved to the next float32 towards +inf, kept in [0, 1]."""
    return torch.nextafter(x, torch.full_like(x, 2.0)).clamp(0, 1)


def one_step_down(x: torch.Tensor) -> torch.Tensor:
    """``x`` with every value moved to the next float32 towards -inf, kept in [0, 1]."""
    return torch.nextafter(x, torch.full_like(x, -1.0)).clamp(0, 1)


def moved_inputs(content: torch.Tensor, style: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Three (content, style) pairs, each one rounding step from ``(content, style)``: the content up,
    the content down, the style up."""
    moved = [(one_step_up(content), style), (one_step_down(content), style), (content, one_step_up(style))]
    for new_content, new_style in moved:
        assert not (torch.equal(new_content, content) and torch.equal(new_style, style))
    return moved
