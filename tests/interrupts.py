"""A user's Ctrl-C stops the suite, even where the code under test turns Ctrl-C into something else.

Tests of Ctrl-C handling run code that catches ``KeyboardInterrupt`` (``Run`` turns it into a result,
``pytest.raises(KeyboardInterrupt)`` expects one) or installs its own SIGINT handler (the commands run
in-process by ``CliRunner``). A real Ctrl-C arriving there became that test's failure, and the suite went
on. A real Ctrl-C is a signal; the interrupts the tests inject are ``raise KeyboardInterrupt``. So this
plugin tells them apart by the signal: Python writes the number of every signal it receives to the
wakeup file descriptor, whichever Python handler is installed, and after each test phase a SIGINT
found there ends the session as pytest's own Ctrl-C does (``KeyboardInterrupt``, exit code 2).

Imported by ``tests/conftest.py``; no torch here (a test runs it in a bare pytest of its own).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Generator

import pytest

_PIPE: tuple[int, int] | None = None  # (read, write): the wakeup fd's pipe, made at the first test


def _arm() -> None:
    """Point the wakeup fd at our pipe, unless something else (a running event loop) holds it now."""
    global _PIPE
    if threading.current_thread() is not threading.main_thread():
        return
    if _PIPE is None:
        read, write = os.pipe()
        os.set_blocking(read, False)
        os.set_blocking(write, False)
        _PIPE = (read, write)
    before = signal.set_wakeup_fd(_PIPE[1], warn_on_full_buffer=False)
    if before not in (-1, _PIPE[1]):
        signal.set_wakeup_fd(before)  # not ours to take


def _ctrl_c_arrived() -> bool:
    if _PIPE is None:
        return False
    seen = b""
    while True:
        try:
            chunk = os.read(_PIPE[0], 4096)
        except BlockingIOError:
            break
        if not chunk:
            break
        seen += chunk
    return int(signal.SIGINT) in seen


def _phase() -> Generator[None, object, object]:
    _arm()
    try:
        return (yield)
    finally:
        if _ctrl_c_arrived():
            raise KeyboardInterrupt("Ctrl-C (SIGINT) during the test: the suite stops")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _phase())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _phase())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    return (yield from _phase())
