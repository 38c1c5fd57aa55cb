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
from typing import Any

from kafka_share.errors import IllegalStateError
from kafka_share.models import AcknowledgeType, ConsumerRecord, TopicIdPartition

__all__ = ["GAP", "InFlightBatch"]

#: Wire acknowledge type for acquired offsets without a record (not public).
GAP = 0

_CANNOT = "The record cannot be acknowledged: "
_OFFSET = operator.attrgetter("offset")

#: acknowledgements taken from the batch for one partition: (node, per-offset wire
#: types, whole ranges ``(first, last, type)`` disjoint from those offsets)
Taken = tuple[int, dict[int, int], list[tuple[int, int, int]]]


class _Span:
    """Consecutive offsets handed out together and kept without an object per
    record: ``poll_arrow`` rows (with their delivery counts), or in implicit mode
    ``poll``'s records (``counts`` None: nothing to check them against, since
    only the consumer itself acknowledges them). Acknowledged as a whole they
    become one range (``type``), with no per-offset bookkeeping."""

    __slots__ = ("counts", "first", "last", "type")

    def __init__(self, first: int, last: int, counts: Any) -> None:
        self.first = first
        self.last = last
        #: delivery counts, one per offset (an int array), or None
        self.counts = counts
        #: the wire type given to every offset of the span not in ``acks``
        self.type: int | None = None

    @property
    def size(self) -> int:
        return self.last - self.first + 1

    def holds(self, offset: int) -> bool:
        return self.first <= offset <= self.last

    def count_of(self, offset: int) -> int:
        """Delivery count of ``offset`` (which it holds); -1 when not kept."""
        return -1 if self.counts is None else int(self.counts[offset - self.first])

    def without(self, offsets: dict[int, int]) -> list[_Span]:
        """The span less ``offsets``, as spans of the consecutive offsets left."""
        out: list[_Span] = []
        run: int | None = None
        for o in range(self.first, self.last + 2):
            if o <= self.last and o not in offsets:
                if run is None:
                    run = o
            elif run is not None:
                counts = None if self.counts is None else self.counts[
                    run - self.first : o - self.first
                ]
                out.append(_Span(run, o - 1, counts))
                run = None
        return out


def _span_of(spans: list[_Span], offset: int) -> _Span | None:
    for span in spans:
        if span.first <= offset <= span.last:
            return span
    return None


def _any_inside(acks: dict[int, int], span: _Span) -> bool:
    first, last = span.first, span.last
    return any(first <= o <= last for o in acks)


