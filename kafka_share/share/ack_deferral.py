"""When acknowledgements wait for a later ShareFetch: a pure policy (no clock, no I/O).

The broker answers a ShareFetch that carries acknowledgements only once it has
recorded them in the share-group state (a write through the share coordinator),
even when records are ready at once; on a local broker that holds the answer
for about a millisecond. A consumer that has caught up with the log fetches
once per record or two, so if every fetch carried the previous records'
acknowledgements, every record produced meanwhile would wait behind that write,
and at a steady trickle the consumer would fall behind by a write per fetch.

So while a node's answers are a trickle (:func:`~kafka_share.share.fetch_ahead.caught_up`
and not empty), the acknowledgements for a long-polling fetch to it are held
back for up to :data:`ACK_DEFER_MS` and then ride on the next fetch (or go as a
ShareAcknowledge if none goes out); the fetches in between carry none and cap
their wait at the end of that window, so no acknowledgement waits longer than
the window and one round trip. An empty answer (the stream went idle), a failure
or a large answer (the consumer is behind: its fetches are not latency bound)
ends the trickle: acknowledgements ride on the next fetch again, as in Java's
client.

Time comes in as ``now_ms`` (any monotonic millisecond clock).
"""

from __future__ import annotations

from kafka_share.share.fetch_ahead import caught_up

__all__ = ["ACK_DEFER_MAX_RECORDS", "ACK_DEFER_MS", "AckDeferral"]

#: The longest acknowledgements are held back from the fetches to a node whose
#: answers are a trickle (as long as acknowledgements waiting for a fetch to
#: ride on linger elsewhere in the engine). At 1,000 records/s one fetch in
#: several dozen carries them; the broker's record locks last 30 s by default, so
#: the delay is harmless to delivery, and a commit sends them at once.
ACK_DEFER_MS = 50
#: Held-back acknowledgements covering more records than this go with the next
#: fetch whatever the window: the broker limits the records of a partition in
#: flight (``group.share.partition.max.record.locks``, default 2000), counted
#: from the oldest unacknowledged one.
ACK_DEFER_MAX_RECORDS = 100


class AckDeferral:
    """Whether the acknowledgements bound for one node wait for a later fetch.

    Network thread only (one per node). The engine tells it about each answer
    to a fetch (:meth:`on_response`, :meth:`on_failure`) and asks
    :meth:`hold_until_ms` when it builds a long-polling fetch that has
    acknowledgements to carry.
    """

    __slots__ = ("_held_since_ms", "_trickle")

    def __init__(self) -> None:
        #: the node's last answer brought a few records (the consumer is caught up)
        self._trickle = False
        #: when acknowledgements were first held back in the current window
        self._held_since_ms: int | None = None

    def on_response(self, acquired: int, size_bytes: int, max_records: int) -> None:
        """A fetch to the node that asked for up to ``max_records`` records was
        answered with ``acquired`` records of ``size_bytes`` bytes in all (a
        fetch capped to the application's pace that got all it asked for is not
        a trickle: the consumer is behind)."""
        self._trickle = acquired > 0 and caught_up(acquired, size_bytes, max_records)

    def on_failure(self) -> None:
        """A fetch to the node failed: acknowledgements go with the next one."""
        self._trickle = False

    def hold_until_ms(self, now_ms: int, records: int) -> int | None:
        """Acknowledgements of ``records`` records are ready for a long-polling
        fetch to the node at ``now_ms``: None to send them with it, else the time
        until which they may wait for a later fetch (that fetch then waits no
        longer than that)."""
        if not self._trickle or records > ACK_DEFER_MAX_RECORDS:
            self._held_since_ms = None
            return None
        if self._held_since_ms is None:
            self._held_since_ms = now_ms
        until = self._held_since_ms + ACK_DEFER_MS
        if now_ms >= until:
            self._held_since_ms = None
            return None
        return until
