"""The ``kafka-share`` Structured Streaming source (a Python data source).

Executors acquire, the driver plans (see ``docs/spark.md``):

* The driver's *source runner* (``initialOffset``, ``latestOffset``,
  ``partitions``, ``commit``) holds no consumer. Each trigger it asks the broker
  for the group's backlog and plans a micro-batch as ``slots`` read slots sharing
  a budget of records (:mod:`._plan`); the end offset it returns,
  ``{"run", "seq", "slots", "budget"}``, is in the query's offset log, so a re-run
  batch is planned exactly as before.
* ``read`` runs in executors' Python workers: the task of slot ``i`` polls with a
  consumer kept in its worker across tasks, stages the coordinates of each
  poll's records, ACCEPTs them, and yields them; a slot already staged (a
  retried task, a speculative copy, a batch re-run after a restart) is read back
  from the log by offset instead (:mod:`._slots`, :mod:`._staging`,
  :mod:`._replay`). Every record of a batch is therefore in the batch however
  often it runs: with an idempotent sink, end-to-end exactly-once.
* ``latestOffset(start)`` and ``commit(end)`` delete the staged chunks of the
  batches Spark has committed, and count what their slots did (progress).

``"run"`` is a token made when the query starts without a checkpoint: staged
chunks live under ``<stagingLocation>/<run>/``, so a new query never mistakes
a former query's chunks in the same location for its own.

``trigger(availableNow=True)``: ``prepareForTriggerAvailableNow`` records the
partitions' end offsets, and ``latestOffset`` returns its start offset (which
ends the query) once the group is done with every record before them
(:mod:`kafka_share.spark._drain`), or once batches have got no records for
``availableNowIdleTimeoutMs``.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import attrs
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

from kafka_share._reprs import attrs_repr
from kafka_share.admin import Admin, OffsetSpec, SharePartitionOffsetInfo
from kafka_share.errors import KafkaError
from kafka_share.models import TopicPartition
from kafka_share.share.topic_pattern import TopicListing as PatternTopic
from kafka_share.share.topic_pattern import match_topics
from kafka_share.spark._arrow import column_names
from kafka_share.spark._drain import DrainGoal
from kafka_share.spark._duplicates import RETAINED_BATCHES
from kafka_share.spark._options import SourceOptions, SparkOptionError, parse_source_options
from kafka_share.spark._plan import BatchPlan, TriggerPolicy
from kafka_share.spark._staging import StagingStore

__all__ = ["ShareGroupDataSource", "ShareGroupStreamReader", "SlotPartition", "source_schema"]

log = logging.getLogger("kafka_share.spark")

_T = TypeVar("_T")

#: How long one admin call of the driver may take.
_ADMIN_TIMEOUT_S = 15.0
#: availableNow: how often the driver looks again while nothing can be planned.
_DRAIN_RECHECK_S = 0.5
#: How long the topics' partitions and the group's isolation level are trusted.
_METADATA_MAX_AGE_S = 30.0


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


class SlotPartition(InputPartition):
    """One read slot of a micro-batch (see :mod:`kafka_share.spark._slots`)."""

    def __init__(
        self, run: str, seq: int, slot: int, budget: int,
        ends: Mapping[tuple[str, int], int] | None = None,
    ) -> None:
        super().__init__((seq, slot))
        self.run = run
        self.seq = seq
        self.slot = slot
        self.budget = budget
        #: (topic, partition) -> end offset when the batch was planned
        self.ends = ends


@attrs_repr
@attrs.frozen(repr=False)
class GroupView:
    """One look at the broker: the partitions' offsets, the group's progress on
    them (None: not known right now) and the backlog they add up to."""

    bounds: Mapping[TopicPartition, tuple[int, int]]
    offsets: Mapping[TopicPartition, SharePartitionOffsetInfo] | None
    backlog: int

    def pending_ends(self) -> dict[str, dict[str, int]]:
        """The end offsets of the partitions with a backlog, as the offset log
        keeps them (``{topic: {partition: end}}``): where a batch's slots stop."""
        out: dict[str, dict[str, int]] = {}
        for tp, behind in partition_backlogs(self.bounds, self.offsets).items():
            if behind > 0:
                out.setdefault(tp.topic, {})[str(tp.partition)] = self.bounds[tp][1]
        return out


def partition_backlogs(
    bounds: Mapping[TopicPartition, tuple[int, int]],
    offsets: Mapping[TopicPartition, SharePartitionOffsetInfo] | None,
) -> dict[TopicPartition, int]:
    """Records not yet done for the group, per partition: its lag (Kafka 4.2+),
    else the distance from the share-partition start offset to the end of the
    log (the whole log for a partition the group has not started on)."""
    out: dict[TopicPartition, int] = {}
    for tp, (earliest, end) in bounds.items():
        info = (offsets or {}).get(tp)
        if info is not None and info.lag is not None:
            out[tp] = info.lag
        elif info is not None and info.start_offset is not None:
            out[tp] = max(0, end - max(info.start_offset, earliest))
        else:
            out[tp] = max(0, end - earliest)
    return out


