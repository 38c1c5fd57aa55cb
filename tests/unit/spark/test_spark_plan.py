"""When the driver plans a micro-batch (pure policy, time passed in)."""

from __future__ import annotations

import pytest

from kafka_share.spark._plan import (
    EMPTY_BATCH_BACKOFF_S,
    SLOT_PROBE_INTERVAL_S,
    BatchPlan,
    TriggerPolicy,
)


def test_no_backlog_no_batch() -> None:
    policy = TriggerPolicy(max_slots=4, max_records=None)
    assert policy.plan(0, 0.0) is None


def test_budget_is_the_backlog_capped_and_split_over_slots() -> None:
    policy = TriggerPolicy(max_slots=4, max_records=None)
    assert policy.plan(10_000, 0.0) == BatchPlan(4, 10_000, capped=False)
    # A small backlog starts only the slots it needs.
    assert policy.plan(1500, 1.0) == BatchPlan(2, 1500, capped=False)
    assert policy.plan(3, 2.0) == BatchPlan(1, 3, capped=False)
    capped = TriggerPolicy(max_slots=8, max_records=2500)
    assert capped.plan(1_000_000, 0.0) == BatchPlan(3, 2500, capped=True)
    # Under the cap, the cap still holds for the batch as a whole.
    assert capped.plan(2000, 1.0) == BatchPlan(2, 2000, capped=True)


def test_slot_budgets_add_up_under_a_cap() -> None:
    plan = BatchPlan(3, 10)
    assert [plan.slot_budget(i) for i in range(3)] == [4, 3, 3]
    assert sum(BatchPlan(7, 1_000_003).slot_budget(i) for i in range(7)) == 1_000_003


def test_without_a_cap_each_slot_may_take_the_whole_backlog() -> None:
    # The backlog sits unevenly on the members: a slot stops at the planned
    # end offsets, not at an even share.
    plan = BatchPlan(3, 10, capped=False)
    assert [plan.slot_budget(i) for i in range(3)] == [10, 10, 10]


def test_min_records_waits_at_most_the_max_trigger_delay() -> None:
    policy = TriggerPolicy(max_slots=2, max_records=None, min_records=100,
                           max_trigger_delay_s=10.0)
    assert policy.plan(50, 0.0) is None
    assert policy.plan(50, 9.0) is None
    assert policy.plan(50, 10.0) == BatchPlan(1, 50, capped=False)
    assert policy.plan(60, 11.0) is None  # the delay counts from the last batch
    assert policy.plan(100, 11.5) == BatchPlan(1, 100, capped=False)


def test_an_empty_batch_is_not_repeated_while_the_backlog_stands_still() -> None:
    policy = TriggerPolicy(max_slots=2, max_records=None)
    assert policy.plan(40, 0.0) is not None
    policy.batch_done(0, 1.0)  # the records are held elsewhere
    assert policy.plan(40, 2.0) is None
    assert policy.plan(40, 1.0 + EMPTY_BATCH_BACKOFF_S) is not None
    policy.batch_done(0, 7.0)
    assert policy.plan(45, 7.5) is not None  # the backlog moved: plan at once
    policy.batch_done(10, 8.0)
    assert policy.plan(35, 8.5) is not None


def test_bad_slots() -> None:
    with pytest.raises(ValueError, match="max_slots"):
        TriggerPolicy(max_slots=0, max_records=None)


def test_slots_follow_the_workers_that_ran_the_last_batch() -> None:
    policy = TriggerPolicy(max_slots=8, max_records=None, adapt_slots=True)
    first = policy.plan(80_000, 0.0)
    assert first is not None and first.slots == 8  # nothing known yet: every partition
    policy.batch_done(80_000, 1.0, workers=2)  # 8 slots ran on 2 workers
    again = policy.plan(80_000, 1.0)
    assert again is not None and again.slots == 2
    # A small batch on 1 worker says nothing about how many could run at once.
    small = policy.plan(900, 2.0)
    assert small is not None and small.slots == 1
    policy.batch_done(900, 3.0, workers=1)
    big = policy.plan(80_000, 3.0)
    assert big is not None and big.slots == 2
    # More workers than before (a new executor): more slots.
    policy.batch_done(80_000, 4.0, workers=3)
    more = policy.plan(80_000, 4.0)
    assert more is not None and more.slots == 3
    # Every SLOT_PROBE_INTERVAL_S, all the slots it may, to see again.
    probe = policy.plan(80_000, 0.0 + SLOT_PROBE_INTERVAL_S)
    assert probe is not None and probe.slots == 8


def test_a_fixed_slot_count_does_not_adapt() -> None:
    policy = TriggerPolicy(max_slots=4, max_records=None)
    policy.plan(80_000, 0.0)
    policy.batch_done(80_000, 1.0, workers=1)
    plan = policy.plan(80_000, 1.0)
    assert plan is not None and plan.slots == 4
