"""Test helpers: reads and shortcuts the tests need and the package does not."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping

from kafka_share.models import AcknowledgeType, TopicIdPartition
from kafka_share.share.ack_deferral import AckDeferral
from kafka_share.share.acknowledgements import _NONE, GAP, Acknowledgements, AckResult
from kafka_share.share.acquired import AcquiredCursor, AcquiredRecords
from kafka_share.share.membership import MembershipError, MembershipManager
from kafka_share.share.session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    SessionAcknowledgePlan,
    SessionFetchPlan,
    ShareSession,
    _by_topic_partition,
)


def succeeded(result: AckResult) -> bool:
    return result.error_code == _NONE


def add_if_absent(
    acks: Acknowledgements, offset: int, acknowledge_type: AcknowledgeType | int
) -> bool:
    """Set the type of ``offset`` unless it already has one; True if it was set.

    The way implicit acknowledgement treats a record: it never overrides an
    explicit choice.
    """
    acks._expand()
    if offset in acks._types:
        return False
    acks.add(offset, acknowledge_type)
    return True


def remove(acks: Acknowledgements, offset: int) -> int | None:
    """Drop ``offset``; returns its type, or None if it was not present."""
    acks._expand()
    return acks._types.pop(offset, None)


def as_dict(acks: Acknowledgements) -> dict[int, int]:
    """A copy of the offset -> type map (GAP is 0)."""
    acks._expand()
    return dict(acks._types)


def has_non_gap(acks: Acknowledgements) -> bool:
    """True if at least one offset carries an application acknowledgement."""
    return any(t != GAP for t in acks._types.values()) or any(
        t != GAP for _, _, t in acks._ranges
    )


def is_new_session(plan: SessionFetchPlan) -> bool:
    return plan.epoch == INITIAL_EPOCH


def is_empty(plan: SessionFetchPlan) -> bool:
    """True if the request would list no partition and forget none."""
    return not plan.topics and not plan.forgotten


def is_close(plan: SessionAcknowledgePlan) -> bool:
    return plan.epoch == FINAL_EPOCH


def would_be_empty(
    session: ShareSession,
    wanted: Iterable[TopicIdPartition],
    acks: Mapping[TopicIdPartition, Acknowledgements] | None = None,
) -> bool:
    """True if :meth:`build_fetch` would list no partition and forget none.

    Such a request only makes sense as a plain long-poll for records; a node
    that is not meant to deliver records this round can skip it. Nothing is
    changed by this call.
    """
    want = _by_topic_partition(wanted)
    if session._epoch == INITIAL_EPOCH:
        return not want  # acks are unsendable on a new session
    if acks and any(a for a in acks.values()):
        return False
    return want == session._partitions


def offsets_between(acquired: AcquiredRecords, first_offset: int, last_offset: int) -> list[int]:
    """The acquired offsets inside ``first_offset..last_offset`` (for example to
    REJECT every acquired offset of a corrupt batch)."""
    out: list[int] = []
    i = max(bisect.bisect_right(acquired._firsts, first_offset) - 1, 0)
    for r in acquired.ranges[i:]:
        if r.first_offset > last_offset:
            break
        lo = max(r.first_offset, first_offset)
        hi = min(r.last_offset, last_offset)
        if lo <= hi:
            out.extend(range(lo, hi + 1))
    return out


def exhausted(cursor: AcquiredCursor) -> bool:
    """True once every acquired offset has been delivered or marked a gap."""
    return cursor._next > cursor._last


def trickle(deferral: AckDeferral) -> bool:
    return deferral._trickle


def fatal_error(membership: MembershipManager) -> MembershipError | None:
    """Set once the member is FATAL; the consumer raises it from every poll."""
    return membership._fatal_error


def heartbeat_in_flight(membership: MembershipManager) -> bool:
    return membership._request.in_flight


def add_gap(acks: Acknowledgements, offset: int) -> None:
    """Mark ``offset`` as a GAP (acquired, but no record to deliver)."""
    acks._check_offset(offset)
    acks._expand()
    acks._types[offset] = GAP
