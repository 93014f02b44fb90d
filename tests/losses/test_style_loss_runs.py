"""--style-loss through the product: the command, its refusals, the record and --replay, batch manifests,
the web form, --fast, cached targets and resume (random weights, 32 px); and the real features (slow)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from PIL import Image

from style_transfer import StyleConfig
from style_transfer.cli.stylize import main
from style_transfer.losses.statistics import SlicedStyleLoss, WassersteinStyleLoss
from style_transfer.fast.fast import Speed, accelerate
from style_transfer.networks.vgg import IMAGENET_MEAN, IMAGENET_STD
from style_transfer.presets import STYLE_LOSS_WEIGHTS
from style_transfer.io.metadata import read_record
from style_transfer.run.run import Run
from style_transfer.config.run_options import RunOptions
from style_transfer.core.style_model import get_style_model_and_losses

from ..conftest import IMAGES, small_image

CONTENT, STYLE = str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png")
TINY = ["--weights", "random", "--size", "32", "--device", "cpu", "--threads", "1", "-q"]


def invoke(args: list[str], exit_code: int = 0):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == exit_code, (f"stylize {' '.join(map(str, args))} exited {result.exit_code}\n"
                                           f"stderr: {result.stderr!r}\nexception: {result.exception!r}")
    return result


def pixels(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"))


def test_sliced_runs_repeat_by_seed_are_recorded_and_replay(tmp_path: Path) -> None:
    paths = {name: tmp_path / f"{name}.png" for name in ("a", "b", "other", "again", "gram")}
    for name, seed in (("a", 1), ("b", 1), ("other", 2)):
        invoke([CONTENT, STYLE, "-o", paths[name], *TINY, "--steps", "20", "--seed", seed, "--style-loss", "sliced",
                "--style-weight", "1000"])
    assert np.array_equal(pixels(paths["a"]), pixels(paths["b"]))  # the same seed: the same directions, image
    assert not np.array_equal(pixels(paths["a"]), pixels(paths["other"]))  # another seed: other directions
    invoke([CONTENT, STYLE, "-o", paths["gram"], *TINY, "--steps", "20", "--seed", "1"])
    assert not np.array_equal(pixels(paths["a"]), pixels(paths["gram"]))
    record = read_record(paths["a"])
    assert record["settings"]["style_loss"] == "sliced" and record["settings"]["style_weight"] == 1000
    assert read_record(paths["gram"])["settings"]["style_loss"] == "gram"
    invoke([CONTENT, STYLE, "-o", paths["again"], "--replay", paths["a"], "-q"])
    assert np.array_equal(pixels(paths["again"]), pixels(paths["a"]))


@pytest.mark.parametrize("extra, needle", [
    (["--style-loss", "sliced", "--tile", "16"], "tile cannot be combined with style_loss 'sliced'"),
    (["--style-loss", "wasserstein", "--fused-gram"], "fused_gram applies to style_loss gram only"),
    (["--style-loss", "moments"], "'moments' is not one of 'gram', 'wasserstein', 'sliced'"),
])
def test_refused_combinations_exit_2_in_one_line(tmp_path: Path, extra: list[str], needle: str) -> None:
    out = tmp_path / "out.png"
    result = invoke([CONTENT, STYLE, "-o", out, *TINY[:-1], "--steps", "1", *extra], 2)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and needle in lines[0], result.stderr
    assert not out.exists()


def test_print_config_shows_the_loss_its_weight_and_no_fused_gram_under_fast(imagenet_cached: Path) -> None:
    result = invoke([CONTENT, STYLE, "-o", "x.png", "--weights", "random", "--style-loss", "wasserstein", "--fast",
                     "--print-config"])
    settings = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in result.stdout.splitlines())}
    assert settings["style_loss"] == "wasserstein", result.stdout
    assert float(settings["style_weight"]) == STYLE_LOSS_WEIGHTS["wasserstein"]["tutorial"], result.stdout
    assert settings["fused_gram"] == "False", result.stdout


def test_a_manifest_column_sets_the_style_loss(tmp_path: Path) -> None:
    from style_transfer.batch.items import default_options, read_manifest

    (tmp_path / "list.csv").write_text("content,style,style-loss\ncat.png,wave.jpg,sliced\ndog.png,wave.jpg,\n")
    items = read_manifest(str(tmp_path / "list.csv"), styles=[], out_dir="out",
                          options={**default_options(), "weights": "random"})
    assert [item.config.style_loss for item in items] == ["sliced", "gram"]
    (tmp_path / "bad.csv").write_text("content,style,style_loss\ncat.png,wave.jpg,moments\n")
    with pytest.raises(ValueError, match=r"bad.csv:2: .*moments"):
        read_manifest(str(tmp_path / "bad.csv"), styles=[], out_dir="out", options=default_options())


def test_the_web_form_offers_the_style_losses_with_their_weights(tmp_path: Path) -> None:
    pytest.importorskip("httpx", reason="FastAPI's TestClient needs httpx")
    from fastapi.testclient import TestClient

    from style_transfer.web.app import create_app

    with TestClient(create_app(tmp_path / "data", weights="random", devices=("cpu",))) as client:
        options = client.get("/api/options").json()
        assert options["style_losses"] == ["gram", "wasserstein", "sliced"]
        assert options["defaults"]["style_loss"] == "gram"
        weights = options["presets"]["tutorial"]["style_weights"]
        assert weights == {"gram": 1e6, **{k: v["tutorial"] for k, v in STYLE_LOSS_WEIGHTS.items()}}
        bad = client.post("/api/jobs", files=[("content", ("c.png", (IMAGES / "chelsea.png").read_bytes())),
                                              ("style", ("s.png", (IMAGES / "ihc.png").read_bytes()))],
                          data={"style_loss": "moments", "weights": "random", "size": "32", "steps": "1"})
        assert bad.status_code == 422 and "style_loss must be one of" in bad.json()["detail"]
    html = Path(__file__).resolve().parents[2] / "style_transfer" / "web" / "static" / "index.html"
    assert 'name="style_loss"' in html.read_text()


def test_the_web_form_field_reaches_the_config() -> None:
    from style_transfer.web.form import Limits, ServerNetwork, _config

    config = _config({"style_loss": "sliced", "weights": "random"}, ServerNetwork("random"), Limits(), 1)
    assert config.style_loss == "sliced"


@pytest.mark.parametrize("kind, cls", [("wasserstein", WassersteinStyleLoss), ("sliced", SlicedStyleLoss)])
def test_the_model_builds_the_chosen_loss_and_fast_keeps_it(cnn, content_32, style_32, kind: str, cls: type) -> None:
    model, styles, contents = get_style_model_and_losses(cnn, IMAGENET_MEAN, IMAGENET_STD, style_32, content_32,
                                                         style_loss=kind, seed=5)
    assert [type(m) for m in styles] == [cls] * 5
    x = content_32.clone()
    model(x)
    plain = [float(m.loss) for m in styles]
    if kind == "sliced":
        for module in styles:
            module.evaluations = 0  # draw the first evaluation's directions again
    fast, fast_styles, _ = accelerate(model, styles, contents, Speed(channels_last=True, fused_gram=True))
    assert [type(m) for m in fast_styles] == [cls] * 5  # the fused Gram is the Gram loss's only
    fast(x)
    assert np.allclose([float(m.loss) for m in fast_styles], plain, rtol=1e-4)


def test_cached_targets_are_kept_per_style_loss(cnn, content_32, style_32) -> None:
    shared: dict = {}
    _, first, _ = get_style_model_and_losses(cnn, IMAGENET_MEAN, IMAGENET_STD, style_32, content_32,
                                             style_loss="wasserstein", style_targets=shared)
    _, again, _ = get_style_model_and_losses(cnn, IMAGENET_MEAN, IMAGENET_STD, style_32 * 0, content_32,
                                             style_loss="wasserstein", style_targets=shared)
    assert all(torch.equal(a.target, b.target) for a, b in zip(first, again))  # from the cache, not the black image
    from style_transfer.run.inputs import style_targets_key

    content, style = small_image("chelsea.png", (32, 21)), small_image("ihc.png", (32, 32))
    keys = {kind: style_targets_key(StyleConfig(weights="random", style_loss=kind), content, [style], [style_32],
                                    torch.device("cpu")) for kind in ("gram", "wasserstein", "sliced")}
    assert len(set(keys.values())) == 3


@pytest.mark.slow
def test_a_resumed_sliced_run_gives_the_uninterrupted_image(tmp_path: Path) -> None:
    images = small_image("chelsea.png", (32, 21)), small_image("ihc.png", (32, 32))
    settings = StyleConfig(size=32, steps=30, weights="random", device="cpu", style_loss="sliced", style_weight=1e3)
    whole = Run(*images, settings).execute()
    checkpoint = tmp_path / "run.ckpt"
    first = Run(*images, settings, RunOptions(checkpoint=str(checkpoint)))
    first.execute(lambda e: first.cancel("interrupted") if e.step == 25 else None)
    resumed = Run(*images, settings, RunOptions(resume=str(checkpoint))).execute()
    assert np.array_equal(np.asarray(resumed.image), np.asarray(whole.image))


@pytest.mark.real_features
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gram", "wasserstein", "sliced"])
def test_on_real_features_each_loss_lowers_its_value_and_paints_toward_the_style(vgg16, vgg16_onnx: Path,
                                                                                 kind: str) -> None:
    """64 px, 40 evaluations on the real VGG16: the loss it optimises falls, and the picture's colours move from
    the cat's toward the stain's (its mean colour comes closer to the stain's)."""
    from style_transfer.io.images import load_image

    content, style = load_image(CONTENT, 64), load_image(STYLE, 64)
    config = StyleConfig(size=64, steps=40, model="vgg16", weights=str(vgg16_onnx),
                         style_loss=kind, device="cpu")

    def style_value(image: torch.Tensor) -> float:
        model, styles, _ = get_style_model_and_losses(vgg16.features, None, None, style, content, style_loss=kind,
                                                      normalization=vgg16.normalization())
        model(image)
        return sum(float(m.loss) for m in styles)

    def shares(channels_last: bool) -> tuple[float, float]:
        """The picture's style value, and its mean colour's distance to the stain's, as shares of the photo's."""
        ordered = dataclasses.replace(config, channels_last=channels_last)
        result = Run(content, style, ordered, cnn=vgg16).execute().image
        out = torch.from_numpy(np.asarray(result, dtype=np.float32) / 255).permute(2, 0, 1)[None]
        colour = {name: image.mean((0, 2, 3)) for name, image in (("content", content), ("out", out), ("style", style))}
        return (style_value(out) / style_value(content),
                float((colour["out"] - colour["style"]).norm() / (colour["content"] - colour["style"]).norm()))

    # The control: the same run in channels_last (another summation order). After 40 evaluations the figures
    # depend on the CPU's rounding, so each bound is widened by 3x the two orders' difference (one pair's
    # difference understates how far rounding can move a figure, as in test_fast.py).
    (value, colour), (value_control, colour_control) = shares(False), shares(True)
    print(f"{kind}: style value {value:.3f} (channels_last {value_control:.3f}), colour distance {colour:.3f} "
          f"(channels_last {colour_control:.3f}) of the photo's")
    assert max(value, colour, value_control, colour_control) < 1  # toward the style, in either order
    assert value < 0.5 + 3 * abs(value - value_control), (value, value_control)
    assert colour < 0.8 + 3 * abs(colour - colour_control), (colour, colour_control)


@pytest.mark.parametrize("kind", ["sliced"])
def test_automatic_tiling_refuses_the_sliced_loss_saying_tiles_would_fit(kind: str) -> None:
    """W2 was refused here too until its tiled gradient was built: it now gets the Gram's tiles."""
    from style_transfer import memory
    from style_transfer.tiling import crops, plans as tile_plans
    from style_transfer.errors import ResourceError
    from style_transfer.run.prepare import sizes_from

    sizes = sizes_from(128, 85, [(128, 128)], 1.0)
    speed = Speed()
    tiled_need = tile_plans.tiled_estimate_bytes((85, 128), (128, 128), 64, tile_plans.tiled_speed(speed),
                                             crops.vgg19_target_bytes(["conv_4"]))
    assert tiled_need < memory.estimate_bytes((85, 128), (128, 128), speed)
    gram = StyleConfig(size=128)
    assert tile_plans.plan_tiles([128], sizes, gram, speed, torch.device("cpu"), available=tiled_need) == [64]
    w2 = StyleConfig(size=128, style_loss="wasserstein")
    assert tile_plans.plan_tiles([128], sizes, w2, speed, torch.device("cpu"), available=tiled_need) == [64]
    with pytest.raises(ResourceError, match=f"tiles of 64 px would fit, but tiling cannot run with style_loss {kind}"):
        tile_plans.plan_tiles([128], sizes, StyleConfig(size=128, style_loss=kind), speed, torch.device("cpu"),
                          available=tiled_need)


@pytest.mark.slow
def test_the_benchmark_reports_time_and_the_distances_not_optimised(tmp_path: Path, capsys) -> None:
    from ..conftest import load_benchmark

    bench = load_benchmark("style_losses")
    out = tmp_path / "report.json"
    assert bench.main(["--weights", "random", "--size", "32", "--steps", "20", "--losses", "gram,sliced",
                       "--pictures", str(tmp_path), "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["machine"]["cpu_model"] and report["network"]["weights"] == "random"
    assert [run["style_loss"] for run in report["runs"]] == ["gram", "sliced"]
    for run in report["runs"]:
        assert set(run["ratios"]) == {"gram", "wasserstein", "sliced", "gram held-out"}
        assert run["ratios"][run["style_loss"]] < 1  # each run came closer to the style by its own statistic
        assert run["median_evaluation_s"] > 0
    assert (tmp_path / "style-loss-sliced.jpg").exists()
    table = capsys.readouterr().out
    assert "| sliced |" in table and "Network: VGG19, seeded random weights" in table
