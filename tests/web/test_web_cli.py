"""The ``stylize-serve`` command: usage errors in one line, a missing extra named, and a real server
(uvicorn on a free loopback port, in its own process) that Ctrl-C stops, keeping the running job's image.
"""

from __future__ import annotations

import io
import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ..conftest import loopback_namespace_problem, small_image

ROOT = Path(__file__).resolve().parents[2]


def serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "style_transfer.web.cli", *args]


def run_serve(*args: str, code: str | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", code, *args] if code else serve_command(*args)
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, message", [
    (["--port", "notaport"], "'notaport' is not a valid integer"),
    (["--port", "70000"], "70000 is not in the range"),
    (["--device", "gpu"], "device must be auto, cpu, cuda, cuda:N or mps, got 'gpu'"),
    (["--weights", "no-such-weights.pth"], "--weights no-such-weights.pth: no such file"),
    (["--queue-limit", "-1"], "-1 is not in the range"),
    (["--model", "vgg11"], "'vgg11' is not one of 'vgg19', 'vgg16'"),
    (["--preprocess", "bgr"], "'bgr' is not one of 'torchvision', 'caffe', 'caffe256'"),
])
@pytest.mark.slow
def test_usage_errors_exit_2_in_one_line(args: list[str], message: str, tmp_path: Path) -> None:
    done = run_serve(*args, "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert not (tmp_path / "data").exists()


@pytest.mark.slow
def test_without_the_web_extra_one_line_names_it(tmp_path: Path) -> None:
    # fastapi made unimportable, as in an install without the extra.
    code = ("import sys; sys.modules['fastapi'] = None; from style_transfer.web.cli import main; "
            "main(sys.argv[1:], prog_name='stylize-serve')")
    done = run_serve("--data-dir", str(tmp_path / "data"), "--port", "0", code=code)
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert "pip install 'style_transfer[web]'" in lines[0] and "fastapi" in lines[0]
    assert not (tmp_path / "data").exists()


@pytest.mark.slow
def test_a_weights_file_of_another_network_fails_at_start_in_one_line(tmp_path: Path) -> None:
    """The server's file is checked before serving: a VGG16 file (13 convolutions; tiny ones, so the file is
    small) under the default --model vgg19 names the --model to pass, and no data folder is made."""
    pytest.importorskip("fastapi", reason="the web extra is not installed")
    import torch

    weights = tmp_path / "vgg16-tiny.pth"
    torch.save({f"{i}.weight": torch.zeros(1, 1, 1, 1) for i in range(13)}, weights)
    done = run_serve("--weights", str(weights), "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "holds a VGG16" in lines[0] and "pass --model vgg16" in lines[0], done.stderr
    assert not (tmp_path / "data").exists()


@pytest.mark.slow
def test_the_command_starts_without_torch_and_the_app_without_torch() -> None:
    """``stylize-serve --help`` needs click only; the app itself loads torch with the first job, not before."""
    code = ("import sys, style_transfer.web.cli; first = sorted(m for m in ('torch', 'fastapi', 'uvicorn') "
            "if m in sys.modules); import style_transfer.web.app; print(first, 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    if "No module named 'fastapi'" in done.stderr:
        pytest.skip("the web extra is not installed")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "False"]


@pytest.mark.slow
def test_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    pytest.importorskip("fastapi", reason="the web extra is not installed")
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_serve("--port", str(port), "--data-dir", str(tmp_path / "data"), "--weights", "random")
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"cannot listen on 127.0.0.1:{port}" in lines[0], done.stderr


def test_the_default_data_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from style_transfer.web.cli import default_data_dir

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_data_dir() == tmp_path / "xdg" / "style_transfer"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_data_dir() == tmp_path / "home" / ".local" / "share" / "style_transfer"


class Server:
    """``stylize-serve`` in its own process on a free loopback port (port 0; the printed address says which)."""

    def __init__(self, data_dir: Path, *args: str, env: dict[str, str] | None = None, device: str = "cpu") -> None:
        self.data_dir = data_dir
        self.process = subprocess.Popen(
            serve_command("--port", "0", "--data-dir", str(data_dir), "--weights", "random", "--device", device,
                          *args),
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.url = self._address()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)
            self.lines.put(line)

    def _address(self) -> str:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                if self.process.poll() is not None:
                    break
                continue
            if "http://" in line:
                return "http://" + line.split("http://", 1)[1].split()[0]
        self.stop()
        raise AssertionError(f"the server printed no address: {''.join(self.stderr)}")

    def stop(self, sig: int = signal.SIGINT) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError("the server did not stop") from None


def job_files() -> list[tuple[str, tuple[str, bytes, str]]]:
    """A job's uploads: the cat (48x32) as content and the stain (40x40) as style, PNG."""
    cat, stain = io.BytesIO(), io.BytesIO()
    small_image("chelsea.png", (48, 32)).save(cat, format="PNG")
    small_image("ihc.png", (40, 40)).save(stain, format="PNG")
    return [("content", ("cat.png", cat.getvalue(), "image/png")), ("style", ("stain.png", stain.getvalue(), "image/png"))]


@pytest.mark.slow
def test_ctrl_c_stops_the_server_and_keeps_the_running_image(tmp_path: Path) -> None:
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("fastapi", reason="the web extra is not installed")
    server = Server(tmp_path / "data")
    try:
        assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/")
        with httpx.Client(base_url=server.url, timeout=60) as client:
            assert client.get("/").status_code == 200
            created = client.post("/api/jobs", files=job_files(),
                                  data={"size": "48", "steps": "10000"})
            assert created.status_code == 201, created.text
            job = created.json()["id"]
            with client.stream("GET", f"/api/jobs/{job}/events") as stream:
                for line in stream.iter_lines():  # until the first evaluation
                    if line.startswith("event: step"):
                        break
            code = server.stop(signal.SIGINT)
    finally:
        server.stop(signal.SIGKILL)
    assert code == 0, "".join(server.stderr)
    assert "Traceback" not in "".join(server.stderr)
    entries = [json.loads(path.read_text()) for path in (tmp_path / "data" / "results").glob("*.json")]
    assert len(entries) == 1 and entries[0]["stopped"] == "terminated" and entries[0]["evaluations"] >= 1
    said = [line.split(f"job {job} ", 1)[1] for line in server.stderr if f"job {job} " in line]  # issue 33.3
    assert said[:2] == ["queued (48 px, 10000 steps, vgg19 random)\n", "started on cpu\n"], said
    assert len(said) == 3 and said[2].startswith("cancelled (the server stopped) after "), said
    assert (tmp_path / "data" / "results" / f"{entries[0]['id']}.png").is_file()


@pytest.mark.slow
def test_model_vgg16_with_random_weights_serves_vgg16_by_default(tmp_path: Path) -> None:
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("fastapi", reason="the web extra is not installed")
    server = Server(tmp_path / "data", "--model", "vgg16", "--quiet")  # Server passes --weights random
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            options = client.get("/api/options").json()
            assert options["defaults"]["model"] == "vgg16" and options["defaults"]["weights"] == "random"
            created = client.post("/api/jobs", files=job_files(),
                                  data={"size": "32", "steps": "1"})  # no weights, no model: the server's
            assert created.status_code == 201, created.text
            with client.stream("GET", f"/api/jobs/{created.json()['id']}/events") as stream:
                final = [line for line in stream.iter_lines() if line.startswith("data:")][-1]
            result = json.loads(final[5:])["result"]
            settings = client.get(f"/api/results/{result['id']}").json()["settings"]
            assert (settings["model"], settings["weights"]) == ("vgg16", "random")
    finally:
        assert server.stop(signal.SIGINT) == 0, "".join(server.stderr)
    assert not [line for line in server.stderr if " job " in line], server.stderr  # --quiet: the address only


IN_LOOPBACK_NAMESPACE = "STYLE_TRANSFER_TEST_IN_LOOPBACK_NAMESPACE"


@pytest.mark.slow
def test_the_address_needs_a_token_beyond_loopback(tmp_path: Path) -> None:
    """Listening on all interfaces makes up a token, prints it in the address, and checks it. Tests listen
    on 127.0.0.1 only, so this one reruns itself in a network namespace of its own with only loopback up:
    there "all interfaces" is loopback alone."""
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("fastapi", reason="the web extra is not installed")
    if os.environ.get(IN_LOOPBACK_NAMESPACE) != "1":
        problem = loopback_namespace_problem(["unshare", "--net"])
        if problem:
            pytest.skip(problem)
        test = f"{__file__}::test_the_address_needs_a_token_beyond_loopback"
        command = (f"ip link set lo up && exec {shlex.quote(sys.executable)} -m pytest -q -n 0 -p no:cacheprovider "
                   f"{shlex.quote(test)}")
        done = subprocess.run(["unshare", "--net", "bash", "-c", command], cwd=ROOT, capture_output=True, text=True,
                              env={**os.environ, IN_LOOPBACK_NAMESPACE: "1"}, timeout=300)
        assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-4000:] + done.stderr[-4000:]
        return
    server = Server(tmp_path / "data", "--host", "0.0.0.0")
    try:
        assert "/?token=" in server.url
        token = server.url.split("token=", 1)[1]
        base = server.url.split("/?", 1)[0].replace("0.0.0.0", "127.0.0.1")
        assert len(token) >= 32
        assert httpx.get(f"{base}/api/options", timeout=30).status_code == 401
        assert httpx.get(f"{base}/api/options", headers={"Authorization": f"Bearer {token}"},
                         timeout=30).status_code == 200
    finally:
        # A graceful stop, then uvicorn re-raises SIGTERM: the process ends by it (143 in a shell), as
        # service managers expect.
        assert server.stop(signal.SIGTERM) == -signal.SIGTERM, "".join(server.stderr)
        assert "Traceback" not in "".join(server.stderr)
