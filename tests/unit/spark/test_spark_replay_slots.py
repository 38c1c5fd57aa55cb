"""Read slots and exact replay, with stand-ins for the consumer and the log."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kafka_share import AcknowledgeType, TopicIdPartition, TopicPartition
from kafka_share._app.columnar import ColumnarRecords, Piece, to_record_batch
from kafka_share.admin import LogSlice
from kafka_share.errors import OffsetOutOfRangeError
from kafka_share.records.builder import build_batch, build_control_batch
from kafka_share.records.columnar import columns_from_rows
from kafka_share.spark import _slots
from kafka_share.spark._options import parse_source_options
from kafka_share.spark._replay import DataLossError, replay_spans
from kafka_share.spark._staging import Chunk, StagingStore

TP = TopicPartition("t", 0)
TIP = TopicIdPartition(uuid.UUID(int=1), "t", 0)


class StandInLog:
    """Admin.read_log over records 0..end-1 of one partition (values b"v<offset>"),
    batches of 10, with offsets below `start` deleted."""

    def __init__(self, end: int, start: int = 0, *, hole: range = range(0)) -> None:
        self.end = end
        self.start = start
        self.hole = hole
        self.reads: list[int] = []

    def read_log(self, tp: TopicPartition, offset: int, **_: Any) -> LogSlice:
        self.reads.append(offset)
        if offset < self.start or offset > self.end:
            raise OffsetOutOfRangeError(f"offset {offset}")
        base = offset - offset % 10
        data = b""
        for b in range(base, min(base + 30, self.end), 10):
            from kafka_share.records.builder import NewRecord

            recs = [NewRecord(None, f"v{o}".encode(), (("h", b"x"),), 1_700_000_000_000,
                              o - b)
                    for o in range(b, min(b + 10, self.end))
                    if o not in self.hole and o >= self.start]
            if recs:
                data += build_batch(recs, base_offset=b, last_offset_delta=min(9, self.end - 1 - b))
        return LogSlice(data, self.end, self.end, self.start)

    def list_offsets(self, specs: dict[TopicPartition, Any], **_: Any) -> dict[TopicPartition, Any]:
        class Info:
            offset = self.start

        return {tp: Info() for tp in specs}


def test_replay_returns_exactly_the_staged_offsets_with_their_counts() -> None:
    log = StandInLog(100)
    table = replay_spans(log, [("t", 0, 5, 12, 1), ("t", 0, 40, 41, 3)],  # type: ignore[arg-type]
                         include_headers=True, fail_on_data_loss=True)
    rows = table.to_pylist()
    assert [r["offset"] for r in rows] == [5, 6, 7, 8, 9, 10, 11, 12, 40, 41]
    assert [r["deliveryCount"] for r in rows] == [1] * 8 + [3, 3]
    assert rows[0]["value"] == b"v5" and rows[0]["topic"] == "t" and rows[0]["partition"] == 0
    assert rows[0]["headers"] == [{"key": "h", "value": b"x"}]
    assert rows[0]["timestamp"].timestamp() == pytest.approx(1_700_000_000)


def test_control_batches_are_skipped() -> None:
    class WithMarker(StandInLog):
        def read_log(self, tp: TopicPartition, offset: int, **kw: Any) -> LogSlice:
            base = super().read_log(tp, offset, **kw)
            marker = build_control_batch(base_offset=self.end - 1)
            return LogSlice(base.records + marker, self.end, self.end, 0)

    # The control record at offset 19 is never taken for a record.
    table = replay_spans(WithMarker(20), [("t", 0, 0, 18, 1)],  # type: ignore[arg-type]
                         include_headers=False, fail_on_data_loss=True)
    assert table.num_rows == 19


def test_records_deleted_by_retention_fail_the_replay_or_are_skipped() -> None:
    spans = [("t", 0, 5, 24, 1)]
    with pytest.raises(DataLossError, match=r"10 records .* t-0 \(offsets 5-14\).*failOnDataLoss"):
        replay_spans(StandInLog(50, start=15), spans,  # type: ignore[arg-type]
                     include_headers=False, fail_on_data_loss=True)
    table = replay_spans(StandInLog(50, start=15), spans,  # type: ignore[arg-type]
                         include_headers=False, fail_on_data_loss=False)
    assert table.column("offset").to_pylist() == list(range(15, 25))
    with pytest.raises(DataLossError, match=r"offsets 7-8"):  # compacted away
        replay_spans(StandInLog(50, hole=range(7, 9)), spans,  # type: ignore[arg-type]
                     include_headers=False, fail_on_data_loss=True)


class StandInConsumer:
    """Each waiting poll_arrow takes the next scripted response (offsets of TP)
    into the buffer when it is empty, and hands out up to its max_records; a
    poll(0) hands out only what is buffered (fetch.ahead=manual). Acks,
    prefetches and the polls' caps are kept."""

    def __init__(
        self, polls: list[list[int]], assigned: frozenset[TopicPartition] = frozenset({TP}),
        counts: dict[int, int] | None = None,
    ) -> None:
        self.polls = polls
        #: delivery counts by offset (1 for the others)
        self.counts = counts or {}
        self.assigned = assigned
        self.buffered: list[int] = []
        self.acks: list[tuple[list[int], AcknowledgeType]] = []
        self.commits = 0
        self.prefetches: list[int] = []
        self.caps: list[int | None] = []

    def poll_arrow(self, timeout: float, max_records: int | None = None) -> Any:
        self.caps.append(max_records)
        if not self.buffered and timeout > 0 and self.polls:
            self.buffered = self.polls.pop(0)
        cut = len(self.buffered) if max_records is None else max_records
        offsets, self.buffered = self.buffered[:cut], self.buffered[cut:]
        rows = [(o, 1_700_000_000_000, None, f"v{o}".encode(), ()) for o in offsets]
        counts = np.array([self.counts.get(o, 1) for o in offsets], np.int32)
        piece = Piece(columns_from_rows(rows), counts, 0)
        return to_record_batch(ColumnarRecords({TIP: [piece]} if rows else {}), view_types=False)

    def assignment(self) -> frozenset[TopicPartition]:
        return self.assigned

    def acknowledge_arrow(self, batch: Any, type: AcknowledgeType) -> None:
        self.acks.append((batch.column("offset").to_pylist(), type))

    def prefetch(self, max_records: int) -> bool:
        self.prefetches.append(max_records)
        return True

    def commit_sync(self, timeout: float) -> dict[Any, Any]:
        self.commits += 1
        return {TIP: None}


