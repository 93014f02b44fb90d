"""The ``stylize-serve`` command: start the web app (FastAPI under uvicorn) and print its address.

Imports click and the standard library at start; the web stack and torch only once the options are
good, so a usage error answers at once and a missing extra is named in one line.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any, Callable

import click

from ..config.choices import PREPROCESSINGS
from ..config.weights import WEIGHTS_WORDS
from ..io.files import shown
from ..layers import MODELS
from ..cli.options import DEFAULTS, OneLineCommand, note
from ..errors import first_line

EXTRA_HINT = "pip install 'style_transfer[web]'"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def default_data_dir() -> Path:
    """``$XDG_DATA_HOME/style_transfer``, else ``~/.local/share/style_transfer``."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "style_transfer"


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


SERVER = {name: "Server" for name in ("host", "port", "data_dir", "devices", "queue_limit", "preview_every", "token",
                                      "max_upload_mb")}
SHORT = {
    "host": "Address to listen on; anything but loopback needs a token.",
    "data_dir": "Folder of the gallery (default: ~/.local/share/style_transfer).",
    "model": "The network of the server's weights: vgg19 or vgg16.",
    "weights": "The server's weights: imagenet, original, random or a FILE.",
    "preprocess": "What the server's weights expect: torchvision, caffe or caffe256.",
    "devices": "auto, cpu, cuda, cuda:N or mps; repeat for one worker per device.",
    "token": "Require this token on every request (made up off loopback).",
    "quiet": "No line per job on stderr (the address is still printed).",
}


@click.command(cls=OneLineCommand, sections=SERVER, short_help_of=SHORT)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Anything but loopback requires a token (--token, or one is made).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="Port (0: any free one).")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder of the gallery (results survive restarts). Default: $XDG_DATA_HOME/style_transfer "
                   "or ~/.local/share/style_transfer.")
@click.option("--model", type=click.Choice(MODELS), default=DEFAULTS.model, show_default=True,
              help="The network of the server's weights, and of jobs that choose imagenet or random weights "
                   "without naming one (the page offers every network with those).")
@click.option("--weights", default=DEFAULTS.weights, show_default=True,
              help="The server's weights, for jobs that do not choose: imagenet (where torchvision's VGG19 cannot "
                   "be had and the original VGG19 is installed, the server takes that at start and says so), "
                   "original (the original VGG19, "
                   "with the original extra; no download), random, or a file (a .pth, .bin or .onnx of a --model network, as stylize takes; the page offers it as 'server', never sends a "
                   "file, and a file is checked at start).")
@click.option("--preprocess", type=click.Choice(PREPROCESSINGS), default=None,
              help="What the server's weights expect (as stylize --preprocess): torchvision, caffe or caffe256. "
                   "Default: what the weights tell. A job never chooses it.")
@click.option("--device", "devices", multiple=True, metavar="DEVICE",
              help="auto, cpu, cuda, cuda:N or mps; repeat for one worker per device. Default: auto.")
@click.option("--queue-limit", type=click.IntRange(0), default=8, show_default=True,
              help="Jobs that may wait; beyond it a new job gets 429.")
@click.option("--preview-every", type=click.IntRange(1), default=5, show_default=True,
              help="Evaluations between two previews on the page.")
@click.option("--token", default=None, help="Require this token on every request (made up when --host is not "
                                             "loopback and none is given).")
@click.option("--max-upload-mb", type=click.IntRange(1), default=50, show_default=True,
              help="Largest upload (all files of one job), MB.")
@click.option("-q", "--quiet", is_flag=True,
              help="No line per job on stderr (queued, started, done, failed, cancelled); the address is still "
                   "printed.")
