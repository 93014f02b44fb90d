"""The ``stylize`` command: flags -> StyleConfig -> ``stylize()``; owns progress and exit codes."""

from __future__ import annotations

import dataclasses
from typing import Any, NoReturn

import click

from .. import __version__
from .checkpoints import checkpoint_help, checkpoint_text, make_run_options, resume_hint, resume_settings, stamp
from .print_config import show_config
from .watch import EXIT_CODES, Signals, Watch, read_record
from ..config.choices import INITS
from ..config.style import StyleConfig
from ..config.weights import WEIGHTS_WORDS, preprocess_assumed
from ..errors import Interrupted, MissingExtra, RunStopped, StyleTransferError
from ..run import Unfinished
from ..io.files import check_not_an_input, shown
from ..io.images import (INPUT_FORMATS_TEXT, MAX_PIXELS, MIN_INPUT_SIDE, check_output, header_size, open_image,
                         save_image)
from .options import (MASK_FIELDS, OneLineCommand, RECORDED_FIELDS, UsageFault, check_input_paths,
                      config_from_options, note, one_line_error, own_process, setting_inputs,
                      settings_options, show_traceback, unexpected_error)
from ..fast.speed import resolve_speed
from ..core.steps import LBFGS_MAX_ITER
from ..run.plans import plan_run
from ..networks.download import planned_weights
from ..io.provenance import check_replay_inputs, replay_config


# Nothing above imports torch (tests/cli/test_startup.py checks it): --help, --version, option errors and
# unreadable inputs answer in a fraction of a second. torch, tqdm and the model load once a run starts.

ALPHA_FORMATS = ("PNG", "WEBP", "TIFF")  # output formats that keep --keep-alpha's transparency





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
              help=checkpoint_help())
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
            config = dataclasses.replace(resume_settings(resume, config), **masks)
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
        run_options = make_run_options(watch.preview_every, checkpoint, checkpoint_every, resume)
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

    from ..run.fits import forecast
    from ..run.run import Run

    own_process(config.threads)
    if not quiet:  # what the run will take, said once its checks pass (a size that cannot fit: the run's error)
        try:
            watch.plan = f"plan: {forecast(content, list(styles), config).text()}"
        except (StyleTransferError, ValueError):
            pass
    checkpoint_before = stamp(run_options.checkpoint)  # the summary names the checkpoint if this run wrote it
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
        hint = resume_hint(run_options.checkpoint, content, styles, output, run.config)
        _keep_partial(exc, output, debug, watch.record(run, exc), hint, run.unfinished)
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
        what = f" ({result.unfinished.text()})" if result.unfinished is not None else ""
        click.echo(f"interrupted at step {result.evaluations}, saved {shown(output)}{what}; "
                   f"{resume_hint(run_options.checkpoint, content, styles, output, run.config)}", err=True)
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
        if run_options.checkpoint is not None and stamp(run_options.checkpoint) != checkpoint_before:
            also.append(f"checkpoint {checkpoint_text(run_options.checkpoint)}")
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
    plan = plan_run(config, max(result.image.size))
    if len(plan.sizes) > 1:  # coarse-to-fine: the first size as a run at one size, the larger ones a share each
        return f": {' + '.join(map(str, plan.evaluations))} at {', '.join(map(str, plan.sizes))} px"
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
    init = None if config.init in INITS else config.init
    weights = None if config.weights in WEIGHTS_WORDS else config.weights
    inputs = [("CONTENT", content), *(("STYLE", style) for style in styles), ("--init", init), ("--replay", replay),
              ("--weights", weights), *(("--style-mask", mask) for mask in config.style_masks),
              ("--content-mask", config.content_mask)]
    check_not_an_input([("-o", output), ("--animate", animate), ("--log", log_path), ("--plot", plot)],
                       [*inputs, ("--resume", resume)])
    check_not_an_input([("--checkpoint", checkpoint)], inputs)  # --resume keeps saving to its own file


def _keep_partial(exc: RunStopped, output: str, debug: bool, record: dict[str, Any] | None,
                  resume_hint: str = "", unfinished: Unfinished | None = None) -> NoReturn:
    """Save the image a stopped run carries (atomically, with ``record``), say so in one line, exit 130 or 1;
    an interrupted run's line ends with ``resume_hint`` (how to continue it); ``unfinished``: which working size the
    picture is, where a run of several sizes stopped before its last."""
    show_traceback(debug)
    if exc.image is None:
        message = f"{exc}; nothing written"
    else:
        try:
            save_image(exc.image, output, metadata=record)
            message = f"{exc}, saved {shown(output)}" + (f" ({unfinished.text()})" if unfinished is not None else "")
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