def backlog_of(
    bounds: Mapping[TopicPartition, tuple[int, int]],
    offsets: Mapping[TopicPartition, SharePartitionOffsetInfo] | None,
) -> int:
    """The group's whole backlog (see :func:`partition_backlogs`)."""
    return sum(partition_backlogs(bounds, offsets).values())


class _GroupProbe:
    """The driver's admin calls: the topics' partitions and offsets, the group's
    progress on them. The partitions and the group's isolation level are read
    again every :data:`_METADATA_MAX_AGE_S` (new partitions join the plan then);
    the offsets on every look."""

    def __init__(self, options: SourceOptions, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self._options = options
        self._admin: Admin | None = None
        self._clock = clock
        self._partitions: tuple[float, list[TopicPartition]] | None = None
        self._isolation: tuple[float, str] | None = None

    def _client(self) -> Admin:
        if self._admin is None:
            self._admin = Admin(dict(self._options.consumer_config))
        return self._admin

    def _cached(self, entry: tuple[float, _T] | None) -> _T | None:
        """A cached value still young enough to trust (None: ask the broker)."""
        if entry is None or self._clock() - entry[0] >= _METADATA_MAX_AGE_S:
            return None
        return entry[1]

    def partitions(self) -> list[TopicPartition]:
        """The subscribed topics' partitions.

        Raises:
            KafkaError: the topics cannot be described.
        """
        cached = self._cached(self._partitions)
        if cached is not None:
            return cached
        names = self._topics()
        if not names:
            self._partitions = (self._clock(), [])
            return []
        described = self._client().describe_topics(names, timeout=_ADMIN_TIMEOUT_S)
        tps = sorted(
            TopicPartition(name, p.partition)
            for name, topic in described.items()
            for p in topic.partitions
        )
        self._partitions = (self._clock(), tps)
        return tps

    def _topics(self) -> Sequence[str]:
        """``subscribe``'s names, or what ``subscribePattern`` matches now (as the
        read slots' consumers match it: whole names, internal topics never)."""
        pattern = self._options.topic_pattern
        if pattern is None:
            return self._options.topics
        listed = self._client().list_topics(timeout=_ADMIN_TIMEOUT_S)
        return sorted(match_topics(re.compile(pattern), (
            PatternTopic(t.name, t.is_internal) for t in listed.values()
        )))

    def goal(self) -> DrainGoal:
        """The partitions' earliest and end offsets now.

        Raises:
            KafkaError: the topics or their offsets cannot be read.
        """
        admin = self._client()
        tps = self.partitions()
        if not tps:
            return DrainGoal({})  # a pattern matching no topic (yet)
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
        level_cached = self._cached(self._isolation)
        if level_cached is not None:
            return level_cached
        group = self._options.group_id
        try:
            entry = admin.describe_group_configs(group, timeout=_ADMIN_TIMEOUT_S).get(
                "share.isolation.level"
            )
        except KafkaError as exc:
            log.info("cannot read the isolation level of share group %r (%s); "
                     "assuming read_uncommitted", group, exc)
            return "read_uncommitted"  # not cached: asked again next time
        level = entry.value if entry is not None else None
        found = "read_committed" if level == "read_committed" else "read_uncommitted"
        self._isolation = (self._clock(), found)
        return found

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

    def look(self) -> GroupView:
        """The offsets and the group's progress now: three admin calls (plus the
        partitions and isolation level when their cache is stale).

        Raises:
            KafkaError: the topics' offsets cannot be read.
        """
        bounds = self.goal().bounds
        if not bounds:
            return GroupView(bounds, {}, 0)
        offsets = self.group_offsets(list(bounds))
        return GroupView(bounds, offsets, backlog_of(bounds, offsets))

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None


class _Progress:
    """What the slots of committed batches did, summed (for the query progress)."""

    FIELDS = ("acquired", "replayed", "redelivered", "accept_failed", "lost_races",
              "already_staged")

    def __init__(self) -> None:
        self.totals = dict.fromkeys(self.FIELDS, 0)
        self.batches = 0
        self.lag: int | None = None

    def add(self, stats: dict[str, int]) -> None:
        for name in self.FIELDS:
            self.totals[name] += int(stats.get(name, 0))


class _Driver:
    """The source runner's state (every method runs on its main thread)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.probe = _GroupProbe(options)
        self.run: str | None = None
        self.policy: TriggerPolicy | None = None
        self.progress = _Progress()
        #: batches whose slots have been counted
        self.counted = 0
        #: how many Python workers ran the slots of the last batch counted
        self.last_workers = 0
        self.draining = False
        self.drained = False
        self.goal: DrainGoal | None = None
        #: availableNow: when batches began to come back empty
        self.idle_since: float | None = None
        self.clock: Callable[[], float] = time.monotonic
        self.sleep: Callable[[float], None] = time.sleep

    def store(self, run: str) -> StagingStore:
        return StagingStore(f"{self.options.staging_location.rstrip('/')}/{run}")

    def trigger_policy(self) -> TriggerPolicy:
        if self.policy is None:
            o = self.options
            slots = o.num_partitions or max(1, len(self.probe.partitions()))
            self.policy = TriggerPolicy(
                max_slots=slots, adapt_slots=o.num_partitions is None,
                max_records=o.max_records_per_trigger,
                min_records=o.min_records_per_trigger,
                max_trigger_delay_s=o.max_trigger_delay_ms / 1000,
            )
        return self.policy

    # -- committed batches ---------------------------------------------------------

    def settle_through(self, run: str, seq: int) -> int | None:
        """Count the staged chunks of batches up to ``seq`` (Spark has committed
        them), and forget those RETAINED_BATCHES older (the slots look records
        handed out again up in them: ``_duplicates``). Returns the records the
        newest of them acquired (None if no batch was new)."""
        store = self.store(run)
        acquired: int | None = None
        for b in store.batches():
            if b > seq:
                continue
            if b > self.counted:
                acquired = self._count_batch(store, b)
                self.counted = b
            if b <= seq - RETAINED_BATCHES:
                store.delete_batch(b)
        return acquired

    def _count_batch(self, store: StagingStore, seq: int) -> int:
        acquired = 0
        workers: set[int] = set()
        for slot in store.slots(seq):
            chunks = list(store.slot_chunks(seq, slot))
            if not chunks or not chunks[-1].end:
                continue
            stats = chunks[-1].stats
            self.progress.add(stats)
            acquired += int(stats.get("acquired", 0))
            if "worker" in stats:
                workers.add(stats["worker"])
            if self.goal is not None and not stats.get("accept_failed"):
                for chunk in chunks[:-1]:
                    for topic, partition, first, last, _ in chunk.spans:
                        self.goal.record_accepted(
                            TopicPartition(topic, partition), range(first, last + 1)
                        )
        self.progress.batches += 1
        self.last_workers = len(workers)
        return acquired

    # -- availableNow --------------------------------------------------------------

    def prepare_drain(self) -> None:
        """Record where the queue ends now (``prepareForTriggerAvailableNow``)."""
        self.draining = True
        try:
            self.goal = self.probe.goal()
        except KafkaError as exc:
            self.goal = None
            log.warning(
                "availableNow: cannot read the end offsets of %s (%s); the query will end "
                "once batches got no record for availableNowIdleTimeoutMs (%d ms)",
                self.options.subscription_text, exc, self.options.available_now_idle_timeout_ms,
            )
        else:
            log.info("availableNow: reading share group %r up to the end offsets %s",
                     self.options.group_id,
                     {str(tp): end for tp, (_, end) in self.goal.bounds.items()})

    def drain_pending(
        self, view: GroupView | None
    ) -> dict[TopicPartition, tuple[int | None, int]] | None:
        """Partitions whose records from the start are not all done (None: unknown)."""
        if self.goal is None:
            return None
        if not any(end > earliest for earliest, end in self.goal.bounds.values()):
            return {}  # the topics were empty
        if view is None or view.offsets is None:
            return None
        return self.goal.pending(view.offsets)

    def drain_done(self, last_acquired: int | None, view: GroupView | None) -> bool:
        """availableNow: whether the query has read what was there at its start."""
        pending = self.drain_pending(view)
        if pending == {}:
            return True
        if last_acquired:
            self.idle_since = None
            return False
        now = self.clock()
        if self.idle_since is None:
            self.idle_since = now
        if (now - self.idle_since) * 1000 < self.options.available_now_idle_timeout_ms:
            return False
        left = "; ".join(
            f"{tp}: from offset {'?' if start is None else start} to {end}"
            for tp, (start, end) in sorted((pending or {}).items())
        )
        log.warning(
            "availableNow: ending although records that were there when the query started "
            "are not all done after %d ms of batches without records (%s): other members of "
            "share group %r hold them, or their locks have not expired yet; they stay in the "
            "group. Raise availableNowIdleTimeoutMs to wait longer",
            self.options.available_now_idle_timeout_ms, left or "unknown", self.options.group_id,
        )
        return True

    # -- planning ------------------------------------------------------------------

    def look(self) -> GroupView | None:
        """This trigger's one look at the broker (None: it did not answer)."""
        try:
            return self.probe.look()
        except KafkaError as exc:
            log.warning("cannot read the backlog of share group %r (%s); no batch this "
                        "trigger", self.options.group_id, exc)
            return None

    def next_plan(self, last_acquired: int | None, view: GroupView | None) -> BatchPlan | None:
        policy = self.trigger_policy()
        now = self.clock()
        if last_acquired is not None:
            policy.batch_done(last_acquired, now, self.last_workers)
        if view is None:
            return None
        backlog = view.backlog
        self.progress.lag = backlog
        if self.draining and backlog == 0:
            # The broker says nothing is left, but availableNow ends on its own
            # terms (drain_done): one more look at the next trigger.
            return None
        return policy.plan(backlog, now)


def _offset(
    run: str, seq: int, plan: BatchPlan | None = None,
    ends: dict[str, dict[str, int]] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"run": run, "seq": seq}
    if plan is not None:
        out["slots"] = plan.slots
        out["budget"] = plan.budget
        out["capped"] = plan.capped
        out["ends"] = ends or {}
    return out


def _slot_ends(end: Mapping[str, Any]) -> dict[tuple[str, int], int] | None:
    """A planned batch's end offsets per partition (None: a batch planned by a
    version of the source that kept none, in a checkpoint it wrote)."""
    ends = end.get("ends")
    if ends is None:
        return None
    return {(topic, int(p)): int(offset)
            for topic, parts in ends.items() for p, offset in parts.items()}


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
        # Pickled for executors: they need the options only.
        return {"_options": self._options, "_driver": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def _state(self) -> _Driver:
        if self._driver is None:
            self._driver = _Driver(self._options)
        return self._driver

    # -- offsets (driver) ----------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:
        # A query without a checkpoint: a new run token, so that chunks another
        # query left in the same stagingLocation are never read as this one's.
        # Spark may call this twice at a query's start: only the location is
        # checked here, the run's folder is made by its first staged chunk.
        run = uuid.uuid4().hex[:16]
        StagingStore(self._options.staging_location).check_writable()
        return _offset(run, 0)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self._options.max_records_per_trigger
        return ReadMaxRows(limit) if limit is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._state().prepare_drain()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        state = self._state()
        run, seq = str(start["run"]), int(start["seq"])
        # Every batch up to `start` is in the query's commit log now: Spark calls
        # latestOffset only once the previous batch has finished.
        last_acquired = state.settle_through(run, seq) if seq > 0 else None
        while not state.drained:
            view = state.look()
            if state.draining and state.drain_done(last_acquired, view):
                state.drained = True
                break
            plan = state.next_plan(last_acquired, view)
            last_acquired = None
            if plan is not None:
                assert view is not None  # no plan without a look
                if isinstance(limit, ReadMaxRows):
                    plan = BatchPlan(plan.slots, min(plan.budget, limit.max_rows))
                return _offset(run, seq + 1, plan, view.pending_ends())
            if not state.draining:
                break
            # availableNow ends the query at the first latestOffset that returns
            # its start, and records from the start may still come back (held
            # by another member, a lock that has not expired): look again.
            state.sleep(_DRAIN_RECHECK_S)
        return start

    def reportLatestOffset(self) -> dict[str, Any] | None:
        # Shown as the source's latestOffset in the query progress: what the
        # slots of committed batches did, and the group's backlog.
        state = self._state()
        out: dict[str, Any] = dict(state.progress.totals)
        out["batches"] = state.progress.batches
        if state.progress.lag is not None:
            out["backlog"] = state.progress.lag
        return out

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        # Idempotent: the plan is in `end`, which is in the offset log.
        lo, hi = int(start["seq"]), int(end["seq"])
        if hi <= lo:
            return []
        if hi != lo + 1:
            raise RuntimeError(f"kafka-share plans one batch at a time, got {start} to {end}")
        # "capped" and "ends" are missing from batches a former version planned.
        plan = BatchPlan(int(end["slots"]), int(end["budget"]), bool(end.get("capped", True)))
        ends = _slot_ends(end)
        return [SlotPartition(str(end["run"]), hi, i, plan.slot_budget(i), ends)
                for i in range(plan.slots)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        # In an executor's Python worker. Imported here: the consumer and the
        # Arrow code are the executors' (the driver's processes never read).
        from kafka_share.spark._slots import read_slot  # noqa: PLC0415

        assert isinstance(partition, SlotPartition)
        options = self._options.for_run(partition.run)
        yield from read_slot(options, partition.seq, partition.slot, partition.budget,
                             partition.ends)

    def commit(self, end: dict[str, Any]) -> None:
        self._state().settle_through(str(end["run"]), int(end["seq"]))

    def stop(self) -> None:
        if self._driver is not None:
            self._driver.probe.close()
