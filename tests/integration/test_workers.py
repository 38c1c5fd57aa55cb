"""kafka_share.workers and ``kafka-share work`` against the session's real broker:
the rate of a pool of sleeping handlers, outcomes, SIGTERM mid-run (a
subprocess), a handler slower than the record lock."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import kafka_share
from kafka_share import AcknowledgeType, ConsumerRecord, ShareConsumer
from kafka_share.workers import AsyncShareWorker, Handled, ShareWorker

pytestmark = [pytest.mark.integration, pytest.mark.slow]

Record = ConsumerRecord[bytes, bytes]
ROOT = Path(kafka_share.__file__).resolve().parents[1]


def config(bootstrap: str, group: str, **extra: object) -> dict[str, object]:
    return {"bootstrap.servers": bootstrap, "group.id": group, **extra}


def drain(bootstrap: str, group: str, topic: str, want: set[str], *, wait_s: float = 30.0,
          linger_s: float = 3.0) -> list[Record]:
    """Poll the group (accepting) until every value of ``want`` came, then ``linger_s``
    more (anything else that comes back is returned too)."""
    consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
        bootstrap_servers=bootstrap, group_id=group
    )
    got: list[Record] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + wait_s
        while not want <= {r.value.decode() for r in got} and time.monotonic() < deadline:
            got.extend(consumer.poll(timeout=0.5))
        until = time.monotonic() + linger_s
        while time.monotonic() < until:
            got.extend(consumer.poll(timeout=0.5))
    finally:
        consumer.close(timeout=5)
    return got


def test_5000_records_at_concurrency_16_reach_80_percent_of_the_ideal_rate(
    kafka_bootstrap: str, topic_factory: Callable[..., str], share_group: str,
    kafka_produce: Callable[..., Any],
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [f"r{i}".encode() for i in range(5000)])
    sleep_s, concurrency = 0.02, 16
    spans: list[tuple[float, float]] = []

    def handle(record: Record) -> None:
        started = time.monotonic()
        time.sleep(sleep_s)
        spans.append((started, time.monotonic()))

    worker: ShareWorker[bytes, bytes] = ShareWorker(
        handle, config(kafka_bootstrap, share_group), topics=[topic], concurrency=concurrency
    )
    summary = worker.run(max_records=5000, handle_signals=False)
    assert (summary.accepted, summary.released, summary.rejected) == (5000, 0, 0)
    # From the first handler's start to the last one's end (joining the group is
    # not the worker's rate).
    elapsed = max(end for _, end in spans) - min(start for start, _ in spans)
    ideal_s = 5000 * sleep_s / concurrency
    ratio = ideal_s / elapsed
    print(f"5000 records, concurrency {concurrency}, {sleep_s * 1000:.0f} ms handler: "
          f"{elapsed:.2f} s, {5000 / elapsed:.0f} records/s, {ratio:.2f} of the ideal")
    assert ratio >= 0.8, f"{ratio:.2f} of the ideal rate ({elapsed:.2f} s for {ideal_s:.2f} s)"
    metrics = worker.metrics()
    assert metrics["records-accepted-total"] == 5000
    assert sleep_s * 1000 <= metrics["handler-time-avg"] < sleep_s * 1000 * 3
    assert drain(kafka_bootstrap, share_group, topic, set(), wait_s=0, linger_s=3) == []


def test_retryable_released_then_accepted_and_poison_rejected(
    kafka_bootstrap: str, topic_factory: Callable[..., str], share_group: str,
    kafka_produce: Callable[..., Any],
) -> None:
    topic = topic_factory(partitions=1)
    values = [f"{kind}-{i}".encode() for i in range(20) for kind in ("ok", "poison", "retry")]
    kafka_produce(topic, values)

    def handle(record: Record) -> int:
        if record.value.startswith(b"poison"):
            raise ValueError(f"cannot parse {record.value!r}")
        if record.value.startswith(b"retry") and record.delivery_count == 1:
            raise TimeoutError("service busy")
        return len(record.value)

    worker: ShareWorker[bytes, bytes] = ShareWorker(
        handle, config(kafka_bootstrap, share_group), topics=[topic], concurrency=4,
        retryable=(TimeoutError,),
    )
    got: list[Handled[bytes, bytes]] = list(worker.handled(idle_timeout_s=3.0))
    by_offset: dict[int, list[tuple[int, AcknowledgeType]]] = {}
    for h in got:
        by_offset.setdefault(h.record.offset, []).append((h.record.delivery_count, h.outcome))
    assert set(by_offset) == set(range(60))
    for offset, outcomes in by_offset.items():
        kind = values[offset].split(b"-")[0]
        expected = {
            b"ok": [(1, AcknowledgeType.ACCEPT)],
            b"poison": [(1, AcknowledgeType.REJECT)],
            b"retry": [(1, AcknowledgeType.RELEASE), (2, AcknowledgeType.ACCEPT)],
        }[kind]
        assert sorted(outcomes) == expected, (offset, outcomes)
    assert drain(kafka_bootstrap, share_group, topic, set(), wait_s=0, linger_s=3) == []


def test_asyncio_worker_handles_every_record_once(
    kafka_bootstrap: str, topic_factory: Callable[..., str], share_group: str,
    kafka_produce: Callable[..., Any],
) -> None:
    topic = topic_factory(partitions=2)
    for p in (0, 1):
        kafka_produce(topic, [f"a{p}-{i}".encode() for i in range(150)], partition=p)
    seen: list[str] = []

    async def handle(record: Record) -> None:
        await asyncio.sleep(0.01)
        seen.append(record.value.decode())

    async def main() -> Any:
        worker: AsyncShareWorker[bytes, bytes] = AsyncShareWorker(
            handle, config(kafka_bootstrap, share_group), topics=[topic], concurrency=8
        )
        return await worker.run(max_records=300, handle_signals=False)

    summary = asyncio.run(main())
    assert summary.accepted == 300
    assert sorted(seen) == sorted(f"a{p}-{i}" for p in (0, 1) for i in range(150))
    assert drain(kafka_bootstrap, share_group, topic, set(), wait_s=0, linger_s=3) == []


HANDLER_APP = '''
import os
import time

OUT = os.environ["WORKER_TEST_OUT"]


def handle(record):
    time.sleep(0.03)
    with open(os.path.join(OUT, "handled.txt"), "a") as f:
        f.write(f"{record.value.decode()} {record.delivery_count}\\n")
'''


def test_sigterm_mid_run_loses_nothing_and_redelivers_nothing_accepted(
    kafka_bootstrap: str, topic_factory: Callable[..., str], share_group: str,
    kafka_produce: Callable[..., Any], tmp_path: Path,
) -> None:
    topic = topic_factory(partitions=1)
    values = [f"s{i}" for i in range(400)]
    kafka_produce(topic, [v.encode() for v in values])
    (tmp_path / "sigterm_app.py").write_text(HANDLER_APP)
    handled_file = tmp_path / "handled.txt"
    env = {**os.environ, "WORKER_TEST_OUT": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from kafka_share.cli import main; main()", "work",
         "sigterm_app:handle", "--app-dir", str(tmp_path), "--group", share_group,
         "--topic", topic, "--concurrency", "4", "--bootstrap-server", kafka_bootstrap],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None and (
            not handled_file.exists() or len(handled_file.read_text().splitlines()) < 60
        ):
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr
    assert "Stopped (SIGTERM)" in stderr, stderr
    lines = [line.split() for line in handled_file.read_text().splitlines()]
    done = [value for value, _ in lines]
    assert len(done) == len(set(done)) and {count for _, count in lines} == {"1"}
    assert f": {len(done)} accepted, 0 released, 0 rejected" in stderr, stderr
    assert 60 <= len(done) < 400
    rest = drain(kafka_bootstrap, share_group, topic, set(values) - set(done))
    back = [r.value.decode() for r in rest]
    # Nothing lost: every record not handled comes back (once); nothing the worker
    # accepted does.
    assert sorted(back) == sorted(set(values) - set(done))
    assert not set(back) & set(done)


def test_a_handler_slower_than_the_lock_keeps_its_records(
    kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group_factory: Callable[..., str], kafka_produce: Callable[..., Any],
) -> None:
    group = share_group_factory({"share.record.lock.duration.ms": "2000"})
    topic = topic_factory(partitions=1)
    values = [f"slow{i}" for i in range(4)]
    kafka_produce(topic, [v.encode() for v in values])
    started: set[str] = set()
    finished: list[tuple[str, int]] = []

    def handle(record: Record) -> None:
        started.add(record.value.decode())
        time.sleep(3.0)  # longer than the 2 s lock
        finished.append((record.value.decode(), record.delivery_count))

    # Once the worker holds records, a second member polls the group: it would be
    # handed any record whose lock ran out.
    stolen: list[tuple[str, bool]] = []

    def thief() -> None:
        deadline = time.monotonic() + 60
        while not started and time.monotonic() < deadline:
            time.sleep(0.05)
        consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
            bootstrap_servers=kafka_bootstrap, group_id=group
        )
        try:
            consumer.subscribe([topic])
            until = time.monotonic() + 8
            while time.monotonic() < until:
                for r in consumer.poll(timeout=0.2):
                    stolen.append((r.value.decode(), r.value.decode() in started))
        finally:
            consumer.close(timeout=5)

    stealer = threading.Thread(target=thief)
    stealer.start()
    try:
        worker: ShareWorker[bytes, bytes] = ShareWorker(
            handle, config(kafka_bootstrap, group, **{"max.poll.records": 2}),
            topics=[topic], concurrency=2,
        )
        summary = worker.run(idle_timeout_s=4.0, handle_signals=False)
    finally:
        stealer.join()
    # The thief may take records the worker had not asked for yet, never one it holds.
    assert not any(was_started for _, was_started in stolen), stolen
    assert {count for _, count in finished} == {1}
    assert sorted([v for v, _ in finished] + [v for v, _ in stolen]) == values
    assert summary.accepted == len(finished) >= 2
    assert worker.metrics()["acquisition-lock-renewals-total"] >= 2



ASYNC_APP = '''
import asyncio


class Busy(Exception):
    pass


async def handle(record):
    await asyncio.sleep(0.005)
    if record.value.startswith(b"retry") and record.delivery_count == 1:
        raise Busy("later")
    if record.value.startswith(b"poison"):
        raise ValueError("bad")
'''


def test_work_command_runs_a_coroutine_function_until_idle(
    kafka_bootstrap: str, topic_factory: Callable[..., str], share_group: str,
    kafka_produce: Callable[..., Any], tmp_path: Path,
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [f"ok-{i}".encode() for i in range(30)] + [b"retry-1", b"poison-1"])
    (tmp_path / "async_app.py").write_text(ASYNC_APP)
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-c", "from kafka_share.cli import main; main()", "work",
         "async_app:handle", "--app-dir", str(tmp_path), "--group", share_group,
         "--topic", topic, "--concurrency", "8", "--retryable", "async_app:Busy",
         "--idle-timeout", "3", "--bootstrap-server", kafka_bootstrap],
        env=env, capture_output=True, text=True, timeout=90, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "AsyncShareWorker async_app:handle" in proc.stderr
    assert "Stopped (idle_timeout_s): 31 accepted, 1 released, 1 rejected" in proc.stderr
