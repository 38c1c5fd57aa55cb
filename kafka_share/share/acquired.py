"""Match fetched records against the offsets a ShareFetch acquired.

Theory of operation
-------------------
A ShareFetch response carries whole producer batches in ``Records`` but
acquires only the offset ranges listed in ``AcquiredRecords`` (each with a
delivery count). The client must (Java ``ShareCompletedFetch.fetchRecords``):

- deliver a non-control record only if its offset is acquired, with the
  delivery count of the range that holds it;
- skip records that are not acquired (before, between or after the ranges);
- acknowledge with GAP every acquired offset that has no non-control record:
  compacted offsets, control batches (transaction markers) and offsets left
  after the last record.

:class:`AcquiredRecords` normalises the ranges once per partition: sorted,
de-duplicated (overlaps are a broker bug, KAFKA-19789; the first range that
names an offset keeps it and the rest are logged and dropped) and bounded.
:class:`AcquiredCursor` then walks them forward alongside the records; each
record costs one comparison in the common case, and whole batches that lie
outside the acquired ranges are skipped without decoding their records.

Nothing here depends on the wire or record classes: batches only need the
small :class:`BatchLike` protocol (``kafka_share.records.RecordBatch``
satisfies it) and records are opaque; :func:`match_records` reads a record's
offset with ``offset_of`` (:data:`TUPLE_OFFSET` for the decoder's plain tuples
``(offset, timestamp, key, value, headers)``; by default the ``offset``
attribute).
"""

from __future__ import annotations

import bisect
import logging
import operator
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, Generic, Protocol, TypeVar

import attrs

from kafka_share._reprs import attrs_repr

__all__ = [
    "MAX_ACQUIRED_OFFSETS",
    "TUPLE_OFFSET",
    "AcquiredCursor",
    "AcquiredRange",
    "AcquiredRecords",
    "BatchLike",
    "MatchResult",
    "match_records",
]

log = logging.getLogger(__name__)

#: Upper bound on the acquired offsets of one partition in one response. The broker
#: caps in-flight records per share-partition (``group.share.partition.max.record.locks``,
#: a few thousand), so anything near this is corrupt data, not a real acquisition;
#: refusing it keeps a bad range from allocating millions of GAP entries.
MAX_ACQUIRED_OFFSETS: Final = 1 << 20


#: ``offset_of`` for records that are tuples with the offset first (the decoder's form).
TUPLE_OFFSET: Final[Callable[[Any], int]] = operator.itemgetter(0)
_ATTR_OFFSET: Final[Callable[[Any], int]] = operator.attrgetter("offset")

R_co = TypeVar("R_co", covariant=True)
R = TypeVar("R")


class BatchLike(Protocol[R_co]):
    """What the matcher needs from a record batch."""

    @property
    def base_offset(self) -> int: ...

    @property
    def last_offset(self) -> int: ...

    @property
    def is_control(self) -> bool: ...

    def records(self) -> Iterable[R_co]: ...


@attrs_repr
@attrs.frozen(slots=True, repr=False)
class AcquiredRange:
    """One ``AcquiredRecords`` entry: offsets ``first_offset..last_offset`` inclusive."""

    first_offset: int
    last_offset: int
    delivery_count: int

    def __len__(self) -> int:
        return self.last_offset - self.first_offset + 1


