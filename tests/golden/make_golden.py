"""Regenerate the golden image of test_golden.py: ``python tests/golden/make_golden.py``.

Run it only when a change is meant to alter the default path's numbers, and say why in
the commit. Pinned on the CPU (golden numbers are CPU-only).
"""

from __future__ import annotations

from pathlib import Path

from style_transfer import StyleConfig, stylize

HERE = Path(__file__).resolve().parent
IMAGES = HERE.parent.parent / "images"
CONTENT = IMAGES / "chelsea.png"
STYLE = IMAGES / "ihc.png"
CONFIG = StyleConfig(size=32, steps=10, weights="random", device="cpu")
GOLDEN = HERE / "chelsea_ihc_32px_random_10steps.png"


def main() -> None:
    stylize(CONTENT, STYLE, CONFIG).save(GOLDEN)
    print(f"wrote {GOLDEN}")


if __name__ == "__main__":
    main()
