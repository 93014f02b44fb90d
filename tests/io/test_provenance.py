"""The provenance record: made, embedded in each output format, read back, printed by stylize-info."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image, PngImagePlugin

from style_transfer.io import provenance
from style_transfer.config.style import StyleConfig
from style_transfer.errors import ImageError, OutputError, WeightsError
from style_transfer.io.images import save_image
from style_transfer.cli.info import main as info_main
from style_transfer.io.metadata import RECORD_FORMATS, read_record, record_field, save_options, xmp_packet
from style_transfer.io.provenance import input_entry, make_record, sha256_file, weights_entry
from ..helpers import invoker, pixels

invoke = invoker(info_main)

ROOT = Path(__file__).resolve().parents[2]
EXTENSIONS = {"PNG": ".png", "JPEG": ".jpg", "WEBP": ".webp", "TIFF": ".tif", "GIF": ".gif"}


def noise_image(width: int = 24, height: int = 16, seed: int = 0) -> Image.Image:
    """Seeded RGB noise: every format's encoder has real work to do."""
    data = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    return Image.fromarray(data, "RGB")


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    """A content, two styles, an init image and a weights file, deep in the user's folders."""
    folder = tmp_path / "home" / "me" / "pictures"
    folder.mkdir(parents=True)
    paths = {"content": folder / "cat.png", "style1": folder / "wave.jpg", "style2": folder / "stain.webp",
             "init": folder / "start.png", "weights": folder / "my-vgg.pth"}
    noise_image(seed=1).save(paths["content"])
    noise_image(seed=2).save(paths["style1"])
    noise_image(seed=3).save(paths["style2"])
    noise_image(seed=4).save(paths["init"])
    paths["weights"].write_bytes(b"not really a state dict, but bytes to hash" * 100)
    return paths


@pytest.fixture
def record(inputs: dict[str, Path]) -> dict[str, Any]:
    config = StyleConfig(size=32, steps=5, weights="random", init=str(inputs["init"]), seed=7)
    return make_record(config, content=inputs["content"], styles=[inputs["style1"], str(inputs["style2"])],
                       weights=config.weights, device=torch.device("cpu"), evaluations=6,
                       losses={"style": torch.tensor(12.5), "content": 3.25, "tv": float("nan")},
                       seconds=1.5, stopped="done")


