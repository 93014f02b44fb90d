"""Input files checked before they are opened: regular, non-empty, readable; names printed safely."""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO


def shown(path: object) -> str:
    """A path as it may be printed on one line.

    Bytes that are not UTF-8 show as ``\\xff`` and control characters (a newline in a file
    name) as ``\\n``, so an error message stays one printable line.
    """
    if isinstance(path, (str, bytes, os.PathLike)):
        text = os.fsencode(path).decode("utf-8", "backslashreplace")
    else:
        text = str(path)
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def file_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` is not a readable, non-empty regular file, or None if it is one.

    Uses ``os.stat`` only: nothing is opened, so a FIFO or a device cannot block or be read.
    """
    name = os.fspath(path)
    try:
        info = os.stat(name)
    except FileNotFoundError:
        if os.path.islink(name):
            return f"is a dangling symlink (to {shown(os.readlink(name))})"
        return "no such file"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symlink loop"
        return f"cannot be read ({exc.strerror})"
    mode = info.st_mode
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    if stat.S_ISFIFO(mode):
        return "is a FIFO (named pipe), not a regular file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device, not a regular file"
    if not stat.S_ISREG(mode):
        return "is not a regular file"
    if info.st_size == 0:
        return "is empty (0 bytes)"
    return None


def open_regular(path: str | os.PathLike, error: type[Exception]) -> BinaryIO:
    """Open a regular file for reading, or raise ``error("<path>: <problem>")``.

    The file type is checked with ``os.stat`` before opening and again on the open
    descriptor (opened non-blocking), so a FIFO swapped in between cannot hang the run.
    """
    name = os.fspath(path)
    problem = file_problem(name)
    if problem is not None:
        raise error(f"{shown(name)}: {problem}")
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise error(f"{shown(name)}: cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise error(f"{shown(name)}: is not a regular file")
    return os.fdopen(fd, "rb")