def _options(tmp_path: Path) -> Any:
    return parse_source_options({
        "kafka.bootstrap.servers": "localhost:9092", "kafka.group.id": "g",
        "subscribe": "t", "stagingLocation": str(tmp_path), "pollTimeoutMs": "1",
    })


def _read(options: Any, consumer: StandInConsumer, budget: int,
          monkeypatch: pytest.MonkeyPatch, log: StandInLog | None = None,
          ends: dict[tuple[str, int], int] | None = None) -> list[int]:
    monkeypatch.setenv("SPARK_REUSE_WORKER", "1")
    monkeypatch.setattr(_slots, "_consumer", lambda o: (consumer, False))
    monkeypatch.setattr(_slots, "_admin", lambda o: log or StandInLog(1000))
    out: list[int] = []
    for batch in _slots.read_slot(options, 1, 0, budget, ends):
        out.extend(batch.column("offset").to_pylist())
    return out


def test_a_slot_stages_then_accepts_each_poll_and_ends_at_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = _options(tmp_path)
    consumer = StandInConsumer([[0, 1, 2], [3, 4], [5, 6, 7]])
    assert _read(options, consumer, 5, monkeypatch) == [0, 1, 2, 3, 4]
    assert consumer.acks == [([0, 1, 2], AcknowledgeType.ACCEPT),
                             ([3, 4], AcknowledgeType.ACCEPT)]
    # Each poll asks for what the slot still wants; the next chunk is fetched
    # ahead only while the slot wants more, never past the budget; at the
    # budget, a poll(0) finds nothing left over and fetches nothing.
    assert consumer.caps == [5, 2, None]
    assert consumer.prefetches == [2]
    assert consumer.polls == [[5, 6, 7]]
    assert consumer.commits == 1
    chunks = list(StagingStore(str(tmp_path)).slot_chunks(1, 0))
    assert [c.spans for c in chunks[:-1]] == [[("t", 0, 0, 2, 1)], [("t", 0, 3, 4, 1)]]
    assert chunks[-1].end and chunks[-1].stats["acquired"] == 5


