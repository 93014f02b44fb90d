"""The FastAPI app: the page (static files from the package) and the JSON API under ``/api``.

``create_app(data_dir)`` makes the app; ``stylize-serve`` (web/cli.py) runs it with uvicorn. The routes only
translate HTTP into the job queue (jobs.py) and the gallery (gallery.py), a job's form into settings (form.py):
no maths here.

The API (all answers JSON unless said; errors are ``{"detail": "one line"}``):

==========================================  ===============================================================
``GET /api/options``                        defaults, choices and limits for the form; the sample images
``POST /api/jobs``                          multipart: ``content`` (a file), ``style`` (1+ files), settings;
                                            201 with the job, 413/422/400 for a bad upload, 429 when full
``GET /api/jobs``, ``GET /api/jobs/{id}``   jobs and their state (``position`` in the queue while waiting)
``GET /api/jobs/{id}/events``               Server-Sent Events: queued, started, step..., then done,
                                            cancelled or failed (the last one)
``GET /api/jobs/{id}/preview``              the latest preview (PNG)
``POST /api/jobs/{id}/cancel``              202; 409 when it ended or is being cancelled already
``GET /api/results``, ``/api/results/{id}``  the gallery, newest first
``GET /api/results/{id}/image``             ``?format=png|jpeg``, ``&download=1``: with the provenance record
``DELETE /api/results/{id}``                204
==========================================  ===============================================================

``GET /openapi.json`` describes it (there is no ``/docs`` page: FastAPI's loads its scripts from a CDN).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import json
import os
import shutil
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, TypeGuard

from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from ..config.choices import CPU_DEFAULT_SIZE, PARAMETRIZATIONS, PRESERVE_COLORS
from ..config.style import StyleConfig
from ..errors import ResourceError, StyleTransferError
from ..io.files import shown
from ..io.images import open_image
from ..layers import MODELS
from ..core.steps import LBFGS_MAX_ITER, planned_evaluations
from ..run.plans import plan_run
from ..presets import PRESET_NAMES, STYLE_LOSSES
from ..io.metadata import read_record, save_options
from ..networks.download import Notice
from .form import (WEIGHTS_CHOICES, Limits, Refused, ServerNetwork, _check_masks, _config, _form_settings,
                   _preset_weights, server_network)
from .gallery import Gallery, new_id
from .guard import Guard
from .jobs import FINAL_EVENTS, AlreadyFinished, JobLog, JobQueue, QueueFull, RunFactory

STATIC = Path(__file__).resolve().parent / "static"
SAMPLES = STATIC / "samples"
# The page's own files only: no script, style or image from another host (it works offline).
CSP = ("default-src 'self'; img-src 'self' blob: data:; style-src 'self'; script-src 'self'; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
SSE_POLL_S = 0.05  # how often an event stream looks for new events
SSE_KEEPALIVE_S = 10.0  # a comment line after this long without events, so proxies keep the stream open


def create_app(data_dir: str | os.PathLike, *, weights: str = "imagenet", model: str = "vgg19",
               preprocess: str | None = None, devices: Sequence[str] = ("auto",), queue_limit: int = 8,
               preview_every: int = 5, token: str | None = None,
               allowed_hosts: Sequence[str] | None = None, limits: Limits = Limits(),
               run_factory: RunFactory | None = None, on_log: JobLog | None = None,
               on_notice: Notice | None = None) -> FastAPI:
    """The web app, keeping its results under ``data_dir`` (created when missing).

    Args:
        weights: the server's weights, for jobs that do not choose (``StyleConfig.weights``); a file here is
            the server's choice, never the client's (a job takes it as weights ``server``).
        model: the network of the server's weights (``StyleConfig.model``), and the default of jobs that
            choose built-in weights (``imagenet``, ``random``) without a model.
        preprocess: what the server's weights expect (``StyleConfig.preprocess``; None: what they tell);
            never the client's.
        devices: one worker per device.
        queue_limit: jobs that may wait; one more gets 429.
        preview_every: a preview every this many evaluations.
        token: when set, every request must carry it (guard.py).
        allowed_hosts: the host names a request's ``Host`` may name (None: any).
        run_factory: makes each job's run (tests pass a gated one); ``run.Run`` by default.
        on_log: takes one line when a job is queued, starts, and ends (done, failed, cancelled), from any thread
            (stylize-serve writes it to stderr); None: the app says nothing.
        on_notice: told, in one line, that torchvision's VGG19 cannot be had and the original VGG19 serves in its
            place (``form.server_network``: asked once, here; the form and ``/api/options`` then show it).

    Raises:
        ValueError: a bad ``model`` or ``preprocess`` (the weights file itself is read by each job; stylize-serve
            loads it once at start).
    """
    network = server_network(weights, model, preprocess, on_notice)
    data = Path(data_dir)
    gallery = Gallery(data / "results")
    work = data / "jobs"
    shutil.rmtree(work, ignore_errors=True)  # inputs of jobs a stopped server never ran
    work.mkdir(parents=True, exist_ok=True)
    queue = JobQueue(gallery, devices=devices, limit=queue_limit, preview_every=preview_every,
                     run_factory=run_factory, on_log=on_log)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        queue.start()
        try:
            yield
        finally:
            await run_in_threadpool(queue.stop)

    # No /docs or /redoc: FastAPI's pages load Swagger UI and ReDoc from a CDN, blank offline. The
    # description is at /openapi.json, and docs/web.md describes the API.
    app = FastAPI(title="style_transfer", summary="Neural style transfer: upload, watch, download.",
                  lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.queue, app.state.gallery, app.state.limits = queue, gallery, limits
    app.add_middleware(Guard, token=token, allowed_hosts=allowed_hosts, max_body=limits.max_body)
    app.include_router(_api(queue, gallery, work, network, limits), prefix="/api")
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html",
                            headers={"Content-Security-Policy": CSP, "Cache-Control": "no-cache"})

    return app


def _api(queue: JobQueue, gallery: Gallery, work: Path, network: ServerNetwork, limits: Limits) -> APIRouter:
    router = APIRouter()
    # What the server's weights expect, resolved once (an ONNX file's graph is read for it), for the form's presets.
    server_preprocess = StyleConfig(weights=network.weights, model=network.model,
                                    preprocess=network.preprocess).preprocess or "torchvision"

    @router.get("/options", tags=["form"])
    def options() -> dict[str, Any]:
        """Defaults, choices and limits of the form, and the sample images."""
        defaults = StyleConfig()
        return {
            "defaults": {"steps": defaults.steps, "seed": defaults.seed, "preset": defaults.preset,
                         "preserve_colors": defaults.preserve_colors, "style_loss": defaults.style_loss,
                         "weights": "server" if network.is_file else network.weights, "model": network.model},
            # The loss weights of each preset for the built-in weights (torchvision's scale) and, with a file, for the
            # server's weights (Caffe's 0-255 scale takes a style weight of 300 where torchvision's takes 1e6).
            "presets": _preset_weights("torchvision"),
            "server_presets": _preset_weights(server_preprocess, network.model) if network.is_file else None,
            # Offline: the server's network (the original VGG19) also runs a job's imagenet VGG19; the page says why.
            "fallback": None if network.fallback is None else {
                "weights": "imagenet", "model": "vgg19", "note": _fallback_text(network.fallback)},
            "preserve_colors": list(PRESERVE_COLORS),
            "style_losses": list(STYLE_LOSSES),
            "parametrizations": list(PARAMETRIZATIONS),  # the form adds "" (auto: fourier with fast)
            "weights": list(WEIGHTS_CHOICES) + (["server"] if network.is_file else []),
            "models": list(MODELS),
            # Each form field's kind, choices, range and one-line help, from its StyleConfig declaration; size and
            # steps at most what this server allows.
            "settings": _form_settings(limits),
            "limits": {"max_body": limits.max_body, "max_styles": limits.max_styles, "max_size": limits.max_size,
                       "max_steps": limits.max_steps, "queue": queue.limit},
            "samples": sorted(path.name for path in SAMPLES.glob("*.jpg")),
        }

    @router.post("/jobs", status_code=201, tags=["jobs"], openapi_extra={"requestBody": _UPLOAD_SCHEMA},
                 responses={400: {"description": "an input is not a usable image"},
                            413: {"description": "the upload is too large"},
                            422: {"description": "a field is missing, a setting is bad, or the size cannot fit "
                                                 "in the server's free memory"},
                            429: {"description": "the queue is full"}})
    async def create_job(request: Request) -> JSONResponse:
        """Start a job from a multipart upload: ``content``, one or more ``style`` files, and settings."""
        form = await request.form(max_files=2 * limits.max_styles + 2, max_fields=40)
        try:
            content = form.get("content")
            styles = form.getlist("style")
            if not isinstance(content, UploadFile):
                raise Refused(422, "missing the content image (a file in the field 'content')")
            if not styles or not _all_files(styles):
                raise Refused(422, "missing the style image (one or more files in the field 'style')")
            if len(styles) > limits.max_styles:
                raise Refused(422, f"{len(styles)} style images, at most {limits.max_styles}")
            config = _config(form, network, limits, len(styles))
            style_masks = form.getlist("style_mask")  # one per style, in order (the first styles)
            if not _all_files(style_masks):
                raise Refused(422, "style_mask must be files (one mask image per style, in order)")
            if len(style_masks) > len(styles):
                raise Refused(422, f"{len(style_masks)} style masks for {len(styles)} style image(s)")
            content_masks = form.getlist("content_mask")  # weighs the content loss by region
            if len(content_masks) > 1 or not _all_files(content_masks):
                raise Refused(422, "content_mask must be one file (a mask image of the photo's shape)")
            job_id = new_id()
            folder = work / job_id
            folder.mkdir()
            try:
                files = [(content, folder / "content", "content")] + [
                    (style, folder / f"style-{i + 1}", f"style {i + 1}") for i, style in enumerate(styles)]
                files += [(mask, folder / f"style-mask-{i + 1}", f"style mask {i + 1}")
                          for i, mask in enumerate(style_masks)]
                files += [(mask, folder / "content-mask", "content mask") for mask in content_masks]
                for upload, path, label in files:
                    await run_in_threadpool(_store, upload, path, label)
                if style_masks:
                    config = dataclasses.replace(config, style_masks=tuple(
                        str(folder / f"style-mask-{i + 1}") for i in range(len(style_masks))))
                if content_masks:
                    config = dataclasses.replace(config, content_mask=str(folder / "content-mask"))
                if style_masks or content_masks:
                    await run_in_threadpool(_check_masks, config, folder / "content", len(styles))
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            names = {"content": _name(content), "styles": [_name(s) for s in styles]}
            job = queue.new_job(config, folder, folder / "content", [folder / f"style-{i + 1}" for i in
                                                                      range(len(styles))], names, job_id)
            try:
                await run_in_threadpool(queue.check_fits, job)  # a size that cannot fit: refused now, in one line
            except ResourceError as exc:
                shutil.rmtree(folder, ignore_errors=True)
                raise Refused(422, str(exc)) from None
            try:
                queue.submit(job)
            except QueueFull as exc:
                raise Refused(429, str(exc)) from None
            except RuntimeError as exc:
                raise Refused(503, str(exc)) from None
        finally:
            await form.close()
        # The evaluations the run will make (whole LBFGS steps), for the page to show from the start.
        planned = plan_run(config, config.size or CPU_DEFAULT_SIZE).total
        return JSONResponse({**job.summary(), "position": queue.position(job), "planned": planned}, status_code=201)

    @router.get("/jobs", tags=["jobs"])
    def list_jobs() -> dict[str, Any]:
        """The jobs this server run knows (waiting, running and recently finished)."""
        return {"jobs": [{**job.summary(), "position": queue.position(job)} for job in queue.jobs()]}

    @router.get("/jobs/{job_id}", tags=["jobs"], responses={404: {"description": "no such job"}})
    def get_job(job_id: str) -> dict[str, Any]:
        """A job's state; ``position`` is its place in the queue while it waits (1: next)."""
        job = _job(queue, job_id)
        return {**job.summary(), "position": queue.position(job)}

    @router.get("/jobs/{job_id}/events", tags=["jobs"], response_class=StreamingResponse,
                responses={200: {"content": {"text/event-stream": {}}}, 404: {"description": "no such job"}})
    async def job_events(job_id: str, request: Request) -> StreamingResponse:
        """The job's events as Server-Sent Events, from the first (or after ``Last-Event-ID``) to the final one."""
        job = _job(queue, job_id)
        last = request.headers.get("last-event-id", "")
        start = int(last) + 1 if last.isdigit() else 0

        async def stream() -> AsyncIterator[str]:
            # Polled, not waited for: an open stream holds no thread, and a client that leaves or a server
            # that stops ends it within a poll.
            yield "retry: 2000\n\n"
            index, quiet = start, 0.0
            while True:
                new = job.events_since(index)
                for event in new:
                    yield f"id: {index}\nevent: {event['type']}\ndata: {json.dumps(event, allow_nan=False)}\n\n"
                    index += 1
                    if event["type"] in FINAL_EVENTS:
                        return
                if new:
                    quiet = 0.0
                    continue
                if queue.stopping():
                    return
                await asyncio.sleep(SSE_POLL_S)
                quiet += SSE_POLL_S
                if quiet >= SSE_KEEPALIVE_S:
                    yield ": keep-alive\n\n"
                    quiet = 0.0

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    @router.get("/jobs/{job_id}/preview", tags=["jobs"], response_class=Response,
                responses={200: {"content": {"image/png": {}}}, 404: {"description": "no such job or no preview yet"}})
    def job_preview(job_id: str) -> Response:
        """The latest preview of a running job (PNG); ``X-Preview-Number`` says which."""
        job = _job(queue, job_id)
        found = job.preview_png()
        if found is None:
            raise HTTPException(404, f"job {job_id} has no preview yet")
        number, png = found
        return Response(png, media_type="image/png",
                        headers={"Cache-Control": "no-store", "X-Preview-Number": str(number)})

    @router.post("/jobs/{job_id}/cancel", status_code=202, tags=["jobs"],
                 responses={404: {"description": "no such job"}, 409: {"description": "ended or cancelling already"}})
    def cancel_job(job_id: str) -> dict[str, Any]:
        """Cancel a job: a waiting one at once; a running one at its next evaluation, keeping its image."""
        try:
            job = queue.cancel(job_id)
        except AlreadyFinished as exc:
            raise HTTPException(409, str(exc)) from None
        if job is None:
            raise HTTPException(404, f"no job {shown(job_id)[:80]}")
        return job.summary()

    @router.get("/results", tags=["results"])
    def list_results() -> dict[str, Any]:
        """The gallery, newest first: each result's settings and how its run ended."""
        return {"results": gallery.list()}

    @router.get("/results/{result_id}", tags=["results"], responses={404: {"description": "no such result"}})
    def get_result(result_id: str) -> dict[str, Any]:
        return _result(gallery, result_id)

    @router.get("/results/{result_id}/image", tags=["results"], response_class=Response,
                responses={200: {"content": {"image/png": {}, "image/jpeg": {}}},
                           404: {"description": "no such result"}})
    def result_image(result_id: str, format: str = "png", download: bool = False) -> Response:
        """The image with its provenance record embedded: ``format`` png (as saved) or jpeg."""
        _result(gallery, result_id)
        path = gallery.image_path(result_id)
        if path is None:
            raise HTTPException(404, f"no result {result_id}")
        if format not in ("png", "jpeg"):
            raise HTTPException(422, f"format must be png or jpeg, got {shown(format)[:40]!r}")
        headers = {"Cache-Control": "private, max-age=3600"}
        if download:
            extension = "jpg" if format == "jpeg" else "png"
            headers["Content-Disposition"] = f'attachment; filename="stylized-{result_id[:8]}.{extension}"'
        if format == "png":
            return FileResponse(path, media_type="image/png", headers=headers)
        return Response(_as_jpeg(path), media_type="image/jpeg", headers=headers)

    @router.delete("/results/{result_id}", status_code=204, tags=["results"],
                   responses={404: {"description": "no such result"}})
    def delete_result(result_id: str) -> Response:
        """Remove a result from the gallery (its image and its entry)."""
        if not gallery.delete(result_id):
            raise HTTPException(404, f"no result {shown(result_id)[:80]}")
        return Response(status_code=204)

    return router


