"""The web page as a person uses it, in a real headless Chromium (Debian's, driven by Selenium) against a
real ``stylize-serve`` on a free loopback port.

It uploads two images, starts a tiny run (random weights), sees the progress bar and at least two
preview updates and the final image, starts a second job and cancels it mid-run (its image kept),
downloads a result and checks it is a PNG with its provenance record.
Two more: every stale state the page once showed (an old error after a new pick, a queue position
on an idle server, ``auto`` for the device, a time left after the end, "cancelled" twice, the same
picture as "so far" and "result"), and the page at a phone's 390 px (nothing outside the screen).

``STYLE_TRANSFER_SCREENSHOT=docs/web-app.png`` also copies the screenshot taken mid-run there (how
the one in docs/ was made); the test itself writes to its temporary folder.
"""

from __future__ import annotations

import os
import shutil
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

pytest.importorskip("fastapi", reason="the web extra is not installed: pip install 'style_transfer[web]'")
pytest.importorskip("selenium", reason="selenium is not installed (it comes with the test extra)")

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

from style_transfer.io.metadata import read_record  # noqa: E402

from ..conftest import small_image  # noqa: E402
from .test_web_cli import Server  # noqa: E402


REAL_URLOPEN = urllib.request.urlopen  # taken at import, before conftest's no_network refuses it in each test


def loopback_only(url: Any, *args: Any, **kwargs: Any) -> Any:
    """urlopen for Selenium's talk to its local chromedriver; any other host is refused, as conftest does."""
    target = url if isinstance(url, str) else url.full_url
    if urlsplit(target).hostname not in ("localhost", "127.0.0.1", "::1"):
        raise AssertionError(f"a test tried to use the network: {target}")
    return REAL_URLOPEN(url, *args, **kwargs)


