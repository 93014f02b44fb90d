"""Masks through the front ends (issue 26.1): the web app's upload, batch manifests' columns, --replay."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pytest
from PIL import Image

from style_transfer.batch.items import read_manifest
from style_transfer.io.metadata import read_record
from style_transfer.io.provenance import sha256_file

from ..conftest import IMAGES, small_image
from ..helpers import FAST, one_error_line, invoke_stylize as invoke

CAT, STYLE, BRICK = str(IMAGES / "chelsea.png"), str(IMAGES / "ihc.png"), str(IMAGES / "brick.png")


def png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def left_mask(width: int, height: int) -> Image.Image:
    mask = Image.new("L", (width, height), 0)
    mask.paste(255, (0, 0, width // 2, height))
    return mask


def test_a_manifest_gives_masks_per_row_relative_to_its_folder(tmp_path: Path) -> None:
    (tmp_path / "jobs.csv").write_text("content,style,style-mask,content-mask\n"
                                       f"{CAT},{STYLE};{BRICK},left.png;right.png,face.png\n"
                                       f"{CAT},{STYLE},,\n")
    first, second = read_manifest(str(tmp_path / "jobs.csv"), styles=[], out_dir=str(tmp_path / "out"))
    assert first.config.style_masks == (str(tmp_path / "left.png"), str(tmp_path / "right.png"))
    assert first.config.content_mask == str(tmp_path / "face.png")
    assert second.config.style_masks == () and second.config.content_mask is None


def test_replay_takes_the_masks_again_and_checks_them(tmp_path: Path) -> None:
    mask = tmp_path / "left.png"
    left_mask(451, 300).save(mask)
    out = tmp_path / "out.png"
    invoke([CAT, STYLE, BRICK, "-o", str(out), *FAST, "--style-mask", str(mask)], 0)
    record = read_record(out)
    assert record["settings"]["style_masks"] == ["left.png"]
    assert record["inputs"]["style_masks"][0]["sha256"] == sha256_file(mask)

    again = tmp_path / "again.png"
    line = one_error_line(invoke([CAT, STYLE, BRICK, "-o", str(again), "--replay", str(out)], 2))
    assert "the recorded run had 1 style mask(s), 0 given" in line
    other = tmp_path / "other.png"
    left_mask(451, 300).transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(other)
    line = one_error_line(invoke([CAT, STYLE, BRICK, "-o", str(again), "--replay", str(out), "--style-mask",
                                  str(other)], 2))
    assert "style mask 1 is not the recorded run's" in line
    invoke([CAT, STYLE, BRICK, "-o", str(again), "--replay", str(out), "--style-mask", str(mask)], 0)
    assert Image.open(again).tobytes() == Image.open(out).tobytes()


def test_resume_takes_the_masks_again(tmp_path: Path) -> None:
    """The checkpoint holds the masks' hashes: resuming with another mask is refused in one line."""
    from style_transfer import StyleConfig
    from style_transfer.run.run import Run
    from style_transfer.config.run_options import RunOptions

    mask, other = tmp_path / "left.png", tmp_path / "right.png"
    left_mask(451, 300).save(mask)
    left_mask(451, 300).transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(other)
    checkpoint = tmp_path / "run.ckpt"
    config = StyleConfig(size=32, steps=30, weights="random", device="cpu", style_masks=(str(mask),))
    first = Run(CAT, [STYLE, BRICK], config, RunOptions(checkpoint=str(checkpoint)))
    first.execute(lambda e: first.cancel("interrupted") if e.step == 3 else None)
    out = tmp_path / "o.png"
    line = one_error_line(invoke([CAT, STYLE, BRICK, "-o", str(out), "--resume", str(checkpoint), "--style-mask",
                                  str(other), "--weights", "random"], 1))
    assert "made with other masks" in line and not out.exists()


web = pytest.importorskip("style_transfer.web.app", reason="the web extra is not installed")


class TestWebApp:
    @pytest.fixture()
    def client(self, tmp_path: Path):
        pytest.importorskip("httpx", reason="FastAPI's TestClient needs httpx")
        from fastapi.testclient import TestClient

        with TestClient(web.create_app(tmp_path / "data", weights="random", devices=("cpu",))) as client:
            yield client

    def post(self, client, masks: list[bytes], content_masks: list[bytes] = (), **fields):
        files = [("content", ("cat.png", png(small_image("chelsea.png", (48, 32))), "image/png")),
                 ("style", ("stain.png", png(small_image("ihc.png", (40, 40))), "image/png")),
                 ("style", ("brick.png", png(small_image("brick.png", (40, 40))), "image/png"))]
        files += [("style_mask", (f"mask{i}.png", data, "image/png")) for i, data in enumerate(masks)]
        files += [("content_mask", (f"keep{i}.png", data, "image/png")) for i, data in enumerate(content_masks)]
        return client.post("/api/jobs", files=files, data={"size": "48", "steps": "4", "weights": "random", **fields})

    def record_of_job(self, client, tmp_path: Path, *args, **fields) -> dict:
        """Post a job (``post``'s arguments), follow it to the end and read its result's record."""
        from ..web.test_web import events

        response = self.post(client, *args, **fields)
        assert response.status_code == 201, response.text
        final = events(client, response.json()["id"])[-1]
        assert final[0] == "done", final
        image = client.get(f"/api/results/{final[1]['result']['id']}/image").content
        (tmp_path / "r.png").write_bytes(image)
        return read_record(tmp_path / "r.png")

    def test_a_job_with_a_mask_and_averaging_runs_and_records_them(self, client, tmp_path: Path) -> None:
        mask = png(left_mask(48, 32))
        record = self.record_of_job(client, tmp_path, [mask], average="0.9")
        assert record["settings"]["average"] == 0.9
        assert record["inputs"]["style_masks"][0]["sha256"] == hashlib.sha256(mask).hexdigest()

    def test_a_job_with_a_content_mask_runs_and_records_it(self, client, tmp_path: Path) -> None:
        """The content mask alone (no style mask): the run weighs the content loss by it and names it."""
        keep = png(left_mask(48, 32))
        record = self.record_of_job(client, tmp_path, [], [keep])
        assert record["inputs"]["content_mask"]["sha256"] == hashlib.sha256(keep).hexdigest()
        assert not record["inputs"].get("style_masks")

    @pytest.mark.parametrize("masks, content_masks, needle", [
        ([png(Image.new("L", (32, 32), 255))], [], "another aspect ratio than the content (48x32)"),
        ([png(Image.new("L", (48, 32), 0))], [], "the mask is empty"),
        ([png(left_mask(48, 32))] * 3, [], "3 style masks for 2 style image(s)"),
        ([], [png(Image.new("L", (48, 32), 0))], "content mask (content-mask): the mask is empty"),
        ([], [png(Image.new("L", (32, 48), 255))], "content mask (content-mask): 32x48 has another aspect"),
        ([], [png(left_mask(48, 32))] * 2, "content_mask must be one file"),
    ], ids=["aspect", "empty", "too-many", "empty-content-mask", "content-mask-aspect", "two-content-masks"])
    def test_bad_masks_are_refused_and_nothing_is_kept(self, client, tmp_path: Path, masks, content_masks,
                                                       needle) -> None:
        response = self.post(client, masks, content_masks)
        assert response.status_code == 422 and needle in response.json()["detail"], response.text
        detail = response.json()["detail"]
        assert "\n" not in detail and str(tmp_path) not in detail
        assert list((tmp_path / "data" / "jobs").iterdir()) == []  # the upload was not kept
