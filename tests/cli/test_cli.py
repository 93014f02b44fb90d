"""The stylize command through click's CliRunner: happy path, exit codes, one-line errors."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image

from style_transfer.cli.stylize import main
from style_transfer.cli.options import option_reference

from ..conftest import IMAGES
from ..helpers import FAST, invoker, one_error_line

invoke = invoker(main)



def test_happy_path_writes_output(tmp_path: Path) -> None:
    out = tmp_path / "out.jpg"
    result = invoke([str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", str(out), *FAST], 0)
    with Image.open(out) as image:
        assert image.format == "JPEG"
        assert image.size == (32, 21)
    assert result.stdout == ""  # progress and summary go to stderr
    assert "wrote" in result.stderr and re.search(r"^20/20 evaluations \(100%\)", result.stderr, re.M), result.stderr


def test_the_run_says_what_it_starts_before_the_bar_not_with_quiet(tmp_path: Path) -> None:
    """Issue 33.6: the seconds before the bar's first evaluation say what runs (test_quiet_prints_nothing: not with
    -q)."""
    result = invoke([str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", str(tmp_path / "out.png"), *FAST])
    lines = result.stderr.split("\n")
    assert re.fullmatch(r"plan: 32x21 px, 20 evaluations; about 0\.\d GiB of memory(, about \d+ s on this machine|; "
                        r"the time is told after the first evaluations \(no run like it measured on this machine\))",
                        lines[0]), lines[0]  # the time: where the suite's book has a rate for a run like it
    assert lines[1:3] == ["making VGG19 with seeded random weights ...", "building the model at 32x21 ..."]
    assert re.match(r"\d+/20 evaluations \(", lines[3])  # then the progress (lines: CliRunner's stderr is no terminal)


def test_quiet_prints_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out.png"
    result = invoke([str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", str(out), "-q", *FAST], 0)
    assert result.output == ""
    assert Image.open(out).format == "PNG"


def test_missing_input(tmp_path: Path) -> None:
    result = invoke([str(tmp_path / "nope.jpg"), str(IMAGES / "ihc.png"), "-o", str(tmp_path / "o.png"), *FAST], 2)
    line = one_error_line(result)
    assert "nope.jpg" in line and "no such file" in line
    assert not (tmp_path / "o.png").exists()


@pytest.mark.parametrize("option, value, needle", [
    ("--steps", "0", "steps"),
    ("--size", "8", "size"),
    ("--steps", "many", "many"),
    ("--init", "zeros", "zeros"),
    ("--device", "tpu", "device"),
    ("--style-layers", "conv_99", "conv_99"),
])
def test_bad_option_value(tmp_path: Path, option: str, value: str, needle: str) -> None:
    out = tmp_path / "o.png"
    args = [str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", str(out), *FAST, option, value]
    line = one_error_line(invoke(args, 2))
    assert needle in line
    assert not out.exists()


@pytest.mark.parametrize("make_output, needle", [
    (lambda tmp: tmp / "missing-folder" / "o.png", "does not exist"),
    (lambda tmp: tmp / "o.unknownext", "extension"),
    (lambda tmp: tmp / "noext", "no extension"),
    (lambda tmp: tmp, "is a directory"),
    pytest.param(lambda tmp: Path("/proc/stylize-o.png"), "not writable",  # root can write almost anywhere else
                 marks=pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")),
])
def test_unwritable_output(tmp_path: Path, make_output, needle: str) -> None:
    out = make_output(tmp_path)
    before = sorted(os.listdir(tmp_path))
    line = one_error_line(invoke([str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", str(out), *FAST], 2))
    assert needle in line
    assert sorted(os.listdir(tmp_path)) == before  # nothing written, no temp file left


def test_existing_output_untouched_on_error(tmp_path: Path) -> None:
    out = tmp_path / "o.png"
    out.write_bytes(b"precious")
    invoke([str(tmp_path / "missing.png"), str(IMAGES / "ihc.png"), "-o", str(out), *FAST], 2)
    assert out.read_bytes() == b"precious"


def test_version() -> None:
    from style_transfer import __version__

    assert __version__ in invoke(["--version"], 0).output


def test_help_mentions_random_weights_and_cpu_default() -> None:
    text = " ".join(option_reference(main, "stylize").split())  # each option in full (docs/options.md)
    assert "no artistic result" in text
    assert "on a CPU" in text


class ModelBuilt(Exception):
    """Raised by the patched VGG19 builder: the run got as far as building the model."""


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch, fresh_random_networks: None) -> list[int]:
    """Make building the network (every loader goes through models.vgg_features) fail loudly; count the tries."""
    from style_transfer.networks import vgg as models

    built: list[int] = []

    def refuse(*args: object, **kwargs: object) -> None:
        built.append(1)
        raise ModelBuilt("the model was built")

    monkeypatch.setattr(models, "vgg_features", refuse)
    return built


@pytest.mark.parametrize("extra, output, needle", [
    (["--steps", "0"], "o.png", "steps"),
    (["--size", "8"], "o.png", "size"),
    (["--style-layers", "conv_99"], "o.png", "conv_99"),
    (["--scale-steps", "1,x"], "o.png", "scale-steps"),
    (["--style-blend", "1,2,3"], "o.png", "3 weight"),
    (["--init", "missing-start.png"], "o.png", "missing-start.png"),
    (["--keep-alpha"], "o.jpg", "keep-alpha"),
    ([], "o.unknownext", "extension"),
    (["--precision", "bf16"], "o.png", "bf16"),  # refused here: bf16_supported is patched to say no
])
def test_exit_2_checks_run_before_the_model_is_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     no_model: list[int], extra: list[str], output: str,
                                                     needle: str) -> None:
    monkeypatch.setattr("style_transfer.fast.hardware.bf16_supported", lambda device: False)
    monkeypatch.chdir(tmp_path)  # relative names (--init's missing file) resolve in the empty tmp_path
    args = [str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", str(tmp_path / output), *FAST, *extra]
    line = one_error_line(invoke(args, 2))
    assert needle in line and "model was built" not in line
    assert no_model == []


def test_the_model_builder_patch_is_reached_by_a_good_run(tmp_path: Path, no_model: list[int]) -> None:
    """The control of the test above: with good options the same patch is hit, so its silence means something."""
    result = CliRunner().invoke(main, [str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o",
                                       str(tmp_path / "o.png"), *FAST])
    assert result.exit_code != 0 and no_model == [1]
    assert not (tmp_path / "o.png").exists()


def test_steps_says_whole_lbfgs_steps_and_the_bar_shows_what_runs_from_the_start(tmp_path: Path,
                                                                                 terminal_stderr: None) -> None:
    """Issue 24.4: --steps N runs whole LBFGS steps of 20 (the tutorial's loop ends with the step that passes
    N: 20 runs 40; --fast runs 80 % of N the same way, 40 runs 40); the help says so, and the bar's total is that
    number at once."""
    short = invoke(["--help"], 0).stdout
    assert "Closure evaluations" not in short and "in whole LBFGS steps of 20" in " ".join(short.split())
    reference = " ".join(option_reference(main, "stylize").split())
    assert "the run ends with the step that passes N" in reference and "--fast --steps 300 runs 240" in reference
    base = [str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "--weights", "random", "--size", "32",
            "--device", "cpu"]
    for extra, planned in ((["--steps", "20"], 40), (["--steps", "40", "--fast"], 40)):
        result = invoke([*base, "-o", str(tmp_path / "out.png"), *extra], 0)
        totals = {int(n) for n in re.findall(r"\b\d+/(\d+) \[", result.stderr)}
        assert totals == {planned}, result.stderr  # every redraw of the bar, the first included
        assert f", {planned} evaluations" in result.stderr


@pytest.mark.parametrize("cap, precision", [
    ("AVX2", "fp32 on this CPU (ONEDNN_MAX_CPU_ISA=AVX2 leaves oneDNN no bf16 instructions)"),
    ("AVX512_CORE_BF16", "bf16 on this CPU (AVX512-BF16), where torch's oneDNN has bf16"),  # the control
])
def test_print_config_honours_a_onednn_cap_as_the_run_does(cap: str, precision: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """--print-config --fast said bf16 under ONEDNN_MAX_CPU_ISA=AVX2 on a CPU with AVX512-BF16, where the run takes
    float32: both read the cap through cpuinfo.onednn_cap_allows_bf16 now (the run's side: tests/fast/test_fast.py)."""
    monkeypatch.setattr("style_transfer.cli.print_config.cpu_flags", lambda: {"avx2", "avx512f", "avx512_bf16"})
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
    lines = dict(line.split(": ", 1) for line in invoke(["--print-config", "--fast", "--device", "cpu"], 0)
                 .stdout.splitlines())
    assert lines["precision"] == precision


def test_print_config_shows_what_fast_resolves_to(imagenet_cached: Path) -> None:
    """Issue 24.5: --print-config --fast shows the levers --fast turns on, its sizes, each size's share of
    --steps and the evaluations that run, not the fields as typed."""
    lines = dict(line.split(": ", 1) for line in invoke(["--print-config", "--fast", "--device", "cpu"], 0)
                 .stdout.splitlines())
    assert (lines["fast"], lines["channels_last"], lines["fused_gram"]) == ("True", "True", "True")
    # What this machine gets, worked out from the facts the command reads: the CPU's flags and the oneDNN cap in force
    # (the quick tier also runs under ONEDNN_MAX_CPU_ISA=AVX2 and AVX512_CORE). oneDNN's own names of the instruction
    # sets below bf16: a cap at one of them leaves it none.
    from style_transfer.fast.cpuinfo import cpu_flags
    import torch

    from style_transfer.fast.hardware import device_bf16

    flags, cap = cpu_flags(), os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip()
    capped = cap.upper() in ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX512_CORE", "AVX512_CORE_VNNI")
    rule = ("fp32 on this CPU (its flags cannot be read; bf16 needs AMX or AVX512-BF16)" if flags is None else
            f"fp32 on this CPU (ONEDNN_MAX_CPU_ISA={cap} leaves oneDNN no bf16 instructions)"
            if capped and flags & {"amx_bf16", "avx512_bf16"} else
            "bf16 on this CPU (AMX), where torch's oneDNN has bf16" if "amx_bf16" in flags else
            "bf16 on this CPU (AVX512-BF16), where torch's oneDNN has bf16" if "avx512_bf16" in flags else
            "fp32 on this CPU (no bf16 instructions; --fast takes bf16 with AMX, AVX512-BF16 or a GPU's native bf16)")
    # and the line agrees with what a run takes, which asks torch's oneDNN itself
    assert rule.startswith("bf16") == device_bf16(torch.device("cpu")).native, rule
    assert (lines["history_size"], lines["precision"], lines["scales"]) == ("50", rule, "1")
    assert lines["parametrization"] == "fourier"  # --fast moves the Fourier coefficients, with 50 pairs
    assert lines["scale_steps"] == "" and lines["sizes"] == "448 on a CPU"  # one size: coarse-to-fine lost content
    assert lines["evaluations"] == "240, in whole LBFGS steps of 20"  # 80 % of --steps 300
    auto = dict(line.split(": ", 1) for line in invoke(["--print-config", "--fast", "--size", "512"], 0)
                .stdout.splitlines())
    assert auto["precision"] == f"{rule}; bf16 on a GPU with native bf16" and auto["sizes"] == "512"
    plain = dict(line.split(": ", 1) for line in invoke(["--print-config"], 0).stdout.splitlines())
    assert (plain["channels_last"], plain["history_size"], plain["scale_steps"]) == ("False", "100", "")
    assert plain["sizes"] == "448 on a CPU; 512 on a GPU" and plain["evaluations"].startswith("320,")
    # a print: coarse-to-fine from 512 px by itself, the first size as a run at one size, 20 % of --steps after it
    printed = dict(line.split(": ", 1) for line in invoke(["--print-config", "--size", "2048"], 0).stdout.splitlines())
    assert (printed["sizes"], printed["min_size"], printed["scales"]) == ("512,1024,2048", "512", "1")
    assert printed["evaluations"].startswith("440 (320,60,60),")
    one = dict(line.split(": ", 1) for line in invoke(["--print-config", "--size", "2048", "--scales", "1"], 0)
               .stdout.splitlines())
    assert (one["sizes"], one["min_size"]) == ("2048", "None")


# --- an output that is an input (issue 24) ---

@pytest.mark.parametrize("name", ["relative", "symlink", "hard link", "style", "init", "log"])
def test_an_output_that_is_an_input_is_refused_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              name: str) -> None:
    """-o (or a side output) that names CONTENT, a STYLE or --init FILE by any name: one line, exit 2, the
    input as it was (it used to be replaced by the result, silently, exit 0)."""
    from style_transfer.run import run

    photo, style = tmp_path / "photo.png", tmp_path / "style.png"
    photo.write_bytes((IMAGES / "chelsea.png").read_bytes())
    style.write_bytes((IMAGES / "ihc.png").read_bytes())
    before = photo.read_bytes(), style.read_bytes()
    link = tmp_path / "link.png"
    if name == "symlink":
        link.symlink_to(photo)
    elif name == "hard link":
        os.link(photo, link)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(run, "load_network", lambda *a, **k: pytest.fail("the run started"))
    args, named = {"relative": (["-o", "./photo.png"], "-o ./photo.png: is the same file as CONTENT photo.png"),
                   "symlink": (["-o", "link.png"], "-o link.png: is the same file as CONTENT photo.png"),
                   "hard link": (["-o", "link.png"], "-o link.png: is the same file as CONTENT photo.png"),
                   "style": (["-o", str(style)], f"-o {style}: is the same file as STYLE style.png"),
                   "init": (["-o", "photo.png", "--init", str(photo)], "-o photo.png: is the same file as CONTENT"),
                   "log": (["-o", "out.png", "--log", "style.png"], "--log style.png: is the same file as STYLE")}[name]
    line = one_error_line(invoke(["photo.png", "style.png", *args, *FAST], 2))
    assert line.startswith(f"Error: {named}") and line.endswith("give another output name"), line
    assert (photo.read_bytes(), style.read_bytes()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["photo.png", "style.png"] +
                                                                 (["link.png"] if link.exists() else []))


