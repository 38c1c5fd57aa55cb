"""When ``trigger(availableNow=True)`` has read everything that was available.

Pure logic (no Spark, no network, no clock), shared by the source and its unit
tests.

A share group is a queue, so "available when the query started" is defined on
the log: when the query starts, the source records each partition's end offset
(``ListOffsets`` latest; the last stable offset when the group reads
``read_committed``). The query has drained the queue once, on every partition,
every record before that end offset is *done* for the group: acknowledged by
any member (this query, or other consumers of the same group) or archived.

The broker's share-partition start offset (SPSO, ``DescribeShareGroupOffsets``)
says exactly that for the records before it, but the value the broker reports
is the one it persisted with the *previous* state change of the partition, so
after the last acknowledgement it can stay behind until something else happens
on the partition. Three facts each prove a partition done:

1. the reported start offset has reached the end offset;
2. the broker reports no lag (Kafka 4.2+, KIP-1226): nothing up to the current
   end of the partition, which is at or after the recorded one, is left;
3. every offset from the reported start offset to the end offset was accepted
   by this query, and the broker confirmed those acknowledgements (this covers
   the stale start offset when this query is the only consumer).

When none holds, records before the end offset are still somewhere: held by
another member, released, or waiting for a lock to expire. The source keeps
polling for them, within a bound (``availableNowIdleTimeoutMs``).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping

import attrs

from kafka_share._reprs import attrs_repr
from kafka_share.admin.types import SharePartitionOffsetInfo
from kafka_share.models import TopicPartition

__all__ = ["AcceptedOffsets", "DrainGoal", "offset_runs"]


def offset_runs(offsets: Iterable[int]) -> list[tuple[int, int]]:
    """The sorted half-open ranges ``[lo, hi)`` of consecutive offsets."""
    runs: list[tuple[int, int]] = []
    for offset in sorted(set(offsets)):
        if runs and runs[-1][1] == offset:
            runs[-1] = (runs[-1][0], offset + 1)
        else:
            runs.append((offset, offset + 1))
    return runs


class AcceptedOffsets:
    """The offsets of one partition that this query accepted, as disjoint ranges."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []

    def add(self, lo: int, hi: int) -> None:
        """Add ``[lo, hi)``, merging it with the ranges it touches."""
        if hi <= lo:
            return
        i = bisect.bisect_left(self._ends, lo)  # first range ending at or after lo
        j = bisect.bisect_right(self._starts, hi)  # ranges starting after hi stay
        if i < j:
            lo = min(lo, self._starts[i])
            hi = max(hi, self._ends[j - 1])
        self._starts[i:j] = [lo]
        self._ends[i:j] = [hi]

    def covers(self, lo: int, hi: int) -> bool:
        """Whether every offset of ``[lo, hi)`` was added."""
        if hi <= lo:
            return True
        i = bisect.bisect_right(self._starts, lo) - 1
        return i >= 0 and self._ends[i] >= hi

    def forget_below(self, offset: int) -> None:
        """Drop what lies before ``offset`` (the group is done with it anyway)."""
        i = bisect.bisect_right(self._ends, offset)
        del self._starts[:i], self._ends[:i]
        if self._starts and self._starts[0] < offset:
            self._starts[0] = offset

    def ranges(self) -> list[tuple[int, int]]:
        return list(zip(self._starts, self._ends, strict=True))


@attrs_repr
@attrs.define(repr=False)
class DrainGoal:
    """The end offsets recorded when an ``availableNow`` query started, and
    what this query accepted since (see the module docstring)."""

    #: partition -> (earliest offset, end offset) when the query started
    bounds: Mapping[TopicPartition, tuple[int, int]]
    accepted: dict[TopicPartition, AcceptedOffsets] = attrs.field(factory=dict)

    def record_accepted(self, tp: TopicPartition, offsets: Iterable[int]) -> None:
        """Note offsets of ``tp`` whose ACCEPT the broker confirmed."""
        if tp not in self.bounds:
            return  # a partition added after the start: not part of the goal
        seen = self.accepted.setdefault(tp, AcceptedOffsets())
        for lo, hi in offset_runs(offsets):
            seen.add(lo, hi)

    def pending(
        self, offsets: Mapping[TopicPartition, SharePartitionOffsetInfo]
    ) -> dict[TopicPartition, tuple[int | None, int]]:
        """Partitions not drained yet: ``tp -> (start offset or None, end offset)``.

        ``offsets`` is the group's answer to ``DescribeShareGroupOffsets``.
        """
        out: dict[TopicPartition, tuple[int | None, int]] = {}
        for tp, (earliest, end) in self.bounds.items():
            if end <= earliest:
                continue  # nothing was there
            info = offsets.get(tp)
            if info is None or info.start_offset is None:
                # Not initialised for the group yet: nobody has fetched from it.
                out[tp] = (None, end)
                continue
            start = info.start_offset
            seen = self.accepted.get(tp)
            if seen is not None:
                seen.forget_below(start)
            if start >= end or info.lag == 0:
                continue
            if seen is not None and seen.covers(max(start, earliest), end):
                continue
            out[tp] = (start, end)
        return out
