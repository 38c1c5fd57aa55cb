"""The stream reader's offset/acknowledgement protocol, with a stand-in consumer.

The reader's real runs (Spark and a broker) are in the integration tests; this
pins down which batches get acknowledged when, without either.
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from kafka_share import AcknowledgeType, TopicIdPartition
from kafka_share._app.columnar import ColumnarRecords, Piece, to_record_batch
from kafka_share.records.columnar import columns_from_rows
from kafka_share.spark._arrow import read_ipc
from kafka_share.spark._options import SparkOptionError, parse_source_options
from kafka_share.spark.source import ArrowPartition, ShareGroupStreamReader, source_schema

OPTIONS = {"kafka.bootstrap.servers": "localhost:9092", "kafka.group.id": "g", "subscribe": "t"}


class StandInConsumer:
    """Explicit-mode rules of ShareConsumer that the reader relies on."""

    def __init__(self, batches: list[int]) -> None:
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
        self.current = list(range(self.next_offset, self.next_offset + n))
        self.next_offset += n
        columns = columns_from_rows([(o, 0, None, b"v", ()) for o in self.current])
        piece = Piece(columns, np.ones(n, dtype=np.int32), 0)
        tip = TopicIdPartition(uuid.UUID(int=1), "t", 0)
        return to_record_batch(ColumnarRecords({tip: [piece]}), view_types=False)

    def acknowledge_arrow(self, batch: Any, type: AcknowledgeType) -> None:
        offsets = batch.column("offset").to_pylist()
        assert set(offsets) <= set(self.current), "not records of the current batch"
        self.pending.update(dict.fromkeys(offsets, type))

    def commit_sync(self, timeout: float) -> dict[Any, Any]:
        self.commits += 1
        self.acked.update(self.pending)
        self.pending = {}
        return {}

    def close(self, timeout: float) -> None:
        self.closed = True


def make_reader(consumer: StandInConsumer, **options: str) -> ShareGroupStreamReader:
    opts = parse_source_options({**OPTIONS, **options})
    reader = ShareGroupStreamReader(opts, source_schema(False))
    reader._state().consumer = consumer  # type: ignore[assignment]
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


def test_available_now_drains_then_stays_put() -> None:
    consumer = StandInConsumer([2, 0, 5])
    reader = make_reader(consumer)
    reader.prepareForTriggerAvailableNow()
    assert reader.latestOffset({"seq": 0}, ReadMaxRows(2000)) == {"seq": 1}
    assert reader.latestOffset({"seq": 1}, ReadMaxRows(2000)) == {"seq": 1}  # empty poll
    assert reader.latestOffset({"seq": 1}, ReadMaxRows(2000)) == {"seq": 1}  # drained
    assert consumer.next_offset == 2 and sorted(consumer.acked) == [0, 1]


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
