"""The options shared by every command that makes pictures: flags <-> StyleConfig, one-line usage errors.

Imports click and the torch-free config only, so each command's --help and option errors answer at once.
The commands (``stylize``, ``stylize-batch``, ``stylize-video``, ...) never import each other; they share
these definitions, so an option means the same everywhere and each default is written once.
"""

from __future__ import annotations

import inspect
import sys
import traceback
from typing import Any, Callable, NoReturn, TypeVar

import click

from ..config import (BACKWARDS, CPU_DEFAULT_SIZE, GPU_DEFAULT_SIZE, INITS, LOSS_FORMS, OPTIMIZERS, PRECISIONS,
                      PREPROCESSINGS, PRESERVE_COLORS, StyleConfig)
from ..errors import StyleTransferError
from ..layers import MODELS, POOLINGS
from ..presets import PRESET_NAMES, PRESETS, STYLE_LOSS_WEIGHTS, STYLE_LOSSES

DEFAULTS = StyleConfig()  # every default below is read from here, so it is written once
TUTORIAL, PAPER = PRESETS["tutorial"], PRESETS["paper"]
F = TypeVar("F", bound=Callable[..., Any])


class UsageFault(click.ClickException):
    """A bad option or argument: one line on stderr, exit 2."""

    exit_code = 2


def show_traceback(debug: bool) -> None:
    """With ``--debug``, the traceback of the exception being handled, before its one-line message."""
    if debug:
        traceback.print_exc(file=sys.stderr)


def one_line_error(exc: Exception, debug: bool) -> NoReturn:
    """End the command with ``exc`` in one line: a failure of the work (``StyleTransferError``) exits 1, a
    setting only the work could check (a plain ``ValueError``: a layer name, a device) exits 2."""
    show_traceback(debug)
    if isinstance(exc, ValueError) and not isinstance(exc, StyleTransferError):
        raise UsageFault(str(exc)) from None
    raise click.ClickException(str(exc)) from None


def unexpected_error(exc: Exception, debug: bool) -> NoReturn:
    """A bug: still one line (exit 1), the traceback only with ``--debug``."""
    show_traceback(debug)
    raise click.ClickException(f"unexpected {type(exc).__name__}: {exc} (rerun with --debug for the "
                               f"traceback)") from None


