"""What the ``stylize`` command does and says about checkpoints: --checkpoint's help, --resume's settings, the run's
options, the summary's checkpoint and the line that says how to continue an interrupted run."""

from __future__ import annotations

import os
import shlex

import click

from ..fast.speed import FAST_FOURIER_HISTORY_SIZE, FAST_HISTORY_SIZE
from ..config.run_options import RunOptions
from ..config.style import StyleConfig
from ..io.files import check_writable, shown
from ..run.plans import checkpoint_bytes
from ..run.rates import rates_path
from .options import SETTINGS_FIELDS, UsageFault


def bytes_text(count: int) -> str:
    """A file's size as a person reads it: ``26.6 MB``, ``114 kB``, ``1.2 GB`` (decimal units, 3 digits)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{count} B"


def checkpoint_help() -> str:
    """--checkpoint's help: when it is written, and how large it grows (``plans.checkpoint_bytes``)."""
    small, large = (bytes_text(checkpoint_bytes(w, h, 100)) for w, h in ((128, 85), (448, 299)))
    return ("Save the run's state to this file on Ctrl-C, SIGTERM or a NaN loss (and every --checkpoint-every "
            "evaluations), to continue with --resume. It is large: float32 copies of the image, 2 x --history-size "
            f"+ 4 of them (LBFGS's curvature pairs), about 12 x W x H x (2 x history + 4) bytes: {small} at 128x85 "
            f"px, {large} at 448x299 px with the default history of 100 (--fast keeps {FAST_FOURIER_HISTORY_SIZE}; "
            f"moving the pixels, {FAST_HISTORY_SIZE}). The "
            "summary line gives the size written.")


def resume_settings(path: str, config: StyleConfig) -> StyleConfig:
    """--resume: the settings saved in the checkpoint (``run.checkpoints.resume_config``); an option given that
    differs from them is refused (naming the option and both values, exit 2), one that agrees is accepted. --threads
    may be given anew. An unreadable checkpoint exits 1."""
    from click.core import ParameterSource

    if not os.path.isfile(path):
        raise UsageFault(f"--resume {shown(path)}: no such checkpoint file")
    from ..errors import CheckpointError
    from ..run.checkpoints import resume_config  # imports torch: only a resumed run reads one before its run

    context = click.get_current_context()
    given = [name for name in SETTINGS_FIELDS if context.get_parameter_source(name) in
             (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)]
    try:
        return resume_config(config, path, given)
    except CheckpointError as exc:  # the file: exit 1
        raise click.ClickException(str(exc)) from None
    except ValueError as exc:  # an option that disagrees with the checkpoint: exit 2
        raise UsageFault(str(exc)) from None


def make_run_options(preview_every: int, checkpoint: str | None, checkpoint_every: int,
                     resume: str | None) -> RunOptions:
    """The run's options; a checkpoint's folder is checked now, and --resume keeps saving to its file."""
    if resume is not None and not os.path.isfile(resume):
        raise ValueError(f"--resume {shown(resume)}: no such checkpoint file")
    checkpoint = checkpoint if checkpoint is not None else resume
    if checkpoint is not None:
        if os.path.isdir(checkpoint):
            raise ValueError(f"--checkpoint {shown(checkpoint)}: is a directory; give a file name")
        check_writable(checkpoint)
    return RunOptions(preview_every=preview_every, checkpoint=checkpoint, checkpoint_every=checkpoint_every,
                      resume=resume, rates=str(rates_path()))  # the command keeps this machine's rates


def resume_hint(checkpoint: str | None, content: str, styles: tuple[str, ...], output: str,
                 config: StyleConfig) -> str:
    """What an interrupted run's last line says about continuing it: the checkpoint and the command."""
    if checkpoint is None or not os.path.isfile(checkpoint):
        return "no checkpoint was asked for (--checkpoint FILE keeps a run's state to resume it)"
    words = ["stylize", content, *styles, "-o", output, "--resume", checkpoint]
    for mask in config.style_masks:  # masks are inputs: given again, checked by hash
        words += ["--style-mask", mask]
    if config.content_mask is not None:
        words += ["--content-mask", config.content_mask]
    if config.weights != "imagenet":  # a checkpoint names a weights file, it cannot hold one; a word: as the run took
        words += ["--weights", config.weights]
    command = " ".join(shlex.quote(shown(word)) for word in words)
    return f"the run's state is in {checkpoint_text(checkpoint)}; continue it with: {command}"


def checkpoint_text(path: str) -> str:
    """A checkpoint written, as the last line names it: its path and size (``run.ckpt (26.6 MB)``)."""
    try:
        return f"{shown(path)} ({bytes_text(os.path.getsize(path))})"
    except OSError:
        return shown(path)


def stamp(path: str | None) -> tuple[int, int] | None:
    """A file's (inode, modification time in ns), None when there is none: tells whether a run rewrote it."""
    try:
        info = os.stat(path) if path is not None else None
    except OSError:
        return None
    return (info.st_ino, info.st_mtime_ns) if info is not None else None