@pytest.fixture
def browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    # Skipped here, not at import: the tests are collected (with their markers: tests/test_suite.py) without a browser.
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.skip(f"no {CHROMIUM} and {CHROMEDRIVER}: apt-get install --no-install-recommends chromium "
                    "chromium-driver fonts-liberation (.ci/run does)")
    monkeypatch.setattr("urllib.request.urlopen", loopback_only)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))  # Chromium writes ~/.config/chromium
    monkeypatch.setenv("SE_AVOID_STATS", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,1300",
                     f"--user-data-dir={home / 'profile'}"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def wait(driver: Any, check: Any, what: str, limit: float = 60) -> Any:
    """Poll ``check`` until it is true. The page replaces elements as it updates (a thumbnail redrawn
    between finding it and reading it): such a stale element is one more poll, not a failure."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    return WebDriverWait(driver, limit, poll_frequency=0.05,
                         ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)).until(
        lambda d: check(d), message=what)


def number(driver: Any, script: str) -> float:
    return float(driver.execute_script(f"return {script};") or 0)


def fill(driver: Any, element_id: str, value: str) -> None:
    field = driver.find_element(By.ID, element_id)
    field.clear()
    field.send_keys(value)


def start_small_job(driver: Any, steps: str = "10") -> None:
    """Ask for a 48 px job of ``steps`` steps on random weights and press Start."""
    fill(driver, "size", "48")
    fill(driver, "steps", steps)
    Select(driver.find_element(By.ID, "weights")).select_by_value("random")
    driver.find_element(By.ID, "start").click()


def test_a_person_uploads_watches_cancels_and_downloads(tmp_path: Path, browser: Any) -> None:
    content, style = tmp_path / "cat.png", tmp_path / "stain.png"
    small_image("chelsea.png", (48, 32)).save(content)
    small_image("ihc.png", (40, 40)).save(style)
    screenshot_to = os.environ.get("STYLE_TRANSFER_SCREENSHOT")
    server = Server(tmp_path / "data", "--preview-every", "2")
    try:
        browser.get(server.url)
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#sample-list .sample"), "the sample images")
        browser.find_element(By.ID, "content-input").send_keys(str(content))
        browser.find_element(By.ID, "style-input").send_keys(str(style))
        wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#content-thumbs img, #style-thumbs img")) == 2,
             "two thumbnails")
        start_small_job(browser)

        wait(browser, lambda d: d.find_element(By.ID, "status").text.startswith("Done"), "the first job to finish")
        wait(browser, lambda d: number(d, "document.getElementById('result').naturalWidth") == 48, "the final image")
        assert number(browser, "document.getElementById('preview').dataset.updates") >= 2
        assert number(browser, "document.getElementById('progress').value") == number(
            browser, "document.getElementById('progress').max") >= 10
        assert "evaluations" in browser.find_element(By.ID, "progress-text").text
        assert not browser.find_element(By.ID, "error").is_displayed()
        wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#gallery-list li")) == 1, "the gallery entry")

        # A second, long job, on the other network: watched mid-run, then cancelled; its image so far is kept.
        fill(browser, "size", "96" if screenshot_to else "48")
        fill(browser, "steps", "10000")
        network = Select(browser.find_element(By.ID, "model"))
        assert [o.get_attribute("value") for o in network.options] == ["vgg19", "vgg16"]
        assert network.first_selected_option.get_attribute("value") == "vgg19"  # the server's
        network.select_by_value("vgg16")
        browser.find_element(By.ID, "start").click()
        previews = 12 if screenshot_to else 2  # the docs' screenshot: a few more evaluations into the run
        wait(browser, lambda d: number(d, "document.getElementById('preview').dataset.updates") >= previews
             and d.find_element(By.ID, "status").text.startswith("Running"), "the second job's previews")
        mid_run = tmp_path / "web-app.png"
        assert browser.save_screenshot(str(mid_run))
        if screenshot_to:
            shutil.copyfile(mid_run, screenshot_to)
        browser.find_element(By.ID, "cancel").click()
        wait(browser, lambda d: d.find_element(By.ID, "status").text.startswith("Cancelled"), "the cancel")
        wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#gallery-list li")) == 2, "two gallery entries")
        assert browser.find_element(By.ID, "result").is_displayed()
        assert "vgg16, weights random" in browser.find_element(By.CSS_SELECTOR, "#gallery-list li .meta").text

        # "Use as content": the result becomes the next content image.
        browser.find_element(By.ID, "use-as-content").click()
        wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#content-thumbs img").get_attribute("title")
             .startswith("result-"), "the result as the content image")

        # Download the cancelled job's PNG as the browser does, into a folder of ours.
        downloads = tmp_path / "downloads"
        downloads.mkdir()
        browser.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
        browser.find_element(By.ID, "download-png").click()
        deadline = time.monotonic() + 60
        while not [p for p in downloads.glob("*.png")] and time.monotonic() < deadline:
            time.sleep(0.05)
        files = list(downloads.glob("*.png"))
        assert len(files) == 1 and files[0].name.startswith("stylized-")
        record = read_record(files[0])
        assert record is not None and record["stopped"] == "cancelled"
        assert record["inputs"]["content"]["name"] == "cat.png" and record["weights"]["kind"] == "random"
        assert record["settings"]["model"] == "vgg16"  # the page's Network choice reached the run
    finally:
        server.stop()


RECORD_STATUS = """
window.statuses = [];
new MutationObserver((records) => {
  for (const record of records) for (const node of record.addedNodes) window.statuses.push(node.textContent);
}).observe(document.getElementById('status'), { childList: true, characterData: true, subtree: true });
"""


def shown(driver: Any, element_id: str) -> bool:
    return driver.find_element(By.ID, element_id).is_displayed()


def test_the_page_shows_no_stale_state(tmp_path: Path, browser: Any) -> None:
    from style_transfer.run.prepare import resolve_device

    content, style = tmp_path / "cat.png", tmp_path / "stain.png"
    small_image("chelsea.png", (48, 32)).save(content)
    small_image("ihc.png", (40, 40)).save(style)
    server = Server(tmp_path / "data", "--preview-every", "2", device="auto")
    try:
        browser.get(server.url)
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#sample-list .sample"), "the sample images")
        browser.execute_script(RECORD_STATUS)  # every text the status line shows, however briefly

        # A complaint goes away with the pick that answers it.
        browser.find_element(By.ID, "start").click()
        wait(browser, lambda d: shown(d, "error"), "the missing content's error")
        browser.find_element(By.ID, "content-input").send_keys(str(content))
        wait(browser, lambda d: not shown(d, "error"), "the error to go with the content's pick")
        browser.find_element(By.ID, "start").click()
        wait(browser, lambda d: "style" in d.find_element(By.ID, "error").text, "the missing style's error")
        browser.find_element(By.ID, "style-input").send_keys(str(style))
        wait(browser, lambda d: not shown(d, "error"), "the error to go with the style's pick")

        start_small_job(browser)
        wait(browser, lambda d: d.find_element(By.ID, "status").text.startswith("Done"), "the first job to finish")
        wait(browser, lambda d: number(d, "document.getElementById('result').naturalWidth") == 48, "the final image")
        statuses = browser.execute_script("return window.statuses;")
        assert not [s for s in statuses if "queue" in s], statuses  # the server was idle
        assert f"Started on {resolve_device('auto')}: loading the model..." in statuses, statuses
        assert "auto" not in " ".join(statuses)
        assert "left" not in browser.find_element(By.ID, "progress-text").text  # no estimate after the end
        assert shown(browser, "result-figure") and not shown(browser, "preview-figure")  # one picture, not two

        # A long job, cancelled mid-run.
        fill(browser, "steps", "10000")
        browser.find_element(By.ID, "start").click()
        wait(browser, lambda d: number(d, "document.getElementById('preview').dataset.updates") >= 1
             and "left" in d.find_element(By.ID, "progress-text").text, "the second job's estimate")
        browser.find_element(By.ID, "cancel").click()
        wait(browser, lambda d: d.find_element(By.ID, "status").text.startswith("Cancelled"), "the cancel")
        status = browser.find_element(By.ID, "status").text
        assert status.lower().count("cancelled") == 1, status
        assert "left" not in browser.find_element(By.ID, "progress-text").text
        assert shown(browser, "result-figure") and not shown(browser, "preview-figure")
        assert not shown(browser, "error")
    finally:
        server.stop()


def test_the_page_fits_a_phone(tmp_path: Path, browser: Any) -> None:
    content, style = tmp_path / "cat.png", tmp_path / "stain.png"
    small_image("chelsea.png", (48, 32)).save(content)
    small_image("ihc.png", (40, 40)).save(style)
    server = Server(tmp_path / "data", "--preview-every", "2")
    try:
        browser.set_window_size(390, 844)
        browser.get(server.url)
        assert browser.execute_script("return window.innerWidth;") == 390
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#sample-list .sample"), "the sample images")
        browser.find_element(By.ID, "content-input").send_keys(str(content))
        browser.find_element(By.ID, "style-input").send_keys(str(style))
        start_small_job(browser, steps="4")
        wait(browser, lambda d: d.find_element(By.ID, "status").text.startswith("Done"), "the job to finish")
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#gallery-list li"), "the gallery entry")
        width, scroll, outside = browser.execute_script("""
            const width = document.documentElement.clientWidth, outside = [];
            for (const e of document.querySelectorAll('input, select, button, output, progress, canvas, img, .button, label')) {
              const r = e.getBoundingClientRect();
              if (r.width && (r.left < 0 || r.right > width)) outside.push(`${e.tagName}#${e.id} ${r.left}-${r.right}`);
            }
            return [width, document.documentElement.scrollWidth, outside];""")
        assert scroll <= width, f"the page scrolls sideways: {scroll} px wide in {width}"
        assert outside == [], outside
    finally:
        server.stop()


def stroke(driver: Any, canvas: Any, points: list[tuple[float, float]]) -> None:
    """Drag the mouse over ``canvas`` through ``points``, each a fraction (0-1) of its width and height."""
    from selenium.webdriver.common.action_chains import ActionChains

    box = canvas.rect

    def offset(point: tuple[float, float]) -> tuple[int, int]:  # Selenium's offsets start at the element's centre
        return round((point[0] - 0.5) * box["width"]), round((point[1] - 0.5) * box["height"])

    chain = ActionChains(driver).move_to_element_with_offset(canvas, *offset(points[0])).click_and_hold()
    for point in points[1:]:
        chain = chain.move_to_element_with_offset(canvas, *offset(point))
    chain.release().perform()


def brush(driver: Any, percent: int) -> None:
    driver.execute_script("const b = document.getElementById('brush-size'); b.value = arguments[0];"
                          "b.dispatchEvent(new Event('input'));", percent)


SENT_MASKS = """
const done = arguments[arguments.length - 1];
maskFiles().then(async (files) => done(await Promise.all(files.map(
  async (f) => [f.name, Array.from(new Uint8Array(await f.blob.arrayBuffer()))])))).catch((e) => done(String(e)));
"""


def test_a_painted_mask_reaches_the_server_white_where_painted(tmp_path: Path, browser: Any) -> None:
    """Paint over the photo for the second style (a stroke down the left, one on the right erased again): the
    server keeps, as style mask 2, a mask of the photo's size that is white down the left and black elsewhere,
    and as style mask 1 (left unpainted) its complement, what no mask covers; the run records those files.
    Before that, uploads for style 2: the complement sent for style 1 (``maskFiles``, the page's own function),
    and the page's one-line refusal when nothing is left for it."""
    import hashlib
    import json

    import numpy as np
    from PIL import Image

    content, stain, brick = tmp_path / "cat.png", tmp_path / "stain.png", tmp_path / "brick.png"
    small_image("chelsea.png", (48, 32)).save(content)
    small_image("ihc.png", (40, 40)).save(stain)
    small_image("brick.png", (40, 40)).save(brick)
    server = Server(tmp_path / "data")
    try:
        browser.get(server.url)
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#sample-list .sample"), "the sample images")
        browser.find_element(By.ID, "style-input").send_keys(f"{stain}\n{brick}")
        paint = '#mask-list li[data-index="1"] .mask-paint'
        assert not browser.find_element(By.CSS_SELECTOR, paint).is_enabled()  # no photo to paint over yet

        # A phone photo (stored 48x32, EXIF: a quarter turn) is painted over upright, as the server checks it.
        phone = tmp_path / "phone.jpg"
        exif = Image.Exif()
        exif[0x0112] = 6
        small_image("chelsea.png", (48, 32)).save(phone, exif=exif)
        browser.find_element(By.ID, "content-input").send_keys(str(phone))
        wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, paint).is_enabled(), "the second style's Paint")
        browser.find_element(By.CSS_SELECTOR, paint).click()
        canvas = browser.find_element(By.CSS_SELECTOR, "#paint-area canvas")
        assert (canvas.get_attribute("width"), canvas.get_attribute("height")) == ("32", "48")

        browser.find_element(By.ID, "content-input").send_keys(str(content))  # another shape: a new canvas
        wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#paint-area canvas").get_attribute("width") == "48",
             "the canvas of the new photo")
        assert not shown(browser, "error")  # nothing painted was lost
        browser.find_element(By.ID, "paint-done").click()
        assert not shown(browser, "painter")

        # First uploads for style 2: what the page would send for style 1, left without a mask before it.
        white, right = tmp_path / "white.png", tmp_path / "right.png"
        Image.new("L", (48, 32), 255).save(white)
        half = Image.new("L", (48, 32), 0)
        half.paste(255, (24, 0, 48, 32))
        half.save(right)
        for upload in (white, right):
            browser.find_element(By.CSS_SELECTOR, '#mask-list li[data-index="1"] .mask-file').send_keys(str(upload))
            wait(browser, lambda d, name=upload.name: d.find_elements(By.CSS_SELECTOR, "#mask-list .mask-state")[1]
                 .text == f"mask: {name}", "the uploaded mask")
            sent = browser.execute_async_script(SENT_MASKS)
            if upload == white:
                assert sent.startswith("Error: The masks cover the whole photo: style 1 without a mask"), sent
        assert [name for name, _ in sent] == ["rest-1.png", "right.png"]
        (tmp_path / "rest.png").write_bytes(bytes(sent[0][1]))
        with Image.open(tmp_path / "rest.png") as rest:
            assert np.array_equal(np.asarray(rest.convert("L")), 255 - np.asarray(half))

        browser.find_element(By.CSS_SELECTOR, paint).click()
        canvas = browser.find_element(By.CSS_SELECTOR, "#paint-area canvas")
        wait(browser, lambda d: number(d, "document.getElementById('paint-photo').naturalWidth") == 48, "the photo")
        assert (canvas.get_attribute("width"), canvas.get_attribute("height")) == ("48", "32")  # the photo's shape
        assert abs(canvas.rect["width"] / canvas.rect["height"] - 1.5) < 0.02  # shown over it, unstretched

        brush(browser, 50)  # 24 px across: a hard core 14.4 px wide around the stroke, soft to 24 px
        stroke(browser, canvas, [(0.15, 0.02), (0.15, 0.5), (0.15, 0.98)])  # x = 7.2 px
        brush(browser, 20)
        stroke(browser, canvas, [(0.8, 0.3), (0.8, 0.7)])
        browser.find_element(By.ID, "brush-erase").click()
        brush(browser, 50)  # its hard core covers all the 20 % stroke
        stroke(browser, canvas, [(0.8, 0.3), (0.8, 0.7)])
        browser.find_element(By.ID, "paint-done").click()
        states = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#mask-list .mask-state")]
        assert states == ["no mask", "painted mask", "no mask"], states  # the styles', then the photo's

        start_small_job(browser, steps="10000")  # long: its inputs stay in its folder until it is cancelled
        wait(browser, lambda d: d.find_element(By.ID, "status").text.startswith("Running"), "the job to run")
        (folder,) = (tmp_path / "data" / "jobs").iterdir()
        saved = {n: (folder / f"style-mask-{n}").read_bytes() for n in (1, 2)}
        browser.find_element(By.ID, "cancel").click()
        wait(browser, lambda d: d.find_element(By.ID, "status").text.startswith("Cancelled"), "the cancel")

        masks = {}
        for n, data in saved.items():
            (tmp_path / f"mask{n}.png").write_bytes(data)
            with Image.open(tmp_path / f"mask{n}.png") as image:
                assert image.format == "PNG" and image.size == (48, 32)
                masks[n] = np.asarray(image.convert("L")).astype(int)
        painted = masks[2]
        assert painted[:, :14].min() >= 250, painted[:, :14].min()  # white in the stroke's core
        assert painted[:, 20:].max() == 0, painted[:, 20:].max()  # black past its soft edge, the erased stroke too
        assert 0 < painted[:, 16].mean() < 255  # a soft edge between
        assert np.abs(masks[1] - (255 - painted)).max() <= 1  # the unpainted style: what the painting leaves

        api = urljoin(server.url, "/api/results")
        results = json.load(urllib.request.urlopen(api))["results"]
        assert "2 style masks" in browser.find_element(By.CSS_SELECTOR, "#gallery-list li .meta").text
        image = urllib.request.urlopen(f"{api}/{results[0]['id']}/image?format=png").read()
        (tmp_path / "result.png").write_bytes(image)
        record = read_record(tmp_path / "result.png")
        assert [m["sha256"] for m in record["inputs"]["style_masks"]] == [
            hashlib.sha256(saved[n]).hexdigest() for n in (1, 2)]  # the run took those masks
    finally:
        server.stop()


