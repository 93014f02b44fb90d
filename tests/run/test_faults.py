"""Faults during a run: Ctrl-C, a NaN loss, out of memory, LBFGS converging early, bugs."""

from __future__ import annotations

import collections
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn

from style_transfer import StyleConfig, get_style_model_and_losses, stylize
from style_transfer import memory
from style_transfer.losses import tutorial as losses
from style_transfer.core import transfer
from style_transfer.run import prepare
from style_transfer.run import inputs as inputs_module, run as run_module
from style_transfer.errors import Interrupted, NonFiniteLoss, ResourceError
from style_transfer.fast.fast import Speed, accelerate
from style_transfer.fast.hardware import bf16_supported
from style_transfer.core.run_stats import RunStats
from style_transfer.memory import estimate_bytes
from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD
from style_transfer.core.transfer import TransferSettings, optimize

from ..conftest import IMAGES
from ..helpers import FAST, one_error_line, invoke_stylize as invoke, transfer as run_transfer

ROOT = Path(__file__).resolve().parents[2]
CONTENT = str(IMAGES / "chelsea.png")
STYLE = str(IMAGES / "ihc.png")


def noise_png(path: Path, width: int, height: int) -> str:
    rng = np.random.default_rng(1)
    Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).save(path)
    return str(path)


# --- Ctrl-C ---

def read_until(stream: int, pattern: str, timeout: float) -> str:
    """Read a pipe until ``pattern`` matches what was read (or fail after ``timeout`` s)."""
    text, deadline = "", time.monotonic() + timeout
    while not re.search(pattern, text):
        left = deadline - time.monotonic()
        assert left > 0, f"no {pattern!r} in time; stderr so far: {text!r}"
        if select.select([stream], [], [], left)[0]:
            chunk = os.read(stream, 4096)
            assert chunk, f"process ended; stderr: {text!r}"
            text += chunk.decode(errors="replace")
    return text


