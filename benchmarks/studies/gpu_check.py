"""A GPU check in one command: CUDA against the CPU, the default and --fast timed, the bf16 Gram's bound.

    python -m benchmarks gpu_check                        # on a CUDA GPU: ~1-2 min on an H100/H200
    python -m benchmarks gpu_check --device cpu --smoke   # the same code on the CPU in seconds (tests)
    python -m benchmarks gpu_check --markdown FILE.json   # the tables of a report

Exit 0 when every check passed or was skipped with a reason, 1 when one failed, 2 without a GPU (unless ``--device
cpu``) or on a bad option. The checks: the first evaluation's loss and image gradient at 128 px, the GPU's float32
(TF32 off) against the CPU's (on the CPU: float32 against float64), within ``LOSS_TOLERANCE`` and
``GRAD_TOLERANCE``; the bf16 Gram kernel within ``2^-8 * sum_m |F_im F_jm| / n`` of the float64 Gram, entry by
entry. The timings: a whole run of the default and of --fast as the command makes it (``benchmarks/loop.py``): its
median interval between evaluations, wall time, start and peak memory.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from style_transfer.cli.options import own_process
from style_transfer.errors import StyleTransferError
from style_transfer.io.images import load_image
from style_transfer.fast.fast import speed_from_config
from style_transfer.fast.hardware import bf16_supported
from style_transfer.fast.kernels import _gram_forward

from .. import loop, memory, network as networks, report as reports, timing
from ..scoring import CONTENT, STYLE

STYLE_WEIGHT, CONTENT_WEIGHT = 1e6 * 1000, 1.0 * 1000  # the tutorial's x1000: LBFGS stores curvature pairs
# (random weights; real weights: the preset's for their input scale, times --loss-scale; set in main)
LOSS_TOLERANCE = 1e-5  # |loss - reference| / |reference|: about 100x the CPU's own float32-vs-float64 difference
GRAD_TOLERANCE = 1e-4  # max |grad - reference| / max |reference|: about 300x
GRAM_BOUND_FACTOR = 2.0**-8  # fast._gram_forward: each entry within 2^-8 sum_m |F_im F_jm| / n
SEED = 0  # the network's weights


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda[:N] (default) or cpu (with --smoke: the CI run)")
    parser.add_argument("--sizes", default="512,1024", help="long sides of the timed runs in px, comma-separated")
    parser.add_argument("--steps", type=int, default=300,
                        help="evaluations of each whole run (the loop's --steps; default 300, the product's)")
    parser.add_argument("--check-size", type=int, default=128, help="long side of the first-evaluation check")
    parser.add_argument("--budget-s", type=float, default=270.0,
                        help="skip the timed runs that would start after this many seconds of the script")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: the physical cores)")
    networks.add_options(parser, loss_scale=True)
    reports.add_options(parser, "gpu_check")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny run: 32 and 64 px, one LBFGS step per run, 64 px check, small Gram cases")
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.steps, args.check_size = "32,64", 1, 64
    try:
        args.sizes = [int(s) for s in str(args.sizes).split(",")]
    except ValueError:
        parser.error(f"--sizes must be integers separated by commas, got {args.sizes!r}")
    return args


@contextlib.contextmanager
def tf32(enabled: bool) -> Iterator[None]:
    """TF32 for CUDA matmuls and cuDNN convolutions on or off inside the block; restored after."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def cuda_flags() -> dict[str, Any]:
    """The global flags that change CUDA float32 and bf16 arithmetic, as they stand."""
    return {
        "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "matmul_allow_bf16_reduced_precision_reduction":
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
    }


# 1. The first evaluation, on two devices or in two precisions.

def first_evaluation(network: Any, content: torch.Tensor, style: torch.Tensor,
                     device: torch.device, dtype: torch.dtype) -> tuple[float, torch.Tensor]:
    """The loss and image gradient (on the CPU, float64) of one evaluation from the content image, the network and
    images copied to ``device`` and ``dtype`` (the preprocessing keeps float32 buffers, as the tutorial's)."""
    copied = networks.wrap(copy.deepcopy(network.features).to(device=device, dtype=dtype), network.model,
                           network.preprocess)
    content, style = content.to(device, dtype), style.to(device, dtype)
    model, style_losses, content_losses = networks.style_model(copied, style, content)
    image = content.clone().requires_grad_(True)
    model(image)
    loss = STYLE_WEIGHT * sum(s.loss for s in style_losses) + CONTENT_WEIGHT * sum(c.loss for c in content_losses)
    loss.backward()
    return float(loss.detach()), image.grad.detach().to("cpu", torch.float64)


