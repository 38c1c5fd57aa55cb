"""A broker started by ``kafka_share.testing`` dies with the process that started it.

Regression for issue 10, defect 9: a CI timeout sends SIGTERM to pytest, which
died without running ``atexit`` or fixture teardown, and the broker JVM (in its
own session, so the signal never reached it) kept running with its temp
directory. SIGKILL left the same orphan.

Each case starts one single-node cluster in a child Python process, kills that
process, and checks that the JVM is gone within a few seconds; for SIGTERM the
temporary work directory must be gone too (for SIGKILL as well: the reaper
removes it, so that is asserted in both cases).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

# The child prints its broker's pid and work directory, then waits to be killed.
_CHILD = """
import json, sys, time
from kafka_share.testing import LocalKafkaCluster
cluster = LocalKafkaCluster()
cluster.start()
print(json.dumps({"pids": list(cluster.pids.values()), "work_dir": str(cluster.work_dir)}),
      flush=True)
time.sleep(600)
"""

_GONE_WITHIN_S = 10.0


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped counts as dead)."""
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
    # The state follows the parenthesised command name.
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_broker_dies_with_the_process_that_started_it(sig: signal.Signals) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD],
        stdout=subprocess.PIPE,
        text=True,
        # Its own process group, as a CI job is: the signal goes to the runner only.
        start_new_session=True,
    )
    pids: list[int] = []
    work_dir: Path | None = None
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line, f"the child exited with {child.wait()} before starting its broker"
        info = json.loads(line)
        pids = [int(p) for p in info["pids"]]
        work_dir = Path(info["work_dir"])
        assert pids and all(_alive(p) for p in pids)
        assert work_dir.is_dir()

        os.kill(child.pid, sig)
        child.wait(timeout=30)

        deadline = time.monotonic() + _GONE_WITHIN_S
        while time.monotonic() < deadline and (
            any(_alive(p) for p in pids) or work_dir.exists()
        ):
            time.sleep(0.1)
        survivors = [p for p in pids if _alive(p)]
        assert not survivors, f"broker JVM(s) {survivors} outlived their parent ({sig.name})"
        assert not work_dir.exists(), f"{work_dir} outlived its parent killed by {sig.name}"
    finally:
        # Never leave an orphan behind, even when the assertions above fail.
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if work_dir is not None:
            shutil.rmtree(work_dir, ignore_errors=True)