@pytest.mark.slow
def test_sigint_saves_current_image_and_exits_130(tmp_path: Path) -> None:
    content = noise_png(tmp_path / "c.png", 48, 32)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "result.png"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    process = subprocess.Popen(
        [sys.executable, "-m", "style_transfer", content, STYLE, "-o", str(out), "--weights", "random",
         "--size", "48", "--steps", "300", "--device", "cpu"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # >= 3 steps ran of the 320 planned: the first plain line (stderr is a pipe) comes at a tenth, 32, in about a
        # second; a run planned far longer waited 10 s for it. The rest of the run is many times the signal's way.
        before = read_until(process.stderr.fileno(), r"\b([3-9]|[1-9]\d+)/320", timeout=120)
        process.send_signal(signal.SIGINT)
        stdout, rest = process.communicate(timeout=60)
    finally:
        process.kill()
    stderr = before + rest.decode()
    assert process.returncode == 130, stderr
    assert stdout == b""
    assert "Traceback" not in stderr
    last = re.split(r"[\r\n]+", stderr.strip())[-1]
    match = re.fullmatch(r"interrupted at step (\d+), saved (.+?); no checkpoint was asked for .*", last)
    assert match, stderr
    assert int(match.group(1)) >= 3 and match.group(2) == str(out)
    with Image.open(out) as image:
        assert image.format == "PNG" and image.size == (48, 32)
    assert os.listdir(out_dir) == ["result.png"]  # no temp file left


def test_interrupted_carries_the_image_of_that_step(cnn, content_32, style_32) -> None:
    input_img = content_32.clone()
    seen = []

    def progress(info) -> None:
        seen.append(input_img.detach().clone())
        if info.step == 3:
            raise KeyboardInterrupt

    with pytest.raises(Interrupted) as caught:
        run_transfer(cnn, content_32, style_32, input_img, 50, progress=progress)
    assert caught.value.step == 3
    assert torch.equal(caught.value.image, seen[2].clamp(0, 1))
    assert not torch.equal(caught.value.image, content_32)  # the run had moved


def test_interrupt_before_the_first_evaluation_carries_no_image(monkeypatch: pytest.MonkeyPatch) -> None:
    class Stopped:  # an optimiser interrupted at once (LBFGS's state is a defaultdict too)
        state: dict = collections.defaultdict(dict)
        param_groups = [{"max_iter": 20}]

        def step(self, closure):
            raise KeyboardInterrupt

    monkeypatch.setattr(transfer, "get_input_optimizer", lambda image, **options: Stopped())
    poisoned = Poisoned(bad_from=100)
    with pytest.raises(Interrupted, match="interrupted at step 0") as caught:
        optimize(poisoned, [], [poisoned], torch.rand(1, 3, 8, 8), num_steps=5)
    assert caught.value.image is None


def test_interrupt_before_the_first_step_leaves_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "load_network", interrupted)
    out = tmp_path / "o.png"
    out.write_bytes(b"precious")
    result = invoke([CONTENT, STYLE, "-o", str(out), *FAST], 130)
    lines = result.stderr.strip().split("\n")
    assert lines[0].startswith("plan: 32x21 px, ")  # what the run would take, once its checks passed
    assert lines[1:] == ["making VGG19 with seeded random weights ...",  # what was under way
                         f"interrupted before the result was written; {out} left as it was"]
    assert out.read_bytes() == b"precious"
    assert os.listdir(tmp_path) == ["o.png"]


# --- non-finite loss ---

class Poisoned(nn.Module):
    """A loss module: (x - 0.25)^2 summed, NaN from the ``bad_from``-th evaluation on."""

    def __init__(self, bad_from: int) -> None:
        super().__init__()
        self.calls, self.bad_from = 0, bad_from

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        self.loss = ((x - 0.25) ** 2).sum()
        if self.calls >= self.bad_from:
            self.loss = self.loss * float("nan")
        return x


def test_nan_loss_stops_keeping_last_finite_image() -> None:
    image = torch.full((1, 3, 8, 8), 0.9)
    poisoned = Poisoned(bad_from=4)
    seen = []
    with pytest.raises(NonFiniteLoss, match="the loss became nan at step 4") as caught:
        optimize(poisoned, [], [poisoned], image, num_steps=50,
                 settings=TransferSettings.of(progress=lambda info: seen.append(image.detach().clone())))
    assert caught.value.step == 3
    assert torch.equal(caught.value.image, seen[2])  # the image evaluated at step 3
    assert torch.isfinite(caught.value.image).all() and not torch.equal(seen[2], seen[0])


def test_nan_at_first_step_keeps_nothing() -> None:
    poisoned = Poisoned(bad_from=1)
    with pytest.raises(NonFiniteLoss, match="no finite image to keep") as caught:
        optimize(poisoned, [], [poisoned], torch.rand(1, 3, 8, 8), num_steps=5)
    assert caught.value.image is None and caught.value.step == 0


def poison_content_loss(monkeypatch: pytest.MonkeyPatch, bad_from: int) -> None:
    original = losses.ContentLoss.forward
    calls = [0]

    def forward(self, x):
        out = original(self, x)
        calls[0] += 1
        if calls[0] >= bad_from:
            self.loss = self.loss * float("nan")
        return out

    monkeypatch.setattr(losses.ContentLoss, "forward", forward)


def test_cli_nan_saves_last_finite_image_and_exits_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    poison_content_loss(monkeypatch, bad_from=4)
    out = tmp_path / "o.png"
    line = one_error_line(invoke([CONTENT, STYLE, "-o", str(out), "-q", *FAST], 1))
    assert "the loss became nan at step 4" in line and f"saved {out}" in line
    with Image.open(out) as image:
        assert image.size == (32, 21)
        assert np.asarray(image).mean() > 20  # a real picture, not black
    assert os.listdir(tmp_path) == ["o.png"]


def test_cli_nan_at_first_step_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    poison_content_loss(monkeypatch, bad_from=1)
    line = one_error_line(invoke([CONTENT, STYLE, "-o", str(tmp_path / "o.png"), "-q", *FAST], 1))
    assert "nothing written" in line
    assert os.listdir(tmp_path) == []


def test_non_finite_result_and_interrupt_fall_back_to_last_good_image() -> None:
    stats = RunStats()
    image = torch.full((1, 3, 4, 4), 0.5)
    stats.check_finite(1.0, image)  # step 1: finite, its image kept
    image.fill_(float("nan"))  # then LBFGS's last (unevaluated) update breaks the image
    with pytest.raises(NonFiniteLoss, match="non-finite after step 1") as caught:
        stats.check_final(image)
    assert torch.equal(caught.value.image, torch.full((1, 3, 4, 4), 0.5))
    interrupted = stats.interrupted()
    assert interrupted.step == 1 and torch.equal(interrupted.image, torch.full((1, 3, 4, 4), 0.5))


def test_help_documents_the_input_decisions() -> None:
    text = " ".join(invoke(["--help"], 0).output.split())
    for needle in ["JPEG, PNG, WebP, BMP, TIFF, GIF only", "frame 0", "at least 8 px on its shorter side",
                   "at most 80 megapixels", "exits 130", "--debug"]:
        assert needle in text


# --- out of memory ---

@pytest.mark.parametrize("error", [
    torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
    RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you tried to "
                 "allocate 9663676416 bytes. Error code 12 (Cannot allocate memory)"),
    MemoryError(),
])
def test_out_of_memory_one_line_suggests_smaller_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      error: BaseException) -> None:
    def exhausted(*args, **kwargs):
        raise error

    monkeypatch.setattr(run_module, "run_style_transfer", exhausted)
    line = one_error_line(invoke([CONTENT, STYLE, "-o", str(tmp_path / "o.png"), *FAST], 1))
    assert line == "Error: out of memory on cpu at size 32 px; try a smaller size (e.g. --size 16)"
    assert os.listdir(tmp_path) == []


