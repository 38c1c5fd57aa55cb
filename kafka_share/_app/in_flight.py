"""The records handed to the application by the last ``poll`` and their acknowledgements.

Application thread only. This is Java's ``ShareFetch``/``ShareInFlightBatch``:
it knows which records may still be acknowledged (only those of the current
batch), which node delivered each partition's records (acks must go back to
that node), and which records are being RENEWed (they come back from a later
``poll`` once the broker has extended their locks).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Sequence
from typing import Any

from kafka_share.errors import IllegalStateError
from kafka_share.models import AcknowledgeType, ConsumerRecord, TopicIdPartition

__all__ = ["GAP", "InFlightBatch"]

#: Wire acknowledge type for acquired offsets without a record (not public).
GAP = 0

_CANNOT = "The record cannot be acknowledged: "
_OFFSET = operator.attrgetter("offset")
_RENEW = AcknowledgeType.RENEW

#: acknowledgements taken from the batch for one partition: (node, per-offset wire
#: types of offsets without a record, ranges ``(first, last, type)`` of the
#: records, disjoint from those offsets)
Taken = tuple[int, dict[int, int], list[tuple[int, int, int]]]


class _Span:
    """Consecutive offsets handed out together, kept without an entry per record:
    ``poll``'s records (``records``: the list handed out, which explicit mode
    checks acknowledgements against), ``poll_arrow`` rows (``counts``: their
    delivery counts), or in implicit mode ``poll``'s records with neither
    (nothing to check them against: only the consumer itself acknowledges them).

    Their acknowledgements: ``type`` when the whole span got one type (one range
    on the wire, no per-offset work), else ``types``, one entry per offset (None:
    not acknowledged yet; empty: none acknowledged), which leaves the batch as
    one range per run of equal types. Never both. A span of explicit mode's
    records has its ``types`` from the start, so acknowledging one of its
    records is one list store.
    """

    __slots__ = ("counts", "first", "last", "records", "size", "type", "types")

    def __init__(
        self,
        first: int,
        last: int,
        counts: Any = None,
        records: Sequence[ConsumerRecord[Any, Any]] = (),
    ) -> None:
        self.first = first
        self.last = last
        #: how many offsets (an attribute, not a property: acknowledge() reads it)
        self.size = last - first + 1
        #: delivery counts, one per offset (an int array), or None
        self.counts = counts
        #: the records, one per offset, or empty (not kept)
        self.records = records
        #: the wire type of every offset of the span (acknowledged as a whole)
        self.type: int | None = None
        #: per-offset types (AcknowledgeType members or wire ints), None where
        #: not acknowledged; empty while no offset has one of its own
        self.types: list[int | None] = [None] * len(records) if records else []

    def count_of(self, offset: int) -> int:
        """Delivery count of ``offset`` (which it holds); -1 when not kept."""
        if self.records:
            return self.records[offset - self.first][9]
        return -1 if self.counts is None else int(self.counts[offset - self.first])

    def per_offset(self) -> list[int | None]:
        """``types``, created (from ``type``, which it replaces) if empty."""
        if not self.types:
            self.types = [self.type] * self.size
            self.type = None
        return self.types

    def unacknowledged(self) -> int:
        if self.type is not None:
            return 0
        return self.types.count(None) if self.types else self.size

    def piece(self, lo: int, hi: int) -> _Span:
        """A new span of the offsets ``first + lo`` to ``first + hi - 1``, not acknowledged."""
        return _Span(
            self.first + lo, self.first + hi - 1,
            None if self.counts is None else self.counts[lo:hi], self.records[lo:hi],
        )

    def take(
        self,
        ranges: list[tuple[int, int, int]],
        kept: list[_Span],
        renewing: dict[int, ConsumerRecord[Any, Any]],
    ) -> None:
        """Move the acknowledged offsets out: to ``ranges`` (one per run of equal
        types), RENEWed records also to ``renewing``; the span itself, or the
        pieces of it still unacknowledged, go to ``kept``."""
        if self.type is not None:
            ranges.append((self.first, self.last, int(self.type)))
            return
        types = self.types
        head = types[0] if types else None
        if head is None and (not types or types.count(None) == len(types)):
            kept.append(self)  # nothing acknowledged
            return
        if head is not None and types.count(head) == len(types):
            runs: Iterable[tuple[int | None, int]] = ((head, len(types)),)  # the common case
        else:
            runs = ((t, len(list(run))) for t, run in itertools.groupby(types))
        lo = 0
        for t, n in runs:
            hi = lo + n
            if t is None:
                kept.append(self.piece(lo, hi))
            else:
                if t == _RENEW and self.records:
                    # Held apart until the broker answers (see on_renew_completed).
                    renewing.update(zip(range(self.first + lo, self.first + hi),
                                        self.records[lo:hi], strict=True))
                ranges.append((self.first + lo, self.first + hi - 1, int(t)))
            lo = hi


#: ``InFlightBatch.hit`` when no span was hit yet: holds no record.
_NO_SPAN = _Span(0, -1)


def _span_of(spans: list[_Span], offset: int) -> _Span | None:
    for span in spans:
        if span.first <= offset <= span.last:
            return span
    return None


def _add_runs(
    spans: list[_Span], records: list[ConsumerRecord[Any, Any]], *, keep: bool
) -> None:
    """``records`` (any order, each offset once) as one span per run of
    consecutive offsets; the records kept in them if ``keep``."""
    ordered = sorted(records, key=_OFFSET)
    start = 0
    n = len(ordered)
    for j in range(1, n + 1):
        if j == n or ordered[j][2] != ordered[j - 1][2] + 1:
            spans.append(_Span(
                ordered[start][2], ordered[j - 1][2], None, ordered[start:j] if keep else ()
            ))
            start = j


class _PartitionInFlight:
    __slots__ = (
        "acks", "failed_offsets", "generation", "node_id", "raised", "ready", "renewing", "spans",
    )

    def __init__(self, node_id: int, generation: int) -> None:
        self.node_id = node_id
        #: the share session with ``node_id`` that acquired these records
        self.generation = generation
        #: the records (or rows) handed out and not yet taken with their
        #: acknowledgement, as spans of consecutive offsets, with their acks
        self.spans: list[_Span] = []
        #: offset -> wire acknowledge type of an offset without a record: GAPs
        #: and failed offsets (disjoint from ``spans``)
        self.acks: dict[int, int] = {}
        #: offset -> default wire type of a record that could not be returned
        #: (deserialization or CRC failure); only these may be acknowledged by
        #: coordinates. The default joins ``acks`` only once the application had
        #: its chance to override it (see :meth:`InFlightBatch.settle_failed`).
        self.failed_offsets: dict[int, int] = {}
        #: failed offsets whose error the application has been given
        self.raised: set[int] = set()
        #: offset -> record whose RENEW is on its way to the broker
        self.renewing: dict[int, ConsumerRecord[Any, Any]] = {}
        #: offset -> renewed record waiting to be handed back by the next poll
        self.ready: dict[int, ConsumerRecord[Any, Any]] = {}


class InFlightBatch:
    """Acknowledgement bookkeeping for the current batch of records.

    Records are kept as spans of consecutive offsets (see :class:`_Span`), not
    one entry each, and acknowledgements leave the batch as ``(first, last,
    type)`` ranges: a span acknowledged with one type is one range end to end.
    ``record_spans`` (implicit mode): ``poll``'s records are not kept at all
    (the consumer accepts them as a whole; only ``async for`` acknowledges them
    one by one, checked by offset). Explicit mode keeps them, to check that an
    acknowledged record is the one handed out (same offset and delivery count).
    """

    def __init__(self, *, record_spans: bool = False) -> None:
        self._record_spans = record_spans
        self._partitions: dict[TopicIdPartition, _PartitionInFlight] = {}
        #: (topic, partition) -> its entry in _partitions, for acknowledge(record):
        #: hashing a str and an int is cheaper than a TopicIdPartition (UUID)
        self._by_name: dict[tuple[str, int], tuple[TopicIdPartition, _PartitionInFlight]] = {}
        #: the span of records last acknowledged: acknowledge() first looks for
        #: the record there, by identity (reset whenever spans leave the batch).
        #: ConsumerCore.acknowledge does the same first, saving a call per record.
        self.hit = _NO_SPAN
        #: (topic, partition) -> the acks last handed to the network thread (the
        #: dict and ranges themselves, not copies): only read to explain a refused
        #: acknowledgement
        self._sent: dict[tuple[str, int], tuple[dict[int, int], list[tuple[int, int, int]]]] = {}
        #: tip -> share session generation of its latest records (kept after the
        #: partition leaves the batch, for the acks taken with it)
        self.generations: dict[TopicIdPartition, int] = {}

    # -- filling ---------------------------------------------------------------

    def _partition(
        self, tip: TopicIdPartition, node_id: int, generation: int
    ) -> _PartitionInFlight:
        p = self._partitions.get(tip)
        if p is None or p.node_id != node_id or p.generation != generation:
            if p is not None and (p.spans or p.acks or p.renewing or p.ready):
                # Records of one partition from a new node (or a new share session
                # with it): the old ones' acks must still go where they belong, so
                # keep them apart.
                raise IllegalStateError(
                    f"partition {tip} has in-flight records from node {p.node_id} "
                    f"(session {p.generation}) and new records from node {node_id} "
                    f"(session {generation})"
                )
            p = _PartitionInFlight(node_id, generation)
            self._partitions[tip] = p
            self._by_name[(tip.topic, tip.partition)] = (tip, p)
        self.generations[tip] = generation
        return p

    def add_records(
        self,
        tip: TopicIdPartition,
        node_id: int,
        records: list[ConsumerRecord[Any, Any]],
        generation: int = 0,
    ) -> None:
        """Records handed out by ``poll``. The batch keeps ``records`` (the list
        itself) in explicit mode: the caller must not change it afterwards."""
        p = self._partition(tip, node_id, generation)
        if not records:
            return
        # The collector hands a partition's records out in offset order, each
        # offset once: first and last tell whether they are consecutive.
        first, last = records[0][2], records[-1][2]
        if last - first + 1 == len(records):
            p.spans.append(_Span(first, last, None, () if self._record_spans else records))
        else:
            _add_runs(p.spans, records, keep=not self._record_spans)

    def add_rows(
        self, tip: TopicIdPartition, node_id: int, pieces: list[Any], generation: int = 0
    ) -> None:
        """Records handed out by ``poll_arrow``: columnar pieces (see
        :mod:`kafka_share._app.columnar`), kept as spans of consecutive offsets
        with their delivery counts (offsets ascend within a piece)."""
        p = self._partition(tip, node_id, generation)
        for piece in pieces:
            offsets = piece.columns.offsets
            counts = piece.delivery_counts
            n = len(offsets)
            if not n:
                continue
            first, last = int(offsets[0]), int(offsets[-1])
            if last - first + 1 == n:
                p.spans.append(_Span(first, last, counts))
                continue
            # Holes (a compacted batch, ranges acquired by others): one span per run.
            breaks = [0, *((offsets[1:] - offsets[:-1] != 1).nonzero()[0] + 1).tolist(), n]
            for lo, hi in itertools.pairwise(breaks):
                p.spans.append(_Span(int(offsets[lo]), int(offsets[hi - 1]), counts[lo:hi]))

    def add_gaps(
        self, tip: TopicIdPartition, node_id: int, offsets: list[int], generation: int = 0
    ) -> None:
        p = self._partition(tip, node_id, generation)
        for o in offsets:
            p.acks[o] = GAP

    def add_failed(
        self,
        tip: TopicIdPartition,
        node_id: int,
        offsets: list[int],
        ack_type: AcknowledgeType,
        generation: int = 0,
    ) -> None:
        """Offsets that failed to become records, with their default type (RELEASE
        or REJECT). They stay acquired, unacknowledged, until the application
        has seen the error (:meth:`mark_failed_raised`) and then either
        acknowledged them by coordinates or let :meth:`settle_failed` apply the
        default: as Java, a poison record is not released behind its back."""
        p = self._partition(tip, node_id, generation)
        value = int(ack_type)
        for o in offsets:
            p.failed_offsets[o] = value

    def mark_failed_raised(self) -> None:
        """The error of the failed offsets was just raised to the application."""
        for p in self._partitions.values():
            if p.failed_offsets:
                p.raised.update(p.failed_offsets)

    def settle_failed(self, *, everything: bool = False) -> None:
        """Failed offsets the application did not acknowledge get their default
        type: those whose error was raised (at the next poll or commit after
        it), or all of them (``everything``: on close)."""
        for p in self._partitions.values():
            if not p.failed_offsets:
                continue
            for o in list(p.failed_offsets if everything else p.raised):
                default = p.failed_offsets.get(o)
                if default is not None:
                    p.acks.setdefault(o, default)

    # -- acknowledging ----------------------------------------------------------------

    def acknowledge(self, record: ConsumerRecord[Any, Any], ack_type: AcknowledgeType) -> None:
        # The hot path (explicit mode, one call per record): the record handed
        # out, found by identity in the span acknowledged last. Bounds tested,
        # not an IndexError caught: raising one costs more than the search, and
        # acknowledging partitions in turn misses on every call.
        span = self.hit
        i = record[2] - span.first
        if 0 <= i < span.size and span.records[i] is record:
            span.types[i] = ack_type
            return
        self.acknowledge_searched(record, ack_type)

    def acknowledge_searched(self, record: ConsumerRecord[Any, Any], ack_type: int) -> None:
        """:meth:`acknowledge` without looking in the span acknowledged last first."""
        entry = self._by_name.get((record[0], record[1]))
        offset = record[2]
        if entry is not None:
            for span in entry[1].spans:
                if span.first <= offset <= span.last:
                    i = offset - span.first
                    records = span.records
                    # The same offset redelivered (a higher delivery count) is
                    # another record.
                    if records:
                        if records[i] is record or records[i][9] == record[9]:
                            span.types[i] = ack_type
                            self.hit = span
                            return
                    elif span.counts is None or int(span.counts[i]) == record[9]:
                        span.per_offset()[i] = ack_type
                        return
                    break
        raise IllegalStateError(self._refusal(record[0], record[1], offset, record[9]))

    def acknowledge_rows(self, rows: list[tuple[str, int, Any, Any, Any]]) -> None:
        """Acknowledge ``poll_arrow`` rows: ``(topic, partition, offsets,
        delivery_counts, wire types)`` per partition, as int64/int32 numpy arrays
        (``types`` one int for every row, or an array). All or nothing: every
        row is checked before any acknowledgement is recorded. A call covering
        a whole span with one type acknowledges it as one range."""
        plan: list[tuple[_Span, Any, Any]] = []
        for topic, partition, offsets, counts, types in rows:
            entry = self._by_name.get((topic, partition))
            spans = entry[1].spans if entry is not None else []
            covered = offsets < 0  # all False
            for span in spans:
                if span.counts is None:
                    continue  # poll's records, not rows
                inside = (offsets >= span.first) & (offsets <= span.last)
                if not inside.any():
                    continue
                wrong = span.counts[offsets[inside] - span.first] != counts[inside]
                if wrong.any():
                    i = int(inside.nonzero()[0][wrong.nonzero()[0][0]])
                    raise IllegalStateError(
                        self._refusal(topic, partition, int(offsets[i]), int(counts[i]))
                    )
                covered |= inside
                plan.append((span, offsets[inside],
                             types if isinstance(types, int) else types[inside]))
            if not covered.all():
                i = int((~covered).nonzero()[0][0])
                raise IllegalStateError(
                    self._refusal(topic, partition, int(offsets[i]), int(counts[i]))
                )
        for span, offsets, types in plan:
            single = types if isinstance(types, int) else (
                int(types[0]) if (types == types[0]).all() else None
            )
            if (
                single is not None and len(offsets) >= span.size
                and len(set(offsets.tolist())) == span.size
            ):
                span.type = single  # the whole span, one type: one range
                span.types = []  # the last call wins
            else:
                values = [single] * len(offsets) if single is not None else types.tolist()
                per_offset = span.per_offset()
                first = span.first
                for o, t in zip(offsets.tolist(), values, strict=True):
                    per_offset[o - first] = t

    def acknowledge_offset(
        self, topic: str, partition: int, offset: int, ack_type: AcknowledgeType
    ) -> None:
        entry = self._by_name.get((topic, partition))
        p = entry[1] if entry is not None else None
        if p is None or offset not in p.failed_offsets:
            raise IllegalStateError(self._offset_refusal(topic, partition, offset))
        p.acks[offset] = int(ack_type)

    def acknowledge_all(self, ack_type: AcknowledgeType) -> None:
        """Implicit mode: every record not yet acknowledged gets ``ack_type``."""
        value = int(ack_type)
        for p in self._partitions.values():
            for span in p.spans:
                if span.type is not None:
                    continue
                if not span.types:
                    span.type = value  # one range
                elif None in span.types:
                    # Some were acknowledged one by one (async for): the rest too.
                    span.types = [value if t is None else t for t in span.types]

    def _refusal(self, topic: str, partition: int, offset: int, delivery_count: int) -> str:
        """Why ``acknowledge`` refused a record (error path only)."""
        where = f"{topic}-{partition} offset {offset}"
        entry = self._by_name.get((topic, partition))
        p = entry[1] if entry is not None else None
        if p is not None:
            span = _span_of(p.spans, offset)
            if span is not None:
                held_count = span.count_of(offset)
                return (
                    f"{_CANNOT}this {where} is from an earlier delivery (delivery count "
                    f"{delivery_count}); the last poll returned it again with delivery "
                    f"count {held_count}: acknowledge that record"
                )
            if offset in p.renewing:
                return (
                    f"{_CANNOT}{where} is being renewed (RENEW): a later poll() returns "
                    "it again, to be acknowledged then"
                )
            if offset in p.failed_offsets:
                return (
                    f"{_CANNOT}{where} could not be returned by poll() (deserialization "
                    "or corrupt batch): use acknowledge_offset()"
                )
        if self._was_sent(topic, partition, offset):
            return (
                f"{_CANNOT}{where} was already acknowledged, and the acknowledgement "
                "was sent (by poll, commit_sync, commit_async or a fetch)"
            )
        return (
            f"{_CANNOT}{where} was not returned by the last poll() of this consumer "
            "(only the last poll's records can be acknowledged, before the next poll)"
        )

    def _offset_refusal(self, topic: str, partition: int, offset: int) -> str:
        where = f"{topic}-{partition} offset {offset}"
        entry = self._by_name.get((topic, partition))
        if entry is not None and _span_of(entry[1].spans, offset) is not None:
            return (
                f"{_CANNOT}{where} was returned by poll(): acknowledge_offset() only takes "
                "records poll() could not return; use acknowledge(record)"
            )
        if self._was_sent(topic, partition, offset):
            return (
                f"{_CANNOT}{where} was already acknowledged, and the acknowledgement "
                "was sent; acknowledge_offset() only takes records poll() could not return"
            )
        return (
            f"{_CANNOT}acknowledge_offset() only takes records poll() could not return "
            f"(a deserialization or corrupt-batch error raised by poll), and {where} is not "
            "one that is still waiting for its acknowledgement"
        )

    def _was_sent(self, topic: str, partition: int, offset: int) -> bool:
        sent = self._sent.get((topic, partition))
        return sent is not None and (
            offset in sent[0] or any(f <= offset <= last for f, last, _ in sent[1])
        )

    # -- queries -------------------------------------------------------------------

    def all_acknowledged(self) -> bool:
        return self.unacknowledged_count() == 0

    def unacknowledged_count(self) -> int:
        return sum(s.unacknowledged() for p in self._partitions.values() for s in p.spans)

    def unacknowledged_by_partition(self) -> dict[TopicIdPartition, int]:
        """Records handed out and not acknowledged yet, per partition (those
        with none left out)."""
        out: dict[TopicIdPartition, int] = {}
        for tip, p in self._partitions.items():
            n = sum(s.unacknowledged() for s in p.spans)
            if n:
                out[tip] = n
        return out

    def has_renewing(self) -> bool:
        return any(p.renewing or p.ready for p in self._partitions.values())

    # -- hand-off to the network thread ------------------------------------------------

    def take_acknowledgements(self) -> dict[TopicIdPartition, Taken]:
        """Remove and return the acknowledged offsets: tip -> (node_id, {offset:
        type} of the offsets without a record (GAPs, failed offsets), [(first,
        last, type)] of the records, one range per run of equal types), the
        two disjoint.

        Acknowledged records leave the batch (they can no longer be acknowledged).
        RENEWed records move to the renewing set until the broker answers.
        """
        out: dict[TopicIdPartition, Taken] = {}
        self.hit = _NO_SPAN  # its span may leave
        for tip, p in self._partitions.items():
            ranges: list[tuple[int, int, int]] = []
            if p.spans:
                kept: list[_Span] = []
                for span in p.spans:
                    span.take(ranges, kept, p.renewing)
                p.spans = kept
            acks = p.acks
            if not (acks or ranges):
                continue
            p.acks = {}  # the dict taken is the caller's
            if acks:
                failed = p.failed_offsets
                if failed:
                    for offset in acks:
                        if failed.pop(offset, None) is not None:
                            p.raised.discard(offset)
            out[tip] = (p.node_id, acks, ranges)
            self._sent[(tip.topic, tip.partition)] = (acks, ranges)
        self._compact()
        return out

    def on_renew_completed(
        self, tip: TopicIdPartition, renewed: frozenset[int], failed: frozenset[int]
    ) -> None:
        """Renewed records wait to be handed back by the next poll; failed ones are dropped."""
        p = self._partitions.get(tip)
        if p is None:
            return
        for offset in renewed:
            record = p.renewing.pop(offset, None)
            if record is not None:
                p.ready[offset] = record
        for offset in failed:
            p.renewing.pop(offset, None)
        self._compact()

    def held_of(self, tip: TopicIdPartition, offsets: frozenset[int]) -> list[int]:
        """Which of ``offsets`` the application holds: handed out by a poll and
        not yet sent with an acknowledgement (sorted)."""
        p = self._partitions.get(tip)
        if p is None:
            return []
        return sorted(o for o in offsets if _span_of(p.spans, o) is not None)

    def take_ready(self) -> dict[TopicIdPartition, list[ConsumerRecord[Any, Any]]]:
        """Renewed records to return from this poll; they rejoin the batch (to be acked)."""
        out: dict[TopicIdPartition, list[ConsumerRecord[Any, Any]]] = {}
        for tip, p in self._partitions.items():
            if p.ready:
                records = [p.ready[o] for o in sorted(p.ready)]
                _add_runs(p.spans, records, keep=True)
                out[tip] = records
                p.ready = {}
        return out

    def source_of(self, tip: TopicIdPartition) -> tuple[int, int] | None:
        """(node, share session generation) of the partition's in-flight records."""
        p = self._partitions.get(tip)
        return (p.node_id, p.generation) if p is not None else None

    def clear(self) -> None:
        self.hit = _NO_SPAN
        self._partitions.clear()
        self._by_name.clear()
        self._sent.clear()

    def _compact(self) -> None:
        for tip in [t for t, p in self._partitions.items()
                    if not (p.spans or p.acks or p.renewing or p.ready
                            or p.failed_offsets)]:
            del self._partitions[tip]
            entry = self._by_name.get((tip.topic, tip.partition))
            if entry is not None and entry[0] == tip:
                del self._by_name[(tip.topic, tip.partition)]
