"""Per-partition acknowledgements and their wire batches.

Theory of operation
-------------------
An :class:`Acknowledgements` holds, for one share-partition, the acknowledge
type chosen for each offset. Besides the public types (ACCEPT, RELEASE,
REJECT, RENEW) it can hold :data:`GAP` (0), which the client sends on its own
for acquired offsets that carry no deliverable record (compacted away,
transaction markers, aborted data).

Before going on the wire the map is coalesced into
:class:`AckBatch` values, following Java's
``Acknowledgements.getAcknowledgementBatches``:

1. contiguous offsets form one batch, a hole in the offsets starts a new one;
2. inside a batch, a run of more than :data:`MAX_RECORDS_WITH_SAME_ACKNOWLEDGE_TYPE`
   identical types (Java triggers when it sees the 11th) is split out into its
   own batch;
3. every batch whose types are all equal is reduced to a one-element array,
   which the broker applies to the whole range.

The result always passes the broker's validation
(``KafkaApis.validateAcknowledgementBatches``): first <= last, ascending and
non-overlapping batches, and either one type or exactly one per offset.

Ranges: the consumer's own bookkeeping may hand over whole ranges of offsets
with one type (:meth:`Acknowledgements.from_types` ``ranges``: a batch accepted
as a whole), kept as ``(first, last, type)`` until something needs them offset
by offset. Such ranges go on the wire as they are, with no per-offset work; any
per-offset operation first spells them out into the map (:meth:`_expand`).

Once the broker answered, the caller records the per-partition outcome with
:meth:`Acknowledgements.complete`, and :meth:`Acknowledgements.result` gives
the :class:`AckResult` that is reported to the application.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Iterator
from typing import Final

import attrs

from kafka_share._reprs import attrs_repr
from kafka_share.models import AcknowledgeType

__all__ = [
    "GAP",
    "MAX_RECORDS_WITH_SAME_ACKNOWLEDGE_TYPE",
    "AckBatch",
    "AckResult",
    "Acknowledgements",
    "batches_to_map",
]

#: Wire acknowledge type for an acquired offset that has no record. Internal only.
GAP: Final = 0

#: A run of identical types longer than this inside a mixed batch gets its own batch.
MAX_RECORDS_WITH_SAME_ACKNOWLEDGE_TYPE: Final = 10

_RENEW: Final = int(AcknowledgeType.RENEW)
_VALID_TYPES: Final = frozenset(int(t) for t in AcknowledgeType)
#: Error code for "no error" in Kafka responses.
_NONE: Final = 0


@attrs_repr
@attrs.frozen(slots=True, repr=False)
class AckBatch:
    """One wire ``AcknowledgementBatch``.

    ``acknowledge_types`` has either one element (applies to every offset of the
    range) or exactly ``last_offset - first_offset + 1`` elements.
    """

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]

    def expand(self) -> Iterator[tuple[int, int]]:
        """Yield ``(offset, type)`` for every offset of the batch."""
        types = self.acknowledge_types
        if len(types) == 1:
            only = types[0]
            for offset in range(self.first_offset, self.last_offset + 1):
                yield offset, only
        else:
            yield from zip(range(self.first_offset, self.last_offset + 1), types, strict=True)


@attrs_repr
@attrs.frozen(slots=True, repr=False)
class AckResult:
    """The outcome of acknowledging one partition.

    ``offsets`` are the offsets the application acknowledged (GAP offsets, which
    the client added by itself, are left out). ``error_code`` is 0 on success.
    """

    offsets: frozenset[int]
    error_code: int
    error_message: str | None


class Acknowledgements:
    """Acknowledge types of one share-partition, keyed by offset.

    Adding the same offset twice keeps the last type (``add``), matching Java
    where the last ``acknowledge`` call before a commit wins.
    """

    __slots__ = (
        "_completed", "_error_code", "_error_message", "_ranges", "_types", "session_generation",
    )

    def __init__(self) -> None:
        self._types: dict[int, int] = {}
        #: (first, last, type) ranges: ascending, disjoint from each other and
        #: from ``_types`` (see the module docstring)
        self._ranges: list[tuple[int, int, int]] = []
        #: the share session (per node) whose records these acknowledge; None: any
        self.session_generation: int | None = None
        self._completed = False
        self._error_code = _NONE
        self._error_message: str | None = None

    # -- building ---------------------------------------------------------

    def add(self, offset: int, acknowledge_type: AcknowledgeType | int) -> None:
        """Set the type of ``offset``, replacing any earlier one.

        Raises:
            ValueError: ``offset`` is negative or the type is not ACCEPT, RELEASE,
                REJECT or RENEW (use :meth:`add_gap` for gaps).
        """
        self._check_offset(offset)
        self._expand()
        value = int(acknowledge_type)
        if value not in _VALID_TYPES:
            raise ValueError(
                f"invalid acknowledge type {acknowledge_type!r} for offset {offset}: "
                "expected ACCEPT (1), RELEASE (2), REJECT (3) or RENEW (4)"
            )
        self._types[offset] = value

    @classmethod
    def from_types(
        cls,
        types: dict[int, int],
        *,
        ranges: Iterable[tuple[int, int, int]] = (),
        session_generation: int | None = None,
    ) -> Acknowledgements:
        """Build from an ``{offset: type}`` map (GAP allowed), taking ownership of
        it, and ``(first, last, type)`` ranges of offsets not in the map.

        The bulk path for the consumer's own bookkeeping: one check over the
        distinct types instead of one call per offset.

        Raises:
            ValueError: a type is not GAP, ACCEPT, RELEASE, REJECT or RENEW, a
                range is empty or negative, or ranges overlap each other or the map.
        """
        spans = sorted(ranges)
        bad = (set(types.values()) | {t for _, _, t in spans}) - _VALID_TYPES - {GAP}
        if bad:
            raise ValueError(f"invalid acknowledge type(s) {sorted(bad)}")
        previous_last = -1
        for first, last, _ in spans:
            if first <= previous_last or first > last or first < 0:
                raise ValueError(f"acknowledged ranges overlap or are empty: {spans}")
            previous_last = last
        if spans and types and _any_in_ranges(types, spans):
            raise ValueError("an offset is both in the map and in a range")
        acks = cls()
        acks._types = types
        acks._ranges = _coalesced(spans)
        acks.session_generation = session_generation
        return acks

    def _expand(self) -> None:
        """Spell the ranges out into the map (before any per-offset operation)."""
        if self._ranges:
            types = self._types
            for first, last, t in self._ranges:
                types.update(dict.fromkeys(range(first, last + 1), t))
            self._ranges = []

    def merge(self, other: Acknowledgements) -> None:
        """Copy ``other``'s entries in; on a shared offset ``other`` wins."""
        if not (self._types or other._types) and not _overlap(self._ranges, other._ranges):
            self._ranges = _coalesced(sorted(self._ranges + other._ranges))  # still ranges
            return
        self._expand()
        other._expand()
        self._types.update(other._types)

    @staticmethod
    def _check_offset(offset: int) -> None:
        if offset < 0:
            raise ValueError(f"acknowledged offset must be >= 0, got {offset}")

    # -- reading ----------------------------------------------------------

    def __len__(self) -> int:
        return len(self._types) + sum(last - first + 1 for first, last, _ in self._ranges)

    def __bool__(self) -> bool:
        return bool(self._types) or bool(self._ranges)

    def __contains__(self, offset: object) -> bool:
        return offset in self._types or (
            isinstance(offset, int) and _any_in_ranges((offset,), self._ranges)
        )

    def get(self, offset: int) -> int | None:
        """The type of ``offset`` (0 for GAP), or None if it has none."""
        self._expand()
        return self._types.get(offset)

    def items(self) -> list[tuple[int, int]]:
        """``(offset, type)`` pairs in ascending offset order."""
        self._expand()
        return sorted(self._types.items())

    def offsets(self) -> frozenset[int]:
        """Every acknowledged offset, GAPs included.

        Reads without spelling the ranges out in place: the application thread
        asks this of completed acknowledgements (see AcknowledgementCompletion).
        """
        if not self._ranges:
            return frozenset(self._types)
        return frozenset(itertools.chain(
            self._types, *(range(first, last + 1) for first, last, _ in self._ranges)
        ))

    def offset_ranges(self) -> list[tuple[int, int]] | None:
        """``[(first, last)]`` covering exactly the acknowledged offsets when they
        are only ranges (no per-offset entry), else None: lets the caller skip
        per-offset work for a batch acknowledged as a whole."""
        if self._types:
            return None
        return [(first, last) for first, last, _ in self._ranges]

    @property
    def has_renew(self) -> bool:
        """True if any offset is RENEW; such a request must set ``IsRenewAck``."""
        return _RENEW in self._types.values() or any(t == _RENEW for _, _, t in self._ranges)

    def to_batches(self) -> list[AckBatch]:
        """Coalesce into wire batches (see the module docstring for the rules)."""
        if not self._types:
            # Ranges alone: the same batches as the offsets spelled out would
            # give, found run by run (a span acknowledged with one type is one
            # run, one single-type batch).
            return _batches_of_runs(self._ranges)
        self._expand()
        types = self._types
        lo, hi = min(types), max(types)
        if hi - lo + 1 == len(types):
            distinct = set(types.values())
            if len(distinct) == 1:
                # The common case (a whole fetch accepted): one contiguous,
                # single-type batch, found without sorting or walking the offsets.
                return [AckBatch(lo, hi, (distinct.pop(),))]
        offsets = sorted(types)
        batches: list[AckBatch] = []
        start = 0
        n = len(offsets)
        for i in range(1, n + 1):
            if i == n or offsets[i] != offsets[i - 1] + 1:
                first = offsets[start]
                _split_contiguous(first, [types[o] for o in offsets[start:i]], batches)
                start = i
        return batches

    # -- completion -------------------------------------------------------

    def complete(self, error_code: int, error_message: str | None = None) -> None:
        """Record the broker's answer for this partition (0 = success).

        Completing twice keeps the first answer: a late duplicate (for example a
        timeout after the real response) must not overwrite it.
        """
        if self._completed:
            return
        self._completed = True
        self._error_code = error_code
        self._error_message = error_message

    @property
    def is_completed(self) -> bool:
        return self._completed

    @property
    def error_code(self) -> int:
        """The error code once completed (0 = success); 0 before completion."""
        return self._error_code

    @property
    def error_message(self) -> str | None:
        return self._error_message

    def result(self) -> AckResult:
        """The outcome to report to the application.

        Raises:
            RuntimeError: the acknowledgements have not been completed yet.
        """
        if not self._completed:
            raise RuntimeError("acknowledgements are not completed yet; no result to report")
        applied = itertools.chain(
            (o for o, t in self._types.items() if t != GAP),
            *(range(first, last + 1) for first, last, t in self._ranges if t != GAP),
        )
        return AckResult(
            offsets=frozenset(applied),
            error_code=self._error_code,
            error_message=self._error_message,
        )

    def __repr__(self) -> str:
        state = f"completed, error_code={self._error_code}" if self._completed else "pending"
        return f"Acknowledgements({len(self)} offsets, {state})"