def test_out_of_memory_at_a_large_size_suggests_tiles_then_smaller_tiles() -> None:
    from style_transfer.memory import out_of_memory

    cpu, error = torch.device("cpu"), MemoryError()
    # The library names the settings as the API takes them (size=...); the commands show them as flags.
    assert str(out_of_memory(error, 2048, cpu)) == (
        "out of memory on cpu at size 2048 px; try tile=512 (the same picture, evaluated in crops) "
        "or a smaller size (e.g. size=1424)")
    assert str(out_of_memory(error, 448, cpu)) == (
        "out of memory on cpu at size 448 px; try tile=192 (the same picture, evaluated in crops) "
        "or a smaller size (e.g. size=304)")
    assert str(out_of_memory(error, 2048, cpu, tile=512)) == (
        "out of memory on cpu at size 2048 px; try a smaller tile (e.g. tile=256) or a smaller size (e.g. size=1424)")
    assert str(out_of_memory(error, 2048, cpu, tile=192)).endswith("; try a smaller size (e.g. size=1424)")
    assert out_of_memory(RuntimeError("shapes do not match"), 2048, cpu) is None


def test_size_that_cannot_fit_is_refused_before_the_model_loads(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    content = noise_png(tmp_path / "c.png", 60, 40)
    style = noise_png(tmp_path / "s.png", 50, 50)
    # By hand, with memory' constants (test_estimate_by_hand): 256 MiB + content px x (3072 + 2400) B +
    # style px x 512 B. At 1024 px: 1024x683 and 1024x1024 px, 4_632_379_392 B (4.3 GiB). At 160 px
    # (160x107, 160x160): 375_223_296 B; at 176 px (176x117, 176x176): 396_974_592 B.
    # In tiles (tiling.tiled_estimate_bytes, the tile whose crop takes at most a tenth of the free memory:
    # 64 px, 12_582_912 B; 128 px would take 50 MB): 256 MiB + 12_582_912 B + content px x (10 LBFGS pairs x
    # 24 B + 120 B + 128 B of conv_4 targets) + style px x 12 B. At 528 px (528x352, 528x528): 375_061_504 B;
    # at 544 px (544x363, 544x544): 380_935_936 B.
    free = 380_000_000  # 0.35 GiB: room for 160 px, not for 176; 528 px in tiles, not 544
    monkeypatch.setattr(memory, "available_bytes", lambda device: free)
    monkeypatch.setattr(run_module, "load_network", lambda *a, **k: pytest.fail("the model was loaded"))
    out = tmp_path / "o.png"
    line = one_error_line(invoke([content, style, "-o", str(out), "--weights", "random", "--size", "1024",
                                  "--device", "cpu"], 1))
    assert line == ("Error: size 1024 px needs about 4.3 GiB but only 0.4 GiB is free on cpu: the largest size "
                    "that fits is about 160 px (--size 160), or about 528 px in tiles (--size 528 --tile 64)")
    assert not out.exists()


@pytest.mark.parametrize("extra", [[], ["--tile", "512"]], ids=["untiled", "tile"])
def test_an_impossible_size_is_refused_from_the_headers_before_any_image_is_upscaled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str]) -> None:
    """Issue 24: the estimate comes from the sizes the headers declare; no image is read at the working size
    (load_image, which upscales, is never called) and the line names the largest size, untiled and in tiles."""
    content = noise_png(tmp_path / "c.png", 60, 40)
    style = noise_png(tmp_path / "s.png", 50, 50)
    monkeypatch.setattr(memory, "available_bytes", lambda device: 380_000_000)  # as above
    monkeypatch.setattr(inputs_module, "load_image", lambda *a, **k: pytest.fail("an image was loaded at the size"))
    monkeypatch.setattr(prepare, "load_image", lambda *a, **k: pytest.fail("an image was loaded at the size"))
    out = tmp_path / "o.png"
    line = one_error_line(invoke([content, style, "-o", str(out), "--weights", "random", "--size", "16384",
                                  "--device", "cpu", *extra], 1))
    needs = "GiB in tiles of 512 px but" if extra else "GiB but"
    assert line.startswith("Error: size 16384 px needs about ") and needs in line
    assert line.endswith("the largest size that fits is about 160 px (--size 160), or about 528 px in tiles "
                         "(--size 528 --tile 64)")
    assert not out.exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the free memory is read from Linux's /proc")
