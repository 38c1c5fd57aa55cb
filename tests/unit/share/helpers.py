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


def succeeded(self: AckResult) -> bool:
    return self.error_code == _NONE


def add_if_absent(
    self: Acknowledgements, offset: int, acknowledge_type: AcknowledgeType | int
) -> bool:
    """Set the type of ``offset`` unless it already has one; True if it was set.

    Implicit acknowledgement uses this so it never overrides an explicit choice.
    """
    self._expand()
    if offset in self._types:
        return False
    self.add(offset, acknowledge_type)
    return True


def remove(self: Acknowledgements, offset: int) -> int | None:
    """Drop ``offset``; returns its type, or None if it was not present."""
    self._expand()
    return self._types.pop(offset, None)


def as_dict(self: Acknowledgements) -> dict[int, int]:
    """A copy of the offset -> type map (GAP is 0)."""
    self._expand()
    return dict(self._types)


def has_non_gap(self: Acknowledgements) -> bool:
    """True if at least one offset carries an application acknowledgement."""
    return any(t != GAP for t in self._types.values()) or any(
        t != GAP for _, _, t in self._ranges
    )


def is_new_session(self: SessionFetchPlan) -> bool:
    return self.epoch == INITIAL_EPOCH


def is_empty(self: SessionFetchPlan) -> bool:
    """True if the request would list no partition and forget none."""
    return not self.topics and not self.forgotten


def is_close(self: SessionAcknowledgePlan) -> bool:
    return self.epoch == FINAL_EPOCH


def would_be_empty(self: ShareSession,
    wanted: Iterable[TopicIdPartition],
    acks: Mapping[TopicIdPartition, Acknowledgements] | None = None,
) -> bool:
    """True if :meth:`build_fetch` would list no partition and forget none.

    Such a request only makes sense as a plain long-poll for records; a node
    that is not meant to deliver records this round can skip it. Nothing is
    changed by this call.
    """
    want = _by_topic_partition(wanted)
    if self._epoch == INITIAL_EPOCH:
        return not want  # acks are unsendable on a new session
    if acks and any(a for a in acks.values()):
        return False
    return want == self._partitions


def offsets_between(self: AcquiredRecords, first_offset: int, last_offset: int) -> list[int]:
    """The acquired offsets inside ``first_offset..last_offset`` (for example to
    REJECT every acquired offset of a corrupt batch)."""
    out: list[int] = []
    i = max(bisect.bisect_right(self._firsts, first_offset) - 1, 0)
    for r in self.ranges[i:]:
        if r.first_offset > last_offset:
            break
        lo = max(r.first_offset, first_offset)
        hi = min(r.last_offset, last_offset)
        if lo <= hi:
            out.extend(range(lo, hi + 1))
    return out


def exhausted(self: AcquiredCursor) -> bool:
    """True once every acquired offset has been delivered or marked a gap."""
    return self._next > self._last


def trickle(self: AckDeferral) -> bool:
    return self._trickle


def fatal_error(self: MembershipManager) -> MembershipError | None:
    """Set once the member is FATAL; the consumer raises it from every poll."""
    return self._fatal_error


def heartbeat_in_flight(self: MembershipManager) -> bool:
    return self._request.in_flight
