"""The ``stylize-compare-backward`` command: measure both backward paths, print a table."""

from __future__ import annotations

import click

from .options import DEFAULTS, OneLineCommand, UsageFault, split_list as _layers
from ..run.compare import BackwardComparison, compare_backward
from ..config.choices import INITS
from ..config.style import StyleConfig
from ..config.checks import filled
from ..errors import StyleTransferError

MIB = 2**20


def format_comparison(result: BackwardComparison) -> str:
    """The table ``stylize-compare-backward`` prints, one row per backward path."""
    combined, per_module = result.row("combined"), result.row("per-module")
    lines = [
        f"combined vs per-module backward at {result.width}x{result.height} px on {result.device}, "
        f"median of {result.evaluations} evaluation(s) each",
        f"{'path':<11} {'backward passes':>15} {'s/evaluation':>12} {'peak MiB':>9} {'saved MiB':>9} "
        f"{'held MiB':>9} {'max |grad diff|':>15}",
    ]
    for row in result.rows:
        lines.append(f"{row.backward:<11} {row.passes:>15d} {row.seconds:>12.4f} {row.peak_bytes / MIB:>9.1f} "
                     f"{row.saved_bytes / MIB:>9.1f} {row.held_bytes / MIB:>9.1f} {row.max_abs_grad_diff:>15.3g}")
    time_ratio = per_module.seconds / combined.seconds if combined.seconds else float("nan")
    relative = per_module.max_abs_grad_diff / result.max_abs_grad if result.max_abs_grad else float("nan")
    peak_ratio = per_module.peak_bytes / combined.peak_bytes if combined.peak_bytes else float("nan")
    lines += [
        f"per-module / combined: {time_ratio:.2f}x the time, {peak_ratio:.2f}x the peak memory; "
        f"gradient difference / max |gradient| = {relative:.2g}",
        f"peak and held (memory still allocated after the evaluation): {result.memory_method}; "
        f"saved: activations saved for backward (torch.autograd.graph.saved_tensors_hooks). "
        f"See docs/retain_graph.md.",
    ]
    return "\n".join(lines)


@click.command(cls=OneLineCommand, short_help_of={"evaluations": "Timed evaluations per path; the median is shown."})
@click.argument("content", type=click.Path(dir_okay=False, path_type=str))
@click.argument("style", type=click.Path(dir_okay=False, path_type=str))
@click.option("--evaluations", type=int, default=5, show_default=True,
              help="Timed closure evaluations per path (after one warm-up each); the median is shown.")
@click.option("--size", type=int, default=None,
              help="Long side of the working image in px. Default: as stylize (512 on a GPU, 448 on a CPU).")
@click.option("--style-weight", type=float, default=DEFAULTS.style_weight, show_default=True)
@click.option("--content-weight", type=float, default=DEFAULTS.content_weight, show_default=True)
@click.option("--init", type=click.Choice(INITS), default=DEFAULTS.init, show_default=True,
              help="The image both paths are evaluated at.")
@click.option("--seed", type=int, default=DEFAULTS.seed, show_default=True)
@click.option("--weights", default=DEFAULTS.weights, show_default=True,
              help="imagenet, original, random or a weights FILE, as for stylize (timings do not depend on them).")
@click.option("--device", default=DEFAULTS.device, show_default=True, help="auto, cpu, cuda, cuda:N or mps.")
@click.option("--content-layers", default=",".join(filled(DEFAULTS.content_layers)), show_default=True)
@click.option("--style-layers", default=",".join(filled(DEFAULTS.style_layers)), show_default=True)
def main(content: str, style: str, evaluations: int, size: int | None, style_weight: float, content_weight: float,
         init: str, seed: int, weights: str, device: str, content_layers: str, style_layers: str) -> None:
    """Compare --backward combined and per-module on CONTENT and STYLE, on this machine.

    Evaluates the loss and its gradient on the start image with both paths and prints,
    per path: backward passes per evaluation, seconds per evaluation, peak memory, and the
    largest difference of the gradients on the image. Writes no image. See docs/retain_graph.md.
    """
    if evaluations < 1:
        raise UsageFault(f"evaluations must be a positive integer, got {evaluations}")
    try:
        config = StyleConfig(size=size, style_weight=style_weight, content_weight=content_weight, init=init,
                             seed=seed, weights=weights, device=device, content_layers=_layers(content_layers),
                             style_layers=_layers(style_layers))
    except ValueError as exc:
        raise UsageFault(str(exc)) from None
    try:
        result = compare_backward(content, style, config, evaluations=evaluations)
    except StyleTransferError as exc:
        raise click.ClickException(str(exc)) from None
    except ValueError as exc:  # a setting only the model can check (a layer name, a device)
        raise UsageFault(str(exc)) from None
    click.echo(format_comparison(result))


if __name__ == "__main__":
    main(prog_name="stylize-compare-backward")
