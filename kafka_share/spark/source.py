"""The ``kafka-share`` Structured Streaming source (a Python data source).

Where each piece runs (PySpark 4.2+):

* ``ShareGroupDataSource.schema`` and ``streamReader`` run in a planner Python
  process and in the driver's *source runner*, a long-lived Python process the
  JVM starts for each source of a query. Constructors do no I/O.
* ``initialOffset``, ``getDefaultReadLimit``, ``latestOffset``, ``partitions``,
  ``commit`` and ``prepareForTriggerAvailableNow`` run in the source runner,
  always on its main thread. The share consumer lives there.
* ``read`` runs on executors, on an unpickled copy of the reader: it only
  decodes the Arrow payload carried by its input partition, so executors never
  talk to Kafka and task retries re-read exactly the same records.

Offsets are ``{"seq": n}``: micro-batch ``n`` of this runner holds the records of
one poll. Acknowledgement (the at-least-once argument):

* ``latestOffset(start)`` is only called once every batch up to ``start`` is in
  the query's commit log (batches run one after another, and on restart an
  unfinished batch is re-run before any new ``latestOffset``). So the top of
  ``latestOffset`` ACCEPTs the held batches ``<= start`` and commits them. Only
  then does it poll, which explicit mode requires anyway.
* ``commit(end)`` does the same for ``<= end``: an idempotent second path (Spark
  calls it a batch late, and not at all after the last batch).
* A batch that is re-run after a restart finds nothing held (a fresh runner) and
  is empty; its records were never acknowledged, so the broker redelivers them
  with ``deliveryCount`` + 1.
* ``query.stop()`` terminates the runner with SIGTERM (``stop()`` is not called);
  a handler closes the consumer so the broker releases held records at once.

``trigger(availableNow=True)``: ``prepareForTriggerAvailableNow`` records the
partitions' end offsets, and ``latestOffset`` returns its start offset (which
ends the query) only once the group is done with every record before them
(:mod:`kafka_share.spark._drain`), polling past empty polls meanwhile for at
most ``availableNowIdleTimeoutMs`` without records.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kafka_share.admin import Admin, OffsetSpec, SharePartitionOffsetInfo
from kafka_share.consumer import ShareConsumer
from kafka_share.errors import KafkaError, WakeupError
from kafka_share.models import AcknowledgeType, TopicPartition
from kafka_share.spark._arrow import column_names, poll_batch_to_table, read_ipc, split_ipc
from kafka_share.spark._drain import DrainGoal
from kafka_share.spark._options import SourceOptions, SparkOptionError, parse_source_options

__all__ = ["ShareGroupDataSource", "ShareGroupStreamReader", "source_schema"]

log = logging.getLogger("kafka_share.spark")

#: How long closing the consumer may take when the query stops.
_CLOSE_TIMEOUT_S = 10.0
#: How long committing acknowledgements may take.
_COMMIT_TIMEOUT_S = 30.0
#: How long one admin call of an ``availableNow`` query may take.
_ADMIN_TIMEOUT_S = 15.0
#: Shortest time between two empty polls while ``availableNow`` waits for records
#: held elsewhere (``pollTimeoutMs`` may be 0): no busy loop of polls and admin calls.
_MIN_DRAIN_POLL_S = 0.2


def source_schema(include_headers: bool) -> StructType:
    """The source's Spark schema: Spark's Kafka source columns plus ``deliveryCount``."""
    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    types = {
        "key": BinaryType(),
        "value": BinaryType(),
        "topic": StringType(),
        "partition": IntegerType(),
        "offset": LongType(),
        "timestamp": TimestampType(),
        "timestampType": IntegerType(),
        "headers": ArrayType(header),
        "deliveryCount": IntegerType(),
    }
    return StructType([StructField(n, types[n]) for n in column_names(include_headers)])


class ShareGroupDataSource(DataSource):
    """``spark.readStream.format("kafka-share")``: records of a Kafka share group.

    Register it with :func:`kafka_share.spark.register`. Options are documented
    in the Spark guide; invalid ones raise :class:`SparkOptionError` naming them.
    """

    @classmethod
    def name(cls) -> str:
        # "kafka" is taken by Spark's own Kafka source.
        return "kafka-share"

    def schema(self) -> StructType:
        return source_schema(parse_source_options(self.options).include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        raise SparkOptionError(
            "kafka-share is a streaming source: use spark.readStream.format('kafka-share'), "
            "or kafka_share.spark.process_queue for a batch job over a share group"
        )

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return ShareGroupStreamReader(parse_source_options(self.options), schema)


class ArrowPartition(InputPartition):
    """One input partition: an Arrow IPC stream of some records of batch ``seq``."""

    def __init__(self, seq: int, payload: bytes) -> None:
        super().__init__(seq)
        self.seq = seq
        self.payload = payload


class _Held:
    """A polled micro-batch waiting for Spark to make it durable."""

    __slots__ = ("batch", "payloads")

    def __init__(self, batch: Any, payloads: list[bytes]) -> None:
        #: the ``poll_arrow`` record batch (acknowledged as a whole)
        self.batch = batch
        self.payloads = payloads


class _GroupProbe:
    """The admin calls of an ``availableNow`` query (see :mod:`._drain`)."""

    def __init__(self, options: SourceOptions) -> None:
        self._options = options
        self._admin: Admin | None = None

    def _client(self) -> Admin:
        if self._admin is None:
            self._admin = Admin(dict(self._options.consumer_config))
        return self._admin

    def goal(self) -> DrainGoal:
        """The partitions' earliest and end offsets now.

        Raises:
            KafkaError: the topics or their offsets cannot be read.
        """
        admin = self._client()
        described = admin.describe_topics(self._options.topics, timeout=_ADMIN_TIMEOUT_S)
        tps = [
            TopicPartition(name, p.partition)
            for name, topic in described.items()
            for p in topic.partitions
        ]
        latest = admin.list_offsets(
            dict.fromkeys(tps, OffsetSpec.latest()),
            isolation_level=self._isolation_level(admin),
            timeout=_ADMIN_TIMEOUT_S,
        )
        earliest = admin.list_offsets(
            dict.fromkeys(tps, OffsetSpec.earliest()), timeout=_ADMIN_TIMEOUT_S
        )
        return DrainGoal({tp: (earliest[tp].offset, latest[tp].offset) for tp in tps})

    def _isolation_level(self, admin: Admin) -> str:
        # A read_committed group never delivers past the last stable offset, so
        # that is where its queue ends; open transactions would otherwise look
        # like records still to come.
        group = self._options.group_id
        try:
            entry = admin.describe_group_configs(group, timeout=_ADMIN_TIMEOUT_S).get(
                "share.isolation.level"
            )
        except KafkaError as exc:
            log.info("cannot read the isolation level of share group %r (%s); "
                     "assuming read_uncommitted", group, exc)
            return "read_uncommitted"
        level = entry.value if entry is not None else None
        return "read_committed" if level == "read_committed" else "read_uncommitted"

    def group_offsets(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, SharePartitionOffsetInfo] | None:
        """The group's start offsets and lag (None: not known right now)."""
        try:
            return self._client().list_share_group_offsets(
                self._options.group_id, partitions, timeout=_ADMIN_TIMEOUT_S
            )
        except KafkaError as exc:
            # E.g. the group does not exist until this query's consumer joins it.
            log.debug("cannot read the offsets of share group %r: %s",
                      self._options.group_id, exc)
            return None

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None