def test_records_acquired_past_the_budget_are_the_slots_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # batch_optimized: the broker answers with whole producer batches, more than
    # the 2 records asked for. What the poll did not hand out is taken at the
    # budget, staged and accepted, instead of waiting locked in the worker.
    options = _options(tmp_path)
    consumer = StandInConsumer([[0, 1, 2], [3, 4, 5, 6], [7]])
    assert _read(options, consumer, 5, monkeypatch) == [0, 1, 2, 3, 4, 5, 6]
    assert consumer.caps == [5, 2, None, None]
    assert consumer.acks[-1] == ([5, 6], AcknowledgeType.ACCEPT)
    assert consumer.polls == [[7]] and consumer.buffered == []
    end = list(StagingStore(str(tmp_path)).slot_chunks(1, 0))[-1]
    assert end.end and end.stats["acquired"] == 7


def test_a_slot_ends_once_its_partitions_reach_the_planned_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Planned when the log ended at offset 5: the poll that got offset 4 (or
    # later: records produced since) is taken, then nothing more is fetched
    # although the budget allows it; the batch does not wait for new records.
    consumer = StandInConsumer([[0, 1, 2], [3, 4, 5, 6], [7, 8, 9], [10]])
    assert _read(_options(tmp_path), consumer, 1000, monkeypatch,
                 ends={("t", 0): 5}) == [0, 1, 2, 3, 4, 5, 6]
    assert consumer.prefetches == [997]  # none after the poll that reached the end
    assert consumer.polls == [[7, 8, 9], [10]]
    just = StandInConsumer([[0, 1, 2], [3, 4], [5]])
    assert _read(_options(tmp_path / "j"), just, 1000, monkeypatch,
                 ends={("t", 0): 5}) == [0, 1, 2, 3, 4]


def test_a_slot_waits_for_every_assigned_partition_with_a_planned_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Assigned t-0 and t-1, both behind when planned: t-0 reaching its end
    # does not end the slot while t-1 (absent from these responses, as when the
    # broker's record limit filled them from other partitions) has not; a
    # planned partition assigned elsewhere (t-2) is not waited for.
    consumer = StandInConsumer([[0, 1], [2, 3], [4]], assigned=frozenset(
        {TP, TopicPartition("t", 1)}))
    assert _read(_options(tmp_path), consumer, 1000, monkeypatch,
                 ends={("t", 0): 2, ("t", 1): 7, ("t", 2): 9}) == [0, 1, 2, 3, 4]


def test_a_slot_whose_partitions_had_no_backlog_polls_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The backlog when planned was on u-0 only, assigned to another member.
    consumer = StandInConsumer([[0, 1], [2]])
    assert _read(_options(tmp_path), consumer, 1000, monkeypatch, ends={("u", 0): 50}) == []
    assert consumer.polls == [[0, 1], [2]] and consumer.caps == []
    end = list(StagingStore(str(tmp_path)).slot_chunks(1, 0))[-1]
    assert end.end and end.stats["acquired"] == 0
    # A member that has not joined yet (no assignment) polls.
    joining = StandInConsumer([[0, 1]], assigned=frozenset())
    assert _read(_options(tmp_path / "n"), joining, 1000, monkeypatch,
                 ends={("u", 0): 50}) == [0, 1]


def test_a_slot_without_planned_ends_reads_to_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    consumer = StandInConsumer([[7, 8], [9]])
    assert _read(_options(tmp_path), consumer, 3, monkeypatch) == [7, 8, 9]


def test_a_slot_ends_at_an_empty_poll(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    consumer = StandInConsumer([[0, 1]])
    assert _read(_options(tmp_path), consumer, 100, monkeypatch) == [0, 1]


def test_a_re_run_slot_replays_its_chunks_and_polls_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = _options(tmp_path)
    first = _read(options, StandInConsumer([[10, 11], [12]]), 3, monkeypatch)
    again = StandInConsumer([[99]])
    assert _read(options, again, 3, monkeypatch) == first == [10, 11, 12]
    assert again.acks == [] and again.polls == [[99]]


def test_a_slot_whose_attempt_died_half_way_replays_then_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = _options(tmp_path)
    store = StagingStore(str(tmp_path))
    store.put_if_absent(1, 0, 0, Chunk([("t", 0, 0, 3, 1)]))  # the dead attempt's
    consumer = StandInConsumer([[4, 5], [6, 7]])
    assert _read(options, consumer, 6, monkeypatch) == [0, 1, 2, 3, 4, 5]


def test_records_handed_out_again_after_a_dead_attempt_staged_them_are_not_read_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The dead attempt staged 0-3 and died before its ACCEPT reached the broker,
    # which hands them out again (delivery count 2) once its connection closes.
    options = _options(tmp_path)
    store = StagingStore(str(tmp_path))
    store.put_if_absent(1, 0, 0, Chunk([("t", 0, 0, 3, 1)]))
    consumer = StandInConsumer([[0, 1, 2, 3, 4, 5]], counts={o: 2 for o in range(4)})
    assert _read(options, consumer, 6, monkeypatch) == [0, 1, 2, 3, 4, 5]
    # Accepted without being staged or read again (each poll asks for the two
    # records the slot still wants); the new records are chunk 1.
    assert consumer.acks == [([0, 1], AcknowledgeType.ACCEPT), ([2, 3], AcknowledgeType.ACCEPT),
                             ([4, 5], AcknowledgeType.ACCEPT)]
    chunks = list(store.slot_chunks(1, 0))
    assert [c.spans for c in chunks[:-1]] == [[("t", 0, 0, 3, 1)], [("t", 0, 4, 5, 1)]]
    assert chunks[-1].stats["already_staged"] == 4 and chunks[-1].stats["acquired"] == 2


def test_records_another_slot_or_a_kept_committed_batch_staged_are_not_read_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = _options(tmp_path)
    store = StagingStore(str(tmp_path))
    store.put_if_absent(1, 1, 0, Chunk([("t", 0, 10, 11, 1)]))  # slot 1 of this batch
    store.put_if_absent(0, 0, 0, Chunk([("t", 0, 20, 21, 2)]))  # a committed batch
    store.put_if_absent(0, 0, 1, Chunk([], end=True))
    # Every record of the first poll was staged before: the slot polls again.
    consumer = StandInConsumer([[10, 11, 20, 21], [22]],
                               counts={10: 2, 11: 2, 20: 3, 21: 3, 22: 2})
    assert _read(options, consumer, 5, monkeypatch) == [22]
    assert consumer.acks[0] == ([10, 11, 20, 21], AcknowledgeType.ACCEPT)
    assert list(store.slot_chunks(1, 0))[-1].stats["already_staged"] == 4
    assert consumer.commits == 1


def test_records_handed_out_again_that_no_chunk_holds_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Released before staging (a lost race's records, a task that died before
    # staging), or staged with the count they carry now: read as usual.
    options = _options(tmp_path)
    store = StagingStore(str(tmp_path))
    store.put_if_absent(1, 1, 0, Chunk([("t", 0, 30, 30, 2)]))
    consumer = StandInConsumer([[30, 31, 32]], counts={30: 2, 31: 2, 32: 4})
    assert _read(options, consumer, 3, monkeypatch) == [30, 31, 32]
    assert consumer.acks == [([30, 31, 32], AcknowledgeType.ACCEPT)]
    assert list(store.slot_chunks(1, 0))[-1].stats["already_staged"] == 0


def _racing(store: StagingStore, rival: list[Chunk], per_poll: int = 1
            ) -> type[StandInConsumer]:
    class Racing(StandInConsumer):
        """While this attempt polls, the rival stages its next chunk(s)."""

        def poll_arrow(self, timeout: float, max_records: int | None = None) -> Any:
            batch = super().poll_arrow(timeout, max_records)
            for _ in range(per_poll if batch.num_rows else 0):
                if rival:
                    chunk = len(list(store.slot_chunks(1, 0)))
                    store.put_if_absent(1, 0, chunk, rival.pop(0))
            return batch

    return Racing


def test_an_attempt_that_loses_a_race_takes_the_winners_chunk_and_keeps_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = _options(tmp_path)
    store = StagingStore(str(tmp_path))
    consumer = _racing(store, [Chunk([("t", 0, 50, 52, 1)])])([[7, 8], [9]])
    # The records polled for chunk 0 are not given back (a release would count
    # a delivery against them): they become chunk 1.
    assert _read(options, consumer, 5, monkeypatch) == [50, 51, 52, 7, 8]
    assert consumer.acks == [([7, 8], AcknowledgeType.ACCEPT)]
    assert [c.spans for c in store.slot_chunks(1, 0)][:2] == [
        [("t", 0, 50, 52, 1)], [("t", 0, 7, 8, 1)]]
    assert list(store.slot_chunks(1, 0))[-1].stats["lost_races"] == 1


def test_records_held_from_a_lost_race_are_released_if_the_rival_ends_the_slot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = _options(tmp_path)
    store = StagingStore(str(tmp_path))
    rival = [Chunk([("t", 0, 50, 52, 1)]), Chunk([], end=True)]
    consumer = _racing(store, rival, per_poll=2)([[7, 8]])
    assert _read(options, consumer, 5, monkeypatch) == [50, 51, 52]
    assert consumer.acks == [([7, 8], AcknowledgeType.RELEASE)]
    assert consumer.commits >= 1, "the release was never sent"


def test_attempts_that_keep_racing_never_pass_records_back_and_forth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = _options(tmp_path)
    store = StagingStore(str(tmp_path))
    rival = [Chunk([("t", 0, 100 + 10 * i, 104 + 10 * i, 1)]) for i in range(4)]
    consumer = _racing(store, rival)([[1, 2], [3, 4], [5, 6], [7, 8]])
    rows = _read(options, consumer, 14, monkeypatch)
    assert len(rows) == len(set(rows))
    assert AcknowledgeType.RELEASE not in [kind for _, kind in consumer.acks]
    accepted = [o for offsets, _ in consumer.acks for o in offsets]
    assert sorted(accepted) == [o for o in rows if o < 100]


def test_a_failing_task_drops_its_consumer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dropped: list[object] = []
    monkeypatch.setattr(_slots, "_drop_consumer", dropped.append)

    class Broken(StandInConsumer):
        def acknowledge_arrow(self, batch: Any, type: AcknowledgeType) -> None:
            raise RuntimeError("boom")

    options = _options(tmp_path)
    with pytest.raises(RuntimeError, match="boom"):
        _read(options, Broken([[1]]), 5, monkeypatch)
    assert dropped == [options]


def test_a_worker_that_is_not_reused_closes_its_consumer_after_the_slot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dropped: list[object] = []
    options = _options(tmp_path)
    consumer = StandInConsumer([[1, 2]])
    monkeypatch.setattr(_slots, "_consumer", lambda o: (consumer, False))
    monkeypatch.setattr(_slots, "_drop_consumer", dropped.append)
    monkeypatch.delenv("SPARK_REUSE_WORKER", raising=False)
    assert [b.num_rows for b in _slots.read_slot(options, 1, 0, 5)] == [2]
    assert dropped == [options]


def test_staged_spans_are_read_once_and_new_chunks_as_they_come(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = StagingStore(str(tmp_path))
    store.put_if_absent(0, 0, 0, Chunk([("t", 0, 0, 9, 1)]))
    store.put_if_absent(0, 0, 1, Chunk([], end=True))
    store.put_if_absent(1, 0, 0, Chunk([("t", 0, 10, 19, 1)]))
    reads: list[tuple[int, int, int]] = []
    get = store.get
    monkeypatch.setattr(store, "get", lambda *a: reads.append(a) or get(*a))
    staged = _slots._StagedSpans(store)
    index = staged.index(1)
    assert index.staged_before("t", 0, 5, 2) and index.staged_before("t", 0, 15, 2)
    assert sorted(reads) == [(0, 0, 0), (0, 0, 1), (1, 0, 0), (1, 0, 1)]
    # Another slot of the running batch stages a chunk: only what is new is read.
    store.put_if_absent(1, 1, 0, Chunk([("t", 0, 20, 29, 1)]))
    reads.clear()
    index = staged.index(1)
    assert index.staged_before("t", 0, 25, 2) and index.staged_before("t", 0, 5, 2)
    assert sorted(reads) == [(1, 0, 1), (1, 1, 0), (1, 1, 1)]
    # A batch the driver deleted is forgotten.
    store.delete_batch(0)
    assert not staged.index(1).staged_before("t", 0, 5, 2)