class AcquiredRecords:
    """The acquired offsets of one partition, sorted and without duplicates.

    Build it with :meth:`from_ranges`. ``ranges`` are disjoint and ascending;
    adjacent ranges are kept apart because their delivery counts may differ.
    """

    __slots__ = ("_firsts", "duplicates", "ranges", "total")

    def __init__(self, ranges: tuple[AcquiredRange, ...], duplicates: int = 0) -> None:
        self.ranges = ranges
        #: How many offsets were named more than once in the response (and dropped).
        self.duplicates = duplicates
        #: How many distinct offsets are acquired.
        self.total = sum(len(r) for r in ranges)
        self._firsts = [r.first_offset for r in ranges]

    @classmethod
    def from_ranges(cls, ranges: Iterable[tuple[int, int, int]]) -> AcquiredRecords:
        """Normalise ``(first_offset, last_offset, delivery_count)`` triples.

        Raises:
            ValueError: a range has a negative offset or ``first_offset >
                last_offset``, or the ranges name more than
                :data:`MAX_ACQUIRED_OFFSETS` offsets.
        """
        indexed: list[tuple[int, int, int, int]] = []  # (first, order, last, count)
        named = 0
        for order, (first, last, count) in enumerate(ranges):
            if first < 0 or first > last:
                raise ValueError(
                    f"invalid acquired range [{first}, {last}] (delivery count {count}): "
                    "offsets must be >= 0 and first_offset <= last_offset"
                )
            named += last - first + 1
            if named > MAX_ACQUIRED_OFFSETS:
                raise ValueError(
                    f"acquired ranges name more than {MAX_ACQUIRED_OFFSETS} offsets; "
                    "refusing to process them"
                )
            indexed.append((first, order, last, count))

        # Fast path: the broker normally sends ascending, disjoint ranges.
        if all(indexed[i][0] > indexed[i - 1][2] for i in range(1, len(indexed))):
            return cls(tuple(AcquiredRange(f, last, c) for f, _, last, c in indexed))

        # Slow path: the first range (in response order) that names an offset keeps
        # it. Process ranges in response order, cutting away what is already taken.
        taken: list[AcquiredRange] = []  # disjoint, sorted by first_offset
        duplicates = 0
        for first, _, last, count in sorted(indexed, key=lambda t: t[1]):
            pieces = [(first, last)]
            for existing in _overlapping(taken, first, last):
                next_pieces = []
                for lo, hi in pieces:
                    if existing.last_offset < lo or existing.first_offset > hi:
                        next_pieces.append((lo, hi))
                        continue
                    if lo < existing.first_offset:
                        next_pieces.append((lo, existing.first_offset - 1))
                    if hi > existing.last_offset:
                        next_pieces.append((existing.last_offset + 1, hi))
                pieces = next_pieces
            kept = sum(hi - lo + 1 for lo, hi in pieces)
            dropped = (last - first + 1) - kept
            if dropped:
                duplicates += dropped
                log.error(
                    "Acquired range [%d, %d] overlaps earlier ranges; dropping %d duplicate "
                    "offset(s)",
                    first,
                    last,
                    dropped,
                )
            for lo, hi in pieces:
                bisect.insort(taken, AcquiredRange(lo, hi, count), key=lambda r: r.first_offset)
        return cls(tuple(taken), duplicates)

    def __len__(self) -> int:
        return self.total

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def delivery_count(self, offset: int) -> int | None:
        """The delivery count of ``offset``, or None if it is not acquired."""
        i = bisect.bisect_right(self._firsts, offset) - 1
        if i >= 0 and offset <= self.ranges[i].last_offset:
            return self.ranges[i].delivery_count
        return None

    def __contains__(self, offset: object) -> bool:
        return isinstance(offset, int) and self.delivery_count(offset) is not None

    def offsets(self) -> Iterator[int]:
        """Every acquired offset, ascending."""
        for r in self.ranges:
            yield from range(r.first_offset, r.last_offset + 1)

    def any_between(self, first_offset: int, last_offset: int) -> bool:
        """True if at least one offset of ``first_offset..last_offset`` is acquired."""
        i = bisect.bisect_right(self._firsts, last_offset) - 1
        return i >= 0 and self.ranges[i].last_offset >= first_offset

    def cursor(self) -> AcquiredCursor:
        """A fresh forward cursor over these ranges."""
        return AcquiredCursor(self)

    def __repr__(self) -> str:
        return f"AcquiredRecords({len(self.ranges)} ranges, {self.total} offsets)"


def _overlapping(taken: list[AcquiredRange], first: int, last: int) -> list[AcquiredRange]:
    out = []
    i = max(bisect.bisect_right(taken, first, key=lambda r: r.first_offset) - 1, 0)
    for r in taken[i:]:
        if r.first_offset > last:
            break
        if r.last_offset >= first:
            out.append(r)
    return out


