"""The ``stylize`` command: flags -> StyleConfig -> ``stylize()``; owns progress and exit codes."""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any, NoReturn

import click

from . import __version__
from .cli_watch import EXIT_CODES, Signals, Watch, read_record
from .config import (BACKWARDS, CPU_DEFAULT_SIZE, GPU_DEFAULT_SIZE, INITS, LOSS_FORMS, OPTIMIZERS, PRECISIONS,
                     PRESERVE_COLORS, RunOptions, StyleConfig)
from .errors import Interrupted, RunStopped, StyleTransferError
from .files import check_writable, shown
from .images import INPUT_FORMATS_TEXT, MAX_PIXELS, MIN_INPUT_SIDE, check_output, open_image, save_image
from .layers import POOLINGS
from .presets import PRESET_NAMES, PRESETS
from .provenance import check_replay_inputs, replay_config


# Nothing above imports torch (tests/test_startup.py checks it): --help, --version, option errors and
# unreadable inputs answer in a fraction of a second. torch, tqdm and the model load once a run starts.

DEFAULTS = StyleConfig()  # every default below is read from here, so it is written once


class UsageFault(click.ClickException):
    """A bad option or argument: one line on stderr, exit 2."""

    exit_code = 2


class OneLineCommand(click.Command):
    """A click command whose own usage errors print one line (no usage dump)."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            exc.ctx = None  # without a context, click prints only "Error: ..."
            raise


def _layers(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _numbers(option: str, value: str | None) -> tuple[float, ...] | None:
    """A comma-separated list of numbers (None stays None, for "from the preset")."""
    if value is None:
        return None
    try:
        return tuple(float(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise UsageFault(f"{option}: expected comma-separated numbers, got {value!r}") from None


TUTORIAL, PAPER = PRESETS["tutorial"], PRESETS["paper"]
ALPHA_FORMATS = ("PNG", "WEBP", "TIFF")  # output formats that keep --keep-alpha's transparency


def show_config(config: StyleConfig) -> None:
    """The resolved settings, one ``name: value`` per line, on stdout."""
    for name, value in vars(config).items():
        if isinstance(value, tuple):
            value = ",".join(str(v) for v in value)
        click.echo(f"{name}: {'auto' if value is None and name in ('size', 'lr') else value}")


def _speed_fields(options: dict[str, Any]) -> dict[str, Any]:
    """The speed options (issue 6) as StyleConfig fields; --scale-steps is a comma-separated list."""
    fields = dict(options)
    try:
        fields["scale_steps"] = tuple(int(v) for v in _layers(fields["scale_steps"]))
    except ValueError:
        raise ValueError(f"scale-steps must be comma-separated integers, got {options['scale_steps']!r}") from None
    return fields


@click.command(cls=OneLineCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("content", required=False, metavar="CONTENT", type=click.Path(path_type=str))  # the loader checks files (exit 1)
@click.argument("styles", nargs=-1, metavar="STYLE...", type=click.Path(path_type=str))
@click.option("-o", "--output", type=click.Path(path_type=str),
              help="Where to write the result; the format follows the extension (.jpg, .png, ...).")
@click.option("--size", type=int, default=None,
              help=f"Long side of the working image in px (aspect kept). Default: {GPU_DEFAULT_SIZE} on a GPU, "
                   f"{CPU_DEFAULT_SIZE} on a CPU (the default 300 steps take 2.5 to 3.5 minutes on 2 cores).")
@click.option("--steps", type=int, default=DEFAULTS.steps, show_default=True,
              help="Closure evaluations (forward+backward passes); the run ends with the LBFGS step that passes "
                   "this, as in the tutorial.")
@click.option("--style-weight", type=float, default=None,
              help=f"Weight of the style losses. Default: the preset's (tutorial {TUTORIAL['style_weight']:g}, "
                   f"paper {PAPER['style_weight']:g}).")
@click.option("--content-weight", type=float, default=None,
              help=f"Weight of the content losses. Default: the preset's (tutorial {TUTORIAL['content_weight']:g}, "
                   f"paper {PAPER['content_weight']:g}). Raise it to keep more of the content's shapes.")
@click.option("--init", default=DEFAULTS.init, show_default=True,
              help=f"Start image: {', '.join(INITS)} or an image FILE. content keeps the photo's layout best; "
                   "noise (uniform, seeded by --seed) gives a freer painting, as in the paper; style starts "
                   "from the (first) style image, FILE from your own picture (both stretched to the content's "
                   "size).")
@click.option("--seed", type=int, default=DEFAULTS.seed, show_default=True,
              help="Seed of everything random; the same inputs, options and seed give the same image.")
@click.option("--weights", default=DEFAULTS.weights, show_default=True,
              help="VGG19 weights: 'imagenet' (torchvision's, downloaded once to the torch hub cache, "
                   "TORCH_HOME), a local state dict FILE, or 'random' (seeded random weights: offline smoke "
                   "runs and tests only, gives no artistic result).")
@click.option("--device", default=DEFAULTS.device, show_default=True,
              help="auto, cpu, cuda, cuda:N or mps; auto picks a GPU when there is one.")
@click.option("--content-layers", default=None,
              help="Comma-separated layers that get a ContentLoss, by the tutorial's names (conv_N, relu_N, "
                   "pool_N: N counts convs) or the paper's (conv4_2, relu4_2, pool3). The tutorial's conv_4 is "
                   "the paper's conv2_2. Default: the preset's (tutorial conv_4, paper conv4_2). Deeper layers "
                   "keep less of the photo's detail.")
@click.option("--style-layers", default=None,
              help="Comma-separated layers that get a StyleLoss. The tutorial's conv_1..conv_5 are the paper's "
                   "conv1_1,conv1_2,conv2_1,conv2_2,conv3_1. Default: the preset's (tutorial conv_1..conv_5, "
                   "paper conv1_1,conv2_1,conv3_1,conv4_1,conv5_1). Deeper layers give larger brush strokes.")
@click.option("--style-layer-weights", default=None,
              help="Comma-separated weights, one per style layer (default: the preset's; tutorial 1 each, "
                   "paper 1/n each). Raise a layer's weight to stress its scale of texture.")
@click.option("--preset", type=click.Choice(PRESET_NAMES), default=DEFAULTS.preset, show_default=True,
              help="Defaults of the algorithm's settings. tutorial: the PyTorch tutorial. paper: Gatys et al. "
                   "2016 (content conv4_2; style conv1_1..conv5_1 weighted 1/5; average pooling; "
                   "E_l = sum (G-A)^2/(4 N^2 M^2) and 1/2 sum (F-P)^2; alpha/beta = 1e-3). The best weight "
                   "balance depends on how the VGG weights expect their input scaled (torchvision's: [0, 1] "
                   "and ImageNet's std; the paper's caffe VGG: [0, 255]); tune --style-weight. Explicit "
                   "options override the preset.")
@click.option("--style-blend", default=None,
              help="With several STYLE images: comma-separated weights, one per style (normalised; default "
                   "equal). Their Gram targets are blended: 0.7,0.3 is mostly the first style.")
@click.option("--style-scale", type=float, default=DEFAULTS.style_scale, show_default=True,
              help="Long side of the style image(s) relative to --size: below 1 gives finer brush strokes, above "
                   "1 coarser ones.")
@click.option("--preserve-colors", type=click.Choice(PRESERVE_COLORS), default=DEFAULTS.preserve_colors,
              show_default=True,
              help="Keep the content's colours (Gatys et al. 2017). luminance: transfer the style on the "
                   "luminance only and keep the content's chroma exactly (YIQ). histogram: first give the style "
                   "image the content's colour mean and covariance (keeps more of the style's look).")
@click.option("--tv-weight", type=float, default=DEFAULTS.tv_weight, show_default=True,
              help="Weight of a total variation term (mean absolute difference between neighbouring pixels): "
                   "smooths noise and high-frequency artefacts. 0 as in the tutorial.")
@click.option("--pooling", type=click.Choice(POOLINGS), default=None,
              help="VGG's pooling layers: max (tutorial) or avg (paper; replaces every max pool, with the same "
                   "kernel and stride: smoother results). Default: the preset's.")
@click.option("--loss-form", type=click.Choice(LOSS_FORMS), default=None,
              help="Loss definitions: tutorial (mse of Grams normalised by N*M; mse of features) or paper "
                   "(E_l = sum (G-A)^2/(4 N^2 M^2); 1/2 sum (F-P)^2). Default: the preset's.")
@click.option("--optimizer", type=click.Choice(OPTIMIZERS), default=DEFAULTS.optimizer, show_default=True,
              help="lbfgs: the tutorial's (up to 20 evaluations per step; best quality per evaluation). "
                   "adam: one evaluation per step, steadier with unusual weights or large --lr.")
@click.option("--lr", type=float, default=None,
              help="Learning rate. Default: 1 for lbfgs (torch's, as in the tutorial), 0.02 for adam.")
@click.option("--keep-alpha", is_flag=True, default=DEFAULTS.keep_alpha,
              help="Give the result the content's transparency (alpha channel), exactly; needs a .png, .webp "
                   "or .tiff output. Without it, transparency is composited over white.")
@click.option("--backward", type=click.Choice(BACKWARDS), default=DEFAULTS.backward, show_default=True,
              help="combined: one backward of the summed loss (the tutorial's). per-module: each loss module "
                   "backpropagates its own loss, retaining the graph (the 2017 tutorial's; same objective, about "
                   "twice the time, more memory). See docs/retain_graph.md; stylize-compare-backward measures both.")
@click.option("--print-config", is_flag=True,
              help="Print the resolved settings (preset filled in, explicit options applied) and exit.")
@click.option("--fast", is_flag=True,
              help="Speed: coarse-to-fine over 3 sizes (--size/4, --size/2, --size; a third, a fifth and a third "
                   "of --steps), plus --channels-last, --fused-gram, --history-size 20, and bf16 where the device "
                   "has it natively. The image differs from the default's; measured quality and time: "
                   "docs/speed.md. Explicit --scales, --min-size or --scale-steps override its sizes.")
@click.option("--precision", type=click.Choice(PRECISIONS), default=DEFAULTS.precision, show_default=True,
              help="Speed: bf16 runs the VGG layers in bfloat16 (losses, image and optimiser stay float32; "
                   "LBFGS's first step, 20 evaluations, runs in float32); faster, the image differs slightly; "
                   "refused where the device has no native bf16.")
@click.option("--channels-last", is_flag=True, help="Speed: NHWC layout for the VGG layers (same values; pays "
                                                    "off with --precision bf16 on a CPU).")
@click.option("--fused-gram", is_flag=True, help="Speed: the Gram matrix's backward as one matmul, added into "
                                                 "the next ReLU's gradient (the same gradient up to rounding, less "
                                                 "time); with bf16 the Gram itself runs as bf16 products over "
                                                 "chunks of pixels, added in float32.")
@click.option("--history-size", "--history", "history_size", type=int, default=DEFAULTS.history_size,
              show_default=True,
              help="Speed/memory: LBFGS curvature pairs kept; each pair holds two copies of the image.")
@click.option("--scales", type=int, default=None,
              help="Speed: coarse-to-fine over this many sizes, each half the next, ending at --size; each "
                   "result, upsampled, starts the next. Needs fewer full-size evaluations. Default: 1, 3 with --fast.")
@click.option("--min-size", type=int, default=None,
              help="Speed: coarse-to-fine from this size up to --size (sizes at most 2x apart).")
@click.option("--scale-steps", default="",
              help="Evaluations per coarse-to-fine size, smallest first, e.g. 100,100,40. "
                   "Default: --steps split, a quarter at the final size.")
@click.option("--threads", type=int, default=None,
              help="CPU threads. Default: the physical cores.")
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
              help="Save the run's state to this file on Ctrl-C, SIGTERM or a NaN loss (and every "
                   "--checkpoint-every evaluations), to continue with --resume.")
@click.option("--checkpoint-every", type=int, default=0,
              help="Also save the checkpoint every N evaluations (at the LBFGS step that passes them).")
@click.option("--resume", type=click.Path(path_type=str), default=None,
              help="Continue the run saved in this checkpoint (same inputs and options); it keeps saving there "
                   "unless --checkpoint says otherwise. The result equals the uninterrupted run's.")
@click.option("--min-improvement", type=float, default=None,
              help="Stop early once the lowest loss improved by less than this fraction (e.g. 0.001) over the "
                   "last --patience evaluations, at the final size. Off by default.")
@click.option("--patience", type=int, default=None, help="Evaluations that --min-improvement looks back over.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or summary on stderr.")
@click.option("--debug", is_flag=True, help="On an error, print the traceback before the one-line message.")
@click.version_option(__version__, "--version", prog_name="stylize")
def main(content: str | None, styles: tuple[str, ...], output: str | None, size: int | None, steps: int,
         style_weight: float | None, content_weight: float | None, init: str, seed: int, weights: str,
         device: str, content_layers: str | None, style_layers: str | None, style_layer_weights: str | None,
         preset: str, style_blend: str | None, style_scale: float, preserve_colors: str, tv_weight: float,
         pooling: str | None, loss_form: str | None, optimizer: str, lr: float | None, keep_alpha: bool,
         backward: str, print_config: bool, save_every: int, save_dir: str | None, animate: str | None,
         log_path: str | None, plot: str | None, no_metadata: bool, replay: str | None, checkpoint: str | None,
         checkpoint_every: int, resume: str | None, min_improvement: float | None, patience: int | None,
         quiet: bool, debug: bool, **speed: Any) -> None:
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
    image and exits 1. Exit codes: 0 done, 1 failure, 2 bad option, 130 interrupted.
    """
    try:
        config = StyleConfig(size=size, steps=steps, style_weight=style_weight, content_weight=content_weight,
                             init=init, seed=seed, weights=weights, device=device,
                             content_layers=None if content_layers is None else _layers(content_layers),
                             style_layers=None if style_layers is None else _layers(style_layers),
                             preset=preset, style_layer_weights=_numbers("--style-layer-weights", style_layer_weights),
                             style_blend=_numbers("--style-blend", style_blend), style_scale=style_scale,
                             preserve_colors=preserve_colors, tv_weight=tv_weight, pooling=pooling,
                             loss_form=loss_form, optimizer=optimizer, lr=lr, keep_alpha=keep_alpha,
                             backward=backward, min_improvement=min_improvement, patience=patience,
                             **_speed_fields(speed))
        if replay is not None:
            config = _replay_config(replay, weights, device)
        if print_config:
            show_config(config)
            return
        if content is None or not styles:
            raise UsageFault(f"Missing argument '{'CONTENT' if content is None else 'STYLE...'}'")
        if output is None:
            raise UsageFault("Missing option '-o' / '--output'")
        fmt = check_output(output)
        if config.keep_alpha and fmt not in ALPHA_FORMATS:
            raise UsageFault(f"--keep-alpha: {output} cannot store transparency; use .png, .webp or .tiff")
        watch = Watch(output, quiet=quiet, save_every=save_every, save_dir=save_dir, animate=animate,
                      log_path=log_path, plot=plot, metadata=not no_metadata)
        run_options = _run_options(watch, checkpoint, checkpoint_every, resume)
    except (ValueError, StyleTransferError) as exc:
        raise UsageFault(str(exc)) from None
    _check_inputs([content, *styles], debug)  # before torch is imported: a bad image answers at once
    if replay is not None:
        try:
            check_replay_inputs(read_record(replay), content, styles, config.weights)
        except (ValueError, StyleTransferError) as exc:
            raise UsageFault(f"--replay {shown(replay)}: {exc}") from None

    import torch

    from .fast import physical_cores
    from .run import Run

    threads = config.threads or physical_cores()
    if threads != torch.get_num_threads():
        torch.set_num_threads(threads)  # the CLI owns the process; the library never sets this
    run = Run(content, list(styles) if len(styles) > 1 else styles[0], config, run_options,
              download_progress=watch.on_download)
    watch.run = run
    signals = Signals(run)
    try:
        with signals:
            result = run.execute(signals.watching(watch.on_event))
        watch.finish(result)  # the result, its animation and plot; a Ctrl-C now stops the writing
    except RunStopped as exc:  # a second Ctrl-C, or a NaN loss: keep the last good image
        watch.close()
        _keep_partial(exc, output, debug, watch.record(run, exc))
    except StyleTransferError as exc:
        watch.close()
        _traceback(debug)
        raise click.ClickException(str(exc)) from None
    except ValueError as exc:  # a setting only the model can check (a layer name, a device)
        watch.close()
        _traceback(debug)
        raise UsageFault(str(exc)) from None
    except KeyboardInterrupt:  # before the first step (loading) or while writing the result
        watch.close()
        click.echo(f"interrupted before the result was written; {shown(output)} left as it was", err=True)
        raise SystemExit(130) from None
    except Exception as exc:  # a bug: still one line, the traceback only with --debug
        watch.close()
        _traceback(debug)
        raise click.ClickException(f"unexpected {type(exc).__name__}: {exc} (rerun with --debug for the "
                                   f"traceback)") from None
    if result.stopped in EXIT_CODES:  # Ctrl-C, SIGTERM: the image so far was saved
        click.echo(f"interrupted at step {result.evaluations}, saved {shown(output)}", err=True)
        raise SystemExit(EXIT_CODES[result.stopped])
    if not quiet:
        if result.stopped == "converged":
            click.echo(f"LBFGS converged (gradient below its tolerance): stopped after {result.evaluations} of "
                       f"{config.steps} evaluations; more would not change the image", err=True)
        elif result.stopped == "plateau":
            click.echo(f"stopped early: the loss improved by less than {config.min_improvement:g} over the last "
                       f"{config.patience} evaluations", err=True)
        click.echo(f"wrote {shown(output)} ({result.image.width}x{result.image.height}, {result.evaluations} "
                   f"evaluations)", err=True)


