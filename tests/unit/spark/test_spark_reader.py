"""The stream reader's offset/acknowledgement protocol, with a stand-in consumer.

The reader's real runs (Spark and a broker) are in the integration tests; this
pins down which batches get acknowledged when, without either.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from kafka_share import AcknowledgeType, TopicIdPartition, TopicPartition
from kafka_share._app.columnar import ColumnarRecords, Piece, to_record_batch
from kafka_share.admin import SharePartitionOffsetInfo
from kafka_share.errors import KafkaTimeoutError
from kafka_share.records.columnar import columns_from_rows
from kafka_share.spark._arrow import read_ipc
from kafka_share.spark._drain import DrainGoal
from kafka_share.spark._options import (
    DEFAULT_AVAILABLE_NOW_MAX_POLL_RECORDS,
    SparkOptionError,
    parse_source_options,
)
from kafka_share.spark.source import ArrowPartition, ShareGroupStreamReader, source_schema

OPTIONS = {"kafka.bootstrap.servers": "localhost:9092", "kafka.group.id": "g", "subscribe": "t"}
TIP = TopicIdPartition(uuid.UUID(int=1), "t", 0)
TP = TopicPartition("t", 0)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class StandInProbe:
    """The admin calls of availableNow: fixed end offsets, scripted group offsets."""

    def __init__(
        self, end: int | None,
        answer: Callable[[], dict[TopicPartition, SharePartitionOffsetInfo] | None],
    ) -> None:
        self.end = end
        self.answer = answer
        self.calls = 0

    def goal(self) -> DrainGoal:
        if self.end is None:
            raise KafkaTimeoutError("no answer")
        return DrainGoal({TP: (0, self.end)})

    def group_offsets(
        self, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, SharePartitionOffsetInfo] | None:
        self.calls += 1
        return self.answer()

    def close(self) -> None:
        pass


def spso(
    start: int | None, lag: int | None = None
) -> dict[TopicPartition, SharePartitionOffsetInfo]:
    return {TP: SharePartitionOffsetInfo(start_offset=start, leader_epoch=0, lag=lag)}


class StandInConsumer:
    """Explicit-mode rules of ShareConsumer that the reader relies on."""

    def __init__(self, batches: list[int], clock: FakeClock | None = None) -> None:
        self.clock = clock
        self.batches = list(batches)  # records per poll
        self.next_offset = 0
        self.current: list[int] = []  # offsets of the last poll
        self.acked: dict[int, AcknowledgeType] = {}
        self.pending: dict[int, AcknowledgeType] = {}
        self.commits = 0
        self.closed = False

    def poll_arrow(self, timeout: float) -> Any:
        done = self.pending.keys() | self.acked.keys()
        unacked = [o for o in self.current if o not in done]
        assert not unacked, "explicit mode: poll with unacknowledged records"
        self.acked.update(self.pending)
        self.pending = {}
        n = self.batches.pop(0) if self.batches else 0
        if self.clock is not None and n == 0:
            self.clock.now += timeout  # an empty poll waits its whole timeout
        self.current = list(range(self.next_offset, self.next_offset + n))
        self.next_offset += n
        columns = columns_from_rows([(o, 0, None, b"v", ()) for o in self.current])
        piece = Piece(columns, np.ones(n, dtype=np.int32), 0)
        return to_record_batch(ColumnarRecords({TIP: [piece]}), view_types=False)

    def acknowledge_arrow(self, batch: Any, type: AcknowledgeType) -> None:
        offsets = batch.column("offset").to_pylist()
        assert set(offsets) <= set(self.current), "not records of the current batch"
        self.pending.update(dict.fromkeys(offsets, type))

    def commit_sync(self, timeout: float) -> dict[Any, Any]:
        self.commits += 1
        had = bool(self.pending)
        self.acked.update(self.pending)
        self.pending = {}
        return {TIP: None} if had else {}

    def close(self, timeout: float) -> None:
        self.closed = True


def make_reader(
    consumer: StandInConsumer, probe: StandInProbe | None = None,
    clock: FakeClock | None = None, **options: str,
) -> ShareGroupStreamReader:
    opts = parse_source_options({**OPTIONS, **options})
    reader = ShareGroupStreamReader(opts, source_schema(False))
    state = reader._state()
    state.consumer = consumer  # type: ignore[assignment]
    state.probe = probe  # type: ignore[assignment]
    if clock is not None:
        state.clock = clock
        state.sleep = clock.sleep
    return reader


def rows_of(reader: ShareGroupStreamReader, start: int, end: int) -> list[int]:
    out: list[int] = []
    for part in reader.partitions({"seq": start}, {"seq": end}):
        assert isinstance(part, ArrowPartition)
        for batch in read_ipc(part.payload):
            out.extend(batch.column("offset").to_pylist())
    return out


def test_a_batch_is_accepted_only_when_the_next_latest_offset_starts_after_it() -> None:
    consumer = StandInConsumer([3, 2])
    reader = make_reader(consumer)
    limit = reader.getDefaultReadLimit()
    assert limit == ReadMaxRows(2000)
    assert reader.latestOffset({"seq": 0}, limit) == {"seq": 1}
    assert rows_of(reader, 0, 1) == [0, 1, 2]
    assert rows_of(reader, 0, 1) == [0, 1, 2]  # planning twice gives the same records
    assert consumer.acked == {}  # batch 1 is running: nothing acknowledged
    assert reader.latestOffset({"seq": 1}, limit) == {"seq": 2}
    assert consumer.acked == {0: AcknowledgeType.ACCEPT, 1: AcknowledgeType.ACCEPT,
                              2: AcknowledgeType.ACCEPT}
    # commit(end) is the second path: it acknowledges batch 2, and repeating it is harmless.
    reader.commit({"seq": 2})
    reader.commit({"seq": 2})
    reader.commit({"seq": 1})
    assert sorted(consumer.acked) == [0, 1, 2, 3, 4]
    assert consumer.commits == 2
    # No new records: the offset stays, and nothing is held.
    assert reader.latestOffset({"seq": 2}, limit) == {"seq": 2}
    assert reader.partitions({"seq": 2}, {"seq": 2}) == []


def test_a_batch_not_held_by_this_runner_is_empty() -> None:
    # After a restart Spark re-runs the unfinished batch on a fresh runner.
    reader = make_reader(StandInConsumer([]))
    assert reader.partitions({"seq": 4}, {"seq": 5}) == []


def test_asked_again_before_the_held_batch_ran_offers_it_again() -> None:
    consumer = StandInConsumer([3, 3])
    reader = make_reader(consumer)
    limit = reader.getDefaultReadLimit()
    assert reader.latestOffset({"seq": 0}, limit) == {"seq": 1}
    assert reader.latestOffset({"seq": 0}, limit) == {"seq": 1}  # no second poll
    assert consumer.next_offset == 3


def test_available_now_does_not_end_at_an_early_empty_poll() -> None:
    # The bug: on a loaded machine one poll came back empty while records were
    # still there, and availableNow ended there. Now it ends when the group is
    # done with every record up to the end offsets taken at the start.
    clock = FakeClock()
    consumer = StandInConsumer([2, 0, 3], clock)
    # The broker reports the start offset of its previous state change (0, then
    # 2), never 5: the reader's own confirmed acknowledgements cover the rest.
    answers = iter([None, spso(0), spso(0), spso(2)])
    probe = StandInProbe(5, lambda: next(answers))
    reader = make_reader(consumer, probe, clock)
    reader.prepareForTriggerAvailableNow()
    limit = reader.getDefaultReadLimit()  # Spark asks right after the preparation
    assert limit == ReadMaxRows(DEFAULT_AVAILABLE_NOW_MAX_POLL_RECORDS)
    assert reader.latestOffset({"seq": 0}, limit) == {"seq": 1}
    assert reader.latestOffset({"seq": 1}, limit) == {"seq": 2}  # past the empty poll
    assert rows_of(reader, 1, 2) == [2, 3, 4]
    assert reader.latestOffset({"seq": 2}, limit) == {"seq": 2}  # done: no further poll
    assert consumer.batches == [] and consumer.next_offset == 5
    assert sorted(consumer.acked) == [0, 1, 2, 3, 4]
    assert reader.latestOffset({"seq": 2}, limit) == {"seq": 2}  # and it stays put
    assert probe.calls == 4


@pytest.mark.parametrize(
    "answer",
    [spso(5), spso(3, lag=0)],
    ids=["start offset at the end", "no lag"],
)
def test_available_now_ends_when_the_broker_says_the_group_is_done(
    answer: dict[TopicPartition, SharePartitionOffsetInfo],
) -> None:
    # Other members took the records: nothing for this query, and no waiting.
    consumer = StandInConsumer([])
    reader = make_reader(consumer, StandInProbe(5, lambda: answer), FakeClock())
    reader.prepareForTriggerAvailableNow()
    assert reader.latestOffset({"seq": 0}, ReadMaxRows(2000)) == {"seq": 0}
    assert consumer.next_offset == 0 and consumer.current == []


def test_available_now_of_empty_topics_ends_without_polling() -> None:
    consumer = StandInConsumer([])
    probe = StandInProbe(0, lambda: None)
    reader = make_reader(consumer, probe, FakeClock())
    reader.prepareForTriggerAvailableNow()
    assert reader.latestOffset({"seq": 0}, ReadMaxRows(2000)) == {"seq": 0}
    assert probe.calls == 0


def test_available_now_waits_for_held_records_within_the_idle_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Records 3-4 stay with another member: the query polls on for
    # availableNowIdleTimeoutMs without records, then ends with a warning.
    clock = FakeClock()
    consumer = StandInConsumer([3], clock)
    reader = make_reader(consumer, StandInProbe(5, lambda: spso(0)), clock,
                         availableNowIdleTimeoutMs="5000", pollTimeoutMs="0")
    reader.prepareForTriggerAvailableNow()
    limit = ReadMaxRows(2000)
    assert reader.latestOffset({"seq": 0}, limit) == {"seq": 1}
    started = clock.now
    with caplog.at_level("WARNING", logger="kafka_share.spark"):
        assert reader.latestOffset({"seq": 1}, limit) == {"seq": 1}
    assert 5.0 <= clock.now - started < 5.5
    # pollTimeoutMs=0: the polls return at once, so the reader paces them.
    assert clock.sleeps and min(clock.sleeps) > 0.1
    assert "t-0: from offset 0 to 5" in caplog.text
    assert "availableNowIdleTimeoutMs" in caplog.text
    assert reader.latestOffset({"seq": 1}, limit) == {"seq": 1}


def test_available_now_without_end_offsets_ends_after_the_idle_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    consumer = StandInConsumer([2], clock)
    with caplog.at_level("WARNING", logger="kafka_share.spark"):
        reader = make_reader(consumer, StandInProbe(None, lambda: None), clock,
                             availableNowIdleTimeoutMs="3000")
        reader.prepareForTriggerAvailableNow()
    assert "cannot read the end offsets of t" in caplog.text
    limit = ReadMaxRows(2000)
    assert reader.latestOffset({"seq": 0}, limit) == {"seq": 1}
    started = clock.now
    assert reader.latestOffset({"seq": 1}, limit) == {"seq": 1}
    assert 3.0 <= clock.now - started < 4.5  # polls of 1 s each


def test_available_now_idle_timeout_zero_ends_at_the_first_empty_poll() -> None:
    clock = FakeClock()
    consumer = StandInConsumer([2, 0, 5], clock)
    reader = make_reader(consumer, StandInProbe(7, lambda: spso(0)), clock,
                         availableNowIdleTimeoutMs="0")
    reader.prepareForTriggerAvailableNow()
    assert reader.latestOffset({"seq": 0}, ReadMaxRows(2000)) == {"seq": 1}
    assert reader.latestOffset({"seq": 1}, ReadMaxRows(2000)) == {"seq": 1}
    assert reader.latestOffset({"seq": 1}, ReadMaxRows(2000)) == {"seq": 1}
    assert consumer.next_offset == 2 and sorted(consumer.acked) == [0, 1]


def test_a_failed_acknowledgement_does_not_count_as_done() -> None:
    clock = FakeClock()
    consumer = StandInConsumer([3], clock)
    consumer.commit_sync = lambda timeout: (  # type: ignore[method-assign]
        consumer.acked.update(consumer.pending) or {TIP: KafkaTimeoutError("lock expired")}
    )
    reader = make_reader(consumer, StandInProbe(3, lambda: spso(0)), clock,
                         availableNowIdleTimeoutMs="2000")
    reader.prepareForTriggerAvailableNow()
    assert reader.latestOffset({"seq": 0}, ReadMaxRows(2000)) == {"seq": 1}
    started = clock.now
    assert reader.latestOffset({"seq": 1}, ReadMaxRows(2000)) == {"seq": 1}
    assert clock.now - started >= 2.0  # it waited: the broker may redeliver them


def test_trigger_once_is_refused() -> None:
    # Spark replaces the default ReadMaxRows by ReadAllAvailable only for Trigger.Once.
    reader = make_reader(StandInConsumer([1]))
    with pytest.raises(SparkOptionError, match=r"trigger\(once=True\)"):
        reader.latestOffset({"seq": 0}, ReadAllAvailable())


def test_fewer_rows_than_a_poll_returns_releases_the_rest() -> None:
    consumer = StandInConsumer([5])
    reader = make_reader(consumer)
    assert reader.latestOffset({"seq": 0}, ReadMaxRows(3)) == {"seq": 1}
    assert rows_of(reader, 0, 1) == [0, 1, 2]
    assert consumer.pending == {3: AcknowledgeType.RELEASE, 4: AcknowledgeType.RELEASE}


def test_partitions_follow_num_partitions_and_pickling_drops_the_consumer() -> None:
    import pickle

    consumer = StandInConsumer([10])
    reader = make_reader(consumer, numPartitions="4")
    reader.latestOffset({"seq": 0}, reader.getDefaultReadLimit())
    parts = reader.partitions({"seq": 0}, {"seq": 1})
    assert len(parts) == 4
    copy = pickle.loads(pickle.dumps(reader))
    assert copy._driver is None
    assert [o for p in parts for b in copy.read(p) for o in b.column("offset").to_pylist()] == (
        list(range(10))
    )


def test_stop_closes_the_consumer_and_forgets_held_records() -> None:
    consumer = StandInConsumer([4])
    reader = make_reader(consumer)
    reader.latestOffset({"seq": 0}, reader.getDefaultReadLimit())
    reader.stop()
    reader.stop()
    assert consumer.closed and consumer.acked == {}
    with pytest.raises(RuntimeError, match="stopped"):
        reader.latestOffset({"seq": 1}, reader.getDefaultReadLimit())


_SIGTERM_SCRIPT = """
import os, signal, sys
from kafka_share.errors import WakeupError
from kafka_share.spark._options import parse_source_options
from kafka_share.spark.source import _Driver

