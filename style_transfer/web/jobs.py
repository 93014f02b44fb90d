"""Jobs and the queue: one worker thread per device runs one job at a time through ``run.Run``.

A job's life is a list of events (``queued``, ``started``, ``step``, then one final event: ``done``,
``cancelled`` or ``failed``) that any number of readers follow from any index (the Server-Sent
Events of the web app). The worker keeps the latest preview image; a reader encodes it when asked, so
the optimisation never waits for an encoder. A finished run's image goes to the gallery with its
provenance record, whether it ran to the end, was cancelled, or was stopped by the server. However a
job ends, its uploads are removed before its final event.

Each step of a job's life but ``step`` also goes, as one line, to the queue's ``on_log`` (stylize-serve
writes it to its stderr): the job's id and what happened, never an image, a file name or the token.

This module imports no web framework: it is the part of the app that tests drive directly.
"""

from __future__ import annotations

import collections
import dataclasses
import io
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from ..config.run_options import RunOptions
from ..config.style import StyleConfig
from ..config.weights import WEIGHTS_WORDS
from ..errors import RunStopped, StyleTransferError, WeightsError, first_line
from ..run.rates import rates_path
from .gallery import Gallery, new_id

FINAL_EVENTS = ("done", "cancelled", "failed")
# How a run's end (RunResult.stopped) shows as the job's final state.
_STATE_OF_STOP = {"done": "done", "converged": "done", "plateau": "done", "cancelled": "cancelled",
                  "interrupted": "cancelled", "terminated": "cancelled"}
KEEP_FINISHED = 200  # finished jobs remembered in memory (their results stay in the gallery)


class QueueFull(Exception):
    """The queue holds its limit of waiting jobs (the API answers 429)."""


class AlreadyFinished(Exception):
    """A cancel for a job that has ended or is already being cancelled (the API answers 409)."""


@dataclass
class Job:
    """One requested run: its inputs (files in its own folder), settings, state and events."""

    id: str
    config: StyleConfig
    content: Path
    styles: list[Path]
    folder: Path  # holds the uploaded inputs; removed when the job ends
    names: dict[str, Any]  # what the client called its files, for display and the record only
    state: str = "queued"  # queued | running | done | cancelled | failed
    error: str | None = None  # the one-line message of a failed job
    result: dict[str, Any] | None = None  # the gallery entry of its image
    created: float = field(default_factory=time.time)
    events: list[dict[str, Any]] = field(default_factory=list)
    preview: Image.Image | None = field(default=None, repr=False)
    previews: int = 0  # previews made so far; the latest is number `previews`
    cancel_reason: str | None = None
    run: Any = field(default=None, repr=False)
    _encoded: tuple[int, bytes] | None = field(default=None, repr=False)
    _changed: threading.Condition = field(default_factory=threading.Condition, repr=False)

    @property
    def finished(self) -> bool:
        return self.state in FINAL_EVENTS

    def emit(self, event: dict[str, Any]) -> None:
        with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    def events_since(self, index: int) -> list[dict[str, Any]]:
        """The events from ``index`` on (a copy; empty when there are none yet)."""
        with self._changed:
            return self.events[index:]

    def preview_png(self) -> tuple[int, bytes] | None:
        """The latest preview as PNG bytes with its number, or None before the first."""
        image, number = self.preview, self.previews
        if image is None:
            return None
        cached = self._encoded
        if cached is not None and cached[0] == number:
            return cached
        buffer = io.BytesIO()
        image.save(buffer, format="PNG", compress_level=1)
        self._encoded = (number, buffer.getvalue())
        return self._encoded

    def summary(self) -> dict[str, Any]:
        return {"id": self.id, "state": self.state, "error": self.error, "result": self.result,
                "previews": self.previews, "names": self.names, "events": len(self.events),
                "last": self.events[-1] if self.events else None, "settings": _shown_settings(self.config)}


RunFactory = Callable[..., Any]  # (content, styles, config, options) -> an object with run.Run's methods
JobLog = Callable[[str], None]  # one line about a job, for the server's terminal


def _default_run(content: Any, styles: Any, config: StyleConfig, options: RunOptions) -> Any:
    from ..run.run import Run  # torch loads with the first job, not with the server

    return Run(content, styles, config, options)


