"""Input files checked before they are opened (regular, non-empty, readable), outputs written atomically and
never over an input; names printed safely."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import tempfile
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from ..errors import OutputError


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
    problem, info = _stat_problem(os.fspath(path))
    if problem is None and info is not None and info.st_size == 0:
        return "is empty (0 bytes)"
    return problem


def path_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` names no file this process may read, or None: missing, a dangling symlink or a loop, a
    directory, a FIFO or a device, no read permission. The commands call these a wrong command line (exit 2); a
    file that is there but empty or not an image is a fault of the file (``file_problem``, the readers: exit 1).

    Uses ``os.stat`` and ``os.access`` only: nothing is opened.
    """
    name = os.fspath(path)
    problem, _ = _stat_problem(name)
    if problem is None and not os.access(name, os.R_OK):
        return f"cannot be read ({os.strerror(errno.EACCES)})"
    return problem


def _stat_problem(name: str) -> tuple[str | None, os.stat_result | None]:
    """What ``os.stat`` tells is wrong with ``name`` as an input file (None: a regular file), and its stat."""
    try:
        info = os.stat(name)
    except FileNotFoundError:
        if os.path.islink(name):
            return f"is a dangling symlink (to {shown(os.readlink(name))})", None
        return "no such file", None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symlink loop", None
        return f"cannot be read ({exc.strerror})", None
    mode = info.st_mode
    if stat.S_ISDIR(mode):
        return "is a directory, not a file", info
    if stat.S_ISFIFO(mode):
        return "is a FIFO (named pipe), not a regular file", info
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device, not a regular file", info
    if not stat.S_ISREG(mode):
        return "is not a regular file", info
    return None, info


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


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, error: type[Exception]) -> Iterator[BinaryIO]:
    """Write ``path`` all or nothing: a temp file in its folder, fsynced, then renamed over it.

    On any failure inside the block the temp file is removed and an existing ``path`` is left as
    it was. An ``OSError`` (the folder missing or not writable, a full disk) becomes ``error``
    naming the path in one line; other exceptions pass unchanged.
    """
    name = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(name))
    try:
        fd, tmp = _create_temp(folder, os.path.splitext(name)[1])
    except OSError as exc:
        raise error(f"{shown(name)}: cannot write to folder {shown(folder)} ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, name)
        fsync_folder(folder)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise error(f"{shown(name)}: cannot write ({exc.strerror or exc})") from None
        raise


def _create_temp(folder: str, suffix: str) -> tuple[int, str]:
    """A new hidden file in ``folder``, open for writing, with the mode the umask gives a new file.

    Not ``tempfile.mkstemp``: its files are 0600, and an output would stay unreadable to the
    user's other accounts (a web server) after the rename.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = os.path.join(folder, f".stylize-{secrets.token_hex(6)}{suffix}")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", folder)


def fsync_folder(folder: str) -> None:
    """Make a rename in ``folder`` durable (best effort: some systems cannot open a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def check_writable(path: str | os.PathLike, folder_word: str = "folder") -> None:
    """Check, before any work, that a file can be written at ``path``: its folder exists and takes files.

    Raises:
        OutputError: a missing or unwritable folder (called ``folder_word`` in the message).
    """
    name = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(name))
    if not os.path.isdir(folder):
        what = "is not a folder" if os.path.exists(folder) else "does not exist"
        raise OutputError(f"{shown(name)}: {folder_word} {shown(folder)} {what}")
    try:  # the honest test of writability (os.access says yes to root on a read-only mount)
        fd, probe = tempfile.mkstemp(prefix=".stylize-probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OutputError(f"{shown(name)}: {folder_word} {shown(folder)} is not writable ({exc.strerror})") from None


def file_identity(path: str | os.PathLike) -> tuple[int, int] | None:
    """The existing file ``path`` names, whatever the name (relative, through symlinks, a hard link):
    ``os.stat``'s (device, inode); None when nothing is there or it cannot be read."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):  # ValueError: a NUL in a name
        return None
    return info.st_dev, info.st_ino


def same_file(first: str | os.PathLike, second: str | os.PathLike) -> bool:
    """Whether two paths name one existing file, by any name (``file_identity``)."""
    one = file_identity(first)
    return one is not None and one == file_identity(second)


def check_not_an_input(outputs: Iterable[tuple[str, str | os.PathLike | None]],
                       inputs: Iterable[tuple[str, str | os.PathLike | None]]) -> None:
    """Refuse, before any work, an output that is the same file as an input (``same_file``), as ffmpeg does.

    Args:
        outputs, inputs: ``(label, path)`` pairs, labels as the user knows them ("-o", "CONTENT"); a path
            of None is left out.

    Raises:
        OutputError: naming the output, the input it is and what to do.
    """
    given = [(label, path) for label, path in inputs if path is not None]
    for label, output in outputs:
        if output is None:
            continue
        for input_label, path in given:
            if same_file(output, path):
                raise OutputError(f"{label} {shown(output)}: is the same file as {input_label} {shown(path)}; "
                                  f"writing it would destroy that input: give another output name")