def main(host: str, port: int, data_dir: Path | None, model: str, weights: str, preprocess: str | None,
         devices: tuple[str, ...], queue_limit: int, preview_every: int, token: str | None,
         max_upload_mb: int, quiet: bool) -> None:
    """Serve the style transfer web page: upload, watch the picture form, cancel, download.

    Open the address it prints. Stop it with Ctrl-C: a running job ends at its next evaluation and
    its image is kept in the gallery.
    """
    from ..config.style import StyleConfig

    devices = tuple(dict.fromkeys(devices or ("auto",)))  # a device named twice still gets one worker
    for device in devices:
        try:
            StyleConfig(device=device, weights=weights)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
    if weights not in WEIGHTS_WORDS and not os.path.isfile(weights):
        raise click.UsageError(f"--weights {shown(weights)}: no such file (use imagenet, original, random or a file)")
    try:
        import uvicorn

        from .form import Limits
        from .app import create_app

        _check_multipart()
    except ImportError as exc:
        raise click.ClickException(f"stylize-serve needs the web extra ({exc.name or exc} is missing): "
                                   f"{EXTRA_HINT}") from None
    if weights not in ("imagenet", "random"):
        _check_weights(model, weights, preprocess)
    _check_bind(host, port)  # before the weights are settled, which may ask the network
    loopback = is_loopback(host)
    if token is None and not loopback:
        token = secrets.token_urlsafe(24)
    folder = data_dir if data_dir is not None else default_data_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        app = create_app(folder, weights=weights, model=model, preprocess=preprocess, devices=devices,
                         queue_limit=queue_limit, preview_every=preview_every, token=token,
                         allowed_hosts=("localhost", "127.0.0.1", "::1") if loopback and token is None else None,
                         limits=Limits(max_body=max_upload_mb * 1_000_000), on_log=job_log(quiet),
                         on_notice=note)  # offline: the original VGG19 serves, said once (even with --quiet)
    except OSError as exc:
        raise click.ClickException(f"--data-dir {shown(folder)}: cannot be used ({exc.strerror or exc})") from None
    server = _Server(uvicorn.Config(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=10,
                                    lifespan="on"))
    server.on_started = lambda bound: click.echo(_address(host, bound, token) + f"  (gallery: {shown(folder)})",
                                                 err=True)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    except SystemExit as exc:  # uvicorn exits 1 after logging why (a bind lost to a race since the check)
        if exc.code:
            raise click.ClickException(f"the server stopped: cannot serve on {host}:{port}") from None


def _check_multipart() -> None:
    """Fail at start when python-multipart is missing: FastAPI imports without it, but every upload would fail.

    Raises:
        ImportError: named ``python-multipart``.
    """
    from starlette import formparsers

    if getattr(formparsers, "multipart", True) is None:  # starlette's own finding (either module name)
        raise ImportError("python-multipart is not installed", name="python-multipart")


def _check_weights(model: str, weights: str, preprocess: str | None) -> None:
    """Load the server's weights file once, so a file that does not fit ``--model`` (or cannot tell its
    preprocessing) fails at start in one line, not in every job."""
    from ..errors import StyleTransferError
    from ..networks.vgg import load_network

    try:
        load_network(model, weights, preprocess=preprocess)
    except StyleTransferError as exc:
        raise click.ClickException(first_line(exc)) from None


def _check_bind(host: str, port: int) -> None:
    """Fail in one line, before uvicorn starts, when the address cannot be listened on."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise click.ClickException(f"cannot listen on {host}:{port} ({reason})") from None


def job_log(quiet: bool) -> Callable[[str], None] | None:
    """The app's ``on_log``: each job's line on stderr after the time of day (``12:03:04 job ... done: ...``);
    None with ``--quiet``."""
    if quiet:
        return None
    return lambda line: click.echo(f"{time.strftime('%H:%M:%S')} {line}", err=True)


def _address(host: str, port: int, token: str | None) -> str:
    shown_host = f"[{host}]" if ":" in host else host
    query = f"/?token={token}" if token else "/"
    return f"style_transfer web app: http://{shown_host}:{port}{query}"


def _make_server_class() -> Any:
    import uvicorn
    from starlette.applications import Starlette

    class Server(uvicorn.Server):
        """uvicorn's server, which also stops the jobs as soon as a stop is asked (Ctrl-C, SIGTERM), so the
        open event streams end and the server does not wait for a long run to finish."""

        on_started: Any = None

        def handle_exit(self, sig: int, frame: Any) -> None:
            app = self.config.app  # uvicorn types it as any ASGI app or an import string
            if isinstance(app, Starlette):  # ours (create_app, a FastAPI app): its state holds the job queue
                app.state.queue.begin_stop()
            super().handle_exit(sig, frame)

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.on_started is not None:
                bound = self.config.port
                for server in getattr(self, "servers", []):
                    for sock in server.sockets:
                        bound = sock.getsockname()[1]
                        break
                self.on_started(bound)

    return Server


def _Server(config: Any) -> Any:  # noqa: N802 - a factory in a class's clothes: uvicorn is imported late
    return _make_server_class()(config)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