class JobQueue:
    """Jobs waiting for a device, and one worker thread per device running them in order.

    Args:
        gallery: where finished images go.
        devices: one worker each ("cpu", "cuda:0", ...); each job runs on the device of the worker that
            takes it.
        limit: jobs that may wait; one more raises ``QueueFull``.
        preview_every: a preview every this many evaluations (``RunOptions.preview_every``).
        run_factory: makes the run of a job (``run.Run`` by default; tests pass their own).
        on_log: takes one line when a job is queued, starts, and ends (done, failed, cancelled); None: no lines.
    """

    def __init__(self, gallery: Gallery, *, devices: Sequence[str] = ("auto",), limit: int = 8,
                 preview_every: int = 5, run_factory: RunFactory | None = None, on_log: JobLog | None = None) -> None:
        if not devices:
            raise ValueError("devices must name at least one device")
        self.gallery = gallery
        self.devices = list(devices)
        self.limit = limit
        self.preview_every = preview_every
        self.run_factory = run_factory or _default_run
        self.on_log = on_log
        self._jobs: dict[str, Job] = {}
        self._waiting: collections.deque[Job] = collections.deque()
        self._lock = threading.Condition()
        self._workers: list[threading.Thread] = []
        self._idle = 0  # workers waiting for a job: the first jobs in line are theirs, not waiting
        self._busy: set[str] = set()  # devices running a job now
        self._stopping = False

    # The server's side -------------------------------------------------------------------------------

    def start(self) -> None:
        for device in self.devices:
            worker = threading.Thread(target=self._work, args=(device,), name=f"style-transfer-{device}",
                                      daemon=True)
            worker.start()
            self._workers.append(worker)

    def stopping(self) -> bool:
        return self._stopping

    def stop(self, timeout: float = 120.0) -> None:
        """Stop serving: waiting jobs are cancelled, running ones end at their next evaluation and
        keep their image (``stopped: terminated``); returns once the workers have saved them."""
        self.begin_stop()
        deadline = time.monotonic() + timeout
        for worker in self._workers:
            worker.join(max(0.0, deadline - time.monotonic()))

    def begin_stop(self) -> None:
        """``stop`` without the wait (safe from a signal handler's thread; a second call does nothing)."""
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
            waiting = list(self._waiting)
            self._waiting.clear()
            running = [job for job in self._jobs.values() if job.state == "running"]
            self._lock.notify_all()
        for job in waiting:
            self._finish(job, "cancelled", error="the server stopped before the job started")
        for job in running:
            self._cancel_running(job, "terminated")

    def new_job(self, config: StyleConfig, folder: Path, content: Path, styles: list[Path],
                names: dict[str, Any], job_id: str | None = None) -> Job:
        return Job(job_id or new_id(), config, content, styles, folder, names)

    def submit(self, job: Job) -> None:
        """Queue a job. Raises ``QueueFull`` or RuntimeError when stopping (the job's folder is then removed)."""
        with self._lock:
            if self._stopping:
                shutil.rmtree(job.folder, ignore_errors=True)
                raise RuntimeError("the server is stopping")
            if len(self._waiting) >= self.limit:
                shutil.rmtree(job.folder, ignore_errors=True)
                raise QueueFull(f"{len(self._waiting)} jobs are waiting already (the limit); try again later")
            self._jobs[job.id] = job
            self._waiting.append(job)
            # Before a worker can emit "started"; no position when an idle worker takes it at once.
            place = self._place(len(self._waiting) - 1)
            job.emit({"type": "queued", "position": place})
            # Under the lock, so it comes before the worker's "started" line.
            self._log(f"job {job.id} queued ({_job_text(job.config)}" + (f", position {place})" if place else ")"))
            self._forget_old()
            self._lock.notify_all()

    def check_fits(self, job: Job) -> None:
        """Refuse a job that fits on none of the queue's devices (``run.fits.check_fits``: the uploads' headers only).

        A device running a job now passes: what that job holds is freed before this one starts, and the
        run checks its size itself then (the job fails at once with the same message).

        Raises:
            ResourceError: the size cannot fit on any device (the first device's message).
        """
        from ..errors import ResourceError
        from ..run.fits import check_fits

        refusal = None
        for device in self.devices:
            with self._lock:
                if device in self._busy:
                    return
            try:
                check_fits(str(job.content), [str(path) for path in job.styles],
                           dataclasses.replace(job.config, device=device))
                return
            except ResourceError as exc:
                refusal = refusal or exc
        if refusal is not None:
            raise refusal

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def jobs(self) -> list[Job]:
        with self._lock:
            return sorted(self._jobs.values(), key=lambda job: job.created)

    def position(self, job: Job) -> int | None:
        """1 for the next job to run once a worker is free; None when not waiting (or an idle worker takes it)."""
        with self._lock:
            for index, waiting in enumerate(self._waiting):
                if waiting is job:
                    return self._place(index)
        return None

    def _place(self, index: int) -> int | None:
        """The position of the job at ``index`` in line (under the lock): idle workers take the first ones."""
        place = index + 1 - self._idle
        return place if place > 0 else None

    def cancel(self, job_id: str) -> Job | None:
        """Cancel a job: a waiting one ends at once, a running one at its next evaluation keeping its image.

        Returns None for an unknown id. Raises ``AlreadyFinished`` for a job that has ended or is being cancelled.
        """
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                return None
            if job.finished or job.cancel_reason is not None:
                raise AlreadyFinished(f"job {job_id} is {'being cancelled' if not job.finished else job.state} already")
            if job.state == "queued":
                self._waiting.remove(job)
                job.cancel_reason = "cancelled"
                moved = self._places()
            else:
                moved = None
        if moved is None:
            self._cancel_running(job, "cancelled")
        else:
            self._finish(job, "cancelled", error=None)
            self._announce_positions(moved)
        return job

    # The workers' side -------------------------------------------------------------------------------

    def _cancel_running(self, job: Job, reason: str) -> None:
        with self._lock:
            job.cancel_reason = reason
            run = job.run
        if run is not None:
            run.cancel(reason)

    def _next(self) -> Job | None:
        with self._lock:
            self._idle += 1
            try:
                while not self._waiting and not self._stopping:
                    self._lock.wait()
            finally:
                self._idle -= 1
            if self._stopping:
                return None
            job = self._waiting.popleft()
            job.state = "running"
            moved = self._places()
        self._announce_positions(moved)
        return job

    def _places(self) -> list[tuple[Job, int | None]]:
        """The waiting jobs and their positions (under the lock)."""
        return [(job, self._place(index)) for index, job in enumerate(self._waiting)]

    def _announce_positions(self, jobs: list[tuple[Job, int | None]]) -> None:
        for job, place in jobs:
            if place is not None:  # None: an idle worker is taking it ("started" comes next)
                job.emit({"type": "queued", "position": place})

    def _work(self, device: str) -> None:
        while True:
            job = self._next()
            if job is None:
                return
            with self._lock:
                self._busy.add(device)
            try:
                self._run(job, device)
            except BaseException as exc:  # noqa: BLE001 - a worker must survive any job
                if not job.finished:
                    self._finish(job, "failed", error=f"unexpected {type(exc).__name__}: {first_line(exc)}")
            finally:
                with self._lock:
                    self._busy.discard(device)
                shutil.rmtree(job.folder, ignore_errors=True)

    def _run(self, job: Job, device: str) -> None:
        config = dataclasses.replace(job.config, device=device) if device != job.config.device else job.config
        styles: Any = [str(path) for path in job.styles]
        run = self.run_factory(str(job.content), styles if len(styles) > 1 else styles[0], config,
                               RunOptions(preview_every=self.preview_every, rates=str(rates_path())))  # the book
        with self._lock:
            job.run = run
            reason = job.cancel_reason
        if reason is not None:  # cancelled while the run was being made: it stops at its first evaluation
            run.cancel(reason)
        name = _device_name(device)
        job.emit({"type": "started", "device": name})
        self._log(f"job {job.id} started on {name}")
        last: dict[str, Any] = {"losses": {}, "elapsed": 0.0}

        def on_event(info: Any) -> None:
            if info.preview is not None:
                job.preview = info.preview
                job.previews += 1
            losses = {"style": info.style_loss, "content": info.content_loss, "tv": info.tv_loss, "loss": info.loss}
            last.update(losses=losses, elapsed=info.elapsed)
            eta = info.time_left
            job.emit({"type": "step", "step": info.step, "total": info.total, **_finite(losses),
                      "elapsed": round(info.elapsed, 3), "eta": None if eta is None else round(eta, 1),
                      "size": list(info.size), "scale": info.scale, "scales": info.scales,
                      "preview": job.previews if info.preview is not None else None})

        try:
            result = run.execute(on_event)
        except RunStopped as exc:  # a non-finite loss (or an interrupt): keep the last good image
            message = first_line(exc)
            if exc.image is not None:
                record = run.record(exc.step, "non-finite", last["losses"], last["elapsed"])
                entry = self._keep(job, _to_pil(exc.image), record, "non-finite", exc.step, last["elapsed"])
                message += "; the last good image is kept in the gallery"
            else:
                entry = None
            self._finish(job, "failed", error=message, result=entry)
        except WeightsError as exc:  # the server's weights, not the browser user's doing: say who can fix it
            self._finish(job, "failed", error=weights_problem(exc, job.config.model))
        except (StyleTransferError, ValueError) as exc:
            self._finish(job, "failed", error=first_line(exc))
        except MemoryError as exc:
            self._finish(job, "failed", error=f"out of memory: {first_line(exc)}")
        else:
            entry = self._keep(job, result.image, result.record, result.stopped, result.evaluations, result.seconds)
            self._finish(job, _STATE_OF_STOP.get(result.stopped, "done"), error=None, result=entry,
                         stopped=result.stopped)

    def _keep(self, job: Job, image: Image.Image, record: dict[str, Any], stopped: str, evaluations: int,
              seconds: float) -> dict[str, Any]:
        # The record names inputs by base name: the client's names, not the job folder's fixed ones.
        inputs = record.get("inputs", {})
        if isinstance(inputs.get("content"), dict):
            inputs["content"]["name"] = job.names.get("content")
        for entry, name in zip(inputs.get("styles") or [], job.names.get("styles") or []):
            entry["name"] = name
        return self.gallery.add(image, record, {
            "stopped": stopped, "evaluations": evaluations, "seconds": round(seconds, 3),
            "settings": record.get("settings", {}), "names": job.names, "device": record.get("device")})

    def _finish(self, job: Job, state: str, *, error: str | None, result: dict[str, Any] | None = None,
                stopped: str | None = None) -> None:
        with self._lock:
            job.state, job.error, job.result, job.run = state, error, result, None
        shutil.rmtree(job.folder, ignore_errors=True)  # its uploads; a result is in the gallery already
        job.emit({"type": state, "error": error, "stopped": stopped, "result": result})
        self._log(_end_line(job.id, state, error, result, stopped))

    def _log(self, line: str) -> None:
        """Give ``on_log`` one line; a terminal that is gone never fails a job."""
        if self.on_log is not None:
            try:
                self.on_log(line)
            except (OSError, ValueError):  # a closed or broken stderr
                pass

    def _forget_old(self) -> None:
        finished = [job for job in self._jobs.values() if job.finished]
        for job in finished[:max(0, len(finished) - KEEP_FINISHED)]:
            del self._jobs[job.id]