def differences(reference: tuple[float, torch.Tensor], other: tuple[float, torch.Tensor]) -> dict[str, float]:
    """Relative loss difference and gradient max-abs difference over the reference gradient's max-abs."""
    (loss0, grad0), (loss1, grad1) = reference, other
    return {"loss": loss1, "reference_loss": loss0,
            "loss_rel_diff": abs(loss1 - loss0) / abs(loss0),
            "grad_max_abs_rel_diff": float((grad1 - grad0).abs().max() / grad0.abs().max())}


def judge(diff: dict[str, float]) -> dict[str, Any]:
    """``diff`` with the tolerances and whether both differences are within them."""
    passed = diff["loss_rel_diff"] <= LOSS_TOLERANCE and diff["grad_max_abs_rel_diff"] <= GRAD_TOLERANCE
    return {**diff, "loss_tolerance": LOSS_TOLERANCE, "grad_tolerance": GRAD_TOLERANCE, "passed": passed}


def check_first_evaluation(device: torch.device, size: int, network: Any) -> dict[str, Any]:
    """Part 1: the device's float32 first evaluation against the CPU's (on the CPU: against float64)."""
    cpu = torch.device("cpu")
    content, style = load_image(CONTENT, size, cpu), load_image(STYLE, size, cpu)
    cpu32 = first_evaluation(network, content, style, cpu, torch.float32)
    cpu64 = first_evaluation(network, content, style, cpu, torch.float64)
    result: dict[str, Any] = {"size": size, "shape": list(content.shape[-2:]),
                              "control_cpu_float32_vs_float64": differences(cpu64, cpu32)}
    if device.type == "cuda":
        with tf32(False):
            flags = cuda_flags()
            device32 = first_evaluation(network, content, style, device, torch.float32)
        with tf32(True):
            device32_tf32 = first_evaluation(network, content, style, device, torch.float32)
        result.update(compared="cuda float32, TF32 off", reference="cpu float32", flags_during=flags,
                      check=judge(differences(cpu32, device32)),
                      cuda_vs_cpu_float64=differences(cpu64, device32),
                      contrast_cuda_tf32_on_vs_cpu_float32=differences(cpu32, device32_tf32))
    else:
        result.update(compared="cpu float32", reference="cpu float64", check=judge(differences(cpu64, cpu32)))
    result["passed"] = result["check"]["passed"]
    return result


# 2. Timings of the default path and --fast.

def time_paths(args: argparse.Namespace, device: torch.device, started: float, notes: list[str],
               write: Any) -> list[dict[str, Any]]:
    """Part 2: per size, the default path then --fast, each a whole run as the command makes it (``loop.real_run``:
    the median interval between evaluations, the wall time, the start) and its peak memory."""
    rows: list[dict[str, Any]] = []
    for size in args.sizes:
        for name in ("default", "fast"):
            config = networks.config(args, size=size, steps=args.steps, device=str(device), fast=name == "fast",
                                     style_weight=STYLE_WEIGHT, content_weight=CONTENT_WEIGHT)
            row: dict[str, Any] = {"size": size, "path": name}
            rows.append(row)
            if time.perf_counter() - started > args.budget_s:
                notes.append(f"{size} px {name}: skipped, the {args.budget_s:.0f} s budget is spent")
                continue
            try:
                base = memory.reset_peak(device) if device.type == "cuda" else None  # CPU peaks: the memory study's
                with tempfile.TemporaryDirectory() as scratch:
                    run = loop.real_run(config, CONTENT, STYLE, device, Path(scratch))
                del run["intervals"], run["events"], run["events_device_time"]
                row["run"] = {**run, "speed": speed_from_config(config, device).__dict__, "base_mib": base,
                              "peak_mib": memory.peak_mib(device) if base is not None else None}
            except (StyleTransferError, RuntimeError, ValueError) as exc:  # out of memory, a refused size
                row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            write()
    return rows


# 3. The bf16 Gram's error bound.