class TestRecord:
    def test_keys_and_values(self, record: dict[str, Any]) -> None:
        assert list(record) == ["style_transfer", "record_version", "settings", "seed", "inputs", "weights",
                                "versions", "device", "evaluations", "losses", "seconds", "stopped", "created"]
        assert record["record_version"] == provenance.RECORD_VERSION == 1
        assert record["seed"] == 7 and record["settings"]["seed"] == 7
        assert record["settings"]["size"] == 32 and record["settings"]["steps"] == 5
        assert record["settings"]["content_layers"] == ["conv_4"]  # the preset resolved, tuples as lists
        assert record["weights"] == {"kind": "random", "seed": provenance.RANDOM_WEIGHTS_SEED}
        assert record["device"] == "cpu" and record["evaluations"] == 6 and record["stopped"] == "done"
        assert record["losses"] == {"style": 12.5, "content": 3.25, "tv": "NaN"}
        assert set(record["versions"]) == {"style_transfer", "torch", "torchvision", "pillow", "python"}
        assert record["versions"]["torch"].split("+")[0] == torch.__version__.split("+")[0]
        assert record["versions"]["pillow"] == Image.__version__
        assert record["created"].endswith("+00:00")

    def test_is_plain_json(self, record: dict[str, Any]) -> None:
        # Strict JSON (no NaN literal), and the same values after a round trip through text.
        assert json.loads(json.dumps(record, allow_nan=False)) == record

    def test_names_have_no_directories(self, record: dict[str, Any], inputs: dict[str, Path],
                                       tmp_path: Path) -> None:
        text = json.dumps(record)
        assert str(tmp_path) not in text and "home/me" not in text
        assert record["inputs"]["content"]["name"] == "cat.png"
        assert [s["name"] for s in record["inputs"]["styles"]] == ["wave.jpg", "stain.webp"]
        assert record["inputs"]["init"]["name"] == "start.png" and record["settings"]["init"] == "start.png"

    def test_weights_file_named_without_directories(self, inputs: dict[str, Path], tmp_path: Path) -> None:
        config = StyleConfig(size=32, weights=str(inputs["weights"]))
        made = make_record(config, content=inputs["content"], styles=[inputs["style1"]], weights=config.weights,
                           device="cpu", evaluations=1, losses={}, seconds=0.0, stopped="done")
        assert str(tmp_path) not in json.dumps(made)
        assert made["settings"]["weights"] == "my-vgg.pth"
        assert made["weights"] == {"kind": "file", "name": "my-vgg.pth",
                                   "sha256": hashlib.sha256(inputs["weights"].read_bytes()).hexdigest()}

    def test_input_hashes_are_the_files(self, record: dict[str, Any], inputs: dict[str, Path]) -> None:
        def digest(path: Path) -> str:
            return hashlib.sha256(path.read_bytes()).hexdigest()

        assert record["inputs"]["content"]["sha256"] == digest(inputs["content"])
        assert [s["sha256"] for s in record["inputs"]["styles"]] == [digest(inputs["style1"]),
                                                                     digest(inputs["style2"])]
        assert record["inputs"]["init"]["sha256"] == digest(inputs["init"])

    def test_sha256_file_reads_in_chunks(self, tmp_path: Path) -> None:
        path = tmp_path / "data.bin"
        data = np.random.default_rng(5).integers(0, 256, 10_000, dtype=np.uint8).tobytes()
        path.write_bytes(data)
        assert sha256_file(path, chunk=333) == hashlib.sha256(data).hexdigest()

    def test_pil_and_tensor_inputs_hash_their_pixels(self) -> None:
        image = noise_image(10, 8, seed=9)
        entry = input_entry(image)
        assert entry == {"name": None, "sha256": hashlib.sha256(np.asarray(image).tobytes()).hexdigest(),
                         "size": [10, 8], "pixels": "rgb8"}
        moved = image.copy()
        moved.putpixel((0, 0), (1, 2, 3))
        assert input_entry(moved)["sha256"] != entry["sha256"]
        tensor = torch.rand(1, 3, 8, 10, generator=torch.Generator().manual_seed(0))
        assert input_entry(tensor) == {"name": None, "sha256": hashlib.sha256(tensor.numpy().tobytes()).hexdigest(),
                                       "size": [10, 8], "pixels": "float32"}

    def test_a_pil_images_alpha_is_hashed_where_it_is_not_opaque(self) -> None:
        """A style's alpha weighs its targets (batch caches them by this hash): two images alike over white but with
        another alpha hash apart; an opaque alpha hashes as the RGB image it is to a run."""
        image = noise_image(10, 8, seed=10)
        opaque = image.convert("RGBA")
        assert input_entry(opaque) == input_entry(image)
        cut = opaque.copy()
        cut.putpixel((0, 0), (255, 255, 255, 0))  # transparent: white to the network, like an opaque white pixel
        white = opaque.copy()
        white.putpixel((0, 0), (255, 255, 255, 255))
        rgb = np.asarray(white.convert("RGB")).tobytes()
        assert input_entry(cut) == {"name": None, "size": [10, 8], "pixels": "rgba8",
                                    "sha256": hashlib.sha256(rgb + cut.getchannel("A").tobytes()).hexdigest()}
        assert input_entry(white)["sha256"] == hashlib.sha256(rgb).hexdigest() != input_entry(cut)["sha256"]

    def test_missing_input_is_one_line(self, tmp_path: Path) -> None:
        with pytest.raises(ImageError, match=r"gone\.png: no such file$"):
            input_entry(tmp_path / "gone.png")
        with pytest.raises(TypeError, match="got int"):
            input_entry(3)
        with pytest.raises(WeightsError, match=r"gone\.pth: no such file$"):
            weights_entry(str(tmp_path / "gone.pth"))

    def test_record_field(self, record: dict[str, Any]) -> None:
        assert record_field(record, "settings.size") == 32
        assert record_field(record, "inputs.styles.1.name") == "stain.webp"
        assert record_field(record, "inputs.styles.-1.name") == "stain.webp"
        for missing in ("settings.sizee", "inputs.styles.2", "seed.x", ""):
            with pytest.raises(KeyError):
                record_field(record, missing)


