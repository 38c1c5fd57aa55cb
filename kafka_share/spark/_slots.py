"""One read slot of a micro-batch, in an executor's Python worker.

The task for slot ``(seq, slot)`` walks the slot's chunks ``0, 1, 2, ...`` in
the staging store (:mod:`._staging`):

* a chunk already staged (by an earlier or a racing attempt) is replayed:
  its records are read back from the log by offset (:mod:`._replay`);
* otherwise the task polls the share group, stages the coordinates of what it
  acquired as that chunk, and only then ACCEPTs the records and yields them;
  if another attempt staged the chunk first, it replays the other's chunk and
  keeps what it acquired for its next chunk (RELEASEd only if the slot ends
  before, so racing attempts never pass records back and forth);
* a record the group hands out again that a chunk of the query run holds
  already (an attempt died, or its locks ran out, between staging and
  accepting it) is ACCEPTed and neither staged nor yielded again
  (:mod:`._duplicates`);
* once the slot has its budget, or its consumer has caught up with the batch,
  or a poll comes back empty, it stages the END marker, which closes the slot
  for every attempt.

Caught up: the driver planned the batch with the end offsets of the partitions
that had a backlog then, and on each of those partitions assigned to the
slot's consumer, the slot got the last record before the end offset or a
later one (records are acquired in offset order, so every earlier one was
acquired by this slot or by another member). A consumer assigned none of them
ends its slot without polling. Stopping at the planned end offsets is what
Spark's Kafka source does, and it lets a slot whose consumer holds most of the
backlog take all of it (see :mod:`._plan`).

Locks are held from a poll to its staging write (milliseconds), not for a whole
micro-batch, so the broker's limit of records in flight per share-partition
does not bound the batch. The consumer is long-lived: one per Python worker and
consumer configuration, kept in this module across tasks and micro-batches
(PySpark reuses its Python workers), so a task does not pay for joining the
group.

Its consumer fetches only when asked (``fetch.ahead=manual``), and every
fetch asks for at most what the slot still wants (``poll_arrow(max_records=...)``).
Once a chunk is staged and accepted, and only while the slot still wants
records, the next chunk is fetched ahead (``prefetch(max_records=...)``,
carrying the ACCEPTs) while Spark takes this chunk's rows, so the broker's
round trip overlaps the work instead of adding to it. With ``record_limit`` the
broker acquires no more than asked, so a slot takes exactly its budget; with
``batch_optimized`` (the default without ``maxRecordsPerTrigger``) a response
can pass it by part of a producer batch, and the slot takes those records too
(``_Slot._left_over``). Either way its consumer holds no record between tasks,
and the slot ends with a commit.
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import threading
import time
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

from kafka_share.admin import Admin
from kafka_share.consumer import ShareConsumer
from kafka_share.models import AcknowledgeType
from kafka_share.spark._arrow import poll_batch_to_table
from kafka_share.spark._duplicates import StagedIndex
from kafka_share.spark._options import SourceOptions
from kafka_share.spark._replay import replay_spans
from kafka_share.spark._staging import Chunk, Span, StagingStore, spans_of

__all__ = ["SlotResult", "read_slot"]

log = logging.getLogger("kafka_share.spark")

#: How long the commit that ends a slot may take.
_COMMIT_TIMEOUT_S = 30.0

_Key = tuple[tuple[str, str], ...]
_consumers: dict[_Key, ShareConsumer[bytes | None, bytes | None]] = {}
_admins: dict[_Key, Admin] = {}
_lock = threading.Lock()


def _key(config: Mapping[str, str]) -> _Key:
    return tuple(sorted(config.items()))


def _consumer_key(options: SourceOptions) -> _Key:
    """A worker's consumer serves the queries with the same settings *and* the
    same subscription: two queries of one group over other topics must not read
    through one consumer subscribed to the first query's topics."""
    subscription = (
        ("pattern", options.topic_pattern) if options.topic_pattern is not None
        else ("topics", ",".join(options.topics))
    )
    return (*_key(options.consumer_config), subscription)


def _consumer(options: SourceOptions) -> tuple[ShareConsumer[bytes | None, bytes | None], bool]:
    """This worker's consumer for these options, and whether it is new."""
    key = _consumer_key(options)
    with _lock:
        consumer = _consumers.get(key)
        if consumer is not None:
            return consumer, False
        consumer = ShareConsumer(dict(options.consumer_config))
        if options.topic_pattern is not None:
            consumer.subscribe(pattern=options.topic_pattern)
        else:
            consumer.subscribe(list(options.topics))
        _consumers[key] = consumer
        return consumer, True


def _drop_consumer(options: SourceOptions) -> None:
    """Forget a consumer that failed (the next task makes a new one)."""
    with _lock:
        consumer = _consumers.pop(_consumer_key(options), None)
    if consumer is not None:
        try:
            consumer.close(timeout=5.0)
        except Exception as exc:
            log.debug("closing a failed consumer: %s", exc)


