"""The mechanisms that tie broker processes to the test process, without a broker.

A ``sleep`` stands in for the JVM; each case runs in a child Python process
that is then killed, like a test runner hit by a CI timeout.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafka_share.testing import LocalKafkaCluster
from kafka_share.testing.errors import HarnessError

_GONE_WITHIN_S = 5.0


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def _run_child(code: str) -> tuple[subprocess.Popen[str], dict[str, object]]:
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    child.stdout.close()
    assert line, f"the child exited with {child.wait()} before reporting"
    return child, json.loads(line)


def _wait_gone(pid: int) -> bool:
    deadline = time.monotonic() + _GONE_WITHIN_S
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _kill_child(child: subprocess.Popen[str], sig: signal.Signals) -> None:
    os.kill(child.pid, sig)
    child.wait(timeout=10)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_pdeathsig_wrapper_kills_the_program_when_its_parent_is_killed() -> None:
    # No reaper involved: plain Popen of the wrapped argv.
    child, info = _run_child(
        "import json, subprocess, time\n"
        "from kafka_share.testing._lifeline import pdeathsig_argv\n"
        "p = subprocess.Popen(pdeathsig_argv(['sleep', '60']), start_new_session=True)\n"
        "time.sleep(0.5)\n"  # past the exec: the pid is sleep's own
        "print(json.dumps({'pid': p.pid}), flush=True)\n"
        "time.sleep(60)\n"
    )
    pid = int(info["pid"])  # type: ignore[call-overload]
    try:
        assert _alive(pid)
        assert b"sleep" in Path(f"/proc/{pid}/cmdline").read_bytes()
        _kill_child(child, signal.SIGKILL)
        assert _wait_gone(pid), "the wrapped program outlived its parent"
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_launch_from_a_short_lived_thread_survives_the_thread_not_the_process() -> None:
    # PDEATHSIG fires when the forking *thread* exits: launch() forks from a
    # long-lived launcher thread, so a worker thread that ends changes nothing.
    child, info = _run_child(
        "import json, threading, time\n"
        "from kafka_share.testing import _lifeline\n"
        "box = []\n"
        "def work():\n"
        "    box.append(_lifeline.launch(['sleep', '60'], start_new_session=True))\n"
        # Still alive once the child has run prctl: then the thread exits.
        "    time.sleep(1.0)\n"
        "t = threading.Thread(target=work)\n"
        "t.start(); t.join(); time.sleep(1.0)\n"
        "print(json.dumps({'pid': box[0].pid, 'alive': box[0].poll() is None}), flush=True)\n"
        "time.sleep(60)\n"
    )
    pid = int(info["pid"])  # type: ignore[call-overload]
    try:
        assert info["alive"], "the program died with the thread that asked for it"
        assert _alive(pid)
        _kill_child(child, signal.SIGTERM)
        assert _wait_gone(pid), "the launched program outlived its parent"
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_reaper_kills_registered_pids_and_removes_dirs_after_sigkill(tmp_path: Path) -> None:
    # No PDEATHSIG involved: the program is started with plain Popen and only
    # registered with the reaper (the macOS path).
    doomed = tmp_path / "work"
    kept = tmp_path / "kept"
    child, info = _run_child(
        "import json, subprocess, sys, time\n"
        "from kafka_share.testing import _lifeline\n"
        f"doomed, kept = {str(doomed)!r}, {str(kept)!r}\n"
        "import os; os.makedirs(doomed); os.makedirs(kept)\n"
        "p = subprocess.Popen(['sleep', '60'], start_new_session=True)\n"
        "_lifeline.track_pid(p.pid)\n"
        "_lifeline.track_dir(doomed)\n"
        "_lifeline.track_dir(kept); _lifeline.forget_dir(kept)\n"
        "print(json.dumps({'pid': p.pid}), flush=True)\n"
        "time.sleep(60)\n"
    )
    pid = int(info["pid"])  # type: ignore[call-overload]
    try:
        assert _alive(pid) and doomed.is_dir()
        _kill_child(child, signal.SIGKILL)
        assert _wait_gone(pid), "the reaper did not kill the registered pid"
        deadline = time.monotonic() + _GONE_WITHIN_S
        while doomed.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not doomed.exists(), "the reaper did not remove the registered directory"
        assert kept.is_dir(), "the reaper removed a directory that was forgotten"
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_cluster_tied_to_its_parent_cannot_be_detached() -> None:
    with pytest.raises(HarnessError, match="die_with_parent=False"):
        LocalKafkaCluster().detach()
