"""Read slots against the real broker, outside Spark: two attempts of one slot racing
(what a speculative copy does), each with its own consumer, in processes of their own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafka_share import ShareConsumer
from kafka_share.spark._staging import StagingStore

pytest_plugins = ["hdfs_fixtures"]

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WORKER = Path(__file__).with_name("slot_race_worker.py")


def _rest_of_group(bootstrap: str, group: str, topic: str, expected: int,
                   timeout_s: float = 60.0) -> set[tuple[int, int]]:
    """(partition, offset) of what a new member of ``group`` gets: the records
    still the group's, polled until ``expected`` of them came (``timeout_s`` at most)."""
    consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
        bootstrap_servers=bootstrap, group_id=group)
    try:
        consumer.subscribe([topic])
        rest: set[tuple[int, int]] = set()
        deadline = time.monotonic() + timeout_s
        while len(rest) < expected and time.monotonic() < deadline:
            rest.update((r.partition, r.offset) for r in consumer.poll(timeout=0.5))
    finally:
        consumer.close(timeout=5)
    return rest


@pytest.mark.parametrize("storage", ["posix", "webhdfs"])
def test_racing_attempts_of_a_slot_yield_the_same_rows_and_lose_nothing(
    kafka_bootstrap: str, topic_factory: Callable[..., str], share_group: str,
    kafka_produce: Callable[..., Any], tmp_path: Path, storage: str,
    request: pytest.FixtureRequest,
) -> None:
    # webhdfs: the two processes race on a real HDFS's atomic rename.
    location = (str(tmp_path / "staging" / "run") if storage == "posix"
                else request.getfixturevalue("hdfs_location"))
    topic = topic_factory(partitions=2)
    for p in (0, 1):
        for b in range(20):  # small producer batches: acquisitions interleave finely
            kafka_produce(topic, [f"r{p}-{b}-{i}".encode() for i in range(500)], partition=p)
    options = {
        "kafka.bootstrap.servers": kafka_bootstrap, "kafka.group.id": share_group,
        "subscribe": topic, "stagingLocation": location,
        "kafka.max.poll.records": "200", "pollTimeoutMs": "2000",
    }
    budget = 12_000
    start_at = time.time() + 4.0  # both processes have started by then
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH"))
        if p)}
    procs = [
        subprocess.Popen([sys.executable, str(WORKER), json.dumps(options), str(start_at),
                          str(budget)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
        for _ in range(2)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
        assert proc.returncode == 0 and lines, err[-4000:]
        results.append(json.loads(lines[-1][len("RESULT "):]))
    a, b = (sorted(map(tuple, r["rows"])) for r in results)
    # Both attempts yield exactly the slot's rows, each record once.
    assert a == b
    assert max(Counter((p, o) for p, o, _ in a).values()) == 1
    # batch_optimized hands out whole producer batches (500 records here), so
    # the last chunk, or records held from a lost race, can pass the budget.
    assert budget <= len(a) < budget + 2 * 500
    # Both attempts really raced: each staged chunks of its own, and together
    # exactly the slot's records; the rest each replayed.
    stats = [r["stats"] for r in results]
    assert all(s["acquired"] > 0 for s in stats), stats
    assert sum(s["acquired"] for s in stats) == len(a)
    assert all(s["acquired"] + s["replayed"] == len(a) for s in stats), stats
    assert len(list(StagingStore(location).slot_chunks(1, 0))) == (
        results[0]["chunks"])
    # Nothing lost: what the slot did not take, released races included, is
    # still in the group; nothing the slot took is.
    rest = _rest_of_group(kafka_bootstrap, share_group, topic, 20_000 - len(a))
    taken = {(p, o) for p, o, _ in a}
    assert not rest & taken
    assert len(rest) + len(taken) == 20_000


def test_a_slot_reads_up_to_the_planned_end_offsets_then_stops(
    kafka_bootstrap: str, topic_factory: Callable[..., str], share_group: str,
    kafka_produce: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The driver planned the batch when each partition ended at offset 300;
    # 2,000 records per partition came after. With a budget far above both,
    # the slot takes every planned record and stops once its consumer has
    # caught up with the plan on both partitions: it does not read the log
    # out (2,300 records a partition) or wait for an empty poll.
    from kafka_share.spark import _slots
    from kafka_share.spark._options import parse_source_options

    topic = topic_factory(partitions=2)
    for p in (0, 1):
        for b in range(30):
            kafka_produce(topic, [f"old{p}-{b}-{i}".encode() for i in range(10)], partition=p)
    ends = {(topic, 0): 300, (topic, 1): 300}
    for p in (0, 1):
        for b in range(200):
            kafka_produce(topic, [f"new{p}-{b}-{i}".encode() for i in range(10)], partition=p)
    options = parse_source_options({
        "kafka.bootstrap.servers": kafka_bootstrap, "kafka.group.id": share_group,
        "subscribe": topic, "stagingLocation": str(tmp_path / "staging"),
        "kafka.max.poll.records": "50", "pollTimeoutMs": "2000",
    })
    monkeypatch.setenv("SPARK_REUSE_WORKER", "1")
    try:
        rows: list[tuple[int, int]] = []
        started = time.monotonic()
        for batch in _slots.read_slot(options, 1, 0, 1_000_000, ends):
            rows.extend(zip(batch.column("partition").to_pylist(),
                            batch.column("offset").to_pylist(), strict=True))
        took_s = time.monotonic() - started
    finally:
        _slots._close_all()
    assert len(set(rows)) == len(rows)
    taken = set(rows)
    assert {(p, o) for p in (0, 1) for o in range(300)} <= taken
    # Past the ends: what polls brought while the other partition caught up.
    assert len(taken) < 600 + 400, len(taken)
    assert took_s < 30
    # The rest is still the group's, none of it acknowledged.
    rest = _rest_of_group(kafka_bootstrap, share_group, topic, 4600 - len(taken))
    assert not rest & taken
    assert len(rest) + len(taken) == 4600


def test_records_a_dead_attempt_staged_but_never_accepted_are_read_once(
    kafka_bootstrap: str, topic_factory: Callable[..., str], share_group: str,
    kafka_produce: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An attempt stages what it polled and dies before its ACCEPT reaches the
    # broker (here: its consumer closes without acknowledging, so the broker
    # releases the records, as when an executor is killed). The retry replays
    # the staged chunk, and the broker hands the same records out again: the
    # slot must not read them twice.
    from kafka_share.spark import _slots
    from kafka_share.spark._options import parse_source_options
    from kafka_share.spark._staging import Chunk, spans_of

    topic = topic_factory(partitions=1)
    for b in range(30):
        kafka_produce(topic, [f"r{b}-{i}".encode() for i in range(10)], partition=0)
    options = parse_source_options({
        "kafka.bootstrap.servers": kafka_bootstrap, "kafka.group.id": share_group,
        "subscribe": topic, "stagingLocation": str(tmp_path / "staging"),
        "kafka.max.poll.records": "50", "pollTimeoutMs": "2000",
    })
    dead: ShareConsumer[bytes, bytes] = ShareConsumer(dict(options.consumer_config))
    try:
        dead.subscribe([topic])
        deadline = time.monotonic() + 30
        polled = dead.poll_arrow(timeout=1.0)
        while not polled.num_rows and time.monotonic() < deadline:
            polled = dead.poll_arrow(timeout=1.0)
        assert polled.num_rows
        spans = spans_of(polled.column("topic"), polled.column("partition"),
                         polled.column("offset"), polled.column("delivery_count"))
        assert StagingStore(options.staging_location).put_if_absent(1, 0, 0, Chunk(spans))
    finally:
        dead.close(timeout=5)  # not acknowledged: released
    staged = polled.num_rows
    monkeypatch.setenv("SPARK_REUSE_WORKER", "1")
    try:
        rows: list[tuple[int, int]] = []
        for batch in _slots.read_slot(options, 1, 0, 300, None):
            rows.extend(zip(batch.column("offset").to_pylist(),
                            batch.column("deliveryCount").to_pylist(), strict=True))
    finally:
        _slots._close_all()
    offsets = [o for o, _ in rows]
    assert sorted(offsets) == list(range(300)), Counter(offsets).most_common(3)
    # The staged records come back as the dead attempt staged them (count 1).
    assert {c for _, c in rows} == {1}
    chunks = list(StagingStore(options.staging_location).slot_chunks(1, 0))
    assert chunks[-1].stats["already_staged"] == staged
    assert chunks[-1].stats["replayed"] == staged
    assert _rest_of_group(kafka_bootstrap, share_group, topic, 1, timeout_s=4.0) == set()