class _PartitionInFlight:
    __slots__ = (
        "acks", "failed_offsets", "generation", "node_id", "raised", "ready", "records",
        "renewing", "spans",
    )

    def __init__(self, node_id: int, generation: int) -> None:
        self.node_id = node_id
        #: the share session with ``node_id`` that acquired these records
        self.generation = generation
        #: offset -> record still awaiting (or holding) an acknowledgement
        self.records: dict[int, ConsumerRecord[Any, Any]] = {}
        #: records handed out without an entry each (poll_arrow rows; poll's
        #: records in implicit mode), disjoint from ``records``
        self.spans: list[_Span] = []
        #: offset -> wire acknowledge type (GAP=0 included)
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

    ``record_spans`` (implicit mode): ``poll``'s records of consecutive offsets
    are kept as one span, not one entry each; the consumer accepts them as a
    whole, as one range on the wire, and only ``async for`` acknowledges them
    one by one (checked by offset).
    """

    def __init__(self, *, record_spans: bool = False) -> None:
        self._record_spans = record_spans
        self._partitions: dict[TopicIdPartition, _PartitionInFlight] = {}
        #: (topic, partition) -> its entry in _partitions, for acknowledge(record):
        #: hashing a str and an int is cheaper than a TopicIdPartition (UUID)
        self._by_name: dict[tuple[str, int], tuple[TopicIdPartition, _PartitionInFlight]] = {}
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
            if p is not None and (p.records or p.spans or p.acks or p.renewing or p.ready):
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
        p = self._partition(tip, node_id, generation)
        if self._record_spans and records:
            # The collector hands a partition's records out in offset order, each
            # offset once: first and last tell whether they are consecutive.
            first, last = records[0][2], records[-1][2]
            if last - first + 1 == len(records):
                p.spans.append(_Span(first, last, None))
                return
        p.records.update(zip(map(_OFFSET, records), records, strict=True))

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
        entry = self._by_name.get((record[0], record[1]))
        if entry is None:
            raise IllegalStateError(self._refusal(record[0], record[1], record[2], record[9]))
        p = entry[1]
        offset = record[2]
        held = p.records.get(offset)
        # The same offset redelivered (a higher delivery count) is another record.
        if held is None or held[9] != record[9]:
            span = _span_of(p.spans, offset) if held is None else None
            count = -1 if span is None else span.count_of(offset)
            if span is None or count not in (-1, record[9]):
                raise IllegalStateError(self._refusal(record[0], record[1], offset, record[9]))
        p.acks[offset] = int(ack_type)

    def acknowledge_rows(self, rows: list[tuple[str, int, Any, Any, Any]]) -> None:
        """Acknowledge ``poll_arrow`` rows: ``(topic, partition, offsets,
        delivery_counts, wire types)`` per partition, as int64/int32 numpy arrays
        (``types`` one int for every row, or an array). All or nothing: every
        row is checked before any acknowledgement is recorded. A call covering
        a whole span with one type acknowledges it as one range."""
        plan: list[tuple[_PartitionInFlight, _Span, Any, Any, Any]] = []
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
                assert entry is not None
                plan.append((entry[1], span, offsets[inside],
                             types if isinstance(types, int) else types[inside], counts))
            if not covered.all():
                i = int((~covered).nonzero()[0][0])
                raise IllegalStateError(
                    self._refusal(topic, partition, int(offsets[i]), int(counts[i]))
                )
        for p, span, offsets, types, _ in plan:
            single = types if isinstance(types, int) else (
                int(types[0]) if (types == types[0]).all() else None
            )
            if (
                single is not None and len(offsets) >= span.size
                and len(set(offsets.tolist())) == span.size
            ):
                span.type = single  # the whole span, one type: one range
                if p.acks and _any_inside(p.acks, span):
                    for o in range(span.first, span.last + 1):
                        p.acks.pop(o, None)  # the last call wins
            else:
                values = [single] * len(offsets) if single is not None else types.tolist()
                p.acks.update(zip(offsets.tolist(), values, strict=True))
                if span.type is not None:
                    # Acknowledged as a whole before: keep that for the other rows.
                    for o in range(span.first, span.last + 1):
                        p.acks.setdefault(o, span.type)
                    span.type = None

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
            if p.records:
                if not p.acks:
                    p.acks = dict.fromkeys(p.records, value)
                else:
                    for offset in p.records:
                        p.acks.setdefault(offset, value)
            for span in p.spans:
                if span.type is not None:
                    continue
                if p.acks and _any_inside(p.acks, span):
                    # Some were acknowledged one by one (async for): the rest too.
                    for o in range(span.first, span.last + 1):
                        p.acks.setdefault(o, value)
                else:
                    span.type = value

    def _refusal(self, topic: str, partition: int, offset: int, delivery_count: int) -> str:
        """Why ``acknowledge`` refused a record (error path only)."""
        where = f"{topic}-{partition} offset {offset}"
        entry = self._by_name.get((topic, partition))
        p = entry[1] if entry is not None else None
        if p is not None:
            held = p.records.get(offset)
            span = _span_of(p.spans, offset)
            held_count = (
                held[9] if held is not None else span.count_of(offset) if span is not None
                else None
            )
            if held_count is not None:
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
        if entry is not None and (
            offset in entry[1].records or _span_of(entry[1].spans, offset) is not None
        ):
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
        return sum(
            sum(1 for o in p.records if o not in p.acks)
            + sum(
                sum(1 for o in range(s.first, s.last + 1) if o not in p.acks)
                for s in p.spans if s.type is None
            )
            for p in self._partitions.values()
        )

    def has_renewing(self) -> bool:
        return any(p.renewing or p.ready for p in self._partitions.values())

    def has_records(self) -> bool:
        return any(p.records or p.spans for p in self._partitions.values())

    def has_pending_acks(self) -> bool:
        return any(p.acks for p in self._partitions.values())

    def is_empty(self) -> bool:
        return not any(
            p.records or p.spans or p.acks or p.renewing or p.ready
            for p in self._partitions.values()
        )

    # -- hand-off to the network thread ------------------------------------------------

    def take_acknowledged(self) -> dict[TopicIdPartition, tuple[int, dict[int, int]]]:
        """:meth:`take_acknowledgements` with the ranges spelled out per offset."""
        out: dict[TopicIdPartition, tuple[int, dict[int, int]]] = {}
        for tip, (node_id, acks, ranges) in self.take_acknowledgements().items():
            for first, last, t in ranges:
                acks.update(dict.fromkeys(range(first, last + 1), t))
            out[tip] = (node_id, acks)
        return out

    def take_acknowledgements(self) -> dict[TopicIdPartition, Taken]:
        """Remove and return the acknowledged offsets: tip -> (node_id, {offset:
        type}, [(first, last, type)]): spans acknowledged as a whole come as
        ranges, disjoint from the per-offset types.

        Acknowledged records leave the batch (they can no longer be acknowledged).
        RENEWed records move to the renewing set until the broker answers.
        """
        out: dict[TopicIdPartition, Taken] = {}
        for tip, p in self._partitions.items():
            ranges = self._take_spans(p) if p.spans else []
            if not p.acks:
                if ranges:
                    out[tip] = (p.node_id, {}, ranges)
                    self._sent[(tip.topic, tip.partition)] = ({}, ranges)
                continue
            acks = p.acks
            p.acks = {}
            if (
                len(acks) >= len(p.records)
                and not p.failed_offsets
                and AcknowledgeType.RENEW not in acks.values()
                and acks.keys() >= p.records.keys()
            ):
                p.records = {}  # the common case: everything acknowledged, no RENEW
            else:
                failed = p.failed_offsets
                for offset, t in acks.items():
                    record = p.records.pop(offset, None)
                    if t == AcknowledgeType.RENEW and record is not None:
                        p.renewing[offset] = record
                    if failed and failed.pop(offset, None) is not None:
                        p.raised.discard(offset)
            out[tip] = (p.node_id, acks, ranges)
            self._sent[(tip.topic, tip.partition)] = (acks, ranges)
        self._compact()
        return out

    @staticmethod
    def _take_spans(p: _PartitionInFlight) -> list[tuple[int, int, int]]:
        """Take the acknowledged spans of ``p`` out of it: those acknowledged as
        a whole become ranges; offsets acknowledged one by one (in ``p.acks``,
        which still holds them) leave their span, which keeps the others."""
        ranges: list[tuple[int, int, int]] = []
        kept: list[_Span] = []
        acks = p.acks
        for span in p.spans:
            if span.type is not None:
                if acks and _any_inside(acks, span):
                    # One by one first, then as a whole: per offset for this span.
                    for o in range(span.first, span.last + 1):
                        acks.setdefault(o, span.type)
                else:
                    ranges.append((span.first, span.last, span.type))
            elif acks and _any_inside(acks, span):
                kept.extend(span.without(acks))
            else:
                kept.append(span)
        p.spans = kept
        return ranges

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

    def take_ready(self) -> dict[TopicIdPartition, list[ConsumerRecord[Any, Any]]]:
        """Renewed records to return from this poll; they rejoin the batch (to be acked)."""
        out: dict[TopicIdPartition, list[ConsumerRecord[Any, Any]]] = {}
        for tip, p in self._partitions.items():
            if p.ready:
                p.records.update(p.ready)
                out[tip] = [p.ready[o] for o in sorted(p.ready)]
                p.ready = {}
        return out

    def current_records(self) -> dict[TopicIdPartition, list[ConsumerRecord[Any, Any]]]:
        return {
            tip: [p.records[o] for o in sorted(p.records)]
            for tip, p in self._partitions.items()
            if p.records
        }

    def node_of(self, tip: TopicIdPartition) -> int | None:
        p = self._partitions.get(tip)
        return p.node_id if p is not None else None

    def source_of(self, tip: TopicIdPartition) -> tuple[int, int] | None:
        """(node, share session generation) of the partition's in-flight records."""
        p = self._partitions.get(tip)
        return (p.node_id, p.generation) if p is not None else None

    def clear(self) -> None:
        self._partitions.clear()
        self._by_name.clear()
        self._sent.clear()

    def _compact(self) -> None:
        for tip in [t for t, p in self._partitions.items()
                    if not (p.records or p.spans or p.acks or p.renewing or p.ready
                            or p.failed_offsets)]:
            del self._partitions[tip]
            entry = self._by_name.get((tip.topic, tip.partition))
            if entry is not None and entry[0] == tip:
                del self._by_name[(tip.topic, tip.partition)]
