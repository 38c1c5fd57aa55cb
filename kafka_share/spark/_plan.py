"""When the driver plans a micro-batch, how big, and over how many read slots.

Pure logic (no Spark, no network, no clock: time comes in as ``now_s``).

The driver does not read records; it decides from the group's backlog (the
records not yet done for the group: the broker's lag on Kafka 4.2+, else the
distance from the share-partition start offset to the end of the log) whether a
micro-batch is worth running, and splits its budget over read slots:

* no backlog: no batch (an idle query runs no empty batches);
* ``minRecordsPerTrigger``: a smaller backlog waits, at most
  ``maxTriggerDelay`` after the previous batch;
* a batch that got no records although the backlog said otherwise (the records
  are held by other members, or their locks have not expired) is not repeated
  for :data:`EMPTY_BATCH_BACKOFF_S` while the backlog stays the same;
* the budget is the backlog, capped by ``maxRecordsPerTrigger``, and the batch
  has about ``budget / MIN_SLOT_RECORDS`` slots at most (a small batch does not
  start slots that would only wait for nothing);
* with ``maxRecordsPerTrigger`` the slots split the budget evenly (it is a
  total). Without it, the budget is only what the driver saw, and each slot may
  take all of it: a slot reads until its consumer has the records that existed
  when the batch was planned (the plan's end offsets, see
  :mod:`kafka_share.spark._slots`). The backlog sits unevenly on the group's
  members (the busier held 61-65 % of it in the steady-state benchmark), so an
  even split left most of a busy member's records for later batches, and the
  broker's lag over-reports while records are in flight, so slots of an even
  split waited for records not produced yet;
* without ``numPartitions``, a batch has as many slots as Python workers ran the
  last batch's slots (how many tasks the executors ran at once: the driver's
  source runner cannot ask Spark for its parallelism), at most the topics'
  partition count, which the first batch and one batch every
  :data:`SLOT_PROBE_INTERVAL_S` plan to learn it again (executors come and go).
  A slot beyond the tasks that run at once waits for a free core and pays a
  Python task's fixed cost (100-250 ms measured on 2 cores) in a second wave.
"""

from __future__ import annotations

import math

import attrs

from kafka_share._reprs import attrs_repr

__all__ = [
    "EMPTY_BATCH_BACKOFF_S", "MIN_SLOT_RECORDS", "SLOT_PROBE_INTERVAL_S", "BatchPlan",
    "TriggerPolicy",
]

#: A read slot is planned for at least this many records of the budget.
MIN_SLOT_RECORDS = 1000
#: After a batch that got nothing, how long an unchanged backlog plans no batch.
EMPTY_BATCH_BACKOFF_S = 5.0
#: How often a batch plans every slot it may, to see how many run at once.
SLOT_PROBE_INTERVAL_S = 60.0


@attrs_repr
@attrs.frozen(repr=False)
class BatchPlan:
    """One micro-batch: ``slots`` read tasks and a budget of ``budget`` records:
    a cap on the whole batch that they split (``capped``), or the backlog the
    driver saw, which each slot may take (see the module docstring)."""

    slots: int
    budget: int
    capped: bool = True

    def slot_budget(self, slot: int) -> int:
        """The most slot ``slot`` reads: its share of a capped budget (the shares
        add up to it), else the whole budget."""
        if not self.capped:
            return self.budget
        return self.budget // self.slots + (1 if slot < self.budget % self.slots else 0)


class TriggerPolicy:
    """Decides each trigger's plan (see the module docstring)."""

    def __init__(
        self,
        *,
        max_slots: int,
        max_records: int | None,
        min_records: int | None = None,
        max_trigger_delay_s: float = 900.0,
        adapt_slots: bool = False,
    ) -> None:
        if max_slots < 1:
            raise ValueError(f"max_slots must be at least 1, got {max_slots}")
        self.max_slots = max_slots
        self.max_records = max_records
        self.min_records = min_records
        self.max_trigger_delay_s = max_trigger_delay_s
        self._last_batch_s: float | None = None
        #: (backlog when planned, when it came back empty) of the last empty batch
        self._empty: tuple[int, float] | None = None
        self._planned_backlog = 0
        #: adapt_slots: how many workers ran the last batch, and when all
        #: max_slots were last planned (None: never)
        self.adapt_slots = adapt_slots
        self._workers: int | None = None
        self._probed_at: float | None = None
        self._planned_slots = 0

    def plan(self, backlog: int, now_s: float) -> BatchPlan | None:
        """The next batch for ``backlog`` records, or None to run none now."""
        if backlog <= 0:
            return None
        if self._last_batch_s is None:
            self._last_batch_s = now_s  # maxTriggerDelay counts from the query's start
        if self.min_records is not None and backlog < self.min_records and (
            now_s - self._last_batch_s < self.max_trigger_delay_s
        ):
            return None
        if self._empty is not None:
            empty_backlog, empty_at = self._empty
            if backlog == empty_backlog and now_s - empty_at < EMPTY_BATCH_BACKOFF_S:
                return None
            self._empty = None
        budget = backlog if self.max_records is None else min(backlog, self.max_records)
        slots = max(1, min(self._slot_cap(now_s), math.ceil(budget / MIN_SLOT_RECORDS)))
        self._last_batch_s = now_s
        self._planned_backlog = backlog
        self._planned_slots = slots
        return BatchPlan(slots, budget, capped=self.max_records is not None)

    def _slot_cap(self, now_s: float) -> int:
        if not self.adapt_slots:
            return self.max_slots
        if (
            self._workers is None or self._probed_at is None
            or now_s - self._probed_at >= SLOT_PROBE_INTERVAL_S
        ):
            self._probed_at = now_s
            return self.max_slots
        return min(self.max_slots, self._workers)

    def batch_done(self, acquired: int, now_s: float, workers: int = 0) -> None:
        """What the last planned batch got: its slots' count of new records, and
        how many Python workers ran its slots (0: not known)."""
        self._empty = (self._planned_backlog, now_s) if acquired == 0 else None
        # Fewer workers than slots: that is how many tasks run at once. As many
        # (a small batch): at least that many, which says nothing new unless more.
        if workers > 0 and (
            self._workers is None or workers < self._planned_slots or workers > self._workers
        ):
            self._workers = workers