class TestWeights:
    def test_imagenet_names_match_torchvision(self) -> None:
        """The names and cache files the record (and the cache path, which imports no torchvision) give torchvision's
        weights, against torchvision's own entries."""
        from torchvision.models import VGG16_Weights, VGG19_Weights

        from style_transfer.config.weights import IMAGENET_WEIGHTS_FILE, IMAGENET_WEIGHTS_NAME, IMAGENET_WEIGHTS_OF

        weights = VGG19_Weights.IMAGENET1K_V1
        assert IMAGENET_WEIGHTS_NAME == f"{type(weights).__name__}.{weights.name}"
        assert IMAGENET_WEIGHTS_FILE == os.path.basename(weights.url)
        for model, entry in (("vgg19", VGG19_Weights.IMAGENET1K_V1), ("vgg16", VGG16_Weights.IMAGENET1K_V1)):
            assert IMAGENET_WEIGHTS_OF[model] == (f"{type(entry).__name__}.{entry.name}", os.path.basename(entry.url))

    @pytest.mark.parametrize("torch_loaded", [True, False])
    def test_imagenet_cache_path_as_torch_hub_says(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   torch_loaded: bool) -> None:
        import torch.hub

        from style_transfer.config.weights import imagenet_weights_path

        def hub_path() -> Path:
            return Path(torch.hub.get_dir()) / "checkpoints" / "vgg19-dcbb9e9d.pth"

        monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch home"))
        if not torch_loaded:  # the path worked out without asking torch.hub
            monkeypatch.delitem(sys.modules, "torch.hub")
        assert imagenet_weights_path() == hub_path()
        monkeypatch.delenv("TORCH_HOME")
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert imagenet_weights_path() == hub_path()

    def test_imagenet_entry_hashes_the_cached_file(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("TORCH_HOME", str(tmp_path))
        entry = weights_entry("imagenet")
        assert entry == {"kind": "imagenet", "name": "VGG19_Weights.IMAGENET1K_V1", "file": "vgg19-dcbb9e9d.pth",
                         "sha256": None}  # not downloaded: no hash
        cached = tmp_path / "hub" / "checkpoints" / "vgg19-dcbb9e9d.pth"
        cached.parent.mkdir(parents=True)
        cached.write_bytes(b"pretend weights")
        assert weights_entry("imagenet")["sha256"] == hashlib.sha256(b"pretend weights").hexdigest()

    def test_file_hash_follows_changes(self, tmp_path: Path) -> None:
        path = tmp_path / "w.pth"
        path.write_bytes(b"first")
        assert weights_entry(str(path))["sha256"] == hashlib.sha256(b"first").hexdigest()
        path.write_bytes(b"second, longer")  # the cache keys on size and mtime: a new file is hashed again
        assert weights_entry(str(path))["sha256"] == hashlib.sha256(b"second, longer").hexdigest()

    def test_random_entry_names_the_seed(self) -> None:
        assert weights_entry("random", seed=5) == {"kind": "random", "seed": 5}


class TestEmbedding:
    @pytest.mark.parametrize("fmt", RECORD_FORMATS)
    def test_round_trip(self, fmt: str, record: dict[str, Any], tmp_path: Path) -> None:
        path = tmp_path / f"out{EXTENSIONS[fmt]}"
        save_image(noise_image(), path, metadata=record)
        with Image.open(path) as image:
            assert image.format == fmt
        assert read_record(path) == record

    @pytest.mark.parametrize("fmt", RECORD_FORMATS)
    def test_round_trip_from_tensor_with_any_text(self, fmt: str, tmp_path: Path) -> None:
        # Characters XML and JSON escape, non-ASCII and a non-UTF-8 file name (surrogate escapes).
        record = {"style_transfer": "0", "record_version": 1, "settings": {"init": "<&>\"' é 猫 \udcff\n"}}
        path = tmp_path / f"out{EXTENSIONS[fmt]}"
        save_image(torch.rand(1, 3, 16, 24, generator=torch.Generator().manual_seed(1)), path, metadata=record)
        assert read_record(path) == record

    @pytest.mark.parametrize("fmt", RECORD_FORMATS)
    def test_pixels_unchanged(self, fmt: str, record: dict[str, Any], tmp_path: Path) -> None:
        plain, marked = tmp_path / f"plain{EXTENSIONS[fmt]}", tmp_path / f"marked{EXTENSIONS[fmt]}"
        image = noise_image()
        save_image(image, plain)
        save_image(image, marked, metadata=record)
        assert read_record(plain) is None
        np.testing.assert_array_equal(pixels(marked), pixels(plain))
        if fmt in ("PNG", "TIFF"):  # lossless: the pixels are the image's own
            np.testing.assert_array_equal(pixels(marked), np.asarray(image))

    @pytest.mark.parametrize("fmt", ["WEBP", "GIF"])
    def test_animation_holds_the_record(self, fmt: str, record: dict[str, Any], tmp_path: Path) -> None:
        path = tmp_path / f"run{EXTENSIONS[fmt]}"
        frames = [noise_image(seed=s) for s in range(3)]
        frames[0].save(path, format=fmt, save_all=True, append_images=frames[1:], duration=100,
                       **save_options(record, fmt))
        with Image.open(path) as image:
            assert image.n_frames == 3
        assert read_record(path) == record

    def test_bmp_cannot_hold_a_record(self, record: dict[str, Any], tmp_path: Path) -> None:
        assert "BMP" not in RECORD_FORMATS
        assert save_options(record, "BMP") == {}
        path = tmp_path / "out.bmp"
        save_image(noise_image(), path, metadata=record)
        assert read_record(path) is None
        np.testing.assert_array_equal(pixels(path), np.asarray(noise_image()))

    def test_unknown_format_is_refused(self, record: dict[str, Any]) -> None:
        with pytest.raises(ValueError, match="'ICO'"):
            save_options(record, "ico")

    def test_record_too_long_for_jpeg(self, tmp_path: Path) -> None:
        path = tmp_path / "out.jpg"
        save_image(noise_image(), path)
        before = path.read_bytes()
        huge = {"style_transfer": "0", "record_version": 1, "settings": {"x": "y" * 70_000}}
        with pytest.raises(OutputError, match="too long for a JPEG"):
            save_image(noise_image(seed=8), path, metadata=huge)
        assert path.read_bytes() == before and os.listdir(tmp_path) == ["out.jpg"]
        save_image(noise_image(), tmp_path / "out.png", metadata=huge)  # PNG has room
        assert read_record(tmp_path / "out.png") == huge

    def test_xmp_is_a_packet_in_our_namespace(self, record: dict[str, Any]) -> None:
        import xml.etree.ElementTree as ET

        packet = xmp_packet(record)
        root = ET.fromstring(packet)
        assert root.tag == "{adobe:ns:meta/}xmpmeta"
        found = root.findall(".//{https://github.com/style-transfer/ns/1.0/}record")
        assert len(found) == 1 and json.loads(found[0].text or "") == record


class TestReadRecord:
    def test_other_metadata_is_no_record(self, tmp_path: Path) -> None:
        info = PngImagePlugin.PngInfo()
        info.add_text("Software", "something else")
        noise_image().save(tmp_path / "a.png", pnginfo=info)
        other_xmp = b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF/></x:xmpmeta>'
        noise_image().save(tmp_path / "a.jpg", xmp=other_xmp)
        noise_image().save(tmp_path / "a.gif", comment="made with another tool")
        for name in ("a.png", "a.jpg", "a.gif"):
            assert read_record(tmp_path / name) is None

    @pytest.mark.parametrize("text, reason", [("{not json", "not JSON"), ("[1, 2]", "record_version"),
                                              ('{"record_version": "1"}', "record_version")])
    def test_damaged_png_record(self, tmp_path: Path, text: str, reason: str) -> None:
        info = PngImagePlugin.PngInfo()
        info.add_itxt("style_transfer", text)
        noise_image().save(tmp_path / "bad.png", pnginfo=info)
        with pytest.raises(ImageError, match=rf"^{tmp_path}/bad\.png: damaged style_transfer record \(.*{reason}"):
            read_record(tmp_path / "bad.png")

    def test_damaged_xmp_record(self, tmp_path: Path) -> None:
        broken = b'<x:xmpmeta xmlns:st="https://github.com/style-transfer/ns/1.0/"><st:record>{}</x:xmpmeta>'
        noise_image().save(tmp_path / "bad.webp", xmp=broken)
        with pytest.raises(ImageError, match=r"bad\.webp: damaged style_transfer record \(XMP is not well-formed"):
            read_record(tmp_path / "bad.webp")

    def test_not_an_image_and_missing(self, tmp_path: Path) -> None:
        (tmp_path / "notes.png").write_text("just text\n")
        with pytest.raises(ImageError, match=r"notes\.png: not an image"):
            read_record(tmp_path / "notes.png")
        with pytest.raises(ImageError, match=r"gone\.png: no such file"):
            read_record(tmp_path / "gone.png")


class TestInfoCommand:
    @pytest.fixture
    def out(self, record: dict[str, Any], tmp_path: Path) -> Path:
        path = tmp_path / "out.jpg"
        save_image(noise_image(), path, metadata=record)
        return path

    def test_prints_a_summary_and_the_whole_record_with_json(self, out: Path, record: dict[str, Any],
                                                             inputs: dict[str, Path]) -> None:
        """Issue 24.5: a short readable summary by default (inputs, network and weights, the settings that
        differ from the defaults, the run, the machine); the whole record with --json."""
        lines = invoke([str(out)], 0).stdout.splitlines()
        assert len(lines) == 6 and lines[0].startswith(f"{out}: made by style_transfer ")
        fields = {key.strip(): value.strip() for key, value in (line.split(":", 1) for line in lines[1:])}
        assert list(fields) == ["inputs", "network", "settings", "run", "machine"]
        digest = record["inputs"]["content"]["sha256"][:12]
        assert fields["inputs"].startswith(f"content {inputs['content'].name} (sha256 {digest}); styles ")
        assert f"start image {inputs['init'].name}" in fields["inputs"]
        assert fields["network"] == "VGG19, seeded random weights (seed 0: no artistic result)"
        assert fields["settings"] == "size 32, steps 5, seed 7"  # only what differs from the defaults
        assert fields["run"] == "6 evaluations, done, 1.5 s; loss style 12.5, content 3.25, tv NaN"
        assert fields["machine"].startswith("cpu; torch ") and "Python " in fields["machine"]
        compact = invoke([str(out), "--json"], 0)
        assert compact.stdout.count("\n") == 1 and json.loads(compact.stdout) == record

    def test_field(self, out: Path) -> None:
        assert invoke([str(out), "--field", "settings.size"], 0).stdout == "32\n"
        assert invoke([str(out), "--field", "inputs.content.name"], 0).stdout == "cat.png\n"  # bare string
        weights = invoke([str(out), "--field", "weights", "--json"], 0).stdout
        assert weights == '{"kind":"random","seed":0}\n'

    def test_several_files_name_each(self, out: Path, tmp_path: Path) -> None:
        other = tmp_path / "other.png"
        save_image(noise_image(), other, metadata={"style_transfer": "0", "record_version": 1, "seed": 4})
        result = invoke([str(out), str(other), "--field", "seed"], 0)
        assert result.stdout == f"{out}: 7\n{other}: 4\n"

    @pytest.mark.parametrize("case, message", [
        ("no record", "out.bmp: no style_transfer record"),
        ("not an image", "notes.png: not an image"),
        ("missing", "gone.png: no such file"),
        ("no field", "out.jpg: the record has no field 'settings.sizee'"),
    ])
    def test_errors_are_one_line_exit_1(self, case: str, message: str, out: Path, tmp_path: Path) -> None:
        save_image(noise_image(), tmp_path / "out.bmp")
        (tmp_path / "notes.png").write_text("text\n")
        args = {"no record": [str(tmp_path / "out.bmp")], "not an image": [str(tmp_path / "notes.png")],
                "missing": [str(tmp_path / "gone.png")], "no field": [str(out), "--field", "settings.sizee"]}[case]
        result = invoke(args, 1)
        assert result.stdout == ""
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("Error: ") and message in result.stderr

    def test_a_bad_file_does_not_hide_the_good_ones(self, out: Path, tmp_path: Path) -> None:
        result = invoke([str(tmp_path / "gone.png"), str(out), "--field", "seed"], 1)
        assert result.stdout == f"{out}: 7\n" and result.stderr.count("\n") == 1

    def test_usage_error_is_one_line_exit_2(self) -> None:
        result = invoke([], 2)
        assert result.stderr.count("\n") == 1 and "Missing argument" in result.stderr

    @pytest.mark.slow
    def test_runs_as_a_module(self, out: Path) -> None:
        done = subprocess.run([sys.executable, "-m", "style_transfer.cli.info", str(out), "--field", "stopped"],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert (done.returncode, done.stdout, done.stderr) == (0, "done\n", "")


# stylize-info must start at once: nothing it imports may import torch.
_IMPORT_WITHOUT_INIT = """
import sys, types
package = types.ModuleType("style_transfer")  # the package without running its __init__ (which imports torch)
package.__path__ = [sys.argv[1]]
sys.modules["style_transfer"] = package
import style_transfer.cli.info, style_transfer.io.provenance, style_transfer.io.metadata
heavy = sorted(m for m in ("torch", "torchvision", "numpy") if m in sys.modules)
print(",".join(heavy))
"""


@pytest.mark.slow
def test_info_cli_and_provenance_do_not_import_torch() -> None:
    done = subprocess.run([sys.executable, "-c", _IMPORT_WITHOUT_INIT, str(ROOT / "style_transfer")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


@pytest.mark.slow
def test_importing_info_cli_leaves_torch_unloaded() -> None:
    code = "import sys, style_transfer.cli.info; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout.strip()) == (0, "False")
