"""The suite itself: a user's Ctrl-C stops it, and the slow parts carry markers for a quick run.

Ctrl-C (``tests/interrupts.py``): a bare pytest runs a generated file in a subprocess: a test that
injects its own KeyboardInterrupt passes; then a real Ctrl-C (SIGINT to the process) lands in code that
swallows it, as the code under test does (``except KeyboardInterrupt``, or a SIGINT handler of its
own); a last test must not run. Without the plugin (the control) the run goes on; with it the run
stops there, exit code 2.

Markers (``setup.cfg``): one collection of the suite, each test with its markers (slow itself: it imports
every test module).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

TESTS = '''
import os
import signal
import time
from pathlib import Path

import pytest


def test_its_own_interrupt_is_no_ctrl_c():
    with pytest.raises(KeyboardInterrupt):
        raise KeyboardInterrupt  # injected by the test, as the Ctrl-C tests do: no signal


def test_a_real_ctrl_c_swallowed():
    if {swallow!r} == "except":  # code that turns Ctrl-C into something else (Run makes it a result)
        try:
            os.kill(os.getpid(), signal.SIGINT)  # what pressing Ctrl-C does to this process
            time.sleep(10)
        except KeyboardInterrupt:
            pass
    else:  # code with a SIGINT handler of its own (a command run in-process by CliRunner)
        before = signal.signal(signal.SIGINT, lambda number, frame: None)
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.1)
        finally:
            signal.signal(signal.SIGINT, before)


def test_after():
    Path({marker!r}).touch()
'''


def run_pytest(folder: Path, swallow: str, plugin: bool) -> tuple[subprocess.CompletedProcess, bool]:
    folder.mkdir()
    marker = folder / "after-ran"
    (folder / "test_generated.py").write_text(TESTS.format(swallow=swallow, marker=str(marker)))
    (folder / "conftest.py").write_text(
        "from tests.interrupts import pytest_runtest_call, pytest_runtest_setup, pytest_runtest_teardown\n"
        if plugin else "")
    done = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", str(folder)],
                          cwd=folder, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    return done, marker.exists()


@pytest.mark.parametrize("swallow", ["except", "handler"])
def test_a_real_ctrl_c_stops_the_suite_where_the_code_under_test_swallows_it(tmp_path: Path, swallow: str) -> None:
    control, after_ran = run_pytest(tmp_path / "without", swallow, plugin=False)
    assert control.returncode == 0 and after_ran, control.stdout  # the trap is real: the run went on
    done, after_ran = run_pytest(tmp_path / "with", swallow, plugin=True)
    assert done.returncode == 2, done.stdout + done.stderr  # pytest's exit code for an interrupted session
    assert "KeyboardInterrupt" in done.stdout and "the suite stops" in done.stdout
    assert "test_its_own_interrupt_is_no_ctrl_c PASSED" in done.stdout
    assert not after_ran and "test_after" not in done.stdout


def test_the_suite_uses_the_plugin() -> None:
    from . import conftest, interrupts

    assert conftest.pytest_runtest_call is interrupts.pytest_runtest_call


MARKERS = '''
import json
import sys

import pytest


class Markers:
    def pytest_collection_finish(self, session):
        found = {item.nodeid: sorted({mark.name for mark in item.iter_markers()}) for item in session.items}
        print("MARKERS " + json.dumps(found))


sys.exit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider"], plugins=[Markers()]))
'''


def markers_of_a_collection() -> dict[str, list[str]]:
    """Each test of the suite with its markers, from a collection of its own (--strict-markers: all declared)."""
    done = subprocess.run([sys.executable, "-c", MARKERS], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("MARKERS "))
    return json.loads(line[len("MARKERS "):])


def markers_of_this_session(session: pytest.Session) -> dict[str, list[str]] | None:
    """The same from the session running this test, where it collected the whole suite unfiltered (the README's
    command: about 20 s less than a collection of its own); None otherwise."""
    option = session.config.option
    if option.markexpr or option.keyword or option.deselect:
        return None
    files = {str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py")}
    if {item.nodeid.split("::")[0] for item in session.items} != files:
        return None
    return {item.nodeid: sorted({mark.name for mark in item.iter_markers()}) for item in session.items}


@pytest.mark.slow
def test_the_slow_kinds_are_slow_so_the_quick_run_leaves_them_out(request: pytest.FixtureRequest) -> None:
    markers = markers_of_this_session(request.session) or markers_of_a_collection()
    kinds = ("browser", "ray", "video", "real_features")
    assert [t for t, names in markers.items() if set(kinds) & set(names) and "slow" not in names] == []
    for path, kind in (("tests/web/test_web_browser.py", "browser"), ("tests/batch/test_batch_ray.py", "ray")):
        tests = [names for t, names in markers.items() if t.startswith(path + "::")]
        assert tests and all(kind in names for names in tests), (path, tests)
    for kind in kinds:
        assert any(kind in names for names in markers.values()), kind
    quick = [t for t, names in markers.items() if "slow" not in names]
    assert len(quick) > len(markers) // 2  # the quick run is most of the suite, without its slow parts