def _fallback_text(note: str) -> str:
    """The page's line for the server's fallback: the library's note, and what the form's choices then run."""
    return (f"Offline: {note}. The weights 'server' are that network, with its own loss weights; imagenet on vgg19 "
            f"runs it too.")


def _job(queue: JobQueue, job_id: str) -> Any:
    job = queue.get(job_id)
    if job is None:
        raise HTTPException(404, f"no job {shown(job_id)[:80]}")
    return job


def _result(gallery: Gallery, result_id: str) -> dict[str, Any]:
    entry = gallery.get(result_id)
    if entry is None:
        raise HTTPException(404, f"no result {shown(result_id)[:80]}")
    return entry


def _all_files(values: Sequence[UploadFile | str]) -> TypeGuard[Sequence[UploadFile]]:
    """Whether every value of a form's field is an uploaded file (none a text)."""
    return all(isinstance(value, UploadFile) for value in values)


def _name(upload: UploadFile) -> str | None:
    """The client's file name, for display and the record only (never a path here)."""
    if not upload.filename:
        return None
    return shown(os.path.basename(upload.filename.replace("\\", "/")))[:120] or None


def _store(upload: UploadFile, path: Path, label: str) -> None:
    """Copy an upload into the job's folder and check it as the command does (``open_image``)."""
    upload.file.seek(0)
    with open(path, "xb") as handle:
        shutil.copyfileobj(upload.file, handle)
    shown_as = f"{label} ({_name(upload)})" if _name(upload) else label
    try:
        open_image(path).close()
    except StyleTransferError as exc:
        raise Refused(400, str(exc).replace(shown(str(path)), shown_as)) from None


