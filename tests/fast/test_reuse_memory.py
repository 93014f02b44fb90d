"""``hardware.reuse_freed_memory`` (set by the commands for their process) changes where the feature maps live, never a
number: whole runs give the same losses and the same picture, bit for bit, with freed memory given back (glibc's way)
and kept."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from style_transfer import StyleConfig, stylize
from style_transfer.fast.hardware import reuse_freed_memory

from ..conftest import IMAGES

ROOT = Path(__file__).resolve().parents[2]

glibc = pytest.mark.skipif(not reuse_freed_memory(False), reason="not glibc: reuse_freed_memory does nothing here")


@pytest.fixture
def allocator():
    """The test switches the allocator; give the session glibc's thresholds back."""
    yield reuse_freed_memory
    reuse_freed_memory(False)


def run(reuse: bool, fast: bool) -> tuple[list[float], bytes, int]:
    """A 32 px run of one LBFGS step (with --fast: its float32 start, bf16 where the CPU has it, and its float32
    finish): each evaluation's losses, the picture's bytes, the minor page faults of the run. conv_1's maps are
    168 KiB, above glibc's 128 KiB: mapped afresh at each evaluation when freed memory is given back."""
    reuse_freed_memory(reuse)
    # Random weights with the loss weights x1000: LBFGS stores curvature pairs, as with real ones.
    config = StyleConfig(weights="random", size=32, steps=10, fast=fast, style_weight=1e9, content_weight=1e3)
    losses: list[float] = []
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    image = stylize(IMAGES / "chelsea.png", IMAGES / "ihc.png", config,
                    progress=lambda info: losses.extend([info.style_loss, info.content_loss]))
    return losses, image.tobytes(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@glibc
@pytest.mark.parametrize("fast", [False, True], ids=["default", "fast"])
def test_same_numbers_with_freed_memory_kept(fast: bool, allocator) -> None:
    given_back, given_back_image, given_back_faults = run(False, fast)
    kept, kept_image, kept_faults = run(True, fast)
    assert len(kept) == len(given_back) >= 2 * 8  # --fast: its float32 start's 4 evaluations, then bf16's
    assert kept == given_back  # every evaluation's losses, exactly
    assert kept_image == given_back_image


@glibc
@pytest.mark.slow
def test_kept_memory_saves_the_page_faults() -> None:
    """The point of it: the maps' pages are touched once, not at every evaluation. In a fresh process: a pytest worker's
    heap, after other tests, may hold the maps already (measured: 3 faults against 2 in a worker, in either mode)."""
    child = ("import sys; sys.path.insert(0, {root!r}); from tests.fast.test_reuse_memory import run; "
             "print(run(False, False)[2], run(True, False)[2])").format(root=str(ROOT))
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    given_back_faults, kept_faults = map(int, done.stdout.split()[-2:])
    assert kept_faults < given_back_faults / 2, (kept_faults, given_back_faults)