for _key, _value in {"{formats}": INPUT_FORMATS_TEXT, "{min_side}": str(MIN_INPUT_SIDE),
                     "{max_mpx}": str(MAX_PIXELS // 1_000_000)}.items():
    main.help = (main.help or "").replace(_key, _value)  # the documented limits, written once


def _check_inputs(paths: list[str], debug: bool) -> None:
    """Open every input image (``open_image``'s checks) and turn a failure into one line, exit 1."""
    for path in paths:
        try:
            open_image(path).close()
        except StyleTransferError as exc:
            _traceback(debug)
            raise click.ClickException(str(exc)) from None


def _traceback(debug: bool) -> None:
    if debug:
        traceback.print_exc(file=sys.stderr)


def _keep_partial(exc: RunStopped, output: str, debug: bool, record: dict[str, Any] | None) -> NoReturn:
    """Save the image a stopped run carries (atomically, with ``record``), say so in one line, exit 130 or 1."""
    _traceback(debug)
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
        click.echo(message, err=True)
        raise SystemExit(130)
    raise click.ClickException(message)


# The options that shape the image: with --replay they come from the record, so giving one is a mistake.
_SETTINGS_OPTIONS = ("size", "steps", "style_weight", "content_weight", "init", "seed", "content_layers",
                     "style_layers", "style_layer_weights", "preset", "style_blend", "style_scale", "preserve_colors",
                     "tv_weight", "pooling", "loss_form", "optimizer", "lr", "keep_alpha", "backward", "fast",
                     "precision", "channels_last", "fused_gram", "history_size", "scales", "min_size",
                     "scale_steps", "min_improvement", "patience")


def _replay_config(path: str, weights: str, device: str) -> StyleConfig:
    """--replay: the recorded settings; --weights (for a weights file) and --device may be given anew."""
    from click.core import ParameterSource

    context = click.get_current_context()
    given = [name for name in _SETTINGS_OPTIONS if context.get_parameter_source(name) == ParameterSource.COMMANDLINE]
    if given:
        raise UsageFault(f"--replay takes the settings from the record; drop --{given[0].replace('_', '-')}")
    explicit = {name: context.get_parameter_source(name) == ParameterSource.COMMANDLINE for name in ("weights", "device")}
    try:
        return replay_config(read_record(path), weights=weights if explicit["weights"] else None,
                             device=device if explicit["device"] else None)
    except (ValueError, StyleTransferError) as exc:
        raise UsageFault(f"--replay {shown(path)}: {exc}") from None


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
