"""The suite itself: a user's Ctrl-C stops it, and the slow parts carry markers for a quick run.

Ctrl-C (``tests/interrupts.py``): a bare pytest runs a generated file in a subprocess: a test that
injects its own KeyboardInterrupt passes; then a real Ctrl-C (SIGINT to the process) lands in code that
swallows it, as the code under test does (``except KeyboardInterrupt``, or a SIGINT handler of its
own); a last test must not run. Without the plugin (the control) the run goes on; with it the run
stops there, exit code 2.

Markers (``setup.cfg``): one collection of the suite, each test with its markers (slow itself: it imports
every test module).

Tiers (``tests/tiers.py``): runs on random weights share the session's network, and a change to it is found; a bare
pytest with the tiers plugin fails an unmarked test that starts a Python child process, and refuses a collection
where an unmarked test uses a real network's fixture.
"""

from __future__ import annotations

import json
import signal
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
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                          # an xdist worker ignores SIGINT (its controller takes Ctrl-C), and a child inherits that
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    return done, marker.exists()


@pytest.mark.parametrize("swallow", ["except", "handler"])
@pytest.mark.slow
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


def test_a_run_on_random_weights_gets_the_sessions_shared_network(cnn) -> None:
    from style_transfer.networks.vgg import load_network, load_vgg19_features
    from style_transfer.run import run

    assert load_network("vgg19", "random").features is cnn
    assert run.load_network("vgg19", "random").features is cnn  # in the modules that imported it too
    assert load_network("vgg19", "random", preprocess="caffe").features is cnn
    fresh = load_vgg19_features("random", seed=3)  # another seed loads afresh (the tests of the loading)
    assert fresh is not cnn


def test_a_change_to_a_shared_network_is_found_and_the_network_dropped() -> None:
    import torch

    from style_transfer.networks.vgg import Network

    from . import tiers

    for change in (lambda m: m[0].weight.add_(1), lambda m: m.train(), lambda m: m[0].weight.requires_grad_(True),
                   lambda m: m[1].register_forward_hook(lambda *a: None)):
        tiny = torch.nn.Sequential(torch.nn.Conv2d(1, 1, 1), torch.nn.ReLU()).eval().requires_grad_(False)
        tiers._SHARED["tiny"], tiers._FINGERPRINTS["tiny"] = Network(tiny), tiers._fingerprint(tiny)
        try:
            assert tiers.changed_networks() == []
            with torch.no_grad():
                change(tiny)
            assert tiers.changed_networks() == ["tiny"] and "tiny" not in tiers._SHARED
        finally:
            tiers._SHARED.pop("tiny", None)


UNMARKED = '''
import subprocess
import sys

import pytest


@pytest.fixture
def real():
    return None


def test_a_child_unmarked():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


@pytest.mark.slow
def test_a_child_marked():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_another_program():
    subprocess.run(["true"], check=True)


{real_test}
'''


@pytest.mark.slow
@pytest.mark.parametrize("real_marked", [True, False])
def test_the_tiers_refuse_a_child_process_or_a_real_network_outside_the_slow_tier(tmp_path: Path,
                                                                                   real_marked: bool) -> None:
    real_test = "@pytest.mark.slow\ndef test_real(real):\n    pass" if real_marked else "def test_real(real):\n    pass"
    (tmp_path / "test_generated.py").write_text(UNMARKED.format(real_test=real_test))
    (tmp_path / "conftest.py").write_text("from tests.tiers import configure as pytest_configure\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    if not real_marked:
        assert done.returncode == 4, done.stdout + done.stderr  # a usage error: nothing ran
        assert "use a real pretrained network, so must be marked slow" in done.stdout + done.stderr
        assert "test_generated.py::test_real" in done.stdout + done.stderr
        return
    assert done.returncode == 1, done.stdout + done.stderr
    assert "test_a_child_marked PASSED" in done.stdout and "test_another_program PASSED" in done.stdout
    assert "test_real PASSED" in done.stdout
    assert "ERROR at teardown of test_a_child_unmarked" in done.stdout
    assert "started 1 Python child process(es)" in done.stdout
