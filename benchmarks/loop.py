"""The real loop, timed: a ``Run`` as the command makes it, each interval between two evaluations' ends split by
what ran in it, the time before the first evaluation and after the last, and a window of evaluations profiled.

For the run the package's methods in ``PARTS`` are wrapped in this process (restored after); each call's own time,
less the wrapped calls inside it, goes to its part, and what ran in none (torch's LBFGS, zero_grad, the loop's
Python) to ``rest``. On CUDA each boundary waits for the device, which adds a little to every part. An interval is
``exact`` where its evaluation ran in float32 in a bf16 run (its start and finish), ``profiled`` in the window.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from style_transfer import Run, StyleConfig
from style_transfer.cli.recorders import LossLog
from style_transfer.core import evaluation, guard, image, lbfgs, run_stats, transfer
from style_transfer.fast.basis import FourierImage
from style_transfer.run.progress import Progress

from .timing import sync

PARTS: dict[str, list[tuple[type, str]]] = {  # the part each wrapped method's own time goes to
    "evaluation": [(evaluation._WholeImage, "forward"), (evaluation._WholeImage, "backward")],
    "basis": [(cls, name) for cls in (FourierImage, image.PixelImage, image.RescuedPixelImage)  # decode, clamp,
              for name in ("before_evaluation", "after_backward", "end_step") if name in vars(cls)],  # 2nd backward
    "LBFGS direction": [(lbfgs.StackedLBFGS, name) for name in ("_direction", "_remember", "_stack")],
    "copies and reads": [(evaluation.Scores, "read"), (run_stats.RunStats, "check_finite"),
                         (guard.JumpGuard, "observe")],  # the loss to the host, the image's copies
    "progress": [(Progress, "__call__")],  # the run's event and the caller's (a loss log, as --log writes one)
}
KINDS = (*PARTS, "rest")


def real_run(config: StyleConfig, content: Path, style: Path, device: torch.device, folder: Path,
             profile: tuple[int, int] = (0, 0)) -> dict[str, Any]:
    """One ``Run`` of ``config`` from the files as the command runs it (the run loads its network, writes a loss log
    into ``folder``, its picture is saved there): the intervals between evaluations' ends with their split, and
    torch.profiler's events of ``profile``'s (first, count) evaluations (from 1) where count > 0, in ``events``
    (``events_device_time``: with the device's kernels)."""
    stack, now = [0.0], {**dict.fromkeys(KINDS, 0.0), "evaluation_cpu": 0.0, "exact": False}
    stamps: list[float] = []
    intervals: list[dict[str, Any]] = []
    first: list[float] = []  # when the first evaluation started
    window = range(profile[0], profile[0] + profile[1])
    profiling: list[Any] = []  # once started: the profiler, whether it runs, whether it has the device's times

    def start_profiler() -> None:
        kinds = torch.profiler.ProfilerActivity
        on_device = device.type == "cuda" and kinds.CUDA in torch.profiler.supported_activities()
        for cuda in ([True, False] if on_device else [False]):  # without CUDA's activity where CUPTI cannot start
            profiler = torch.profiler.profile(activities=[kinds.CPU, kinds.CUDA] if cuda else [kinds.CPU])
            try:
                profiler.start()
            except RuntimeError:
                continue
            profiling[:] = [profiler, True, cuda]
            return

    def timed(part: str, name: str, method: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if part == "closure" and len(stamps) + 1 == profile[0] and profile[1]:
                start_profiler()
            if part == "evaluation" and name == "forward":  # the run's model: a bf16 one's float32 start or finish?
                model = args[0].model  # fast.fast's counts its evaluations (done) and knows its float32 ones
                now["exact"] = (getattr(model, "done", 0) < getattr(model, "exact_until", 0)
                                or bool(getattr(model, "finishing", False)))
            sync(device)
            start, cpu = time.perf_counter(), time.process_time()
            if part == "evaluation" and not first:
                first.append(start)
            stack.append(0.0)
            scope = part == "evaluation" and len(stamps) + 1 in window
            try:
                with torch.autograd.profiler.record_function("evaluation") if scope else contextlib.nullcontext():
                    return method(*args, **kwargs)
            finally:
                sync(device)
                spent, inner = time.perf_counter() - start, stack.pop()
                stack[-1] += spent
                if part in PARTS:
                    now[part] += spent - inner
                if part == "evaluation":
                    now["evaluation_cpu"] += time.process_time() - cpu
                if part == "closure":  # an evaluation ended (or raised: a jump, a stop): its interval closes
                    close(start + spent)
        return call

    def close(end: float) -> None:
        if stamps:
            total = end - stamps[-1]
            intervals.append({"total": total, **now, "rest": total - sum(now[k] for k in PARTS),
                              "profiled": len(stamps) + 1 in window})
        stamps.append(end)
        if len(stamps) == window.stop - 1 and profiling:
            profiling[0].stop()
            profiling[1] = False
        now.update({**dict.fromkeys(KINDS, 0.0), "evaluation_cpu": 0.0, "exact": False})

    wrapped = [(part, cls, name, vars(cls)[name]) for part, methods in PARTS.items() for cls, name in methods]
    wrapped.append(("closure", transfer._Closure, "__call__", transfer._Closure.__call__))
    started = time.perf_counter()
    try:
        for part, cls, name, method in wrapped:
            setattr(cls, name, timed(part, name, method))
        with LossLog(folder / "log.jsonl") as losses:
            result = Run(str(content), str(style), config).execute(losses)
    finally:
        for _, cls, name, method in wrapped:
            setattr(cls, name, method)
        if profiling and profiling[1]:  # the run ended inside the window
            profiling[0].stop()
    result.image.save(folder / "out.png")
    ended = time.perf_counter()
    steady = [i for i in intervals if not (i["exact"] or i["profiled"])]  # a bf16 run's bf16 ones, unprofiled
    median = (lambda values: statistics.median(values) if values else None)
    return {"evaluations": result.evaluations, "wall_s": ended - started, "start_s": first[0] - started,
            "finish_s": ended - stamps[-1], "steady": len(steady), "interval_s": median([i["total"] for i in steady]),
            "late_interval_s": median([i["total"] for i in steady[len(steady) // 2:]]),  # LBFGS's history full
            "exact_interval_s": median([i["total"] for i in intervals if i["exact"] and not i["profiled"]]),
            "evaluation_s": median([i["evaluation"] for i in steady]),
            "evaluation_cpu_s": median([i["evaluation_cpu"] for i in steady]),
            "split_s": {k: sum(i[k] for i in steady) / max(len(steady), 1) for k in KINDS},
            "intervals": [{k: round(v, 6) if isinstance(v, float) else v for k, v in i.items()} for i in intervals],
            "events": profiling[0].events() if profiling and len(stamps) >= window.stop - 1 else None,
            "events_device_time": bool(profiling and profiling[2])}
