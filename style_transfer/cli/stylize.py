"""The ``stylize`` command: flags -> StyleConfig -> ``stylize()``; owns progress and exit codes."""

from __future__ import annotations

import dataclasses
import os
import shlex
from typing import Any, NoReturn

import click

from .. import __version__
from .watch import EXIT_CODES, Signals, Watch, read_record
from ..config.run_options import RunOptions
from ..config.style import StyleConfig
from ..networks.weights import WEIGHTS_WORDS, preprocess_assumed
from ..fast.cpuinfo import Bf16, cpu_bf16, cpu_flags
from ..errors import Interrupted, MissingExtra, RunStopped, StyleTransferError
from ..io.files import check_not_an_input, check_writable, shown
from ..io.images import (INPUT_FORMATS_TEXT, MAX_PIXELS, MIN_INPUT_SIDE, check_output, header_size, open_image,
                         save_image)
from .options import (MASK_FIELDS, OneLineCommand, RECORDED_FIELDS, SETTINGS_FIELDS, UsageFault, check_input_paths,
                      config_from_options, note, one_line_error, own_process, setting_inputs,
                      settings_options, show_traceback, unexpected_error)
from ..fast.speed import FAST_HISTORY_SIZE, Speed, resolve_speed
from ..run.plans import checkpoint_bytes, default_size_of, plan_run
from ..core.steps import LBFGS_MAX_ITER
from ..networks.download import planned_weights
from ..io.provenance import check_replay_inputs, replay_config


# Nothing above imports torch (tests/cli/test_startup.py checks it): --help, --version, option errors and
# unreadable inputs answer in a fraction of a second. torch, tqdm and the model load once a run starts.

ALPHA_FORMATS = ("PNG", "WEBP", "TIFF")  # output formats that keep --keep-alpha's transparency


def bytes_text(count: int) -> str:
    """A file's size as a person reads it: ``26.6 MB``, ``114 kB``, ``1.2 GB`` (decimal units, 3 digits)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{count} B"


def _checkpoint_help() -> str:
    """--checkpoint's help: when it is written, and how large it grows (``plans.checkpoint_bytes``)."""
    small, large = (bytes_text(checkpoint_bytes(w, h, 100)) for w, h in ((128, 85), (448, 299)))
    return ("Save the run's state to this file on Ctrl-C, SIGTERM or a NaN loss (and every --checkpoint-every "
            "evaluations), to continue with --resume. It is large: float32 copies of the image, 2 x --history-size "
            f"+ 4 of them (LBFGS's curvature pairs), about 12 x W x H x (2 x history + 4) bytes: {small} at 128x85 "
            f"px, {large} at 448x299 px with the default history of 100 (--fast keeps it; moving the pixels, "
            f"{FAST_HISTORY_SIZE}). The "
            "summary line gives the size written.")