# --help groups each command's options under these headings, with one line each; the long form of every
# option is in docs/options.md, made from the commands themselves by docs/make_options.py.
SECTIONS = ("Basics", "Style", "Output and run control", "Speed", "Advanced")
SECTION_OF = {
    "Basics": ("output", "size", "steps", "style_weight", "content_weight", "seed", "model", "weights", "preprocess",
               "device", "preset", "quiet"),
    "Style": ("init", "content_layers", "style_layers", "style_layer_weights", "style_blend", "style_scale",
              "preserve_colors", "tv_weight", "pooling", "loss_form", "style_loss", "keep_alpha", "style_masks", "content_mask",
              "average"),
    "Output and run control": ("save_every", "save_dir", "animate", "log_path", "plot", "no_metadata", "replay",
                               "checkpoint", "checkpoint_every", "resume", "min_improvement", "patience"),
    "Speed": ("fast", "precision", "channels_last", "fused_gram", "history_size", "scales", "min_size",
              "scale_steps", "threads", "tile"),
    "Advanced": ("optimizer", "lr", "backward", "print_config", "debug", "version", "help"),
}
SHORT_HELP = {
    "output": "Output file; the format follows the extension.",
    "size": "Long side of the working image in px (default 512 GPU, 448 CPU).",
    "steps": "Evaluations, in whole LBFGS steps of 20: ends with the step that passes N.",
    "style_weight": "Weight of the style losses (default: the preset's, 1e6).",
    "content_weight": "Weight of the content losses (default: the preset's, 1).",
    "init": "Start image: content, noise, style or an image FILE.",
    "seed": "Seed: same inputs, options and seed give the same image.",
    "model": "The network: vgg19 (the tutorial's) or vgg16.",
    "weights": "imagenet, a .pth or .onnx FILE, or random (tests).",
    "preprocess": "What the weights expect: torchvision, caffe or caffe256.",
    "device": "auto, cpu, cuda, cuda:N or mps.",
    "content_layers": "Layers with a ContentLoss (conv_4 or conv4_2 names).",
    "style_layers": "Layers with a StyleLoss (conv_1,... or conv1_1,... names).",
    "style_layer_weights": "One weight per style layer, comma-separated.",
    "preset": "Defaults of the algorithm: tutorial or paper (Gatys 2016).",
    "style_blend": "With several STYLEs: one weight per style, comma-separated.",
    "style_scale": "Style image size relative to --size (<1 finer strokes).",
    "preserve_colors": "Keep the content's colours: luminance or histogram.",
    "tv_weight": "Weight of a total variation (smoothness) term.",
    "pooling": "VGG's pools: max (tutorial) or avg (paper).",
    "loss_form": "Loss definitions: tutorial or paper.",
    "style_loss": "Style statistics: gram (tutorial), wasserstein or sliced.",
    "optimizer": "lbfgs (the tutorial's) or adam.",
    "lr": "Learning rate (default 1 for lbfgs, 0.02 for adam).",
    "keep_alpha": "Keep the content's transparency (.png, .webp, .tiff).",
    "style_masks": "Where a STYLE goes: a grey mask FILE over the content, once per STYLE.",
    "content_mask": "A grey mask FILE weighting the content loss by region.",
    "average": "Output the moving average of the iterates, this decay (e.g. 0.99).",
    "backward": "combined (one backward) or per-module (retain_graph).",
    "fast": "60 % of the steps, faster arithmetic: about a fifth of the time, more loss.",
    "precision": "fp32, or bf16 for the VGG layers where the device has it.",
    "channels_last": "NHWC layout for the VGG layers.",
    "fused_gram": "The Gram matrix's backward as one matmul.",
    "history_size": "LBFGS curvature pairs kept (memory: two images each).",
    "scales": "Coarse-to-fine over this many sizes (default 1).",
    "min_size": "Coarse-to-fine from this size up to --size.",
    "scale_steps": "Evaluations per coarse-to-fine size, e.g. 100,60,100.",
    "threads": "CPU threads (default: the physical cores).",
    "tile": "Evaluate in overlapping crops of at most PX px: print sizes, flat memory.",
    "min_improvement": "Stop once the loss improves by less than this fraction.",
    "patience": "Evaluations that --min-improvement looks back over.",
    "print_config": "Print the resolved settings and exit.",
    "save_every": "Write the current image every N evaluations.",
    "save_dir": "Folder for --save-every's images (default: beside the output).",
    "animate": "Write the run as an animation (.webp or .gif).",
    "log_path": "Write one JSON line per evaluation to this file.",
    "plot": "Plot the loss curves to this image (needs the plot extra).",
    "no_metadata": "Write no provenance record into the images.",
    "replay": "Run again with the settings recorded in this earlier output.",
    "checkpoint": "Save the run's state here on Ctrl-C, SIGTERM or NaN.",
    "checkpoint_every": "Also save the checkpoint every N evaluations.",
    "resume": "Continue the run saved in this checkpoint.",
    "quiet": "No progress bar or summary on stderr.",
    "debug": "On an error, print the traceback too.",
}
LONG_HELP = "style_transfer.long_help"  # set in a context's meta, --help shows every option's full text
_SECTION = {name: section for section, names in SECTION_OF.items() for name in names}


class OneLineCommand(click.Command):
    """A click command whose own usage errors print one line (no usage dump), and whose --help lists its
    options under SECTIONS with one line each (``ctx.meta[LONG_HELP] = True``: each option's full text).

    A command's own options go under its ``sections`` (name -> heading; first, before SECTIONS) and
    ``short_help_of`` (name -> one line) keyword arguments.
    """

    def __init__(self, *args: Any, sections: dict[str, str] | None = None,
                 short_help_of: dict[str, str] | None = None, **kwargs: Any) -> None:
        kwargs["context_settings"] = {"help_option_names": ["-h", "--help"], "max_content_width": 100,
                                      **(kwargs.get("context_settings") or {})}
        kwargs.setdefault("epilog", "Every option in full: docs/options.md.")
        super().__init__(*args, **kwargs)
        self.sections = dict(sections or {})
        self.short_help_of = {**SHORT_HELP, **(short_help_of or {})}

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            exc.ctx = None  # without a context, click prints only "Error: ..."
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:  # raised by the command's own checks: one line too
            exc.ctx = None
            raise

    def section_of(self, param: click.Parameter) -> str:
        """The heading ``param`` is listed under."""
        name = param.name or ""
        if name == "help" or (isinstance(param, click.Option) and "--help" in param.opts):
            name = "help"
        return self.sections.get(name) or _SECTION.get(name, "Options")

    def grouped_records(self, ctx: click.Context, long: bool = False) -> dict[str, list[tuple[str, str]]]:
        """Each heading's ``(option names, help)`` records, in --help order (own headings first)."""
        groups: dict[str, list[tuple[str, str]]] = {name: [] for name in dict.fromkeys(self.sections.values())}
        groups.update({name: [] for name in ("Options", *SECTIONS) if name not in groups})
        for param in self.get_params(ctx):
            if not isinstance(param, click.Option):
                continue  # the arguments are in the usage line and the description
            short = None if long else self.short_help_of.get(param.name or "")
            saved = getattr(param, "help", None)
            if short is not None:
                param.help = short  # type: ignore[attr-defined]
            try:
                record = param.get_help_record(ctx)
            finally:
                if short is not None:
                    param.help = saved  # type: ignore[attr-defined]
            if record is not None:
                groups[self.section_of(param)].append(record)
        return {name: records for name, records in groups.items() if records}

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        for heading, records in self.grouped_records(ctx, long=bool(ctx.meta.get(LONG_HELP))).items():
            with formatter.section(heading):
                formatter.write_dl(records)


