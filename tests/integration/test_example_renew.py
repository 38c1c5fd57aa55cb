"""examples/long_running_renew.py against the session broker, run as a user would.

The group's lock is 3 s and each record takes 8 s of work: without working
renewals the locks would expire mid-work and a second consumer of the group,
polling all along, would be handed the records.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafka_share import ConsumerRecord, ShareConsumer

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "long_running_renew.py"
LOCK_MS = 3000
WORK_S = 8.0
RECORDS = 6  # fewer than the example's WORKERS: one poll acquires them all

_STARTED = re.compile(r"^started partition=(\d+) offset=(\d+) delivery_count=(\d+) lock_ms=(\S+)")
_PROCESSED = re.compile(
    r"^processed partition=(\d+) offset=(\d+) delivery_count=(\d+) renewals=(\d+) result=(\S*)$"
)


class SecondConsumer(threading.Thread):
    """Another member of the group, polling (implicit mode) on its own thread until stopped."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(name="second-consumer", daemon=True)
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.received: list[ConsumerRecord[bytes, bytes]] = []
        self.polls = 0
        self.error: BaseException | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
                bootstrap_servers=self.bootstrap, group_id=self.group
            )
            try:
                consumer.subscribe([self.topic])
                while not self.stop.is_set():
                    self.received.extend(consumer.poll(0.5))
                    self.polls += 1
            finally:
                consumer.close(timeout=5.0)
        except BaseException as exc:  # reported by the test
            self.error = exc


def summary_of(output: str) -> dict[str, str]:
    lines = [line for line in output.splitlines() if line.startswith("summary: ")]
    assert len(lines) == 1, output
    return dict(item.split("=", 1) for item in lines[0].removeprefix("summary: ").split())


def test_renewing_example_keeps_its_records_past_the_lock_duration(
    topic_factory: Callable[..., str], share_group_factory: Callable[..., str],
    kafka_bootstrap: str, kafka_produce: Callable[..., Any],
) -> None:
    topic = topic_factory(partitions=1)
    group = share_group_factory({"share.record.lock.duration.ms": str(LOCK_MS)})
    produced = kafka_produce(topic, [f"job-{i}".encode() for i in range(RECORDS)], partition=0)
    offsets = sorted(r.offset for r in produced)

    lines: list[str] = []
    second = SecondConsumer(kafka_bootstrap, group, topic)
    with subprocess.Popen(
        [sys.executable, str(SCRIPT), "--bootstrap-servers", kafka_bootstrap, "--group", group,
         "--topic", topic, "--work-seconds", str(WORK_S), "--max-records", str(RECORDS),
         "--timeout", "90"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        stdout = proc.stdout
        reader = threading.Thread(target=lambda: lines.extend(stdout), daemon=True)
        reader.start()
        try:
            # Once the example holds every record, the second member joins and polls
            # through the work, well past the 3 s lock.
            deadline = time.monotonic() + 60
            while sum(1 for line in list(lines) if _STARTED.match(line)) < RECORDS:
                assert proc.poll() is None, "the example exited early:\n" + "".join(lines)
                assert time.monotonic() < deadline, "records not started:\n" + "".join(lines)
                time.sleep(0.05)
            started_at = time.monotonic()
            second.start()
            rc = proc.wait(timeout=90)
            work_took = time.monotonic() - started_at
            # After the example has accepted everything there is still nothing to get.
            time.sleep(3.0)
        finally:
            second.stop.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        reader.join(10)
        stderr = proc.stderr.read()
    second.join(15)
    out = "".join(lines)
    assert rc == 0, f"exit status {rc}\n{out}\n{stderr}"
    assert second.error is None, repr(second.error)
    assert second.polls > 10, "the second consumer did not keep polling"
    # The example worked past several lock durations while the second consumer polled.
    assert work_took > 2 * LOCK_MS / 1000
    assert [(r.offset, r.delivery_count) for r in second.received] == [], (
        "the second consumer got records the example was still working on\n" + out + stderr
    )

    started = [m for m in map(_STARTED.match, out.splitlines()) if m]
    assert sorted(int(m[2]) for m in started) == offsets, "a record was started twice"
    assert {m[4] for m in started} == {str(LOCK_MS)}, "acquisition_lock_timeout_ms"
    processed = [m for m in map(_PROCESSED.match, out.splitlines()) if m]
    assert sorted(int(m[2]) for m in processed) == offsets, "not processed exactly once"
    assert all(m[3] == "1" for m in processed), "a lock expired: delivery_count > 1"
    by_offset = {r.offset: r.value.decode().upper() for r in produced}
    assert all(m[5] == by_offset[int(m[2])] for m in processed)
    # 8 s of work, renewed every second (a third of the 3 s lock): several each.
    assert all(int(m[4]) >= 3 for m in processed), out
    summary = summary_of(out)
    assert summary["processed"] == str(RECORDS)
    assert summary["lost"] == "0"
    assert summary["delivery_counts"] == "1"
    assert summary["lock_ms"] == str(LOCK_MS)
    assert int(summary["renewals"]) == sum(int(m[4]) for m in processed)
    assert "failed" not in stderr, stderr