def show_config(config: StyleConfig) -> None:
    """The resolved settings, one ``name: value`` per line, on stdout: the preset filled in, the speed
    settings --fast turns on (``fast.speed.resolve_speed``, with this CPU's flags and the oneDNN cap in force; a GPU
    taken to have native bf16), and the plan (``plans.plan_run``: the sizes and the evaluations that run)."""
    devices = ["cpu"] if config.device == "cpu" else ["cuda"] if config.device.startswith("cuda") else ["cpu", "cuda"]
    bf16 = {"cpu": cpu_bf16(cpu_flags(), os.environ.get("ONEDNN_MAX_CPU_ISA")), "cuda": Bf16(True, "native bf16")}
    speeds = {device: resolve_speed(config, device, bf16[device]) for device in devices}
    speed: Speed = speeds[devices[0]]
    resolved: dict[str, Any] = {**vars(config), "channels_last": speed.channels_last, "fused_gram": speed.fused_gram,
                                "history_size": speed.history_size, "parametrization": speed.parametrization,
                                "two_loop": speed.two_loop}
    if speed.reason:  # --fast chose the precision: which, and why, on each kind of device the run may take
        resolved["precision"] = "; ".join(f"{s.precision} {s.reason}" for s in speeds.values())
    plans = {device: plan_run(config, config.size or default_size_of(device), speeds[device]) for device in devices}
    plan = plans[devices[-1]]
    if len(plan.sizes) > 1 and not config.scale_steps and len({p.budgets for p in plans.values()}) == 1:
        resolved["scale_steps"] = plan.budgets  # the split of --steps each size gets
    for name, value in resolved.items():
        if isinstance(value, tuple):
            value = ",".join(str(v) for v in value)
        if name == "preprocess" and value is None:  # a weights file not found yet: the run names the problem
            value = "auto (from the weights)"
        click.echo(f"{name}: {'auto' if value is None and name in ('size', 'lr') else value}")
    where = {"cpu": " on a CPU", "cuda": " on a GPU"} if config.size is None else {"cpu": "", "cuda": ""}
    sizes = [",".join(map(str, p.sizes)) + where[d] for d, p in plans.items()]
    click.echo(f"sizes: {'; '.join(dict.fromkeys(sizes))}")
    runs = {d: f"{p.total}" + (f" ({','.join(map(str, p.evaluations))})" if len(p.sizes) > 1 else "")
            for d, p in plans.items()}
    counts = [text + (where[d] if len(set(runs.values())) > 1 else "") for d, text in runs.items()]
    steps = f", in whole LBFGS steps of {LBFGS_MAX_ITER}" if config.optimizer == "lbfgs" else ""
    click.echo(f"evaluations: {'; '.join(dict.fromkeys(counts))}{steps}")


@click.command(cls=OneLineCommand)
@click.argument("content", required=False, metavar="CONTENT", type=click.Path(path_type=str))  # the loader checks files (exit 1)
@click.argument("styles", nargs=-1, metavar="STYLE...", type=click.Path(path_type=str))
@click.option("-o", "--output", type=click.Path(path_type=str),
              help="Where to write the result; the format follows the extension (.jpg, .png, ...).")
@settings_options
@click.option("--print-config", is_flag=True,
              help="Print the resolved settings (preset filled in, explicit options applied) and exit.")
@click.option("--save-every", type=int, default=0,
              help="Write the current image every N evaluations beside OUTPUT (out.0040.png), or in --save-dir.")
@click.option("--save-dir", type=click.Path(path_type=str), default=None,
              help="Folder for --save-every's images (default: beside OUTPUT).")
@click.option("--animate", type=click.Path(path_type=str), default=None,
              help="Write the run as an animation (.webp or .gif): a frame every --save-every evaluations "
                   "(default 10) and the final image.")
@click.option("--log", "log_path", type=click.Path(path_type=str), default=None,
              help="Write one JSON line per evaluation (step, seconds, each loss term) to this file.")
@click.option("--plot", type=click.Path(path_type=str), default=None,
              help="Plot the loss curves to this image (.png); needs matplotlib: pip install 'style_transfer[plot]'.")
@click.option("--no-metadata", is_flag=True,
              help="Write no provenance record (settings, input hashes, versions) into the images.")
@click.option("--replay", type=click.Path(path_type=str), default=None,
              help="Run again with the settings recorded in this output of an earlier run, on the CONTENT and "
                   "STYLE given (checked by SHA-256): the same image on the same machine.")
@click.option("--checkpoint", type=click.Path(path_type=str), default=None,
              help=_checkpoint_help())
@click.option("--checkpoint-every", type=int, default=0,
              help="Also save the checkpoint every N evaluations (at the LBFGS step that passes them).")
@click.option("--resume", type=click.Path(path_type=str), default=None,
              help="Continue the run saved in this checkpoint (same inputs and options); it keeps saving there "
                   "unless --checkpoint says otherwise. The result equals the uninterrupted run's.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or summary on stderr.")
