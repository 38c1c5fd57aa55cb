"""What the share engine hands to the application side: fetched data and
acknowledgement outcomes, as plain values (the engine never touches the
application's queues or futures; the network thread forwards these)."""

from __future__ import annotations

import attrs

from kafka_share._reprs import attrs_repr
from kafka_share.errors import KafkaError
from kafka_share.models import TopicIdPartition
from kafka_share.share.acknowledgements import Acknowledgements

__all__ = ["AcknowledgementCompletion", "CompletedShareFetch", "LocksLost", "SessionReplaced"]


@attrs_repr
@attrs.frozen(repr=False)
class AcknowledgementCompletion:
    """The broker's answer (or a local failure) for one acknowledgement batch of a partition."""

    partition: TopicIdPartition
    #: what was acknowledged (no longer touched by the engine once completed)
    acknowledgements: Acknowledgements
    error: KafkaError | None
    #: Offsets that were RENEWed successfully and go back to the application.
    renewed_offsets: frozenset[int] = frozenset()
    #: Lock duration reported with the answer (ShareAcknowledge v2), if any.
    acquisition_lock_timeout_ms: int | None = None

    @property
    def offsets(self) -> frozenset[int]:
        """The acknowledged offsets (GAPs included), spelled out only when asked:
        a batch accepted as a whole is a range until a callback wants offsets."""
        return self.acknowledgements.offsets()


@attrs_repr
@attrs.define(eq=False, repr=False)
class CompletedShareFetch:
    """One partition's data from one ShareFetch response (network -> application).

    Decoding and deserialization happen on the application thread, like Java's
    ShareCompletedFetch, so the network thread stays free for heartbeats.
    """

    node_id: int
    partition: TopicIdPartition
    records: bytes | memoryview
    #: (first_offset, last_offset, delivery_count) ranges the broker acquired for us
    acquired: list[tuple[int, int, int]]
    acquisition_lock_timeout_ms: int | None = None
    #: which share session with ``node_id`` acquired these records: acknowledgements
    #: are only valid in that session (a new session has none of its locks)
    session_generation: int = 0
    #: conservative end of the records' acquisition lock, on the monotonic
    #: millisecond clock (``share.held.lock_expiry_ms``); None: unknown. Records
    #: are not handed to the application past it.
    lock_expires_ms: int | None = None


@attrs_repr
@attrs.frozen(repr=False)
class SessionReplaced:
    """The share session with ``node_id`` was lost and generation ``generation``
    replaces it: records acquired by an older one hold no lock any more (the
    broker released them and will deliver them again), so records of theirs not
    yet handed to the application are dropped rather than worked on twice."""

    node_id: int
    generation: int


@attrs_repr
@attrs.frozen(repr=False)
class LocksLost:
    """Under ``share.auto.renew``: the locks of these offsets of ``partition``
    (acquired by share session ``generation`` with ``node_id``) were not renewed
    (a renewal failed, or ``share.auto.renew.max.ms`` was reached and the lock
    ran out). Buffered records among them are dropped, not handed out; the
    application hears of those it holds at its next poll or commit."""

    partition: TopicIdPartition
    node_id: int
    generation: int
    offsets: frozenset[int]
    #: why, in words for the application (ends a sentence)
    reason: str = "their locks ran out"
