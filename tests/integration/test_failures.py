"""Failure scenarios against real brokers: a consumer process killed with SIGKILL.

Scenarios that kill or restart brokers live in ``test_failures_*.py`` with their
own clusters, so the session's shared broker is never disturbed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from share_helpers import poll_until

pytestmark = pytest.mark.integration

WORKER = Path(__file__).with_name("failure_worker.py")
LOCK_MS = 2500


@pytest.fixture
def worker_processes() -> Iterator[list[subprocess.Popen[str]]]:
    """Subprocesses started by a test; killed at teardown whatever happened."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def _hold_in_worker(
    procs: list[subprocess.Popen[str]], bootstrap: str, group: str, topic: str, count: int
) -> tuple[subprocess.Popen[str], set[int], float]:
    """Start the worker; return it, the offsets it holds and when it reported them."""
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), bootstrap, group, topic, str(count), "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    procs.append(proc)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the worker prints once it holds its records
    held_at = time.monotonic()
    assert line, f"the worker exited (code {proc.poll()}) without reporting its records"
    report = json.loads(line)
    held = set(report["offsets"])
    assert held, "the worker got no records"
    assert set(report["delivery_counts"]) == {1}
    return proc, held, held_at


def _survivor_gets_everything(
    consumer_factory: Any, group: str, topic: str, held: set[int], count: int
) -> float:
    """A fresh consumer receives all ``count`` records; the held ones a second time.

    Returns when the last record arrived.
    """
    survivor = consumer_factory(group)
    survivor.subscribe([topic])
    got = poll_until(survivor, lambda s: len({r.offset for r in s}) >= count, timeout_s=30)
    arrived_at = time.monotonic()
    by_offset = {r.offset: r for r in got}
    assert sorted(by_offset) == list(range(count)), sorted(by_offset)
    assert len(got) == count, "a record was delivered twice to the survivor"
    for offset, record in by_offset.items():
        # The dead consumer's records went through one more delivery attempt.
        expected = 2 if offset in held else 1
        assert record.delivery_count == expected, (offset, record.delivery_count, held)
    results = survivor.commit_sync(timeout=10.0)
    assert results and all(err is None for err in results.values()), results
    return arrived_at


def test_sigkilled_consumer_records_are_redelivered_with_a_higher_delivery_count(
    kafka_bootstrap: str,
    topic_factory: Any,
    share_group_factory: Any,
    kafka_produce: Any,
    consumer_factory: Any,
    worker_processes: list[subprocess.Popen[str]],
) -> None:
    topic = topic_factory(partitions=1)
    group = share_group_factory({"share.record.lock.duration.ms": str(LOCK_MS)})
    kafka_produce(topic, [f"r{i}".encode() for i in range(10)], partition=0)
    proc, held, _ = _hold_in_worker(worker_processes, kafka_bootstrap, group, topic, 10)

    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(10) == -signal.SIGKILL
    # The broker releases them when the dead process's connection closes (the
    # share session is bound to it), at the latest when the lock expires.
    _survivor_gets_everything(consumer_factory, group, topic, held, 10)


def test_frozen_consumer_records_come_back_only_after_the_lock_expires(
    kafka_bootstrap: str,
    topic_factory: Any,
    share_group_factory: Any,
    kafka_produce: Any,
    consumer_factory: Any,
    worker_processes: list[subprocess.Popen[str]],
) -> None:
    """SIGSTOP keeps the connection open, so only the acquisition lock frees the records."""
    topic = topic_factory(partitions=1)
    group = share_group_factory({"share.record.lock.duration.ms": str(LOCK_MS)})
    kafka_produce(topic, [f"r{i}".encode() for i in range(10)], partition=0)
    proc, held, held_at = _hold_in_worker(worker_processes, kafka_bootstrap, group, topic, 10)

    os.kill(proc.pid, signal.SIGSTOP)
    try:
        arrived_at = _survivor_gets_everything(consumer_factory, group, topic, held, 10)
        # Nobody acknowledged or released them: the lock (taken just before the
        # worker reported) had to expire first.
        assert arrived_at - held_at >= LOCK_MS / 1000 - 0.3, arrived_at - held_at
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
