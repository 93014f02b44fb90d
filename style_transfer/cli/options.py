"""The options shared by every command that makes pictures: flags <-> StyleConfig, one-line usage errors, and the
progress lines a stderr that is no terminal gets in place of a bar.

Imports click and the torch-free config only, so each command's --help and option errors answer at once.
The commands (``stylize``, ``stylize-batch``, ``stylize-video``, ...) never import each other; they share
these definitions, so an option means the same everywhere and each default is written once.
"""

from __future__ import annotations

import inspect
import sys
import time
import traceback
from typing import Any, Callable, NoReturn, TypeVar

import click

from ..config.choices import INITS
from ..config.fields import SECTIONS, Setting
from ..config.style import StyleConfig
from ..config.text import SETTINGS, as_options, config_from_text
from ..errors import StyleTransferError
from ..io.files import path_problem, shown
from ..run.plans import checkpoint_bytes

DEFAULTS = StyleConfig()  # the defaults, for the commands beside the settings (stylize-compare-backward)
F = TypeVar("F", bound=Callable[..., Any])


class UsageFault(click.ClickException):
    """A bad option or argument: one line on stderr, exit 2."""

    exit_code = 2


def note(message: str) -> None:
    """A ``note:`` line on stderr, a library message's settings as flags (``as_options``): what a user should read
    that is not an error (the weights a run took in place of the default's; the caller decides about --quiet)."""
    click.echo(f"note: {as_options(message)}", err=True)



class ProgressLines:
    """Progress where stderr is no terminal (a log file, CI, a pipe), in place of a tqdm bar, whose every redraw
    stays there (some 25 kB on one line for 240 evaluations). A plain line when the count has moved
    by a tenth of the total, or 10 s have passed, since the last line; and, on ``close``, the last news if it was
    not written. So at most 11 lines, and one more per 10 s: ``12/40 evaluations (30%)  style 3.1  1.2 s, 2.8 s
    left`` (the time left at the rate so far, as the bar shows it; ``counts_left=False``: none, where the detail
    carries the library's own, as stylize-video's does).
    """

    SHARE = 0.1  # of the total, between two lines
    SECONDS = 10.0  # between two lines, however little the count moved: a slow run is never silent for long

    def __init__(self, total: int, unit: str, *, clock: Callable[[], float] = time.monotonic,
                 write: Callable[[str], None] | None = None, counts_left: bool = True) -> None:
        self.total, self.unit, self.clock, self.counts_left = total, unit, clock, counts_left
        self.write = write if write is not None else lambda line: click.echo(line, err=True)
        self.start = self.written_at = clock()
        self.written = 0  # the count of the last line
        self.news: tuple[int, str] = (0, "")  # the latest count and detail
        self.pending = False  # the news is not in a line yet

    @staticmethod
    def wanted() -> bool:
        """Whether stderr is no terminal, so these lines replace the bar (a test of the bar patches this)."""
        isatty = getattr(sys.stderr, "isatty", None)
        return not (callable(isatty) and isatty())

    @property
    def done(self) -> int:
        return self.news[0]

    def update(self, done: int, detail: str = "") -> None:
        """``done`` of the total (raised to ``done`` when over), ``detail`` after it; a line when one is due."""
        self.total = max(self.total, done)
        self.news, self.pending = (done, detail), True
        now = self.clock()
        if done - self.written >= self.SHARE * self.total or now - self.written_at >= self.SECONDS:
            self._line(now)

    def close(self, total: int | None = None) -> None:
        """The last news as a line, unless written already. ``total``: the count a run ended on short of its
        plan (LBFGS converged), shown as the total, as the bar ends."""
        if total is not None and total != self.total:
            self.total, self.pending = total, True
        if self.pending:
            self._line(self.clock())

    def _line(self, now: float) -> None:
        done, detail = self.news
        elapsed = now - self.start
        left = (f", {elapsed / done * (self.total - done):.1f} s left"
                if self.counts_left and 0 < done < self.total and elapsed > 0 else "")
        self.write(f"{done}/{self.total} {self.unit} ({100 * done // max(self.total, 1)}%)"
                   + (f"  {detail}" if detail else "") + f"  {elapsed:.1f} s{left}")
        self.written, self.written_at, self.pending = done, now, False