def gram_cases(smoke: bool) -> list[tuple[int, int, bool, bool]]:
    """(channels, pixels, rows_last, signed) feature maps: 1 to 16 pixel chunks, a remainder, both layouts; signed:
    a convolution's output (the tutorial's style losses sit before the ReLU), else a ReLU's."""
    if smoke:
        return [(16, 1024, False, True), (32, 4096 + 3, True, True), (16, 2048, False, False)]
    return [(64, 128 * 128, False, True), (64, 128 * 128 + 5, True, True), (128, 96 * 64, True, False),
            (256, 64 * 128, False, True), (512, 32 * 64, True, True), (512, 1000, False, False)]


def gram_error_ratio(features: torch.Tensor, gram: torch.Tensor, rows_last: bool, n: int) -> dict[str, float]:
    """Largest ``|gram - exact| / bound`` over the entries (``exact``: the float64 Gram of ``features``; ``bound =
    2^-8 * sum_m |F_im F_jm| / n``); an entry whose bound is 0 (an all-zero channel) must be exact, else infinite."""
    f = features.detach().to("cpu", torch.float64)
    f = f.t() if rows_last else f  # (channels, pixels)
    exact = f @ f.t() / n
    bound = GRAM_BOUND_FACTOR * (f.abs() @ f.abs().t()) / n
    error = (gram.detach().to("cpu", torch.float64) - exact).abs()
    ratio = torch.where(bound > 0, error / bound.clamp_min(torch.finfo(torch.float64).tiny),
                        torch.where(error > 0, math.inf, 0.0))
    return {"max_ratio": float(ratio.max()), "max_rel_error": float(error.max() / exact.abs().max())}


def check_bf16_gram(device: torch.device, smoke: bool) -> dict[str, Any]:
    """Part 3: ``_gram_forward`` on bf16 features on ``device`` against the bound, over ``gram_cases``."""
    if not bf16_supported(device):
        what = "GPU" if device.type == "cuda" else "CPU"
        return {"status": "skipped", "passed": None,
                "reason": f"no native bf16 on this {what}: the bf16 path is refused there"}
    generator = torch.Generator().manual_seed(SEED)
    cases = []
    for channels, pixels, rows_last, signed in gram_cases(smoke):
        values = torch.randn(channels, pixels, generator=generator)  # drawn on the CPU: the same on every device
        values = values if signed else values.relu()
        features = (values.t().contiguous() if rows_last else values).to(torch.bfloat16).to(device)
        n = channels * pixels  # the Gram's normalisation for a (1, C, H, W) map: its numel
        gram = _gram_forward(features, rows_last, n)
        timing.sync(device)
        cases.append({"channels": channels, "pixels": pixels, "rows_last": rows_last, "signed": signed,
                      "gram_dtype": str(gram.dtype), **gram_error_ratio(features, gram, rows_last, n)})
    worst = max(case["max_ratio"] for case in cases)
    passed = worst <= 1.0
    return {"status": "passed" if passed else "failed", "passed": passed, "max_ratio": worst,
            "bound": "|G - G64| <= 2^-8 * sum_m |F_im F_jm| / n per entry", "cases": cases,
            "flags": cuda_flags() if device.type == "cuda" else None}


# The whole check.

def run(args: argparse.Namespace, device: torch.device, network: Any) -> int:
    started = time.perf_counter()
    random = args.weights == "random"
    report: dict[str, Any] = reports.start(args, networks.block_of(network, args.weights), device, args.label, **{
        "device": str(device), "smoke": args.smoke, "passed": None,
        "settings": {"style_weight": STYLE_WEIGHT, "content_weight": CONTENT_WEIGHT,
                     "weights": f"random, seed {SEED}" if random else os.path.basename(args.weights),
                     "sizes": args.sizes, "steps": args.steps, "check_size": args.check_size,
                     "flags": cuda_flags() if device.type == "cuda" else None},
        "checks": {}, "timings": [], "notes": []})
    out = Path(args.out) if args.out else reports.path("gpu_check", report, reports.sizes(args.sizes),
                                                       ("smoke-" if args.smoke else "") + (args.label or ""))

    def write() -> None:
        report["wall_s"] = time.perf_counter() - started
        reports.write(report, out)

    report["checks"]["first_evaluation"] = check_first_evaluation(device, args.check_size, network)
    print("\n".join(check_rows(report)), flush=True)
    write()
    report["checks"]["bf16_gram"] = check_bf16_gram(device, args.smoke)
    print(check_rows(report)[-1], flush=True)
    write()
    report["timings"] = time_paths(args, device, started, report["notes"], write)
    print("\n".join(timing_rows(report)))
    failed = [name for name, check in report["checks"].items() if check["passed"] is False]
    failed += [f"{row['size']} px {row['path']}" for row in report["timings"] if "error" in row]
    report["passed"] = not failed
    write()
    for note in report["notes"]:
        print(f"note: {note}")
    print(f"{'passed' if not failed else 'FAILED: ' + ', '.join(failed)}; total {report['wall_s']:.0f} s; "
          f"wrote {out}")
    return 0 if not failed else 1


