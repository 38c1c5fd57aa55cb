"""The records handed to the application by the last ``poll`` and their acknowledgements.

Application thread only. This is Java's ``ShareFetch``/``ShareInFlightBatch``:
it knows which records may still be acknowledged (only those of the current
batch), which node delivered each partition's records (acks must go back to
that node), and which records are being RENEWed (they come back from a later
``poll`` once the broker has extended their locks).
"""

from __future__ import annotations

import operator
from typing import Any

from kafka_share.errors import IllegalStateError
from kafka_share.models import AcknowledgeType, ConsumerRecord, TopicIdPartition

__all__ = ["GAP", "InFlightBatch"]

#: Wire acknowledge type for acquired offsets without a record (not public).
GAP = 0

_CANNOT = "The record cannot be acknowledged: "
_OFFSET = operator.attrgetter("offset")


class _PartitionInFlight:
    __slots__ = (
        "acks", "failed_offsets", "generation", "node_id", "raised", "ready", "records",
        "renewing",
    )

    def __init__(self, node_id: int, generation: int) -> None:
        self.node_id = node_id
        #: the share session with ``node_id`` that acquired these records
        self.generation = generation
        #: offset -> record still awaiting (or holding) an acknowledgement
        self.records: dict[int, ConsumerRecord[Any, Any]] = {}
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
    """Acknowledgement bookkeeping for the current batch of records."""

    def __init__(self) -> None:
        self._partitions: dict[TopicIdPartition, _PartitionInFlight] = {}
        #: (topic, partition) -> its entry in _partitions, for acknowledge(record):
        #: hashing a str and an int is cheaper than a TopicIdPartition (UUID)
        self._by_name: dict[tuple[str, int], tuple[TopicIdPartition, _PartitionInFlight]] = {}
        #: (topic, partition) -> the acks last handed to the network thread (the
        #: dict itself, not a copy): only read to explain a refused acknowledgement
        self._sent: dict[tuple[str, int], dict[int, int]] = {}
        #: tip -> share session generation of its latest records (kept after the
        #: partition leaves the batch, for the acks taken with it)
        self.generations: dict[TopicIdPartition, int] = {}

    # -- filling ---------------------------------------------------------------

    def _partition(
        self, tip: TopicIdPartition, node_id: int, generation: int
    ) -> _PartitionInFlight:
        p = self._partitions.get(tip)
        if p is None or p.node_id != node_id or p.generation != generation:
            if p is not None and (p.records or p.acks or p.renewing or p.ready):
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
        p.records.update(zip(map(_OFFSET, records), records, strict=True))

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
            raise IllegalStateError(self._refusal(record[0], record[1], offset, record[9]))
        p.acks[offset] = int(ack_type)

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
            if not p.acks:
                p.acks = dict.fromkeys(p.records, value)
            else:
                for offset in p.records:
                    p.acks.setdefault(offset, value)

    def _refusal(self, topic: str, partition: int, offset: int, delivery_count: int) -> str:
        """Why ``acknowledge`` refused a record (error path only)."""
        where = f"{topic}-{partition} offset {offset}"
        entry = self._by_name.get((topic, partition))
        p = entry[1] if entry is not None else None
        if p is not None:
            held = p.records.get(offset)
            if held is not None:
                return (
                    f"{_CANNOT}this {where} is from an earlier delivery (delivery count "
                    f"{delivery_count}); the last poll returned it again with delivery "
                    f"count {held[9]}: acknowledge that record"
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
        if offset in self._sent.get((topic, partition), ()):
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
        if entry is not None and offset in entry[1].records:
            return (
                f"{_CANNOT}{where} was returned by poll(): acknowledge_offset() only takes "
                "records poll() could not return; use acknowledge(record)"
            )
        if offset in self._sent.get((topic, partition), ()):
            return (
                f"{_CANNOT}{where} was already acknowledged, and the acknowledgement "
                "was sent; acknowledge_offset() only takes records poll() could not return"
            )
        return (
            f"{_CANNOT}acknowledge_offset() only takes records poll() could not return "
            f"(a deserialization or corrupt-batch error raised by poll), and {where} is not "
            "one that is still waiting for its acknowledgement"
        )

    # -- queries -------------------------------------------------------------------

    def all_acknowledged(self) -> bool:
        return all(
            all(o in p.acks for o in p.records) for p in self._partitions.values()
        )

    def unacknowledged_count(self) -> int:
        return sum(
            sum(1 for o in p.records if o not in p.acks) for p in self._partitions.values()
        )

    def most_held(self) -> int:
        """The most records of one partition handed out and not yet acknowledged
        (what this consumer still holds of that partition's record-lock limit)."""
        return max((len(p.records) for p in self._partitions.values()), default=0)

    def has_renewing(self) -> bool:
        return any(p.renewing or p.ready for p in self._partitions.values())

    def has_records(self) -> bool:
        return any(p.records for p in self._partitions.values())

    def has_pending_acks(self) -> bool:
        return any(p.acks for p in self._partitions.values())

    def is_empty(self) -> bool:
        return not any(
            p.records or p.acks or p.renewing or p.ready for p in self._partitions.values()
        )

    # -- hand-off to the network thread ------------------------------------------------

    def take_acknowledged(self) -> dict[TopicIdPartition, tuple[int, dict[int, int]]]:
        """Remove and return the acknowledged offsets: tip -> (node_id, {offset: type}).

        Acknowledged records leave the batch (they can no longer be acknowledged).
        RENEWed records move to the renewing set until the broker answers.
        """
        out: dict[TopicIdPartition, tuple[int, dict[int, int]]] = {}
        for tip, p in self._partitions.items():
            if not p.acks:
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
            out[tip] = (p.node_id, acks)
            self._sent[(tip.topic, tip.partition)] = acks
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
                    if not (p.records or p.acks or p.renewing or p.ready or p.failed_offsets)]:
            del self._partitions[tip]
            entry = self._by_name.get((tip.topic, tip.partition))
            if entry is not None and entry[0] == tip:
                del self._by_name[(tip.topic, tip.partition)]