def _as_jpeg(path: Path) -> bytes:
    """A result's PNG as JPEG (quality 95) with the same record embedded."""
    from PIL import Image

    record = read_record(path)
    buffer = io.BytesIO()
    with Image.open(path) as image:
        rgb = image.convert("RGB")
    options = save_options(record, "JPEG") if record is not None else {}
    rgb.save(buffer, format="JPEG", quality=95, **options)
    return buffer.getvalue()


_UPLOAD_SCHEMA = {
    "required": True,
    "content": {"multipart/form-data": {"schema": {
        "type": "object",
        "required": ["content", "style"],
        "properties": {
            "content": {"type": "string", "format": "binary", "description": "the content image"},
            "style": {"type": "array", "items": {"type": "string", "format": "binary"},
                      "description": "one or more style images"},
            "size": {"type": "integer", "description": "long side in px (empty: 512 on a GPU, 448 on a CPU)"},
            "steps": {"type": "integer", "description": f"evaluations, in whole LBFGS steps of {LBFGS_MAX_ITER}: "
                                                      f"the run ends with the step that passes it (default 300 runs "
                                                      f"{planned_evaluations(300)}); the job's 'planned' says how "
                                                      f"many will run"},
            "style_weight": {"type": "number"}, "content_weight": {"type": "number"},
            "preset": {"type": "string", "enum": list(PRESET_NAMES)},
            "preserve_colors": {"type": "string", "enum": list(PRESERVE_COLORS)},
            "style_loss": {"type": "string", "enum": list(STYLE_LOSSES),
                           "description": "the style statistics: gram (the tutorial's), wasserstein or sliced"},
            "style_blend": {"type": "string", "description": "one weight per style image, comma separated"},
            "fast": {"type": "boolean"}, "seed": {"type": "integer"},
            "parametrization": {"type": "string", "enum": list(PARAMETRIZATIONS),
                                "description": "what the optimiser moves: pixels (the tutorial's) or fourier (empty: "
                                               "fourier with fast, pixels without)"},
            "style_mask": {"type": "array", "items": {"type": "string", "format": "binary"},
                           "description": "grey masks over the content, one per style in order (white: the style "
                                          "goes there); styles without one share the rest"},
            "average": {"type": "number", "description": "output the moving average of the iterates, this decay"},
            "weights": {"type": "string", "enum": [*WEIGHTS_CHOICES, "server"],
                        "description": "server: the server's network (its file, model and preprocessing)"},
            "model": {"type": "string", "enum": list(MODELS),
                      "description": "the network of imagenet or random weights (default: the server's); "
                                     "with server weights only the server's"},
        }}}},
}
