"""A GPU check in one command: CUDA against the CPU, the default and --fast timed, the bf16 Gram's bound.

    python -m benchmarks gpu_check                        # on a CUDA GPU: ~1-2 min on an H100/H200
    python -m benchmarks gpu_check --device cpu --smoke   # the same code on the CPU in seconds (tests)
    python -m benchmarks gpu_check --markdown FILE.json   # the tables of a report

Exit 0 when every check passed or was skipped with a reason, 1 when one failed, 2 without a GPU (unless ``--device
cpu``) or on a bad option. The checks: the first evaluation's loss and image gradient at 128 px, the GPU's float32
(TF32 off) against the CPU's (on the CPU: float32 against float64), within ``LOSS_TOLERANCE`` and
``GRAD_TOLERANCE``; the bf16 Gram kernel within ``2^-8 * sum_m |F_im F_jm| / n`` of the float64 Gram, entry by
entry. The timings: seconds per evaluation, a whole ``stylize()`` run and its peak memory, default and --fast.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from style_transfer import StyleConfig, stylize
from style_transfer.errors import StyleTransferError
from style_transfer.io.images import load_image
from style_transfer.fast.fast import accelerator, speed_from_config
from style_transfer.fast.hardware import bf16_supported
from style_transfer.fast.kernels import _gram_forward
from style_transfer.run.settings import transfer_settings

from .. import memory, network as networks, report as reports, timing
from ..scoring import CONTENT, STYLE

STYLE_WEIGHT, CONTENT_WEIGHT = 1e6 * 1000, 1.0 * 1000  # the tutorial's x1000: LBFGS stores curvature pairs
# (random weights; real weights: the preset's for their input scale, times --loss-scale; set in main)
LOSS_TOLERANCE = 1e-5  # |loss - reference| / |reference|: about 100x the CPU's own float32-vs-float64 difference
GRAD_TOLERANCE = 1e-4  # max |grad - reference| / max |reference|: about 300x
GRAM_BOUND_FACTOR = 2.0**-8  # fast._gram_forward: each entry within 2^-8 sum_m |F_im F_jm| / n
TIMED_EVALUATIONS = 40  # the per-evaluation timing's evaluations: two LBFGS steps
LBFGS_STEP = 20  # evaluations per LBFGS step (torch's max_iter)
SEED = 0  # the network's weights


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda[:N] (default) or cpu (with --smoke: the CI run)")
    parser.add_argument("--sizes", default="512,1024", help="long sides of the timed runs in px, comma-separated")
    parser.add_argument("--steps", type=int, default=300,
                        help="evaluations of each whole run (the loop's --steps; default 300, the product's)")
    parser.add_argument("--check-size", type=int, default=128, help="long side of the first-evaluation check")
    parser.add_argument("--budget-s", type=float, default=270.0,
                        help="skip a timed run whose estimated end passes this many seconds of the script")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's)")
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

class _Timed(Exception):
    """The timed evaluations ran: the rest of the planned run is not needed."""


def seconds_per_evaluation(network: Any, config: StyleConfig, device: torch.device,
                           smoke: bool) -> dict[str, Any]:
    """Median interval between evaluations 22 to 40 at ``config.size`` (smoke: 3 to 20): the second LBFGS step, so
    start-up, a bf16 run's float32 first step and the evaluation after it are left out. The loop runs as ``stylize``
    runs it (``config``'s basis, history and two-loop) for a run planned two LBFGS steps longer, stopped after those
    evaluations: a --fast run's float32 finish (its last step's last evaluations) is not among them."""
    speed = speed_from_config(config, device)
    content, style = load_image(CONTENT, config.size, device), load_image(STYLE, config.size, device)
    stop = LBFGS_STEP if smoke else TIMED_EVALUATIONS
    settings = transfer_settings(config, accelerate=accelerator(speed))  # its history and two-loop: the config's

    def run(clock: timing.Clock) -> None:
        def progress(info: Any) -> None:
            clock(info)
            if clock.evaluations >= stop:
                raise _Timed

        with contextlib.suppress(_Timed):
            networks.transfer(network, content, style, stop + 2 * LBFGS_STEP,
                              (config.style_weight, config.content_weight),
                              settings.changed(progress=progress))

    result = memory.clocked(run, device, peak=device.type == "cuda")  # CPU peaks: benchmark's
    clock = result.pop("clock")
    # An LBFGS that stopped before the second step leaves what it ran, its first two evaluations left out.
    skip = 2 if smoke or clock.evaluations <= LBFGS_STEP + 1 else LBFGS_STEP + 1
    return {"s_per_eval": clock.per_evaluation(skip), "timed_intervals": max(clock.evaluations - skip, 0),
            "evaluations": clock.evaluations, "shape": list(content.shape[-2:]), "speed": speed.__dict__,
            "basis": settings.parts.basis.name, **result}


def whole_run(config: StyleConfig, device: torch.device) -> dict[str, Any]:
    """``stylize()`` from the files, as a user runs it: wall time, evaluations, peak memory."""
    run = memory.clocked(lambda clock: stylize(CONTENT, STYLE, config, progress=clock), device,
                         peak=device.type == "cuda")
    clock = run.pop("clock")
    clock()  # the end, after the device finished
    return {"steps": config.steps, "evaluations": clock.evaluations - 1, "wall_s": clock.elapsed,
            "first_evaluation_s": clock.stamps[1] - clock.stamps[0] if clock.evaluations > 1 else None, **run,
            "scales": config.scales, "min_size": config.min_size, "scale_steps": list(config.scale_steps or ())}


def time_paths(args: argparse.Namespace, device: torch.device, network: Any, started: float, notes: list[str],
               write: Any) -> list[dict[str, Any]]:
    """Part 2: per size, the default path then --fast: seconds per evaluation, then a whole run."""
    network.features.to(device)
    steps, budget_s = args.steps, args.budget_s
    rows: list[dict[str, Any]] = []
    for size in args.sizes:
        for name in ("default", "fast"):
            config = networks.config(args, size=size, steps=steps, device=str(device), fast=name == "fast",
                                     style_weight=STYLE_WEIGHT, content_weight=CONTENT_WEIGHT)
            row: dict[str, Any] = {"size": size, "path": name}
            rows.append(row)
            if time.perf_counter() - started > budget_s:
                notes.append(f"{size} px {name}: skipped, the {budget_s:.0f} s budget is spent")
                continue
            try:
                row["per_eval"] = seconds_per_evaluation(network, config, device, args.smoke)
                per_eval = row["per_eval"]["s_per_eval"] or 0.0
                # Coarse-to-fine sizes cost less per evaluation; up to three extra LBFGS steps of rounding.
                estimate = 1.3 * per_eval * (steps + 3 * LBFGS_STEP) + 5.0
                if time.perf_counter() - started + estimate > budget_s:
                    notes.append(f"{size} px {name}: whole run skipped (estimated {estimate:.0f} s would pass "
                                 f"the {budget_s:.0f} s budget)")
                else:
                    row["run"] = whole_run(config, device)
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
    report["timings"] = time_paths(args, device, network, started, report["notes"], write)
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
    """The timings' table (Markdown): per size and path, s/evaluation, the whole run, its peak allocated."""
    lines = ["| size | path | s/evaluation | whole run: evaluations, wall time | peak allocated (MiB) |",
             "|---|---|---|---|---|"]
    for row in report["timings"]:
        per_eval, whole = row.get("per_eval") or {}, row.get("run") or {}
        shape = per_eval.get("shape")
        seconds, peak = per_eval.get("s_per_eval"), whole.get("peak_mib")
        lines.append(f"| {f'{shape[1]}x{shape[0]}' if shape else row['size']} | {row['path']} | "
                     f"{'' if seconds is None else f'{seconds:.4f} s'} | "
                     + (f"{whole['evaluations']}, {whole['wall_s']:.1f} s" if whole else row.get("error", "skipped"))
                     + f" | {'' if peak is None else f'{peak:.0f}'} |")
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
    if args.threads:
        torch.set_num_threads(args.threads)  # a script owns its process; the library never does this
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