def _coalesced(ranges: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Sorted disjoint ranges with touching ones of the same type joined (the
    pieces of one fetch, polled a slice at a time, become one wire batch)."""
    out: list[tuple[int, int, int]] = []
    for first, last, t in ranges:
        if out and out[-1][1] + 1 == first and out[-1][2] == t:
            out[-1] = (out[-1][0], last, t)
        else:
            out.append((first, last, t))
    return out


def _any_in_ranges(offsets: Iterable[int], ranges: list[tuple[int, int, int]]) -> bool:
    """Whether an offset falls in one of the sorted, disjoint ``ranges`` (a
    bisect each: explicit acknowledgements of mixed types are many ranges)."""
    firsts = [first for first, _, _ in ranges]
    for o in offsets:
        i = bisect.bisect_right(firsts, o) - 1
        if i >= 0 and o <= ranges[i][1]:
            return True
    return False


def _overlap(a: list[tuple[int, int, int]], b: list[tuple[int, int, int]]) -> bool:
    """Whether two lists of disjoint ranges overlap (sorted together, an overlap
    shows between neighbours; not every pair compared)."""
    if not a or not b:
        return False
    both = sorted(a + b)
    return any(later[0] <= earlier[1] for earlier, later in itertools.pairwise(both))


def _batches_of_runs(ranges: list[tuple[int, int, int]]) -> list[AckBatch]:
    """Wire batches for sorted, disjoint ``(first, last, type)`` ranges: the
    batches :func:`_split_contiguous` makes of the same offsets spelled out, with
    work per range (per offset only inside mixed batches, whose types go on the
    wire one per offset anyway)."""
    batches: list[AckBatch] = []
    stretch: list[tuple[int, int, int]] = []  # touching runs, types differ
    for first, last, t in ranges:
        if stretch and stretch[-1][1] + 1 == first:
            if stretch[-1][2] == t:
                stretch[-1] = (stretch[-1][0], last, t)
                continue
        elif stretch:
            _split_runs(stretch, batches)
            stretch = []
        stretch.append((first, last, t))
    if stretch:
        _split_runs(stretch, batches)
    return batches


def _split_runs(runs: list[tuple[int, int, int]], out: list[AckBatch]) -> None:
    """:func:`_split_contiguous` for one contiguous stretch given as its maximal
    runs of one type: a run longer than MAX_RECORDS_WITH_SAME_ACKNOWLEDGE_TYPE
    is a batch of its own, the runs between such runs one mixed batch."""
    pending: list[tuple[int, int, int]] = []
    for run in runs:
        if run[1] - run[0] + 1 > MAX_RECORDS_WITH_SAME_ACKNOWLEDGE_TYPE:
            if pending:
                _emit_runs(pending, out)
                pending = []
            out.append(AckBatch(run[0], run[1], (run[2],)))
        else:
            pending.append(run)
    if pending:
        _emit_runs(pending, out)


def _emit_runs(runs: list[tuple[int, int, int]], out: list[AckBatch]) -> None:
    if len(runs) == 1:
        out.append(AckBatch(runs[0][0], runs[0][1], (runs[0][2],)))
        return
    types = tuple(itertools.chain.from_iterable(
        itertools.repeat(t, last - first + 1) for first, last, t in runs
    ))
    out.append(AckBatch(runs[0][0], runs[-1][1], types))


def _split_contiguous(first_offset: int, types: list[int], out: list[AckBatch]) -> None:
    """Append the batches for one contiguous range of offsets to ``out``.

    Runs longer than MAX_RECORDS_WITH_SAME_ACKNOWLEDGE_TYPE are emitted as
    single-type batches; the mixed stretches between them stay together.
    """
    n = len(types)
    pending_start = 0  # start of the mixed stretch not yet emitted
    run_start = 0
    for i in range(1, n + 1):
        if i < n and types[i] == types[run_start]:
            continue
        # types[run_start:i] is a maximal run of one type.
        if i - run_start > MAX_RECORDS_WITH_SAME_ACKNOWLEDGE_TYPE:
            if pending_start < run_start:
                _emit(first_offset, types, pending_start, run_start, out)
            out.append(
                AckBatch(first_offset + run_start, first_offset + i - 1, (types[run_start],))
            )
            pending_start = i
        run_start = i
    if pending_start < n:
        _emit(first_offset, types, pending_start, n, out)


def _emit(first_offset: int, types: list[int], lo: int, hi: int, out: list[AckBatch]) -> None:
    chunk = types[lo:hi]
    head = chunk[0]
    if all(t == head for t in chunk):
        ack_types: tuple[int, ...] = (head,)
    else:
        ack_types = tuple(chunk)
    out.append(AckBatch(first_offset + lo, first_offset + hi - 1, ack_types))


def batches_to_map(batches: Iterable[AckBatch]) -> dict[int, int]:
    """Expand wire batches back into an offset -> type map.

    Raises:
        ValueError: the batches break a broker validation rule (first > last,
            overlapping or descending batches, wrong number of types).
    """
    out: dict[int, int] = {}
    previous_last = -1
    for batch in batches:
        if batch.first_offset > batch.last_offset:
            raise ValueError(f"batch {batch} has first_offset > last_offset")
        if batch.first_offset <= previous_last:
            raise ValueError(f"batch {batch} overlaps or precedes the previous batch")
        size = batch.last_offset - batch.first_offset + 1
        if len(batch.acknowledge_types) not in (1, size):
            raise ValueError(
                f"batch {batch} has {len(batch.acknowledge_types)} types for {size} offsets"
            )
        out.update(batch.expand())
        previous_last = batch.last_offset
    return out