def own_process(threads: int | None) -> None:
    """What a command sets for its own process, which the library never does: torch's threads (``threads``; None: the
    physical cores) and glibc keeping freed memory for reuse (the same numbers without each evaluation's fresh pages,
    ``fast.hardware.reuse_freed_memory``). torch is imported here, not with this module: --help answers without it."""
    import torch

    from ..fast.hardware import physical_cores, reuse_freed_memory

    threads = threads or physical_cores()
    if threads != torch.get_num_threads():
        torch.set_num_threads(threads)
    reuse_freed_memory()


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
# option is in docs/options.md, made from the commands themselves by docs/make_options.py. The settings' own
# heading and line are declared with their StyleConfig field (config/style.py); these are the commands' others.
COMMAND_SECTIONS = {
    "Basics": ("output", "quiet"),
    "Output and run control": ("save_every", "save_dir", "animate", "log_path", "plot", "no_metadata", "replay",
                               "checkpoint", "checkpoint_every", "resume"),
    "Advanced": ("print_config", "debug", "version", "help"),
}
COMMAND_SHORT_HELP = {
    "output": "Output file; the format follows the extension.",
    "print_config": "Print the resolved settings and exit.",
    "save_every": "Write the current image every N evaluations.",
    "save_dir": "Folder for --save-every's images (default: beside the output).",
    "animate": "Write the run as an animation (.webp or .gif).",
    "log_path": "Write one JSON line per evaluation to this file.",
    "plot": "Plot the loss curves to this image (needs the plot extra).",
    "no_metadata": "Write no provenance record into the images.",
    "replay": "Run again with the settings recorded in this earlier output.",
    "checkpoint": f"Save the run's state here on Ctrl-C, SIGTERM or NaN (large: "
                  f"{checkpoint_bytes(448, 299, 100) / 1e6:.0f} MB at 448 px).",
    "checkpoint_every": "Also save the checkpoint every N evaluations.",
    "resume": "Continue the run saved in this checkpoint.",
    "quiet": "No progress bar or summary on stderr.",
    "debug": "On an error, print the traceback too.",
}
SHORT_HELP = {**{s.name: s.short for s in SETTINGS}, **COMMAND_SHORT_HELP}
LONG_HELP = "style_transfer.long_help"  # set in a context's meta, --help shows every option's full text
_SECTION = {**{s.name: s.section for s in SETTINGS},
            **{name: section for section, names in COMMAND_SECTIONS.items() for name in names}}


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
            # click declares message Final; rewritten in place, the exception keeps its class and hints.
            exc.message = as_options(exc.message)  # type: ignore[misc]
            raise
        except click.ClickException as exc:  # the library names settings as the API does (weights=FILE): as flags
            exc.message = as_options(exc.message)  # type: ignore[misc]  # as above
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
                param.help = short
            try:
                record = param.get_help_record(ctx)
            finally:
                if short is not None:
                    param.help = saved
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


def click_option(declared: Setting) -> Callable[[F], F]:
    """The click option of a setting, made from its declaration (``config.fields.Setting``).

    Its value reaches ``config_from_options`` as click converts it (numbers, choices) or as text (lists); one
    not given is the field's default, or None where the preset (or the device) fills it in.
    """
    kwargs: dict[str, Any] = {"help": declared.help, "metavar": declared.metavar}
    if declared.kind == "flag":
        return click.option(*declared.options, declared.name, is_flag=True, default=declared.default, **kwargs)
    kwargs["type"] = {"int": int, "float": float, "file": click.Path(path_type=str), "files": click.Path(path_type=str),
                      "choice": click.Choice(declared.choices) if declared.choices else None}.get(declared.kind, str)
    if declared.kind == "files":
        kwargs["multiple"] = True
    default = None if declared.default == () else declared.default
    shown = declared.shown_default or default is not None
    return click.option(*declared.options, declared.name, default=default, show_default=shown, **kwargs)


# The options that shape the image, in StyleConfig's order, each made from its field's declaration.
SETTINGS_OPTIONS: list[Callable[[F], F]] = [click_option(s) for s in SETTINGS]
SETTINGS_FIELDS = tuple(s.name for s in SETTINGS)
# Inputs given as options: like CONTENT and STYLE they are given again to --replay and --resume (checked by hash).
MASK_FIELDS = tuple(s.name for s in SETTINGS if s.is_input)
# With --replay these come from the record, so giving one on the command line is a mistake.
RECORDED_FIELDS = tuple(s.name for s in SETTINGS if s.replayed and not s.is_input)


def settings_options(function: F) -> F:
    """Decorate a click command with every setting's option (they arrive as keyword arguments)."""
    for option in reversed(SETTINGS_OPTIONS):
        function = option(function)
    return function


def config_from_options(options: dict[str, Any]) -> StyleConfig:
    """Pop the settings' keyword arguments off ``options`` and build the StyleConfig (``config.text``, the
    parser the web app and batch manifests use too), naming each bad value by its option.

    Raises:
        UsageFault: a value no config accepts (the message names the option), exit 2.
    """
    values = {declared.options[0]: options.pop(declared.name) for declared in SETTINGS}
    try:
        return config_from_text(values)
    except ValueError as exc:
        raise UsageFault(str(exc)) from None


def setting_inputs(config: StyleConfig) -> list[tuple[str, Any]]:
    """The input files a config names beside the images, each with its option: ``--init`` (when a file), each
    ``--style-mask``, ``--content-mask`` (None where not given)."""
    init = None if config.init in INITS else config.init
    return [("--init", init), *(("--style-mask", mask) for mask in config.style_masks),
            ("--content-mask", config.content_mask)]


def check_input_paths(inputs: list[tuple[str, Any]]) -> None:
    """Refuse an input path that names no file to read (missing, a directory, no permission: ``path_problem``)
    as a usage error, exit 2; whether the file is a usable image is the readers' to say (exit 1).

    Args:
        inputs: (the option, or "" for an argument; the path, or None/an image where there is no path).

    Raises:
        UsageFault: ``"--style-mask m.png: no such file"``, naming the first such path.
    """
    for option, path in inputs:
        problem = path_problem(path) if isinstance(path, str) else None
        if problem is not None:
            raise UsageFault(f"{option} {shown(path)}: {problem}".lstrip())


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