@click.option("--debug", is_flag=True, help="On an error, print the traceback before the one-line message.")
@click.version_option(__version__, "--version", prog_name="stylize")
def main(content: str | None, styles: tuple[str, ...], output: str | None, print_config: bool, save_every: int,
         save_dir: str | None, animate: str | None, log_path: str | None, plot: str | None, no_metadata: bool,
         replay: str | None, checkpoint: str | None, checkpoint_every: int, resume: str | None, quiet: bool,
         debug: bool, **settings: Any) -> None:
    """Repaint CONTENT in the style of STYLE (Gatys et al.) and write the result to OUTPUT.

    A faithful port of the PyTorch neural style transfer tutorial: VGG19, LBFGS,
    content loss after conv_4, style losses after conv_1..conv_5. Several STYLE images
    are blended (--style-blend).

    Inputs are recognised by content, not extension: {formats} only. Animated or multi-page
    files give their first frame (frame 0). An input must be at least {min_side} px on its
    shorter side (a 1x1 image is refused; small icons are upscaled) and at most {max_mpx}
    megapixels as declared in its header. The output is written atomically, in the same
    formats; file names starting with '-' go after '--'. Ctrl-C saves the current image to
    OUTPUT and exits 130; a NaN or infinite loss stops the run, saves the last finite
    image and exits 1. Exit codes: 0 done, 1 failure, 2 bad option or input path, 130 interrupted.
    """
    told = settings.get("preprocess") is not None or replay is not None or resume is not None  # else: the file's
    try:
        config = config_from_options(settings)
        if replay is not None and resume is not None:
            raise UsageFault("give --replay or --resume, not both")
        masks = {name: getattr(config, name) for name in MASK_FIELDS}  # inputs: given again, checked by hash
        if replay is not None:
            config = dataclasses.replace(_replay_config(replay, config.weights, config.device), **masks)
        if resume is not None:
            config = dataclasses.replace(_resume_config(resume, config), **masks)
        if print_config:  # the weights that will run: offline, the original VGG19's settings (and a note)
            show_config(planned_weights(config, on_notice=None if quiet else note))
            return
        if content is None or not styles:
            raise UsageFault(f"Missing argument '{'CONTENT' if content is None else 'STYLE...'}'")
        if output is None:
            raise UsageFault("Missing option '-o' / '--output'")
        fmt = check_output(output)
        _check_not_inputs(content, styles, config, output, animate, log_path, plot, replay, checkpoint, resume)
        if config.keep_alpha and fmt not in ALPHA_FORMATS:
            raise UsageFault(f"--keep-alpha: {output} cannot store transparency; use .png, .webp or .tiff")
        watch = Watch(output, quiet=quiet, save_every=save_every, save_dir=save_dir, animate=animate,
                      log_path=log_path, plot=plot, metadata=not no_metadata)
        run_options = _run_options(watch, checkpoint, checkpoint_every, resume)
    except MissingExtra as exc:  # an extra not installed (--plot's matplotlib): not a usage error, exit 1
        raise click.ClickException(str(exc)) from None
    except (ValueError, StyleTransferError) as exc:
        raise UsageFault(str(exc)) from None
    _check_inputs(content, styles, config, debug)  # before torch is imported: a bad image answers at once
    if not told and preprocess_assumed(config.weights):
        # a state dict cannot tell whether it holds torchvision's or Caffe's weights: say which is taken
        note(f"{shown(config.weights)} does not tell which preprocessing its weights expect; torchvision's assumed "
             f"(RGB, ImageNet's mean and std); for Caffe weights pass --preprocess caffe or caffe256")
    if replay is not None:
        try:
            check_replay_inputs(read_record(replay), content, styles, config.weights, style_masks=config.style_masks,
                                content_mask=config.content_mask)
        except (ValueError, StyleTransferError) as exc:
            raise UsageFault(f"--replay {shown(replay)}: {exc}") from None

    from ..run.run import Run

    own_process(config.threads)
    checkpoint_before = _stamp(run_options.checkpoint)  # the summary names the checkpoint if this run wrote it
    run = Run(content, list(styles) if len(styles) > 1 else styles[0], config, run_options,
              download_progress=watch.on_download, on_notice=watch.on_notice, on_stage=watch.on_stage)
    watch.run = run
    signals = Signals(run)
    try:
        with signals:
            result = run.execute(signals.watching(watch.on_event))
        watch.finish(result)  # the result, its animation and plot; a Ctrl-C now stops the writing
    except RunStopped as exc:  # a second Ctrl-C, or a NaN loss: keep the last good image
        watch.close()
        hint = _resume_hint(run_options.checkpoint, content, styles, output, run.config)
        _keep_partial(exc, output, debug, watch.record(run, exc), hint)
    except (StyleTransferError, ValueError) as exc:  # ValueError: a setting only the model can check
        watch.close()
        one_line_error(exc, debug)
    except KeyboardInterrupt:  # before the first step (loading) or while writing the result
        watch.close()
        click.echo(f"interrupted before the result was written; {shown(output)} left as it was", err=True)
        raise SystemExit(130) from None
    except Exception as exc:  # a bug: still one line, the traceback only with --debug
        watch.close()
        unexpected_error(exc, debug)
    if result.stopped in EXIT_CODES:  # Ctrl-C, SIGTERM: the image so far was saved
        click.echo(f"interrupted at step {result.evaluations}, saved {shown(output)}; "
                   f"{_resume_hint(run_options.checkpoint, content, styles, output, run.config)}", err=True)
        raise SystemExit(EXIT_CODES[result.stopped])
    if result.ended_above_start:  # even with --quiet: the picture is not what was asked for
        click.echo(f"warning: the loss ended at {result.losses['loss']:.4g}, above the {result.start_loss:.4g} it "
                   "started at: LBFGS diverged and the picture is probably noise; try --fast (it recovers from a "
                   "diverging run) or a lower --style-weight", err=True)
    if not quiet:
        if result.stopped == "converged":
            click.echo(f"LBFGS converged (gradient below its tolerance): stopped after {result.evaluations} of "
                       f"{watch.planned or config.steps} evaluations; more would not change the image", err=True)
        elif result.stopped == "plateau":
            click.echo(f"stopped early: the loss improved by less than {config.min_improvement:g} over the last "
                       f"{config.patience} evaluations", err=True)
        also = watch.written()
        if run_options.checkpoint is not None and _stamp(run_options.checkpoint) != checkpoint_before:
            also.append(f"checkpoint {_checkpoint_text(run_options.checkpoint)}")
        smaller = _smaller_than_the_photo(content, result)
        if smaller:  # before the summary, which stays the last line
            click.echo(smaller, err=True)
        click.echo(f"wrote {shown(output)} ({result.image.width}x{result.image.height}, {result.evaluations} "
                   f"evaluations{_why_evaluations(result, config)})" + (f"; also {', '.join(also)}" if also else ""),
                   err=True)