@pytest.mark.slow
def test_size_100000_exits_at_once_in_one_line_and_little_memory(tmp_path: Path) -> None:
    """Issue 24: `--size 100000` grew to 22 GB and was killed. Now: one line, exit 1, under 1 GB peak RSS.

    The command runs in a child of a small Python parent that reads the child's peak RSS; the child's
    data (heap and anonymous maps, not the libraries) is capped at 4 GiB, so that a regression fails here
    instead of taking the machine."""
    content = noise_png(tmp_path / "c.png", 60, 40)
    style = noise_png(tmp_path / "s.png", 50, 50)
    out = tmp_path / "o.png"
    parent = (
        "import resource, subprocess, sys\n"
        "def cap():\n"
        "    resource.setrlimit(resource.RLIMIT_DATA, (4 * 2**30, 4 * 2**30))\n"
        "done = subprocess.run([sys.executable, '-m', 'style_transfer'] + sys.argv[1:], preexec_fn=cap,\n"
        "                      capture_output=True, text=True, timeout=60)\n"
        "sys.stderr.write(done.stderr)\n"
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    done = subprocess.run([sys.executable, "-c", parent, content, style, "-o", str(out), "--size", "100000",
                           "--weights", "random", "--device", "cpu"], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    code, peak_kib = (int(word) for word in done.stdout.split())
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert code == 1 and len(lines) == 1, done.stderr
    assert lines[0].startswith("Error: size 100000 px needs about ") and "--tile" in lines[0], lines[0]
    assert peak_kib < 2**20, f"peak RSS {peak_kib / 2**20:.2f} GiB"  # ru_maxrss is in KiB on Linux
    assert not out.exists()


def test_fast_estimate_names_the_size_that_fits_with_fast(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With --fast on the pixels the refusal uses that path's estimate (20 LBFGS pairs instead of 100; in the Fourier
    basis --fast keeps 100, the default's estimate)."""
    content = noise_png(tmp_path / "c.png", 60, 40)
    style = noise_png(tmp_path / "s.png", 50, 50)
    # By hand: 256 MiB + content px x (3072 + 480) B + style px x 512 B. At 192 px (192x128, 192x192):
    # 374_603_776 B; at 208 px (208x139, 208x208): 393_282_048 B. The default path fits only 160 px.
    free = 380_000_000
    monkeypatch.setattr(memory, "available_bytes", lambda device: free)
    monkeypatch.setattr(run_module, "load_network", lambda *a, **k: pytest.fail("the model was loaded"))
    line = one_error_line(invoke([content, style, "-o", str(tmp_path / "o.png"), "--weights", "random",
                                  "--size", "1024", "--device", "cpu", "--fast", "--parametrization", "pixels"], 1))
    assert "the largest size that fits is about 192 px (--size 192), or about" in line


def test_estimate_by_hand() -> None:
    """BASE + content pixels x (activations + 24 B per LBFGS pair) + style pixels x 512 B."""
    content, style = 100 * 200, 50 * 60
    assert estimate_bytes((100, 200), (50, 60)) == memory.BASE_BYTES + content * (3072 + 2400) + style * 512
    bf16_20 = Speed(precision="bf16", history_size=20)
    assert estimate_bytes((100, 200), (50, 60), bf16_20) == (memory.BASE_BYTES + content * (3072 + 480)
                                                             + style * 512)


def saved_bytes(cnn, height: int, width: int, speed: Speed | None = None, start: bool = False) -> int:
    """Bytes autograd saves for backward in the tutorial's model (``speed``: its fast form), counted by hook.

    A bf16 fast model is counted in bf16 (its steady state), or with ``start`` at its first evaluation (float32).
    """
    content, style = torch.rand(1, 3, height, width), torch.rand(1, 3, 64, 64)
    model, sl, cl = get_style_model_and_losses(cnn, IMAGENET_MEAN, IMAGENET_STD, style, content)
    if speed is not None:
        model, _, _ = accelerate(model, sl, cl, speed)
        if not start:
            model.exact_left = 0
    constant = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    saved = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in constant:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model(content.clone().requires_grad_(True))
    return sum(saved.values())


def saved_bytes_per_pixel(cnn, speed: Speed | None = None, start: bool = False) -> float:
    """The slope between two sizes, which removes what does not grow with the image (the Gram matrices)."""
    return (saved_bytes(cnn, 64, 96, speed, start) - saved_bytes(cnn, 32, 48, speed, start)) / (64 * 96 - 32 * 48)


def test_memory_estimate_covers_what_autograd_keeps(cnn) -> None:
    """Independent count: the bytes autograd saves for backward in the tutorial's model."""
    per_pixel = saved_bytes_per_pixel(cnn)
    # By hand for conv_1..conv_5: 475 floats (1900 B) per pixel; the RSS slope measured 3072 B.
    assert per_pixel == pytest.approx(1900, rel=0.02)
    assert per_pixel <= memory.ACTIVATION_BYTES_PER_PIXEL <= 2 * per_pixel
    history = 100 * 2 * 3 * 4  # LBFGS keeps 100 (s, y) pairs, each the size of the image
    assert estimate_bytes((64, 96), (64, 64)) >= memory.BASE_BYTES + saved_bytes(cnn, 64, 96) + history * 64 * 96


@pytest.mark.skipif(not bf16_supported(torch.device("cpu")), reason="this CPU has no native bf16")
def test_fast_memory_estimate_covers_what_autograd_keeps(cnn) -> None:
    """The same count on the --fast model (bf16, channels_last, ReLU + Gram steps)."""
    per_pixel = saved_bytes_per_pixel(cnn, Speed("bf16", True, True, 20))
    # By hand from the default's 1900 B: the max-pool indices stay int64 (pool_2: 64 channels at 1/4 of
    # the pixels, pool_4: 128 at 1/16, 8 B each: 192 B), the rest is bf16, half of 1708 B (854 B), and
    # the content loss keeps a float32 copy of conv_4 (128 channels at 1/4 of the pixels: 128 B). The ReLU steps
    # after conv_2 and conv_4 run on their pooled maps (fast.kernels._ReluGram), which the next convolution keeps
    # anyway: their full-size outputs are not kept (64 channels in bf16: 128 B; 128 at 1/4: 64 B).
    assert per_pixel == pytest.approx(192 + 854 + 128 - 128 - 64, rel=0.02)
    assert per_pixel < memory.ACTIVATION_BYTES_PER_PIXEL  # the estimate covers it (its peak RSS: see memory)
    # Its first LBFGS step runs in float32 (fast.FastStyleModel): the default's 1900 B less the same two ReLU
    # outputs, in float32 (256 B and 128 B).
    start = saved_bytes_per_pixel(cnn, Speed("bf16", True, True, 20), start=True)
    assert start == pytest.approx(1900 - 256 - 128, rel=0.02)


# --- LBFGS stopping early on its tolerances ---

def test_lbfgs_early_stop_is_reported(content_32, style_32) -> None:
    # Style weight 0 and the content as start: loss and gradient are exactly 0, below
    # tolerance_grad, so LBFGS returns after its first evaluation (the tutorial's loop
    # would call it 300 more times for nothing).
    stats = RunStats()
    config = StyleConfig(size=32, steps=300, style_weight=0, weights="random", device="cpu")
    image = stylize(content_32, style_32, config, stats=stats)
    assert (stats.evaluations, stats.converged) == (1, True)
    assert image.size == (32, 21)
    stats = RunStats()
    stylize(content_32, style_32, StyleConfig(size=32, steps=5, weights="random", device="cpu"), stats=stats)
    assert (stats.evaluations, stats.converged) == (20, False)


@pytest.mark.slow
def test_tolerance_change_exit_continues_like_the_tutorial(cnn, content_32, style_32,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A step that ends early on tolerance_change is called again, as the tutorial's loop does."""
    from style_transfer.core import transfer

    from .. import tutorial_reference as tutorial

    def eager(input_img, **kwargs):  # every LBFGS step ends after one iteration on tolerance_change
        return torch.optim.LBFGS([input_img], tolerance_change=1e3)

    monkeypatch.setattr(transfer, "get_input_optimizer", eager)
    monkeypatch.setattr(tutorial, "get_input_optimizer", eager)
    style = style_32[..., 5:26, :].contiguous()  # the tutorial needs both images the same size
    stats = RunStats()
    ours = transfer.run_style_transfer(cnn, IMAGENET_MEAN, IMAGENET_STD, content_32, style, content_32.clone(), 7,
                                       settings=transfer.TransferSettings.of(stats=stats))
    theirs, evaluations = tutorial.run_style_transfer(cnn, list(IMAGENET_MEAN), list(IMAGENET_STD), content_32,
                                                      style, content_32.clone(), num_steps=7)
    # One iteration = 2 evaluations per step; the loop runs until it passes 7, in both.
    assert stats.evaluations == evaluations == 8 and not stats.converged
    torch.testing.assert_close(ours, theirs.detach(), rtol=0, atol=0)


def test_cli_reports_early_stop(tmp_path: Path) -> None:
    out = tmp_path / "o.png"
    result = invoke([CONTENT, STYLE, "-o", str(out), "--weights", "random", "--size", "32", "--device", "cpu",
                     "--style-weight", "0"], 0)
    assert "LBFGS converged (gradient below its tolerance): stopped after 1 of 320 evaluations" in result.stderr
    assert f"wrote {out} (32x21, 1 evaluations)" in result.stderr


# --- bugs and --debug ---

def test_unexpected_error_is_one_line_and_debug_shows_traceback(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def buggy(*args, **kwargs):
        raise TypeError("boom")

    monkeypatch.setattr("style_transfer.run.run.Run.execute", buggy)
    args = [CONTENT, STYLE, "-o", str(tmp_path / "o.png"), *FAST]
    line = one_error_line(invoke(args, 1))
    assert line == "Error: unexpected TypeError: boom (rerun with --debug for the traceback)"
    debug = invoke([*args, "--debug"], 1)
    assert "Traceback" in debug.stderr and "TypeError: boom" in debug.stderr
    assert debug.stderr.strip().splitlines()[-1] == line
    assert os.listdir(tmp_path) == []


def test_debug_shows_traceback_of_a_bad_input(tmp_path: Path) -> None:
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image")
    result = invoke([str(bad), STYLE, "-o", str(tmp_path / "o.png"), *FAST, "--debug"], 1)
    assert "Traceback" in result.stderr
    assert result.stderr.strip().splitlines()[-1] == f"Error: {bad}: not a readable image: it is text, not an image"


def test_resource_error_is_a_memory_error() -> None:
    assert issubclass(ResourceError, MemoryError)


def test_ctrl_c_during_the_loop_stops_at_the_next_evaluation() -> None:
    """The CLI's signal handlers: at once before the loop and on a second Ctrl-C; during the loop a
    Ctrl-C or SIGTERM only asks the run to stop (Run.cancel), and the run stops between evaluations
    (never inside a destructor, where Python would print "Exception ignored" and the run would go on)."""
    from style_transfer.cli.watch import Signals
    from style_transfer.run.run import Run

    before_loop = Signals(Run("a.png", "b.png"))
    with pytest.raises(KeyboardInterrupt):
        before_loop._handle(signal.SIGINT, None)
    with pytest.raises(SystemExit) as stop:
        before_loop._handle(signal.SIGTERM, None)
    assert stop.value.code == 143
    run = Run("a.png", "b.png")
    looping = Signals(run)
    looping.watching(lambda info: None)(None)  # the first evaluation is done
    looping._handle(signal.SIGINT, None)  # noted, not raised
    assert run.cancelled and run._reason == "interrupted"
    with pytest.raises(KeyboardInterrupt):
        looping._handle(signal.SIGINT, None)  # a second Ctrl-C: at once
    terminated = Run("a.png", "b.png")
    term = Signals(terminated)
    term.watching(lambda info: None)(None)
    term._handle(signal.SIGTERM, None)
    assert terminated.cancelled and terminated._reason == "terminated"