"""When ``share.auto.renew`` renews which locks: a pure schedule (no clock, no I/O).

Under ``share.auto.renew`` the network thread renews (AcknowledgeType.RENEW,
KIP-1222, Kafka 4.2+) the acquisition locks of the records this consumer holds:
those still buffered and those handed to the application and not acknowledged
yet. Java's client (4.2 to 4.4) only renews when the application acknowledges a
record with RENEW, and then hands the record back from a later ``poll``; here the
renewal is invisible to the application: nothing is delivered again.

The rules:

* **When.** A span of records (one acquired range, see
  :mod:`kafka_share.share.held`) is renewed once half of its lock has passed
  (:meth:`RenewalSchedule.renew_at_ms`). Half a lock is the slack for the RENEW
  to get out: only one share request per node is in flight, so a renewal may wait
  for an answer to a request before it (the engine shortens a ShareFetch's
  ``max_wait_ms`` to the next renewal for that), and then needs a round trip.
* **What.** The span's offsets that are still held, not being acknowledged, and
  not being renewed already.
* **Until.** Acknowledged, or ``share.auto.renew.max.ms`` after the acquisition
  (then the lock runs out and the broker delivers the record again), or a renewal
  failed (the broker said the record is no longer ours).
"""

from __future__ import annotations

from collections.abc import Callable

from kafka_share.share.held import HeldRecords, HeldSpan

__all__ = ["RenewalSchedule"]


class RenewalSchedule:
    """Which held records to renew at ``now_ms``, and when next (see the module docstring)."""

    def __init__(self, max_ms: int) -> None:
        self.max_ms = max_ms

    @staticmethod
    def renew_at_ms(span: HeldSpan) -> int:
        """When ``span``'s lock is renewed: once half of it has passed."""
        return span.lock_expires_ms - span.lock_ms // 2

    def _limit_reached(self, span: HeldSpan, now_ms: int) -> bool:
        return now_ms - span.acquired_at_ms >= self.max_ms

    def due(
        self, held: HeldRecords, now_ms: int, node_free: Callable[[int], bool]
    ) -> list[tuple[HeldSpan, list[int]]]:
        """The spans (of nodes ``node_free`` says may be sent to) to renew now, each
        with the offsets to renew. Spans past ``max_ms`` are marked as done."""
        out: list[tuple[HeldSpan, list[int]]] = []
        for span in held.spans():
            if span.renewal_over or now_ms < self.renew_at_ms(span):
                continue
            if self._limit_reached(span, now_ms):
                span.renewal_over = True
                continue
            if not node_free(span.node_id):
                continue
            offsets = span.renewable()
            if offsets:
                out.append((span, offsets))
        return out

    def next_due_ms(
        self, held: HeldRecords, now_ms: int, node_free: Callable[[int], bool]
    ) -> int | None:
        """When :meth:`due` next has something for a free node (None: nothing to
        renew). A span due now whose node is busy is left out: the answer that
        frees the node wakes the driver anyway, and counting it would spin."""
        best: int | None = None
        for span in held.spans():
            if span.renewal_over or not node_free(span.node_id):
                continue
            at = self.renew_at_ms(span)
            if at <= now_ms and (self._limit_reached(span, now_ms) or not span.renewable()):
                continue
            if best is None or at < best:
                best = at
        return best

    def next_due_for_node(self, held: HeldRecords, node_id: int) -> int | None:
        """The earliest renewal time among ``node_id``'s spans (a ShareFetch to that
        node must not long-poll past it)."""
        times = [
            self.renew_at_ms(s) for s in held.spans()
            if s.node_id == node_id and not s.renewal_over
        ]
        return min(times) if times else None
