"""The gallery: finished results kept in the data folder, one PNG and one JSON file per result.

``<data dir>/results/<id>.png`` holds the image with its provenance record embedded;
``<data dir>/results/<id>.json`` holds what the page lists (settings, how the run ended). Both are
written atomically, the image first, so a listed result always has its image. Ids are 32 random
hex digits made here; no name a client sends ever becomes part of a path.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import secrets
import threading
from pathlib import Path
from typing import Any

from PIL import Image

from ..errors import OutputError
from ..io.files import atomic_output
from ..io.images import save_image

_ID = re.compile(r"^[0-9a-f]{32}$")


def new_id() -> str:
    """An unguessable id (128 random bits) that is also a safe file name."""
    return secrets.token_hex(16)


def valid_id(value: str) -> bool:
    return bool(_ID.match(value))


class Gallery:
    """The results in ``folder`` (created when missing); safe to use from several threads."""

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def image_path(self, result_id: str) -> Path | None:
        """The PNG of a result, or None for an unknown or malformed id."""
        if not valid_id(result_id):
            return None
        path = self.folder / f"{result_id}.png"
        return path if path.is_file() else None

    def add(self, image: Image.Image, record: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
        """Save a result: the image with ``record`` embedded, then its entry (with ``id`` and ``created`` added).

        Raises:
            OutputError: the data folder cannot be written.
        """
        result_id = new_id()
        # To the microsecond: two results saved in the same second (small jobs) keep their order in ``list``.
        entry = {"id": result_id,
                 "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds"),
                 "width": image.width, "height": image.height, **entry}
        save_image(image, self.folder / f"{result_id}.png", metadata=record)
        with atomic_output(self.folder / f"{result_id}.json", OutputError) as handle:
            handle.write(json.dumps(entry, ensure_ascii=True, indent=1).encode("ascii"))
        return entry

    def get(self, result_id: str) -> dict[str, Any] | None:
        if not valid_id(result_id):
            return None
        try:
            entry = json.loads((self.folder / f"{result_id}.json").read_text("utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict) or self.image_path(result_id) is None:
            return None
        return entry

    def list(self) -> list[dict[str, Any]]:
        """Every readable result, newest first (a damaged entry is skipped, never deleted)."""
        entries = [self.get(path.stem) for path in self.folder.glob("*.json")]
        return sorted((e for e in entries if e is not None), key=_created, reverse=True)

    def delete(self, result_id: str) -> bool:
        """Remove a result's files; False when there is no such result."""
        if not valid_id(result_id):
            return False
        with self._lock:
            found = False
            for suffix in (".json", ".png"):  # the entry first: a half-deleted result is no longer listed
                with contextlib.suppress(FileNotFoundError):
                    (self.folder / f"{result_id}{suffix}").unlink()
                    found = True
            return found


def _created(entry: dict[str, Any]) -> datetime.datetime:
    """When a result was saved (entries of earlier versions: to the second); unreadable: the earliest time."""
    try:
        when = datetime.datetime.fromisoformat(str(entry.get("created", "")))
    except ValueError:
        return datetime.datetime.min.replace(tzinfo=datetime.timezone.utc)
    return when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)