class _Driver:
    """The source runner's state: the consumer and the batches it holds.

    Every method runs on the runner's main thread; so does the SIGTERM handler,
    between two bytecodes of whatever the thread was doing. ``in_call`` tells
    the handler whether that was a consumer call (then it only wakes the
    consumer up, and the call's caller shuts down).
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.consumer: ShareConsumer[bytes | None, bytes | None] | None = None
        self.held: dict[int, _Held] = {}
        self.draining = False
        self.drained = False
        #: availableNow: the end offsets when the query started (None: unknown)
        self.goal: DrainGoal | None = None
        self.probe: _GroupProbe | None = None
        #: availableNow: when the current run of empty polls began
        self.idle_since: float | None = None
        self.clock: Callable[[], float] = time.monotonic
        self.sleep: Callable[[float], None] = time.sleep
        self.polled = False
        self.in_call = False
        self.terminating = False
        self.closed = False

    # -- lifecycle -------------------------------------------------------------

    def ensure_consumer(self) -> ShareConsumer[bytes | None, bytes | None]:
        if self.closed:
            raise RuntimeError("the kafka-share source was stopped")
        if self.consumer is None:
            self._install_sigterm_handler()
            consumer: ShareConsumer[bytes | None, bytes | None] = ShareConsumer(
                dict(self.options.consumer_config)
            )
            consumer.subscribe(list(self.options.topics))
            self.consumer = consumer
        return self.consumer

    def _install_sigterm_handler(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            # Only the main thread may set handlers; the runner always calls us
            # there, so this is a source used some other way (e.g. a test).
            return
        signal.signal(signal.SIGTERM, self._on_sigterm)

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        # query.stop(): the JVM terminates this process. Close the consumer first,
        # so the broker releases the records of the unfinished batch at once
        # rather than when their locks expire.
        self.terminating = True
        if self.in_call:
            if self.consumer is not None:
                self.consumer.wakeup()
            return  # the interrupted call's caller shuts down (see _guarded)
        self.shutdown()
        self._die()

    @staticmethod
    def _die() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    def shutdown(self) -> None:
        """Close the consumer (idempotent): unacknowledged records are released."""
        if self.closed:
            return
        self.closed = True
        if self.probe is not None:
            self.probe.close()
        consumer, self.consumer = self.consumer, None
        held = sum(h.batch.num_rows for h in self.held.values())
        self.held.clear()
        if consumer is not None:
            log.info("kafka-share source stopping; releasing %d held records", held)
            try:
                consumer.close(timeout=_CLOSE_TIMEOUT_S)
            except Exception as exc:  # the process is going away: report, do not mask
                log.warning("closing the share consumer failed: %s", exc)

    def after_call(self) -> None:
        """Finish a SIGTERM that arrived during a consumer call."""
        if self.terminating:
            self.shutdown()
            self._die()

    # -- acknowledgement -------------------------------------------------------

    def ack_through(self, seq: int) -> None:
        """ACCEPT and commit every held batch up to ``seq`` (idempotent)."""
        done = sorted(s for s in self.held if s <= seq)
        if not done or self.consumer is None:
            return
        consumer = self.consumer
        count = 0
        batches = []
        self.in_call = True
        try:
            for s in done:
                batch = self.held.pop(s).batch
                consumer.acknowledge_arrow(batch, AcknowledgeType.ACCEPT)
                batches.append(batch)
                count += batch.num_rows
            results = consumer.commit_sync(timeout=_COMMIT_TIMEOUT_S)
        except WakeupError:
            results = {}
        finally:
            self.in_call = False
        self.after_call()
        if self.goal is not None:
            confirmed = {tip.topic_partition for tip, error in results.items() if error is None}
            for batch in batches:
                self._note_accepted(batch, confirmed)
        for partition, error in results.items():
            if error is not None:
                # Typically a lock that expired before the batch finished: the broker
                # has redelivered those records, so they will be seen twice.
                log.warning(
                    "acknowledging batch(es) %s on %s failed (%s): their records may be "
                    "delivered again; keep the group's share.record.lock.duration.ms above "
                    "the trigger interval plus the batch time",
                    done, partition, error,
                )
        log.debug("accepted %d records of batch(es) %s", count, done)

    def _note_accepted(self, batch: Any, confirmed: set[TopicPartition]) -> None:
        assert self.goal is not None
        topics = batch.column("topic").to_pylist()
        partitions = batch.column("partition").to_pylist()
        offsets = batch.column("offset").to_pylist()
        by_partition: dict[TopicPartition, list[int]] = {}
        for topic, partition, offset in zip(topics, partitions, offsets, strict=True):
            by_partition.setdefault(TopicPartition(topic, partition), []).append(offset)
        for tp, seen in by_partition.items():
            if tp in confirmed:
                self.goal.record_accepted(tp, seen)

    # -- availableNow ----------------------------------------------------------

    def prepare_drain(self) -> None:
        """Record where the queue ends now (``prepareForTriggerAvailableNow``)."""
        self.draining = True
        # Spark asks for the read limit right after this, and the consumer is
        # made at the first latestOffset: both see these options.
        self.options = self.options.for_available_now()
        if self.probe is None:
            self.probe = _GroupProbe(self.options)
        try:
            self.goal = self.probe.goal()
        except KafkaError as exc:
            self.goal = None
            log.warning(
                "availableNow: cannot read the end offsets of %s (%s); the query will end "
                "once no record arrived for availableNowIdleTimeoutMs (%d ms)",
                ", ".join(self.options.topics), exc, self.options.available_now_idle_timeout_ms,
            )
        else:
            log.info("availableNow: reading share group %r up to the end offsets %s",
                     self.options.group_id,
                     {str(tp): end for tp, (_, end) in self.goal.bounds.items()})

    def drain_pending(self) -> dict[TopicPartition, tuple[int | None, int]] | None:
        """Partitions whose records from the start are not all done (None: unknown)."""
        if self.goal is None or self.probe is None:
            return None
        wanted = [tp for tp, (earliest, end) in self.goal.bounds.items() if end > earliest]
        if not wanted:
            return {}  # the topics were empty
        offsets = self.probe.group_offsets(wanted)
        return None if offsets is None else self.goal.pending(offsets)

    def give_up_waiting(self, now: float) -> bool:
        """After an empty poll: whether availableNow stops waiting for more records."""
        if self.idle_since is None:
            self.idle_since = now
        if (now - self.idle_since) * 1000 < self.options.available_now_idle_timeout_ms:
            return False
        pending = self.drain_pending()
        if pending:
            left = "; ".join(
                f"{tp}: from offset {'?' if start is None else start} to {end}"
                for tp, (start, end) in sorted(pending.items())
            )
            log.warning(
                "availableNow: ending although records that were there when the query "
                "started are not all done after %d ms without records (%s): other members "
                "of share group %r hold them, or their locks have not expired yet; they stay "
                "in the group. Raise availableNowIdleTimeoutMs to wait longer",
                self.options.available_now_idle_timeout_ms, left, self.options.group_id,
            )
        return True

    # -- polling ---------------------------------------------------------------

    def poll(self, max_rows: int) -> Any:
        """One ``poll_arrow`` record batch of at most ``max_rows`` rows (None: none)."""
        consumer = self.ensure_consumer()
        timeout_ms = (
            self.options.poll_timeout_ms if self.polled
            else max(self.options.poll_timeout_ms, self.options.initial_poll_timeout_ms)
        )
        self.in_call = True
        batch: Any = None
        try:
            batch = consumer.poll_arrow(timeout=timeout_ms / 1000)
            self.polled = True
            if batch.num_rows > max_rows:
                # Only when Spark asks for fewer rows than one poll may return:
                # give the rest back now rather than hold them under a lock.
                consumer.acknowledge_arrow(batch.slice(max_rows), AcknowledgeType.RELEASE)
                batch = batch.slice(0, max_rows)
        except WakeupError:
            batch = None
        finally:
            self.in_call = False
        self.after_call()
        return batch if batch is not None and batch.num_rows else None


class ShareGroupStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The stream reader of the ``kafka-share`` source (see the module docstring)."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        expected = column_names(options.include_headers)
        if list(schema.fieldNames()) != expected:
            raise SparkOptionError(
                f"the kafka-share source has the fixed schema {expected} "
                f"(headers only with includeHeaders=true); got {schema.fieldNames()}: "
                "do not pass .schema(...), select or cast columns after load()"
            )
        self._options = options
        self._driver: _Driver | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Pickled for executors: they need the options only, never the consumer.
        return {"_options": self._options, "_driver": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def _state(self) -> _Driver:
        if self._driver is None:
            self._driver = _Driver(self._options)
        return self._driver

    # -- offsets ---------------------------------------------------------------

    def initialOffset(self) -> dict[str, int]:
        return {"seq": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        # One micro-batch is one poll, so it never holds more than max.poll.records.
        # Saying so also tells Trigger.Once apart: Spark then replaces this limit
        # with ReadAllAvailable (and only then).
        return ReadMaxRows(self._state().options.max_poll_records)

    def prepareForTriggerAvailableNow(self) -> None:
        # availableNow reads what the topics hold now: record their end offsets
        # before anything is consumed (see kafka_share.spark._drain).
        self._state().prepare_drain()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, int]:
        state = self._state()
        if isinstance(limit, ReadAllAvailable) and not state.draining:
            raise SparkOptionError(
                "the kafka-share source does not support trigger(once=True): the query "
                "stops before the batch could be acknowledged, so its records would be "
                "redelivered on every run; use trigger(availableNow=True)"
            )
        seq = int(start["seq"])
        # Every batch up to `start` is in the query's commit log now (module docstring).
        state.ack_through(seq)
        if state.held:
            # Asked again before the held batch ran (never seen in practice): explicit
            # mode forbids polling before it is acknowledged, so offer it again.
            return {"seq": max(state.held)}
        if state.drained:
            return {"seq": seq}
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else (
            state.options.max_poll_records
        )
        while True:
            if state.draining and state.drain_pending() == {}:
                state.drained = True  # availableNow: all done, the last batch included
                return {"seq": seq}
            started = state.clock()
            batch = state.poll(max_rows)
            if batch is not None:
                state.idle_since = None
                break
            if not state.draining:
                return {"seq": seq}
            # availableNow, and records from the start may still be held elsewhere
            # (another member, a lock that has not expired): an empty poll is not
            # the end of the queue. Poll again, within availableNowIdleTimeoutMs.
            now = state.clock()
            if state.give_up_waiting(now):
                state.drained = True
                return {"seq": seq}
            if now - started < _MIN_DRAIN_POLL_S:
                state.sleep(_MIN_DRAIN_POLL_S - (now - started))
        table = poll_batch_to_table(batch, self._options.include_headers)
        parts = self._options.num_partitions or table.group_by(
            ["topic", "partition"]
        ).aggregate([]).num_rows
        payloads = split_ipc(
            table, min_parts=parts, max_bytes=self._options.max_partition_bytes
        )
        state.held[seq + 1] = _Held(batch, payloads)
        return {"seq": seq + 1}

    def reportLatestOffset(self) -> dict[str, int] | None:
        return None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        # Idempotent: Spark may plan the same batch more than once. A batch this
        # runner does not hold (re-run after a restart) is empty: its records were
        # never acknowledged and come back from the broker as new records.
        state = self._state()
        lo, hi = int(start["seq"]), int(end["seq"])
        out: list[InputPartition] = []
        for seq in range(lo + 1, hi + 1):
            held = state.held.get(seq)
            if held is not None:
                out.extend(ArrowPartition(seq, p) for p in held.payloads)
        return out

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, ArrowPartition)
        yield from read_ipc(partition.payload)

    def commit(self, end: dict[str, Any]) -> None:
        self._state().ack_through(int(end["seq"]))

    def stop(self) -> None:
        # Called when the JVM side goes away abruptly (not on query.stop()).
        if self._driver is not None:
            self._driver.shutdown()
