"""The ``stylize`` command: flags -> StyleConfig -> ``stylize()``; owns progress and exit codes."""

from __future__ import annotations

import sys
from typing import Any

import click
from tqdm import tqdm

from . import __version__
from .config import CPU_DEFAULT_SIZE, GPU_DEFAULT_SIZE, INITS, StyleConfig
from .errors import StyleTransferError
from .images import check_output, save_image
from .transfer import StepInfo, stylize

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


@click.command(cls=OneLineCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("content", type=click.Path(dir_okay=False, path_type=str))
@click.argument("style", type=click.Path(dir_okay=False, path_type=str))
@click.option("-o", "--output", required=True, type=click.Path(path_type=str),
              help="Where to write the result; the format follows the extension (.jpg, .png, ...).")
@click.option("--size", type=int, default=None,
              help=f"Long side of the working image in px (aspect kept). Default: {GPU_DEFAULT_SIZE} on a GPU, "
                   f"{CPU_DEFAULT_SIZE} on a CPU (the default 300 steps take 2.5 to 3.5 minutes on 2 cores).")
@click.option("--steps", type=int, default=DEFAULTS.steps, show_default=True,
              help="Closure evaluations (forward+backward passes); the run ends with the LBFGS step that passes "
                   "this, as in the tutorial.")
@click.option("--style-weight", type=float, default=DEFAULTS.style_weight, show_default=True,
              help="Weight of the style losses.")
@click.option("--content-weight", type=float, default=DEFAULTS.content_weight, show_default=True,
              help="Weight of the content losses.")
@click.option("--init", type=click.Choice(INITS), default=DEFAULTS.init, show_default=True,
              help="Start from the content image or from uniform noise (seeded by --seed).")
@click.option("--seed", type=int, default=DEFAULTS.seed, show_default=True,
              help="Seed of everything random; the same inputs, options and seed give the same image.")
@click.option("--weights", default=DEFAULTS.weights, show_default=True,
              help="VGG19 weights: 'imagenet' (torchvision's, downloaded once to the torch hub cache, "
                   "TORCH_HOME), a local state dict FILE, or 'random' (seeded random weights: offline smoke "
                   "runs and tests only, gives no artistic result).")
@click.option("--device", default=DEFAULTS.device, show_default=True,
              help="auto, cpu, cuda, cuda:N or mps; auto picks a GPU when there is one.")
@click.option("--content-layers", default=",".join(DEFAULTS.content_layers), show_default=True,
              help="Comma-separated layers that get a ContentLoss (tutorial names: conv_N, relu_N, pool_N).")
@click.option("--style-layers", default=",".join(DEFAULTS.style_layers), show_default=True,
              help="Comma-separated layers that get a StyleLoss.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or summary on stderr.")
@click.version_option(__version__, "--version", prog_name="stylize")
def main(content: str, style: str, output: str, size: int | None, steps: int, style_weight: float,
         content_weight: float, init: str, seed: int, weights: str, device: str, content_layers: str,
         style_layers: str, quiet: bool) -> None:
    """Repaint CONTENT in the style of STYLE (Gatys et al.) and write the result to OUTPUT.

    A faithful port of the PyTorch neural style transfer tutorial: VGG19, LBFGS,
    content loss after conv_4, style losses after conv_1..conv_5.
    """
    try:
        config = StyleConfig(size=size, steps=steps, style_weight=style_weight, content_weight=content_weight,
                             init=init, seed=seed, weights=weights, device=device,
                             content_layers=_layers(content_layers), style_layers=_layers(style_layers))
        check_output(output)
    except ValueError as exc:
        raise UsageFault(str(exc)) from None

    bars: dict[str, tqdm] = {}  # made on first use, so an early error prints one line only

    def on_step(info: StepInfo) -> None:
        if "steps" not in bars:
            bars["steps"] = tqdm(total=config.steps, unit="step", file=sys.stderr, disable=quiet,
                                 dynamic_ncols=True)
        bar = bars["steps"]
        if info.step > bar.total:
            bar.total = info.step  # the last LBFGS step runs past --steps, as in the tutorial
        bar.update(info.step - bar.n)
        bar.set_postfix(style=f"{info.style_loss:.4g}", content=f"{info.content_loss:.4g}", refresh=False)

    def on_download(done: int, total: int) -> None:
        if quiet:
            return
        if "download" not in bars:
            bars["download"] = tqdm(total=total or None, unit="B", unit_scale=True, file=sys.stderr,
                                    desc="downloading VGG19 weights (once)")
        bars["download"].update(done - bars["download"].n)

    try:
        image = stylize(content, style, config, progress=on_step, download_progress=on_download)
        save_image(image, output)
    except StyleTransferError as exc:
        raise click.ClickException(str(exc)) from None
    except ValueError as exc:  # a setting only the model can check (a layer name, a device)
        raise UsageFault(str(exc)) from None
    finally:
        for bar in bars.values():
            bar.close()
    if not quiet:
        evaluations = bars["steps"].n if "steps" in bars else 0
        click.echo(f"wrote {output} ({image.width}x{image.height}, {evaluations} evaluations)", err=True)
