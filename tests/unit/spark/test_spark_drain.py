"""When availableNow has drained the queue (pure logic of kafka_share.spark._drain)."""

from __future__ import annotations

from kafka_share import TopicPartition
from kafka_share.admin import SharePartitionOffsetInfo
from kafka_share.spark._drain import AcceptedOffsets, DrainGoal, offset_runs

A, B, C = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def info(start: int | None, lag: int | None = None) -> SharePartitionOffsetInfo:
    return SharePartitionOffsetInfo(start_offset=start, leader_epoch=0, lag=lag)


def test_offset_runs() -> None:
    assert offset_runs([]) == []
    assert offset_runs([5, 3, 4, 9, 10, 4]) == [(3, 6), (9, 11)]


def test_accepted_offsets_merge_and_cover() -> None:
    seen = AcceptedOffsets()
    seen.add(10, 20)
    seen.add(30, 40)
    seen.add(5, 5)  # empty
    assert seen.ranges() == [(10, 20), (30, 40)]
    assert seen.covers(12, 20) and not seen.covers(12, 21) and seen.covers(7, 7)
    seen.add(20, 30)  # touches both: one range
    assert seen.ranges() == [(10, 40)]
    seen.add(0, 5)
    seen.add(45, 50)
    seen.add(3, 12)
    assert seen.ranges() == [(0, 40), (45, 50)]
    assert seen.covers(0, 40) and not seen.covers(0, 41) and not seen.covers(39, 46)
    seen.forget_below(20)
    assert seen.ranges() == [(20, 40), (45, 50)]
    seen.forget_below(42)
    assert seen.ranges() == [(45, 50)]
    seen.forget_below(47)
    assert seen.ranges() == [(47, 50)]


def test_pending_partitions() -> None:
    goal = DrainGoal({A: (0, 100), B: (0, 50), C: (7, 7)})
    # C was empty at the start: never pending. Uninitialised partitions are.
    assert goal.pending({}) == {A: (None, 100), B: (None, 50)}
    assert goal.pending({A: info(None), B: info(50)}) == {A: (None, 100)}
    # The broker's start offset reached the end offset, or it reports no lag.
    assert goal.pending({A: info(100), B: info(10, lag=0)}) == {}
    assert goal.pending({A: info(60, lag=5), B: info(49)}) == {A: (60, 100), B: (49, 50)}


def test_own_confirmed_acceptances_cover_a_stale_start_offset() -> None:
    goal = DrainGoal({A: (0, 100)})
    goal.record_accepted(A, range(60, 80))
    assert goal.pending({A: info(60)}) == {A: (60, 100)}
    goal.record_accepted(A, [80, 81, *range(83, 100)])
    assert goal.pending({A: info(60)}) == {A: (60, 100)}  # 82: someone else's, or a gap
    goal.record_accepted(A, [82, 150])  # past the end offset: harmless
    assert goal.pending({A: info(60)}) == {}
    # Records another member accepted before 60 are behind the start offset.
    assert goal.pending({A: info(0)}) == {A: (0, 100)}


def test_partitions_outside_the_goal_are_ignored() -> None:
    goal = DrainGoal({A: (0, 10)})
    goal.record_accepted(C, range(10))
    assert goal.accepted.keys() == set()
    assert goal.pending({A: info(10), C: info(0)}) == {}