def _admin(options: SourceOptions) -> Admin:
    key = _key(options.consumer_config)
    with _lock:
        admin = _admins.get(key)
        if admin is None:
            admin = _admins[key] = Admin(dict(options.consumer_config))
        return admin


class _StagedSpans:
    """The spans staged under one run's store, for :class:`StagedIndex`, read
    incrementally: a chunk never changes once written, so each is read once per
    worker, and a committed batch's slots are not listed again."""

    def __init__(self, store: StagingStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        #: (batch, slot) -> the next chunk to read (None: its END was read)
        self._next: dict[tuple[int, int], int | None] = {}
        #: batch -> the spans read so far
        self._spans: dict[int, list[Span]] = {}
        #: committed batches read to their slots' ENDs
        self._final: set[int] = set()

    def index(self, seq: int) -> StagedIndex:
        """What batch ``seq`` (running) and the committed batches before it
        that the driver keeps have staged so far."""
        index = StagedIndex()
        with self._lock:
            present = [b for b in self._store.batches() if b <= seq]
            for b in present:
                if b not in self._final:
                    for slot in self._store.slots(b):
                        self._read_new(b, slot)
                    if b < seq:  # committed: every slot has ended
                        self._final.add(b)
                index.add(self._spans.get(b, ()))
            for b in set(self._spans) - set(present):  # deleted by the driver
                del self._spans[b]
                self._final.discard(b)
        return index

    def _read_new(self, seq: int, slot: int) -> None:
        key = (seq, slot)
        chunk = self._next.get(key, 0)
        if chunk is None:
            return
        for value in self._store.slot_chunks(seq, slot, first=chunk):
            if value.end:
                chunk = None
                break
            self._spans.setdefault(seq, []).extend(value.spans)
            chunk += 1
        self._next[key] = chunk


#: one reader of staged spans per run's store (a worker serves one query at a time)
_staged: dict[str, _StagedSpans] = {}


def _staged_spans(store: StagingStore) -> _StagedSpans:
    with _lock:
        reader = _staged.get(store.location)
        if reader is None:
            if len(_staged) >= 16:
                _staged.clear()
            reader = _staged[store.location] = _StagedSpans(store)
        return reader


@atexit.register
def _close_all() -> None:
    # The worker exits (Spark stops it): leave the group at once, so the broker
    # does not wait for the session to time out before reassigning.
    with _lock:
        consumers = list(_consumers.values())
        admins = list(_admins.values())
        _consumers.clear()
        _admins.clear()
    for c in consumers:
        try:
            c.close(timeout=5.0)
        except Exception:
            pass
    for a in admins:
        try:
            a.close()
        except Exception:
            pass


class SlotResult:
    """What one attempt of a slot did (staged with the END marker it wrote)."""

    __slots__ = ("accept_failed", "acquired", "already_staged", "lost_races", "redelivered",
                 "replayed", "worker")

    def __init__(self) -> None:
        #: which Python worker ran the slot (the driver counts them to learn how
        #: many slots run at once): a checksum of host and process id
        self.worker = zlib.crc32(f"{socket.gethostname()}:{os.getpid()}".encode())
        self.acquired = 0
        self.replayed = 0
        self.redelivered = 0
        self.accept_failed = 0
        self.lost_races = 0
        #: records handed out again that a chunk of this run holds already
        #: (:mod:`._duplicates`): accepted, not read twice
        self.already_staged = 0

    def as_stats(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}


class _Slot:
    """The state of one attempt at one slot (see the module docstring)."""

    def __init__(
        self, options: SourceOptions, seq: int, slot: int, budget: int,
        ends: Mapping[tuple[str, int], int] | None = None,
    ) -> None:
        self.options = options
        self.seq = seq
        self.slot = slot
        self.budget = budget
        #: (topic, partition) -> end offset when the batch was planned (None: not
        #: known, the slot reads up to its budget)
        self.ends = ends
        #: partitions planned with an end offset whose last planned record (or
        #: a later one) this slot got
        self.reached: set[tuple[str, int]] = set()
        self.caught_up = False
        self.store = StagingStore(options.staging_location)
        self.result = SlotResult()
        self.taken = 0
        self.consumer: ShareConsumer[bytes | None, bytes | None] | None = None
        self.fresh = False
        #: records accepted since the last commit, for the accept-failure count
        self.unconfirmed: dict[tuple[str, int], int] = {}
        #: records acquired for a chunk another attempt staged first, kept for
        #: the next chunk (see _acquire)
        self.held: Any = None
        #: records were released, or accepted without being staged, since the
        #: last commit
        self.acks_pending = False

    def run(self) -> Iterator[Any]:
        yield from self._chunks()
        if self.held is not None and self.consumer is not None:
            # Another attempt ended the slot while this one held records from a
            # lost race: they are in no chunk, so they go back to the group.
            self.consumer.acknowledge_arrow(self.held, AcknowledgeType.RELEASE)
            self.held = None
            self.acks_pending = True
        self._commit()  # the slot may end on another attempt's chunk

    def _chunks(self) -> Iterator[Any]:
        chunk = 0
        while True:
            staged = self.store.get(self.seq, self.slot, chunk)
            if staged is None:
                staged, table = self._acquire(chunk)
                if table is not None:
                    yield table
                    chunk += 1
                    continue
                if staged is None:
                    return  # this attempt wrote the END marker
            if staged.end:
                return
            yield self._replay(staged)
            chunk += 1

    def _acquire(self, chunk: int) -> tuple[Chunk | None, Any]:
        """Poll and stage chunk ``chunk``. Returns (None, table) when this attempt
        staged records, (None, None) when it staged the END marker, and (the
        chunk, None) when another attempt staged the chunk first."""
        batch = self._next_batch()
        if batch is None:
            return self._end(chunk)
        consumer = self.consumer
        assert consumer is not None
        spans = spans_of(batch.column("topic"), batch.column("partition"),
                         batch.column("offset"), batch.column("delivery_count"))
        if not self.store.put_if_absent(self.seq, self.slot, chunk, Chunk(spans)):
            # A racing attempt staged this chunk first. Keep these records (still
            # locked to this consumer) for the next chunk nobody has staged, rather
            # than give them back: a release counts a delivery against each, and
            # two attempts that kept losing races to each other would pass the
            # same records back and forth until the group's delivery limit
            # archived them (seen with staging at 450 ms a chunk: 151 of 20,000
            # records lost).
            self.held = batch
            self.result.lost_races += 1
            staged = self.store.get(self.seq, self.slot, chunk)
            assert staged is not None
            return staged, None
        # Staged: the records are in this batch however often it is re-run. Only
        # now may the broker forget them: the ACCEPT rides on the next fetch,
        # sent at once if the slot wants more (it runs while Spark takes these
        # rows), else on the commit that ends the slot.
        consumer.acknowledge_arrow(batch, AcknowledgeType.ACCEPT)
        n = batch.num_rows
        self._note_reached(spans)
        if not self.caught_up and self.budget - self.taken - n > 0:
            consumer.prefetch(max_records=self.budget - self.taken - n)
        for topic, partition, first, last, count in spans:
            key = (topic, partition)
            self.unconfirmed[key] = self.unconfirmed.get(key, 0) + last - first + 1
            if count > 1:
                self.result.redelivered += last - first + 1
        self.taken += n
        self.result.acquired += n
        return None, poll_batch_to_table(batch, self.options.include_headers)

    def _next_batch(self) -> Any:
        """The records for the next chunk (held from a lost race, else polled,
        else left over past the budget), less those staged already; None when
        there are none."""
        while True:
            if self.held is not None:
                batch, self.held = self.held, None
            else:
                batch = self._poll() if self._wants_more() else self._left_over()
            if batch is None:
                return None
            batch = self._without_staged(batch)
            if batch is not None:
                return batch

    def _without_staged(self, batch: Any) -> Any:
        """``batch`` less the records handed out again that a chunk of this run
        holds already (:mod:`._duplicates`), which are ACCEPTed here; None if
        none are left."""
        import numpy as np  # noqa: PLC0415 (the executors' Arrow code: see spans_of)
        import pyarrow as pa  # noqa: PLC0415

        counts = np.asarray(batch.column("delivery_count").to_numpy(zero_copy_only=False))
        again = np.flatnonzero(counts > 1)
        if not len(again):
            return batch  # the common case: nothing was handed out before
        index = self._staged_index()
        rows = pa.array(again)
        found = [
            i for i, topic, partition, offset, count in zip(
                again.tolist(), batch.column("topic").take(rows).to_pylist(),
                batch.column("partition").take(rows).to_pylist(),
                batch.column("offset").take(rows).to_pylist(), counts[again].tolist(),
                strict=True,
            )
            if index.staged_before(topic, partition, offset, count)
        ]
        if not found:
            return batch
        staged = np.zeros(batch.num_rows, dtype=bool)
        staged[found] = True
        assert self.consumer is not None
        self.consumer.acknowledge_arrow(batch.filter(pa.array(staged)), AcknowledgeType.ACCEPT)
        self.acks_pending = True
        self.result.already_staged += len(found)
        log.warning(
            "batch %d slot %d: %d records handed out again were staged already in this query "
            "run (an attempt died, or its locks ran out, between staging and accepting them): "
            "accepted, not read twice", self.seq, self.slot, len(found),
        )
        rest = batch.filter(pa.array(~staged))
        return rest if rest.num_rows else None

    def _staged_index(self) -> StagedIndex:
        """The spans staged in this batch so far (every slot's) and in the
        committed batches the driver keeps."""
        return _staged_spans(self.store).index(self.seq)

    def _wants_more(self) -> bool:
        return self.taken < self.budget and not self.caught_up

    def _note_reached(self, spans: list[Span]) -> None:
        if self.ends is None:
            return
        for topic, partition, _, last, _ in spans:
            end = self.ends.get((topic, partition))
            if end is not None and last >= end - 1:
                self.reached.add((topic, partition))
        self.caught_up = self._nothing_left()

    def _nothing_left(self) -> bool:
        """Whether the consumer has caught up with the plan (module docstring):
        False while the plan's ends or the consumer's assignment are unknown (a
        member that has not joined yet)."""
        assert self.consumer is not None and self.ends is not None
        assigned = self.consumer.assignment()
        if not assigned:
            return False
        return all(tp in self.reached for tp in
                   ((a.topic, a.partition) for a in assigned) if tp in self.ends)

    def _poll(self) -> Any:
        if self.consumer is None:
            self.consumer, self.fresh = _consumer(self.options)
            if not self.fresh and self.ends is not None and self._nothing_left():
                return None  # none of its partitions had a backlog when planned
        timeout_ms = self.options.poll_timeout_ms
        if self.fresh:
            # A new member waits for its assignment first.
            timeout_ms = max(timeout_ms, self.options.initial_poll_timeout_ms)
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            batch = self.consumer.poll_arrow(timeout=max(0.0, deadline - time.monotonic()),
                                             max_records=self.budget - self.taken)
            if batch.num_rows:
                self.fresh = False
                return batch
            if time.monotonic() >= deadline:
                return None

    def _left_over(self) -> Any:
        """Records the consumer acquired past the slot's budget: in
        ``batch_optimized`` mode the broker hands out whole producer batches, so a
        response can pass what the slot asked for. They are this slot's too
        (a poll(0) under ``fetch.ahead=manual`` fetches nothing), or they would
        wait locked in this worker."""
        if self.consumer is None:
            return None
        batch = self.consumer.poll_arrow(timeout=0)
        return batch if batch.num_rows else None

    def _end(self, chunk: int) -> tuple[Chunk | None, Any]:
        self._commit()
        end = Chunk([], end=True, stats=self.result.as_stats())
        if self.store.put_if_absent(self.seq, self.slot, chunk, end):
            return None, None
        staged = self.store.get(self.seq, self.slot, chunk)
        assert staged is not None
        return staged, None

    def _commit(self) -> None:
        """Send the last ACCEPTs and learn which failed (their locks had run out:
        the broker hands those records out again, to a later batch)."""
        if self.consumer is None or not (self.unconfirmed or self.acks_pending):
            return
        self.acks_pending = False
        results = self.consumer.commit_sync(timeout=_COMMIT_TIMEOUT_S)
        for tip, error in results.items():
            if error is None:
                continue
            lost = self.unconfirmed.get((tip.topic, tip.partition), 0)
            self.result.accept_failed += lost
            log.warning(
                "accepting %d staged records of %s failed (%s): they stay in batch %d and "
                "come back in a later batch too; keep the group's share.record.lock.duration.ms "
                "well above the time a slot takes from a poll to staging it",
                lost, tip, error, self.seq,
            )
        self.unconfirmed.clear()

    def _replay(self, staged: Chunk) -> Any:
        o = self.options
        self.result.replayed += staged.records
        self.taken += staged.records
        return replay_spans(
            _admin(o), staged.spans, include_headers=o.include_headers,
            fail_on_data_loss=o.fail_on_data_loss,
        )


def read_slot(
    options: SourceOptions, seq: int, slot: int, budget: int,
    ends: Mapping[tuple[str, int], int] | None = None,
) -> Iterator[Any]:
    """The Arrow tables of slot ``slot`` of batch ``seq``, which reads at most
    ``budget`` records and stops at the planned end offsets ``ends`` (see the
    module docstring)."""
    attempt = _Slot(options, seq, slot, budget, ends)
    try:
        for table in attempt.run():
            yield from table.to_batches()
    except BaseException:
        if attempt.consumer is not None:
            # Records polled but not staged are released by closing; a consumer
            # whose state is unknown is not reused.
            _drop_consumer(options)
        raise
    r = attempt.result
    log.info("batch %d slot %d: %d records acquired, %d replayed, %d redelivered",
             seq, slot, r.acquired, r.replayed, r.redelivered)
    if attempt.consumer is not None and not os.environ.get("SPARK_REUSE_WORKER"):
        # Spark runs each task in a new Python worker and ends it with os._exit
        # (spark.python.worker.reuse=false): leave the group now, handing back
        # anything fetched ahead, instead of when the session times out.
        _drop_consumer(options)