def check_rows(report: dict[str, Any]) -> list[str]:
    """The checks' table (Markdown, also printed as they pass): the first evaluation, then the bf16 Gram's bound."""
    first, gram = report["checks"]["first_evaluation"], report["checks"].get("bf16_gram")
    check = first["check"]
    h, w = first["shape"]
    lines = ["| check | result | tolerance | passed |", "|---|---|---|---|",
             f"| first evaluation {w}x{h}, {first['compared']} vs {first['reference']}: loss | "
             f"{check['loss_rel_diff']:.2e} relative | {check['loss_tolerance']:.0e} | {check['passed']} |",
             f"| same: gradient max-abs difference / max-abs | {check['grad_max_abs_rel_diff']:.2e} | "
             f"{check['grad_tolerance']:.0e} | {check['passed']} |"]
    if gram is not None:
        result = (f"skipped: {gram['reason']} | |" if gram["status"] == "skipped" else
                  f"largest error/bound {gram['max_ratio']:.3f} | 1 |")
        passed = "" if gram["passed"] is None else gram["passed"]
        lines.append(f"| bf16 Gram within 2^-8 sum\\|F F\\| / n | {result} {passed} |")
    return lines


def timing_rows(report: dict[str, Any]) -> list[str]:
    """The timings' table (Markdown): per size and path, the whole run's interval, wall time and peak allocated."""
    lines = ["| size | path | s/evaluation (median interval) | whole run: evaluations, wall time (start) | "
             "peak allocated (MiB) |", "|---|---|---|---|---|"]
    for row in report["timings"]:
        run = row.get("run") or {}
        seconds, peak = run.get("interval_s"), run.get("peak_mib")
        lines.append(f"| {row['size']} | {row['path']} | {'' if seconds is None else f'{seconds:.4f} s'} | "
                     + (f"{run['evaluations']}, {run['wall_s']:.1f} s ({run['start_s']:.1f} s)" if run
                        else row.get("error", "skipped")) + f" | {'' if peak is None else f'{peak:.0f}'} |")
    return lines


def markdown(report: dict[str, Any]) -> str:
    """The checks and the timings of a report as Markdown."""
    return "\n".join([*reports.head(report, "random"), "", *check_rows(report), "", *timing_rows(report)])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())))
        return 0
    if reports.bad_label(args.label):
        return 2
    try:
        device: torch.device | None = torch.device(args.device)
    except RuntimeError:
        device = None
    if device is None or device.type not in ("cuda", "cpu"):
        print(f"error: --device must be cuda, cuda:N or cpu, got {args.device!r}", file=sys.stderr)
        return 2
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: no CUDA GPU is available here (the CPU smoke run is --device cpu --smoke)", file=sys.stderr)
        return 2
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        print(f"error: {args.device} does not exist: {torch.cuda.device_count()} CUDA GPU(s)", file=sys.stderr)
        return 2
    if args.steps < 1 or min(args.sizes) < 16 or args.check_size < 16:
        print("error: --steps must be >= 1 and sizes >= 16 px", file=sys.stderr)
        return 2
    own_process(args.threads)  # as the command sets its process: threads, glibc keeping freed memory
    global STYLE_WEIGHT, CONTENT_WEIGHT
    try:
        network = networks.load(args)  # random: load_network(model, "random"), seed 0 (SEED)
        STYLE_WEIGHT, CONTENT_WEIGHT = networks.loss_weights(args)
    except (StyleTransferError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return run(args, device, network)


if __name__ == "__main__":
    sys.exit(main())