def _shown_settings(config: StyleConfig) -> dict[str, Any]:
    """The network and loss weights a job runs with, resolved (offline: the original VGG19's), for its API entry;
    a server's weights file as ``server``, never its name."""
    return {"model": config.model, "weights": config.weights if config.weights in WEIGHTS_WORDS else "server",
            "preprocess": config.preprocess, "style_weight": config.style_weight,
            "content_weight": config.content_weight}


def _job_text(config: StyleConfig) -> str:
    """What a queued job asks, for its log line: ``48 px, 8 steps, vgg19 random``."""
    size = f"{config.size} px" if config.size else "default size"
    weights = config.weights if config.weights in ("imagenet", "original", "random") else "server file"
    return f"{size}, {config.steps} step{'s' if config.steps != 1 else ''}, {config.model} {weights}"


def _end_line(job_id: str, state: str, error: str | None, result: dict[str, Any] | None,
              stopped: str | None) -> str:
    """The log line of a job's end: its state; its evaluations and seconds when it ran; why, when not done."""
    ran = f"{result['evaluations']} evaluations in {result['seconds']:.1f} s" if result else None
    if state == "done":
        how = f" ({stopped})" if stopped not in (None, "done") else ""  # converged, plateau
        return f"job {job_id} done: {ran}{how}" if ran else f"job {job_id} done"
    if state == "cancelled":
        why = "the server stopped" if stopped == "terminated" else error
        return (f"job {job_id} cancelled" + (f" ({why})" if why else "")
                + (f" after {ran}; its image is in the gallery" if ran else ""))
    lines = (error or "").strip().splitlines()
    return f"job {job_id} {state}: {lines[0] if lines else 'no reason given'}"