def _why_evaluations(result: Any, config: StyleConfig) -> str:
    """Why a finished run's count is not --steps, as the summary's words after it; "" where it is."""
    if result.stopped != "done" or result.evaluations == config.steps or config.optimizer != "lbfgs":
        return ""
    why = f": whole LBFGS steps of {LBFGS_MAX_ITER} past "
    share = resolve_speed(config).steps_share
    if share is not None:
        return why + f"{round(share * 100)} % of --steps {config.steps} (--fast), jumps cutting some short"
    return why + f"--steps {config.steps}"


def _smaller_than_the_photo(content: str, result: Any) -> str:
    """A line for a picture made smaller than its photo (a 3000 px photo came back at 448 px unsaid)."""
    try:
        width, height = header_size(content, upright=True)
    except (StyleTransferError, OSError):
        return ""
    side = max(result.image.size)
    if max(width, height) < 1.5 * side:  # a few pixels' resize is no news
        return ""
    return (f"the photo is {width}x{height}; the picture's long side is --size {side}: a larger --size keeps more "
            "detail and takes longer")


for _key, _value in {"{formats}": INPUT_FORMATS_TEXT, "{min_side}": str(MIN_INPUT_SIDE),
                     "{max_mpx}": str(MAX_PIXELS // 1_000_000)}.items():
    main.help = (main.help or "").replace(_key, _value)  # the documented limits, written once


def _check_inputs(content: str, styles: tuple[str, ...], config: StyleConfig, debug: bool) -> None:
    """Check the input files: a path that names no file this process may read (missing, a directory, no
    permission) is a wrong command line, exit 2, for every input; an image that cannot be used (not an image,
    corrupt, too small) exits 1 (``open_image``'s line). The masks' contents are read by the run, which names
    them as masks."""
    given = setting_inputs(config)
    check_input_paths([("", content), *(("", style) for style in styles), *given])
    for path in [content, *styles, given[0][1]]:  # the images and an --init file
        if path is None:
            continue
        try:
            open_image(path).close()
        except StyleTransferError as exc:
            show_traceback(debug)
            raise click.ClickException(str(exc)) from None


def _check_not_inputs(content: str, styles: tuple[str, ...], config: StyleConfig, output: str, animate: str | None,
                      log_path: str | None, plot: str | None, replay: str | None, checkpoint: str | None,
                      resume: str | None) -> None:
    """Refuse, before any work (before --log is opened), a file this run writes that is one of its inputs
    by any name (docs/inputs-and-errors.md)."""
    init = None if config.init in ("content", "noise", "style") else config.init
    weights = None if config.weights in WEIGHTS_WORDS else config.weights
    inputs = [("CONTENT", content), *(("STYLE", style) for style in styles), ("--init", init), ("--replay", replay),
              ("--weights", weights), *(("--style-mask", mask) for mask in config.style_masks),
              ("--content-mask", config.content_mask)]
    check_not_an_input([("-o", output), ("--animate", animate), ("--log", log_path), ("--plot", plot)],
                       [*inputs, ("--resume", resume)])
    check_not_an_input([("--checkpoint", checkpoint)], inputs)  # --resume keeps saving to its own file


def _keep_partial(exc: RunStopped, output: str, debug: bool, record: dict[str, Any] | None,
                  resume_hint: str = "") -> NoReturn:
    """Save the image a stopped run carries (atomically, with ``record``), say so in one line, exit 130 or 1;
    an interrupted run's line ends with ``resume_hint`` (how to continue it)."""
    show_traceback(debug)
    if exc.image is None:
        message = f"{exc}; nothing written"
    else:
        try:
            save_image(exc.image, output, metadata=record)
            message = f"{exc}, saved {shown(output)}"
        except StyleTransferError as error:
            message = f"{exc}; could not save it: {error}"
        except KeyboardInterrupt:
            message = f"{exc}; interrupted again while saving, {shown(output)} left as it was"
    if isinstance(exc, Interrupted):
        click.echo(f"{message}; {resume_hint}" if resume_hint else message, err=True)
        raise SystemExit(130)
    raise click.ClickException(message)


def _replay_config(path: str, weights: str, device: str) -> StyleConfig:
    """--replay: the recorded settings; --weights (for a weights file) and --device may be given anew."""
    from click.core import ParameterSource

    context = click.get_current_context()
    given = [name for name in RECORDED_FIELDS if context.get_parameter_source(name) == ParameterSource.COMMANDLINE]
    if given:
        raise UsageFault(f"--replay takes the settings from the record; drop --{given[0].replace('_', '-')}")
    explicit = {name: context.get_parameter_source(name) == ParameterSource.COMMANDLINE for name in ("weights", "device")}
    try:
        return replay_config(read_record(path), weights=weights if explicit["weights"] else None,
                             device=device if explicit["device"] else None)
    except (ValueError, StyleTransferError) as exc:
        raise UsageFault(f"--replay {shown(path)}: {exc}") from None


def _resume_config(path: str, config: StyleConfig) -> StyleConfig:
    """--resume: the settings saved in the checkpoint; an option given that differs from them is refused
    (naming the option and both values), one that agrees is accepted. --threads may be given anew."""
    from click.core import ParameterSource

    if not os.path.isfile(path):
        raise UsageFault(f"--resume {shown(path)}: no such checkpoint file")
    from ..errors import CheckpointError
    from ..io.provenance import setting_text, weights_entry
    from ..run.checkpoints import checkpoint_settings  # imports torch: only a resumed run reads one before its run

    try:
        saved = checkpoint_settings(path)
    except CheckpointError as exc:
        raise click.ClickException(str(exc)) from None
    context = click.get_current_context()
    skipped = ("threads", *MASK_FIELDS)  # --threads may be given anew; masks are inputs (the checkpoint checks them)
    given = [name for name in SETTINGS_FIELDS if name not in skipped and context.get_parameter_source(name) in
             (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)]
    where = f"--resume {shown(path)}"
    recorded = saved["weights"]
    if "weights" in given:
        mine = weights_entry(config.weights)
        if mine.get("kind") != recorded.get("kind"):
            theirs = recorded.get("name") if recorded.get("kind") == "file" else recorded.get("kind")
            raise UsageFault(f"{where}: --weights {shown(config.weights)} differs from the checkpoint's "
                             f"{shown(str(theirs))}; drop --weights to continue the run as it was")
        if mine.get("kind") == "file" and mine.get("sha256") != recorded.get("sha256"):
            raise UsageFault(f"{where}: --weights {shown(config.weights)} is not the weights file the run was "
                             f"made with ({shown(str(recorded.get('name')))}, SHA-256 differs)")
    for name in given:
        if name == "weights":
            continue
        ours, theirs = getattr(config, name), saved["settings"].get(name)
        theirs = tuple(theirs) if isinstance(theirs, list) else theirs
        if ours != theirs:
            flag = "--" + name.replace("_", "-")
            if isinstance(ours, bool):
                raise UsageFault(f"{where}: {flag} was not given to the run the checkpoint holds; drop {flag} to "
                                 f"continue the run as it was")
            raise UsageFault(f"{where}: {flag} {setting_text(ours)} differs from the checkpoint's "
                             f"{setting_text(theirs)}; drop {flag} to continue the run as it was")
    try:
        resumed = replay_config({"settings": saved["settings"], "weights": recorded},
                                weights=config.weights if "weights" in given else None)
    except ValueError as exc:
        message = str(exc).replace("give it with weights=FILE", "give it again with weights=FILE")
        raise UsageFault(f"{where}: {message}") from None
    return dataclasses.replace(resumed, threads=config.threads)


def _resume_hint(checkpoint: str | None, content: str, styles: tuple[str, ...], output: str,
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
    return f"the run's state is in {_checkpoint_text(checkpoint)}; continue it with: {command}"


def _checkpoint_text(path: str) -> str:
    """A checkpoint written, as the last line names it: its path and size (``run.ckpt (26.6 MB)``)."""
    try:
        return f"{shown(path)} ({bytes_text(os.path.getsize(path))})"
    except OSError:
        return shown(path)


def _stamp(path: str | None) -> tuple[int, int] | None:
    """A file's (inode, modification time in ns), None when there is none: tells whether a run rewrote it."""
    try:
        info = os.stat(path) if path is not None else None
    except OSError:
        return None
    return (info.st_ino, info.st_mtime_ns) if info is not None else None


def _run_options(watch: Watch, checkpoint: str | None, checkpoint_every: int, resume: str | None) -> RunOptions:
    """The run's options; a checkpoint's folder is checked now, and --resume keeps saving to its file."""
    if resume is not None and not os.path.isfile(resume):
        raise ValueError(f"--resume {shown(resume)}: no such checkpoint file")
    checkpoint = checkpoint if checkpoint is not None else resume
    if checkpoint is not None:
        if os.path.isdir(checkpoint):
            raise ValueError(f"--checkpoint {shown(checkpoint)}: is a directory; give a file name")
        check_writable(checkpoint)
    return RunOptions(preview_every=watch.preview_every, checkpoint=checkpoint, checkpoint_every=checkpoint_every,
                      resume=resume)