def test_a_painted_content_mask_reaches_the_server(tmp_path: Path, browser: Any) -> None:
    """The photo's own row: paint where its shapes are kept (a stroke down the left); the server keeps it as the
    run's content mask (white in the stroke, black on the right), the record hashes it, and the gallery names it.
    No style mask is sent with it."""
    import hashlib
    import json

    import numpy as np
    from PIL import Image

    content, stain = tmp_path / "cat.png", tmp_path / "stain.png"
    small_image("chelsea.png", (48, 32)).save(content)
    small_image("ihc.png", (40, 40)).save(stain)
    server = Server(tmp_path / "data")
    try:
        browser.get(server.url)
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#sample-list .sample"), "the sample images")
        browser.find_element(By.ID, "style-input").send_keys(str(stain))
        browser.find_element(By.ID, "content-input").send_keys(str(content))
        paint = '#mask-list li[data-index="content"] .mask-paint'
        wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, paint).is_enabled(), "the photo's Paint")
        browser.find_element(By.CSS_SELECTOR, paint).click()
        assert "the photo's shapes are kept" in browser.find_element(By.ID, "painter-title").text
        canvas = browser.find_element(By.CSS_SELECTOR, "#paint-area canvas")
        wait(browser, lambda d: number(d, "document.getElementById('paint-photo').naturalWidth") == 48, "the photo")
        brush(browser, 50)
        stroke(browser, canvas, [(0.15, 0.02), (0.15, 0.5), (0.15, 0.98)])
        browser.find_element(By.ID, "paint-done").click()
        states = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#mask-list .mask-state")]
        assert states == ["no mask", "painted mask"], states
        assert browser.execute_async_script(SENT_MASKS) == []  # no style mask goes with it

        start_small_job(browser, steps="10000")
        wait(browser, lambda d: d.find_element(By.ID, "status").text.startswith("Running"), "the job to run")
        (folder,) = (tmp_path / "data" / "jobs").iterdir()
        saved = (folder / "content-mask").read_bytes()
        assert not list(folder.glob("style-mask-*"))
        browser.find_element(By.ID, "cancel").click()
        wait(browser, lambda d: d.find_element(By.ID, "status").text.startswith("Cancelled"), "the cancel")

        (tmp_path / "keep.png").write_bytes(saved)
        with Image.open(tmp_path / "keep.png") as image:
            assert image.format == "PNG" and image.size == (48, 32)
            kept = np.asarray(image.convert("L")).astype(int)
        assert kept[:, :14].min() >= 250 and kept[:, 20:].max() == 0, (kept[:, :14].min(), kept[:, 20:].max())

        wait(browser, lambda d: "content mask" in " ".join(e.text for e in d.find_elements(
            By.CSS_SELECTOR, "#gallery-list li .meta")), "the gallery's note of the content mask")
        api = urljoin(server.url, "/api/results")
        results = json.load(urllib.request.urlopen(api))["results"]
        image = urllib.request.urlopen(f"{api}/{results[0]['id']}/image?format=png").read()
        (tmp_path / "result.png").write_bytes(image)
        record = read_record(tmp_path / "result.png")
        assert record["inputs"]["content_mask"]["sha256"] == hashlib.sha256(saved).hexdigest()
    finally:
        server.stop()