def test_the_summary_says_why_the_picture_is_smaller_and_why_the_count_is_not_steps(tmp_path) -> None:
    """Issue 47.7: a photo larger than --size, and evaluations other than --steps, are explained in the summary; a
    run at the photo's own size gets no size line."""
    from PIL import Image

    from style_transfer.core.steps import LBFGS_MAX_ITER

    from ..helpers import invoke_stylize

    small = tmp_path / "small.png"
    with Image.open("images/chelsea.png") as photo:
        photo.convert("RGB").resize((40, 27)).save(small)
    told = invoke_stylize(["images/chelsea.png", "images/ihc.png", "-o", tmp_path / "a.png", "--weights", "random",
                           "--size", "32", "--steps", "30"]).stderr
    assert "the photo is 451x300; the picture's long side is --size 32" in told
    expected = -(-31 // LBFGS_MAX_ITER) * LBFGS_MAX_ITER  # whole steps until more than 30 ran
    assert f"{expected} evaluations: whole LBFGS steps of {LBFGS_MAX_ITER} past --steps 30)" in told
    quiet = invoke_stylize([small, "images/ihc.png", "-o", tmp_path / "b.png", "--weights", "random", "--size", "40",
                            "--steps", "10"]).stderr
    assert "the photo is" not in quiet and "past --steps 10" in quiet