class AcquiredCursor:
    """Walk acquired offsets forward while records are visited in offset order.

    Call :meth:`take` for each non-control record, in ascending offset order;
    it returns the delivery count if the record is acquired (None otherwise) and
    appends to ``gaps`` every acquired offset that was passed without a record.
    Call :meth:`finish` after the last record: the acquired offsets left over are
    gaps too. Offsets covered only by control batches are simply never taken,
    so they become gaps.
    """

    __slots__ = ("_count", "_last", "_next", "_range_index", "_ranges")

    def __init__(self, acquired: AcquiredRecords) -> None:
        self._ranges = acquired.ranges
        self._range_index = 0
        if self._ranges:
            first = self._ranges[0]
            self._next = first.first_offset  # next acquired offset not yet resolved
            self._last = first.last_offset
            self._count = first.delivery_count
        else:
            self._next = -1
            self._last = -2
            self._count = 0

    def state(self) -> tuple[int, int, int, int]:
        """Where the cursor is, for :meth:`restore`."""
        return (self._range_index, self._next, self._last, self._count)

    def restore(self, state: tuple[int, int, int, int]) -> None:
        """Go back to where :meth:`state` said the cursor was."""
        self._range_index, self._next, self._last, self._count = state

    @property
    def next_offset(self) -> int | None:
        """The next acquired offset still unresolved, or None when exhausted."""
        return None if self._next > self._last else self._next

    def _advance_range(self) -> None:
        self._range_index += 1
        if self._range_index < len(self._ranges):
            r = self._ranges[self._range_index]
            self._next = r.first_offset
            self._last = r.last_offset
            self._count = r.delivery_count
        else:
            self._next = self._last + 1  # exhausted

    def take(self, offset: int, gaps: list[int]) -> int | None:
        """Resolve acquired offsets up to ``offset``; see the class docstring.

        Returns the delivery count when ``offset`` is acquired, None when it is
        not and the record must be skipped.
        """
        if offset < self._next or self._next > self._last:
            return None  # before the next acquired offset, or nothing left
        while True:
            if offset <= self._last:
                # self._next <= offset <= self._last: the range holds the record.
                if offset > self._next:
                    gaps.extend(range(self._next, offset))
                count = self._count
                self._next = offset + 1
                if self._next > self._last:
                    self._advance_range()
                return count
            # The record is past this whole range: the rest of it are gaps.
            gaps.extend(range(self._next, self._last + 1))
            self._advance_range()
            if self._next > self._last or offset < self._next:
                return None  # exhausted, or the record sits in a hole between ranges

    def span_count(self, first: int, last: int) -> int | None:
        """The delivery count :meth:`take_span` would return, changing nothing."""
        if first < self._next or last > self._last or self._next > self._last:
            return None
        return self._count

    def take_span(self, first: int, last: int, gaps: list[int]) -> int | None:
        """Resolve ``first..last`` at once when the current range holds all of it.

        The fast path for a record batch that lies inside one acquired range (the
        common case): returns the range's delivery count, appends the acquired
        offsets before ``first`` to ``gaps`` and moves past ``last``. The caller
        adds the offsets in the span that have no record (compaction holes) to
        ``gaps`` itself. Returns None, changing nothing, when the span is not
        wholly inside the current range; then use :meth:`take` per record.
        """
        count = self.span_count(first, last)
        if count is None:
            return None
        if first > self._next:
            gaps.extend(range(self._next, first))
        self._next = last + 1
        if self._next > self._last:
            self._advance_range()
        return count

    def take_through(self, last: int) -> list[tuple[int, int, int]]:
        """Resolve every acquired offset up to ``last`` at once (:meth:`take` for
        a whole batch whose record offsets ascend and end at ``last``).

        Returns the acquired runs ``(first, last, delivery_count)`` from the
        cursor through ``last``, in order: the caller delivers the batch's
        records inside them, skips the rest, and appends the offsets of a run
        that have no record to ``gaps``, as :meth:`take` would have one record
        at a time. Acquired offsets after ``last`` stay unresolved.
        """
        runs: list[tuple[int, int, int]] = []
        while self._next <= self._last and self._next <= last:
            hi = min(self._last, last)
            runs.append((self._next, hi, self._count))
            self._next = hi + 1
            if self._next > self._last:
                self._advance_range()
        return runs

    def drain_before(self, offset: int, out: list[int]) -> None:
        """Resolve every acquired offset below ``offset``, appending it to ``out``.

        The caller decides what they become: for a corrupt batch Java REJECTs the
        acquired offsets of the batch, so the fetch code drains up to
        ``batch.last_offset + 1`` into a reject list. ``offset`` stays unresolved.
        """
        while self._next <= self._last and self._next < offset:
            if offset <= self._last:
                out.extend(range(self._next, offset))
                self._next = offset
                return
            out.extend(range(self._next, self._last + 1))
            self._advance_range()

    def finish(self, gaps: list[int]) -> None:
        """Every acquired offset not resolved yet is a gap."""
        while self._next <= self._last:
            gaps.extend(range(self._next, self._last + 1))
            self._advance_range()


@attrs_repr
@attrs.define(slots=True, repr=False)
class MatchResult(Generic[R]):
    """Records to deliver with their delivery counts, and the GAP offsets."""

    records: list[tuple[R, int]]
    gaps: list[int]


def match_records(
    acquired: AcquiredRecords,
    batches: Iterable[BatchLike[R]],
    *,
    offset_of: Callable[[R], int] | None = None,
) -> MatchResult[R]:
    """Match every batch of one partition against its acquired offsets.

    ``batches`` must be in offset order. Control batches deliver nothing (their
    acquired offsets become gaps) and batches entirely outside the acquired
    ranges are skipped without iterating their records, so compressed batches
    that hold nothing acquired are never decompressed.

    Args:
        acquired: the partition's acquired offsets.
        batches: the decoded batches of the partition's ``Records``.
        offset_of: reads a record's absolute offset; :data:`TUPLE_OFFSET` for
            ``kafka_share.records`` tuples. Default: the ``offset`` attribute.
    """
    get_offset = offset_of or _ATTR_OFFSET
    records: list[tuple[R, int]] = []
    gaps: list[int] = []
    cursor = AcquiredCursor(acquired)
    for batch in batches:
        next_offset = cursor.next_offset
        if next_offset is None:
            break  # nothing left to match; later batches cannot be acquired
        if batch.last_offset < next_offset:
            continue  # wholly before the next acquired offset
        if batch.is_control or not acquired.any_between(
            max(batch.base_offset, next_offset), batch.last_offset
        ):
            # Control batches never deliver; their acquired offsets (resolved when
            # a later record passes them or at finish) are gaps.
            continue
        take = cursor.take
        for record in batch.records():
            count = take(get_offset(record), gaps)
            if count is not None:
                records.append((record, count))
    cursor.finish(gaps)
    return MatchResult(records, gaps)
