"""Write docs/options.md, every option of every command in full, from the commands themselves.

    python docs/make_options.py           # rewrite the page
    python docs/make_options.py --check   # exit 1 when the committed page is stale (tests/test_docs.py)

The commands are the console scripts setup.cfg installs, in its order.
"""

from __future__ import annotations

import configparser
import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "options.md"


def commands() -> list[tuple[str, str]]:
    """``(name, "module:function")`` of each console script in setup.cfg."""
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    lines = parser["options.entry_points"]["console_scripts"].strip().splitlines()
    return [tuple(part.strip() for part in line.split("=", 1)) for line in lines if line.strip()]  # type: ignore[misc]


def render() -> str:
    sys.path.insert(0, str(ROOT))
    from style_transfer.cli.options import option_reference

    parts = ["# Every option of every command", "",
             "Made by `python docs/make_options.py` from the commands themselves; `--help` shows the same "
             "options with one line each. Exit codes and faults: [inputs-and-errors.md](inputs-and-errors.md).",
             ""]
    parts += [f"- [`{name}`](#{name})" for name, _ in commands()]
    parts.append("")
    for name, target in commands():
        module, function = target.split(":")
        parts.append(option_reference(getattr(importlib.import_module(module), function), name))
    return "\n".join(parts).rstrip() + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if PAGE.read_text() != text:
            print(f"{PAGE} is stale: run python docs/make_options.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