class Consumer:
    woken = False
    def poll_arrow(self, timeout):
        if sys.argv[1] == "during-poll":
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs inside this call
            if self.woken:
                raise WakeupError("woken")
        return None
    def wakeup(self):
        self.woken = True
    def close(self, timeout):
        print("closed", flush=True)

driver = _Driver(parse_source_options({OPTIONS!r}))
driver.consumer = Consumer()
driver._install_sigterm_handler()
if sys.argv[1] == "idle":
    os.kill(os.getpid(), signal.SIGTERM)  # like query.stop() while Spark is elsewhere
else:
    driver.poll(10)
print("survived", flush=True)
"""


@pytest.mark.parametrize("when", ["idle", "during-poll"])
def test_sigterm_closes_the_consumer_then_terminates(when: str) -> None:
    # query.stop() terminates the source runner with SIGTERM: the consumer must be
    # closed first (so the broker releases held records), then the process ends
    # as SIGTERM would have ended it.
    import signal
    import subprocess
    import sys

    script = _SIGTERM_SCRIPT.replace("{OPTIONS!r}", repr(OPTIONS))
    proc = subprocess.run(
        [sys.executable, "-c", script, when], capture_output=True, text=True, timeout=60,
        check=False,
    )
    assert proc.stdout.split() == ["closed"], proc.stderr
    assert proc.returncode == -signal.SIGTERM


class StandInAdmin:
    """The admin calls the availableNow probe makes."""

    def __init__(self, isolation: str | None, configs_fail: bool = False) -> None:
        self.isolation = isolation
        self.configs_fail = configs_fail
        self.levels: list[str] = []

    def describe_topics(self, topics: Any, timeout: float) -> dict[str, Any]:
        from kafka_share.admin import PartitionInfo, TopicDescription

        parts = tuple(PartitionInfo(p, 1, (1,), (1,)) for p in (0, 1))
        return {t: TopicDescription(t, uuid.UUID(int=2), False, parts) for t in topics}

    def list_offsets(self, specs: Any, *, isolation_level: str = "read_uncommitted",
                     timeout: float) -> dict[Any, Any]:
        from kafka_share.admin import ListOffsetsResultInfo

        self.levels.append(isolation_level)
        return {tp: ListOffsetsResultInfo(0 if spec.timestamp == -2 else 10 + tp.partition, -1,
                                          0) for tp, spec in specs.items()}

    def describe_group_configs(self, group: str, timeout: float) -> dict[str, Any]:
        from kafka_share.admin import ConfigEntry

        if self.configs_fail:
            raise KafkaTimeoutError("not allowed")
        if self.isolation is None:
            return {}
        return {"share.isolation.level": ConfigEntry("share.isolation.level", self.isolation)}


@pytest.mark.parametrize(
    ("isolation", "fail", "level"),
    [
        ("read_committed", False, "read_committed"),
        ("read_uncommitted", False, "read_uncommitted"),
        (None, False, "read_uncommitted"),
        ("read_committed", True, "read_uncommitted"),
    ],
)
def test_the_end_offsets_follow_the_groups_isolation_level(
    isolation: str | None, fail: bool, level: str
) -> None:
    from kafka_share.spark.source import _GroupProbe

    probe = _GroupProbe(parse_source_options({**OPTIONS, "subscribe": "t,u"}))
    admin = StandInAdmin(isolation, fail)
    probe._admin = admin  # type: ignore[assignment]
    goal = probe.goal()
    assert admin.levels == [level, "read_uncommitted"]  # latest, then earliest
    assert goal.bounds == {
        TopicPartition(t, p): (0, 10 + p) for t in ("t", "u") for p in (0, 1)
    }