def _device_name(device: str) -> str:
    """The device a worker's runs use: ``auto`` resolved (``cpu``, ``cuda``, ``mps``), other names as given."""
    if device != "auto":
        return device
    from ..run.prepare import resolve_device  # torch loads with the first job, not with the server

    return str(resolve_device(device))


def weights_problem(exc: WeightsError, model: str = "vgg19") -> str:
    """A weights error as a browser user reads it: what went wrong, and what the server's operator sets.

    The library's message ends with a command-line fix ("...; pass weights=FILE") that a browser user
    cannot act on, so only its first part (what went wrong) is kept.
    """
    from ..config.weights import IMAGENET_WEIGHTS_OF

    what = first_line(exc).split("; ")[0]
    return (f"the server cannot load its {model.upper()} weights ({what}). The server's operator can put "
            f"torchvision's {IMAGENET_WEIGHTS_OF[model][1]} in the server's torch hub cache (TORCH_HOME/hub/checkpoints) or "
            f"start the server with stylize-serve --weights FILE"
            + (" (or, with the original extra and no download, stylize-serve --weights original)"
               if model == "vgg19" else "")
            + ". Meanwhile, Weights: random in the form checks "
            "that the page works (no artistic result).")




def _finite(values: dict[str, float]) -> dict[str, float | None]:
    """Losses as JSON can hold them: NaN and infinities become None."""
    return {k: (float(v) if v == v and abs(float(v)) != float("inf") else None) for k, v in values.items()}


def _to_pil(tensor: Any) -> Image.Image:
    from ..io.images import tensor_to_pil

    return tensor_to_pil(tensor)