def split_list(value: str) -> tuple[str, ...]:
    """``"a, b,,c"`` -> ``("a", "b", "c")``."""
    return tuple(v.strip() for v in value.split(",") if v.strip())


def numbers(option: str, value: str | None) -> tuple[float, ...] | None:
    """A comma-separated list of numbers (None stays None, for "from the preset")."""
    if value is None:
        return None
    try:
        return tuple(float(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise UsageFault(f"{option}: expected comma-separated numbers, got {value!r}") from None


# The options that shape the image, in --help order. Each maps onto the StyleConfig field of its name
# (--history-size onto history_size); config_from_options() builds the config from them.
SETTINGS: list[Callable[[F], F]] = [
    click.option("--size", type=int, default=None,
                 help=f"Long side of the working image in px (aspect kept). Default: {GPU_DEFAULT_SIZE} on a GPU, "
                       f"{CPU_DEFAULT_SIZE} on a CPU (the default 300 steps take 2.5 to 3.5 minutes on 2 cores)."),
    click.option("--steps", type=int, default=DEFAULTS.steps, show_default=True,
                 help="Evaluations (forward+backward passes), in whole LBFGS steps of 20: the run ends with the step "
                      "that passes N, as in the tutorial (300 runs 320, 20 runs 40; adam: N+1). --fast's share "
                      "and coarse-to-fine sizes (--scales) round up the same way: --fast --steps 300 runs 180; "
                      "stylize --print-config shows the number."),
    click.option("--style-weight", type=float, default=None,
                 help=f"Weight of the style losses. Default: the preset's (tutorial {TUTORIAL['style_weight']:g}, "
                       f"paper {PAPER['style_weight']:g})."),
    click.option("--content-weight", type=float, default=None,
                 help=f"Weight of the content losses. Default: the preset's (tutorial {TUTORIAL['content_weight']:g}, "
                       f"paper {PAPER['content_weight']:g}). Raise it to keep more of the content's shapes."),
    click.option("--init", default=DEFAULTS.init, show_default=True,
                 help=f"Start image: {', '.join(INITS)} or an image FILE. content keeps the photo's layout best; "
                      "noise (uniform, seeded by --seed) gives a freer painting, as in the paper; style starts "
                      "from the (first) style image, FILE from your own picture (both stretched to the content's "
                      "size)."),
    click.option("--seed", type=int, default=DEFAULTS.seed, show_default=True,
                 help="Seed of everything random; the same inputs, options and seed give the same image."),
    click.option("--model", type=click.Choice(MODELS), default=DEFAULTS.model, show_default=True,
                 help="The network whose features the losses compare: vgg19 (the tutorial's and the paper's) or "
                      "vgg16 (13 convolutions; the same first five layers, so the tutorial's layers work on both). "
                      "Paper layer names follow the network (VGG16 ends at conv5_3)."),
    click.option("--weights", default=DEFAULTS.weights, show_default=True,
                 help="The network's weights: 'imagenet' (torchvision's, downloaded once to the torch hub cache, "
                      "TORCH_HOME), a local FILE (a torchvision state dict .pth; a Caffe-converted one such as "
                      "neural-style-pt's vgg19-d01eb7cb.pth; or an ONNX file of a VGG16/VGG19, which needs the onnx "
                      "extra), or 'random' (seeded random weights: offline smoke runs and tests only, gives no "
                      "artistic result). Every file is checked before use and never runs code."),
    click.option("--preprocess", type=click.Choice(PREPROCESSINGS), default=None,
                 help="How the image is prepared for the weights, as a module in front of the network: "
                      "torchvision (RGB minus ImageNet's mean, over its std: torchvision's weights), caffe (BGR, "
                      "times 255, minus the Caffe mean: Keras files such as a keras.applications VGG16 in ONNX) or "
                      "caffe256 (the same times 256: the Lua neural-style and neural-style-pt files). Default: "
                      "what the weights tell (torchvision's and random weights: torchvision; neural-style-pt's "
                      "file names: caffe256; a Keras ONNX export: caffe); a file that cannot tell needs it."),
    click.option("--device", default=DEFAULTS.device, show_default=True,
                 help="auto, cpu, cuda, cuda:N or mps; auto picks a GPU when there is one."),
    click.option("--content-layers", default=None,
                 help="Comma-separated layers that get a ContentLoss, by the tutorial's names (conv_N, relu_N, "
                      "pool_N: N counts convs) or the paper's (conv4_2, relu4_2, pool3). The tutorial's conv_4 is "
                      "the paper's conv2_2. Default: the preset's (tutorial conv_4, paper conv4_2). Deeper layers "
                      "keep less of the photo's detail."),
    click.option("--style-layers", default=None,
                 help="Comma-separated layers that get a StyleLoss. The tutorial's conv_1..conv_5 are the paper's "
                      "conv1_1,conv1_2,conv2_1,conv2_2,conv3_1. Default: the preset's (tutorial conv_1..conv_5, "
                      "paper conv1_1,conv2_1,conv3_1,conv4_1,conv5_1). Deeper layers give larger brush strokes."),
    click.option("--style-layer-weights", default=None,
                 help="Comma-separated weights, one per style layer (default: the preset's; tutorial 1 each, "
                      "paper 1/n each). Raise a layer's weight to stress its scale of texture."),
    click.option("--preset", type=click.Choice(PRESET_NAMES), default=DEFAULTS.preset, show_default=True,
                 help="Defaults of the algorithm's settings. tutorial: the PyTorch tutorial. paper: Gatys et al. "
                      "2016 (content conv4_2; style conv1_1..conv5_1 weighted 1/5; average pooling; "
                      "E_l = sum (G-A)^2/(4 N^2 M^2) and 1/2 sum (F-P)^2; alpha/beta = 1e-3). The best weight "
                      "balance depends on how the VGG weights expect their input scaled (torchvision's: [0, 1] "
                      "and ImageNet's std; the paper's caffe VGG: [0, 255]); tune --style-weight. Explicit "
                      "options override the preset."),
    click.option("--style-blend", default=None,
                 help="With several STYLE images: comma-separated weights, one per style (normalised; default "
                      "equal). Their Gram targets are blended: 0.7,0.3 is mostly the first style."),
    click.option("--style-scale", type=float, default=DEFAULTS.style_scale, show_default=True,
                 help="Long side of the style image(s) relative to --size: below 1 gives finer brush strokes, above "
                      "1 coarser ones."),
    click.option("--preserve-colors", type=click.Choice(PRESERVE_COLORS), default=DEFAULTS.preserve_colors,
                 show_default=True,
                 help="Keep the content's colours (Gatys et al. 2017). luminance: transfer the style on the "
                      "luminance only and keep the content's chroma exactly (YIQ). histogram: first give the style "
                      "image the content's colour mean and covariance (keeps more of the style's look)."),
    click.option("--tv-weight", type=float, default=DEFAULTS.tv_weight, show_default=True,
                 help="Weight of a total variation term (mean absolute difference between neighbouring pixels): "
                      "smooths noise and high-frequency artefacts. 0 as in the tutorial."),
    click.option("--pooling", type=click.Choice(POOLINGS), default=None,
                 help="VGG's pooling layers: max (tutorial) or avg (paper; replaces every max pool, with the same "
                      "kernel and stride: smoother results). Default: the preset's."),
    click.option("--loss-form", type=click.Choice(LOSS_FORMS), default=None,
                 help="Loss definitions: tutorial (mse of Grams normalised by N*M; mse of features) or paper "
                      "(E_l = sum (G-A)^2/(4 N^2 M^2); 1/2 sum (F-P)^2). Default: the preset's."),
    click.option("--style-loss", type=click.Choice(STYLE_LOSSES), default=DEFAULTS.style_loss, show_default=True,
                 help="The style statistics: gram (the tutorial's Gram matrices), wasserstein (the W2 distance of the "
                      "features' Gaussian fits: means and covariances) or sliced (sliced Wasserstein, Heitz et al. "
                      "2021: sorted projections on random directions, re-drawn each evaluation from --seed). Each "
                      f"has its own default --style-weight (tutorial preset: wasserstein "
                      f"{STYLE_LOSS_WEIGHTS['wasserstein']['tutorial']:g}, sliced "
                      f"{STYLE_LOSS_WEIGHTS['sliced']['tutorial']:g}, at every input scale); neither runs in tiles (--tile) or with --fused-gram (--fast leaves it off). "
                      "docs/style-controls.md compares them."),
    click.option("--optimizer", type=click.Choice(OPTIMIZERS), default=DEFAULTS.optimizer, show_default=True,
                 help="lbfgs: the tutorial's (up to 20 evaluations per step; best quality per evaluation). "
                      "adam: one evaluation per step, steadier with unusual weights or large --lr."),
    click.option("--lr", type=float, default=None,
                 help="Learning rate. Default: 1 for lbfgs (torch's, as in the tutorial), 0.02 for adam."),
    click.option("--keep-alpha", is_flag=True, default=DEFAULTS.keep_alpha,
                 help="Give the result the content's transparency (alpha channel), exactly; needs a .png, .webp "
                      "or .tiff output. Without it, transparency is composited over white."),
    click.option("--backward", type=click.Choice(BACKWARDS), default=DEFAULTS.backward, show_default=True,
                 help="combined: one backward of the summed loss (the tutorial's). per-module: each loss module "
                      "backpropagates its own loss, retaining the graph (the 2017 tutorial's; same objective, about "
                      "twice the time, more memory). See docs/retain_graph.md; stylize-compare-backward "
                      "measures both."),
    click.option("--fast", is_flag=True,
                 help="Speed: 60 % of --steps at --size, plus --channels-last, --fused-gram and bf16 on a CPU with "
                      "AMX or a GPU with native bf16: on a real VGG16 about 0.2x the CPU time at 1.1-1.8x the "
                      "loss, the content kept (docs/speed.md). Explicit --scales, --min-size or --scale-steps make it "
                      "coarse-to-fine (which lost the content on real features)."),
    click.option("--precision", type=click.Choice(PRECISIONS), default=DEFAULTS.precision, show_default=True,
                 help="Speed: bf16 runs the VGG layers in bfloat16 (losses, image and optimiser stay float32; "
                      "LBFGS's first step, 20 evaluations, runs in float32); faster, the image differs slightly; "
                      "refused where the device has no native bf16."),
    click.option("--channels-last", is_flag=True, help="Speed: NHWC layout for the VGG layers (same values; pays "
                                                       "off with --precision bf16 on a CPU)."),
    click.option("--fused-gram", is_flag=True, help="Speed: the Gram matrix's backward as one matmul, added into "
                                                    "the next ReLU's gradient (the same gradient up to rounding, less "
                                                    "time); with bf16 the Gram itself runs as bf16 products over "
                                                    "chunks of pixels, added in float32."),
    click.option("--history-size", "--history", "history_size", type=int, default=DEFAULTS.history_size,
                 show_default=True,
                 help="Speed/memory: LBFGS curvature pairs kept; each pair holds two copies of the image."),
    click.option("--scales", type=int, default=None,
                 help="Speed: coarse-to-fine over this many sizes, each half the next, ending at --size; each "
                      "result, upsampled, starts the next. Needs fewer full-size evaluations; on a real VGG16 "
                      "it loses content (docs/speed.md). Default: 1."),
    click.option("--min-size", type=int, default=None,
                 help="Speed: coarse-to-fine from this size up to --size (sizes at most 2x apart)."),
    click.option("--scale-steps", default="",
                 help="Evaluations per coarse-to-fine size, smallest first, e.g. 100,100,40, each rounded up to whole "
                      "LBFGS steps of 20. Default: --steps split, a quarter at the final size."),
    click.option("--threads", type=int, default=None,
                 help="CPU threads. Default: the physical cores."),
    click.option("--tile", type=click.IntRange(min=16), default=DEFAULTS.tile, metavar="PX", show_default="auto",
                 help="Evaluate sizes larger than PX in overlapping crops of at most PX x PX px: the untiled "
                      "gradient with flat memory (print sizes; docs/print-size.md). Default: tiles only where a "
                      "size does not fit in memory."),
    click.option("--min-improvement", type=float, default=None,
                 help="Stop early once the lowest loss improved by less than this fraction (e.g. 0.001) over the "
                      "last --patience evaluations, at the final size. Off by default."),
    click.option("--patience", type=int, default=None, help="Evaluations that --min-improvement looks back over."),
    click.option("--style-mask", "--style-masks", "style_masks", multiple=True, type=click.Path(path_type=str),
                 metavar="FILE",
                 help="Spatial control (Gatys et al. 2017): a grey-level image over the content, white where this "
                      "STYLE goes (soft edges allowed), resized with the content; give it once per STYLE, in order. "
                      "STYLEs after the last mask share what no mask covers. Each style's statistics (--style-loss) are "
                      "taken over its own region (guided statistics). The mask must have the content's aspect ratio."),
    click.option("--content-mask", type=click.Path(path_type=str), default=None, metavar="FILE",
                 help="A grey-level image over the content weighting the content loss by region: white keeps the "
                      "photo's shapes as usual, black leaves the region to the style alone."),
    click.option("--average", type=float, default=None, metavar="DECAY",
                 help="Write the bias-corrected exponential moving average of the images the optimiser evaluates "
                      "(avg = DECAY*avg + (1-DECAY)*image after every evaluation) instead of the last one: smoother "
                      "results. 0.99 averages about the last 100 evaluations; restarted at each coarse-to-fine "
                      "size. Off by default."),
]
SETTINGS_FIELDS = ("size", "steps", "style_weight", "content_weight", "init", "seed", "model", "weights", "preprocess",
                   "device",
                   "content_layers", "style_layers", "style_layer_weights", "preset", "style_blend", "style_scale",
                   "preserve_colors", "tv_weight", "pooling", "loss_form", "style_loss", "optimizer", "lr", "keep_alpha",
                   "backward", "fast", "precision", "channels_last", "fused_gram", "history_size", "scales",
                   "min_size", "scale_steps", "threads", "tile", "min_improvement", "patience", "style_masks",
                   "content_mask", "average")
# Inputs given as options: like CONTENT and STYLE they are given again to --replay and --resume (checked by hash).
MASK_FIELDS = ("style_masks", "content_mask")
# With --replay these come from the record, so giving one on the command line is a mistake.
RECORDED_FIELDS = tuple(name for name in SETTINGS_FIELDS if name not in ("weights", "device", "threads", *MASK_FIELDS))


def settings_options(function: F) -> F:
    """Decorate a click command with every option of SETTINGS (they arrive as keyword arguments)."""
    for option in reversed(SETTINGS):
        function = option(function)
    return function


def config_from_options(options: dict[str, Any]) -> StyleConfig:
    """Pop the SETTINGS_FIELDS keyword arguments off ``options`` and build the StyleConfig.

    Raises:
        UsageFault: a value no config accepts (the message names the option), exit 2.
    """
    values = {name: options.pop(name) for name in SETTINGS_FIELDS}
    try:
        for name in ("content_layers", "style_layers"):
            if values[name] is not None:
                values[name] = split_list(values[name])
        for name in ("style_layer_weights", "style_blend"):
            values[name] = numbers(f"--{name.replace('_', '-')}", values[name])
        try:
            values["scale_steps"] = tuple(int(v) for v in split_list(values["scale_steps"]))
        except ValueError:
            raise ValueError(f"scale-steps must be comma-separated integers, got {values['scale_steps']!r}") from None
        return StyleConfig(**values)
    except ValueError as exc:
        raise UsageFault(str(exc)) from None


def option_reference(command: click.Command, name: str) -> str:
    """Markdown: ``name``'s usage, its description, and each option's full help under its heading."""
    ctx = click.Context(command, info_name=name, **command.context_settings)
    ctx.meta[LONG_HELP] = True
    lines = [f"## `{name}`", "", "```text", " ".join(command.collect_usage_pieces(ctx)).join(
        (f"{name} ", "")), "```", ""]
    lines += [inspect.cleandoc(command.help or ""), ""]
    grouped = command.grouped_records(ctx, long=True) if isinstance(command, OneLineCommand) else {
        "Options": [r for p in command.get_params(ctx) if isinstance(p, click.Option)
                    and (r := p.get_help_record(ctx)) is not None]}
    for heading, records in grouped.items():
        lines += [f"### {heading}", "", "| option | what |", "|---|---|"]
        lines += [f"| `{_cell(names)}` | {_cell(text)} |" for names, text in records]
        lines.append("")
    return "\n".join(lines)


def _cell(text: str) -> str:
    """``text`` on one line, fit for a Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")
