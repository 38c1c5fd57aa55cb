"""The driver side of the stream reader: planning, offsets, cleanup and progress,
with a stand-in for the broker's answers (no Spark, no broker)."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from kafka_share import TopicPartition
from kafka_share.admin import SharePartitionOffsetInfo
from kafka_share.errors import KafkaTimeoutError
from kafka_share.spark._drain import DrainGoal
from kafka_share.spark._duplicates import RETAINED_BATCHES
from kafka_share.spark._options import SparkOptionError, parse_source_options
from kafka_share.spark._staging import Chunk, StagingStore
from kafka_share.spark.source import (
    GroupView,
    ShareGroupStreamReader,
    SlotPartition,
    backlog_of,
    source_schema,
)

TP = TopicPartition("t", 0)


class StandInProbe:
    def __init__(self, backlog: int = 0, end: int | None = 100) -> None:
        self.backlog_now = backlog
        self.end = end
        self.offsets: dict[TopicPartition, SharePartitionOffsetInfo] | None = None
        self.looks = 0

    def partitions(self) -> list[TopicPartition]:
        return [TopicPartition("t", p) for p in range(4)]

    def goal(self) -> DrainGoal:
        if self.end is None:
            raise KafkaTimeoutError("no answer")
        return DrainGoal({TP: (0, self.end)})

    def look(self) -> GroupView:
        self.looks += 1
        return GroupView({TP: (0, self.end or 0)}, self.offsets, self.backlog_now)

    def close(self) -> None:
        pass


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def make(tmp_path: Path, probe: StandInProbe, **options: str) -> tuple[ShareGroupStreamReader,
                                                                      Clock]:
    opts = parse_source_options({
        "kafka.bootstrap.servers": "localhost:9092", "kafka.group.id": "g", "subscribe": "t",
        "stagingLocation": str(tmp_path), **options,
    })
    reader = ShareGroupStreamReader(opts, source_schema(False))
    state = reader._state()
    state.probe = probe  # type: ignore[assignment]
    clock = Clock()
    state.clock = clock
    state.sleep = clock.sleep
    return reader, clock


def stage_slot(tmp_path: Path, run: str, seq: int, slot: int, offsets: range,
               **stats: int) -> None:
    store = StagingStore(f"{tmp_path}/{run}")
    store.put_if_absent(seq, slot, 0, Chunk([("t", 0, offsets.start, offsets.stop - 1, 1)]))
    store.put_if_absent(seq, slot, 1, Chunk([], end=True,
                                             stats={"acquired": len(offsets), **stats}))


def test_a_new_query_gets_a_run_of_its_own(tmp_path: Path) -> None:
    reader, _ = make(tmp_path, StandInProbe())
    first, second = reader.initialOffset(), reader.initialOffset()
    assert first["seq"] == 0 and first["run"] != second["run"]
    # Spark calls initialOffset twice: no folder for a run that stages nothing.
    assert list(tmp_path.iterdir()) == []


def test_a_bad_staging_location_fails_at_the_start(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    reader, _ = make(tmp_path, StandInProbe(), stagingLocation=str(tmp_path / "file" / "x"))
    with pytest.raises(Exception, match=r"stagingLocation .* is not a writable directory"):
        reader.initialOffset()


def test_an_idle_group_plans_no_batch(tmp_path: Path) -> None:
    reader, _ = make(tmp_path, StandInProbe(backlog=0))
    start = reader.initialOffset()
    assert reader.latestOffset(start, ReadAllAvailable()) == start


def test_a_backlog_is_planned_over_slots_and_capped_by_the_read_limit(tmp_path: Path) -> None:
    reader, _ = make(tmp_path, StandInProbe(backlog=10_000))
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    # Slots default to the topics' partition count (4 here).
    # Without a read limit, each slot may take the whole backlog and stops at
    # the end offsets of the partitions with a backlog when planned.
    assert end == {"run": start["run"], "seq": 1, "slots": 4, "budget": 10_000,
                   "capped": False, "ends": {"t": {"0": 100}}}
    parts = reader.partitions(start, end)
    assert all(isinstance(p, SlotPartition) for p in parts)
    assert [(p.seq, p.slot, p.budget) for p in parts] == [(1, i, 10_000) for i in range(4)]
    assert all(p.ends == {("t", 0): 100} for p in parts)
    assert [(p.seq, p.slot) for p in reader.partitions(start, end)] == [(1, i) for i in range(4)]
    assert reader.partitions(end, end) == []
    # A read limit is a total: the slots split it.
    reader2, _ = make(tmp_path, StandInProbe(backlog=10_000), numPartitions="2")
    s2 = reader2.initialOffset()
    capped = reader2.latestOffset(s2, ReadMaxRows(3000))
    assert (capped["budget"], capped["slots"], capped["capped"]) == (3000, 2, True)
    assert [p.budget for p in reader2.partitions(s2, capped)] == [1500, 1500]


def test_a_batch_planned_by_a_former_version_splits_its_budget(tmp_path: Path) -> None:
    # Checkpoints written before the plan kept end offsets: the batch re-runs
    # as it was planned then.
    reader, _ = make(tmp_path, StandInProbe())
    start = {"run": "r", "seq": 4}
    parts = reader.partitions(start, {"run": "r", "seq": 5, "slots": 2, "budget": 10})
    assert [(p.budget, p.ends) for p in parts] == [(5, None), (5, None)]


def test_committed_batches_are_counted_then_forgotten_ten_batches_later(
    tmp_path: Path,
) -> None:
    probe = StandInProbe(backlog=5000)
    reader, _ = make(tmp_path, probe)
    start = reader.initialOffset()
    run = start["run"]
    end = reader.latestOffset(start, ReadAllAvailable())
    stage_slot(tmp_path, run, 1, 0, range(0, 300), redelivered=2, replayed=5)
    stage_slot(tmp_path, run, 1, 1, range(300, 500), accept_failed=7, already_staged=3)
    nxt = reader.latestOffset(end, ReadAllAvailable())
    assert nxt["seq"] == 2
    progress = reader.reportLatestOffset()
    assert progress is not None
    assert progress["acquired"] == 500 and progress["redelivered"] == 2
    assert progress["replayed"] == 5 and progress["accept_failed"] == 7
    assert progress["already_staged"] == 3
    assert progress["batches"] == 1 and progress["backlog"] == 5000
    # commit() of the same batch again (Spark calls it a batch late) is harmless.
    reader.commit(end)
    assert reader.reportLatestOffset()["acquired"] == 500  # type: ignore[index]
    # The chunks stay for the slots' lookup of records handed out again
    # (_duplicates) until RETAINED_BATCHES more batches are committed.
    store = StagingStore(f"{tmp_path}/{run}")
    assert store.batches() == [1]
    reader.commit({**end, "seq": 1 + RETAINED_BATCHES - 1})
    assert store.batches() == [1]
    reader.commit({**end, "seq": 1 + RETAINED_BATCHES})
    assert store.batches() == []
    assert reader.reportLatestOffset()["batches"] == 1  # type: ignore[index]


def test_available_now_ends_when_the_group_is_done(tmp_path: Path) -> None:
    probe = StandInProbe(backlog=100, end=100)
    reader, _ = make(tmp_path, probe)
    start = reader.initialOffset()
    reader.prepareForTriggerAvailableNow()
    probe.offsets = {TP: SharePartitionOffsetInfo(start_offset=0, leader_epoch=0, lag=100)}
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end["seq"] == 1
    stage_slot(tmp_path, start["run"], 1, 0, range(0, 100))
    # The broker still reports the stale start offset, but this query's staged and
    # accepted chunks cover everything up to the end offset.
    probe.offsets = {TP: SharePartitionOffsetInfo(start_offset=0, leader_epoch=0, lag=None)}
    assert reader.latestOffset(end, ReadAllAvailable()) == end


def test_available_now_ends_after_the_idle_timeout(tmp_path: Path) -> None:
    probe = StandInProbe(backlog=50, end=None)  # end offsets unknown
    reader, clock = make(tmp_path, probe, availableNowIdleTimeoutMs="3000")
    start = reader.initialOffset()
    reader.prepareForTriggerAvailableNow()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end["seq"] == 1
    stage_slot(tmp_path, start["run"], 1, 0, range(0, 0))  # a batch that got nothing
    clock.now += 1
    # No batch while the backlog stands still (the empty-batch backoff), and the
    # query does not end either (returning `end` would end it) until the idle
    # timeout has passed: 3 s without a record since the query started.
    assert reader.latestOffset(end, ReadAllAvailable()) == end
    assert reader._state().drained
    assert 103.0 <= clock.now < 104.0


def test_options_are_checked_and_the_driver_is_not_pickled(tmp_path: Path) -> None:
    reader, _ = make(tmp_path, StandInProbe(backlog=1))
    reader.initialOffset()
    copy = pickle.loads(pickle.dumps(reader))
    assert copy._driver is None and copy._options == reader._options
    with pytest.raises(SparkOptionError, match="fixed schema"):
        ShareGroupStreamReader(reader._options, source_schema(True))


def test_the_backlog_is_the_lag_else_the_distance_from_the_start_offset() -> None:
    tps = [TopicPartition("t", p) for p in range(4)]
    bounds = {tps[0]: (0, 100), tps[1]: (10, 100), tps[2]: (50, 100), tps[3]: (0, 100)}
    offsets = {
        tps[0]: SharePartitionOffsetInfo(start_offset=40, leader_epoch=0, lag=7),
        tps[1]: SharePartitionOffsetInfo(start_offset=30, leader_epoch=0, lag=None),
        # A start offset below the log start (retention): counted from the log start.
        tps[2]: SharePartitionOffsetInfo(start_offset=20, leader_epoch=0, lag=None),
    }  # tps[3]: not started by the group: the whole log
    assert backlog_of(bounds, offsets) == 7 + 70 + 50 + 100
    assert backlog_of(bounds, None) == 100 + 90 + 50 + 100


def test_a_plan_keeps_the_end_offsets_of_the_partitions_with_a_backlog() -> None:
    tps = [TopicPartition("t", p) for p in range(3)] + [TopicPartition("u", 0)]
    bounds = {tps[0]: (0, 100), tps[1]: (0, 80), tps[2]: (0, 60), tps[3]: (5, 9)}
    offsets = {
        tps[0]: SharePartitionOffsetInfo(start_offset=40, leader_epoch=0, lag=7),
        tps[1]: SharePartitionOffsetInfo(start_offset=80, leader_epoch=0, lag=0),  # done
        tps[2]: SharePartitionOffsetInfo(start_offset=60, leader_epoch=0, lag=None),  # done
    }
    view = GroupView(bounds, offsets, backlog_of(bounds, offsets))
    assert view.pending_ends() == {"t": {"0": 100}, "u": {"0": 9}}


def test_an_available_now_trigger_looks_at_the_broker_once(tmp_path: Path) -> None:
    probe = StandInProbe(backlog=100, end=100)
    reader, _ = make(tmp_path, probe)
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    reader.latestOffset(start, ReadAllAvailable())
    assert probe.looks == 1


def test_the_probe_reads_partitions_and_isolation_level_again_only_when_stale(
    tmp_path: Path,
) -> None:
    from kafka_share.spark import source

    calls: list[str] = []

    class StandInAdmin:
        def describe_topics(self, topics: Any, timeout: float) -> Any:
            calls.append("describe_topics")
            part = type("P", (), {"partition": 0})()
            return {"t": type("T", (), {"partitions": [part]})()}

        def describe_group_configs(self, group: str, timeout: float) -> Any:
            calls.append("describe_group_configs")
            return {}

        def list_offsets(self, specs: Any, isolation_level: str = "read_uncommitted",
                         timeout: float = 0) -> Any:
            calls.append("list_offsets")
            return {tp: type("O", (), {"offset": 10})() for tp in specs}

        def list_share_group_offsets(self, group: str, tps: Any, timeout: float) -> Any:
            calls.append("list_share_group_offsets")
            return {}

    clock = Clock()
    opts = parse_source_options({
        "kafka.bootstrap.servers": "localhost:9092", "kafka.group.id": "g", "subscribe": "t",
        "stagingLocation": str(tmp_path),
    })
    probe = source._GroupProbe(opts, clock=clock)
    probe._admin = StandInAdmin()  # type: ignore[assignment]
    assert probe.look().backlog == 0
    assert sorted(calls) == sorted(["describe_topics", "describe_group_configs",
                                    "list_offsets", "list_offsets",
                                    "list_share_group_offsets"])
    calls.clear()
    clock.sleep(source._METADATA_MAX_AGE_S / 2)
    probe.look()
    assert sorted(calls) == ["list_offsets", "list_offsets", "list_share_group_offsets"]
    calls.clear()
    clock.sleep(source._METADATA_MAX_AGE_S)
    probe.look()
    assert "describe_topics" in calls and "describe_group_configs" in calls
