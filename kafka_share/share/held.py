"""The records this consumer holds: a ledger from acquisition until the
acknowledgement completes. Pure (no clock, no I/O); network thread only.

Theory of operation
-------------------
Every ShareFetch response that acquires records adds one :class:`HeldSpan` per
acquired range: which node and share session acquired it, the delivery count,
when it was acquired and when its acquisition lock ends. A span stays until
every one of its offsets is settled: its acknowledgement completed (accepted,
released, rejected, or failed), its share session was replaced (the broker
released the locks), or its lock ran out without a renewal. Spans, not
offsets: a response of 500 records costs one entry, and the common
acknowledgement that settles a whole span costs a bisect, not a set per
record (the ledger runs on every response, auto-renewal or not).

Three things use it:

* **Re-sent acquisitions.** A ShareFetch answer that acquires an offset this
  consumer already holds, from the same node and share session and with the same
  delivery count, is a resend of the same acquisition, not a new delivery
  (librdkafka's mock cluster sends every held record with each answer; a real
  broker increments the delivery count on redelivery). :meth:`HeldRecords.acquire`
  drops such offsets from the answer, so they are neither delivered nor
  acknowledged twice.
* **Lock deadlines.** Each span's ``lock_expires_ms`` is the conservative end of
  its lock (see :func:`lock_expiry_ms`); the consumer never hands out a record
  past it, and auto-renewal renews before it.
* **Auto-renewal** (:mod:`kafka_share.share.renewal`): which held records are
  not acknowledged yet (renewable), which RENEW is in flight, and how long
  since their acquisition.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator

import attrs

from kafka_share._reprs import attrs_repr
from kafka_share.models import TopicIdPartition

__all__ = ["HeldRecords", "HeldSpan", "held_ranges_without", "lock_expiry_ms", "lock_margin_ms"]

#: The least time taken off a lock's end (see :func:`lock_margin_ms`).
MIN_LOCK_MARGIN_MS = 50


def lock_margin_ms(lock_ms: int) -> int:
    """How much earlier than "arrival + lock duration" a lock is taken to end.

    The broker starts a record's lock when it acquires the record, before it
    writes the response; the response's arrival is later by the broker's
    remaining work on the request (reading the log, the other partitions), the
    transfer, and our network thread's wait for the GIL (up to the
    interpreter's 5 ms switch interval per hand-over). Together that is a few
    milliseconds on a LAN and tens on a loaded host; the margin is 5 % of the
    lock with a floor of 50 ms (50 ms for the 1 s minimum lock, 1.5 s for the
    30 s default), well above that and small next to the lock.
    """
    return max(MIN_LOCK_MARGIN_MS, lock_ms // 20)


def lock_expiry_ms(arrival_ms: int, lock_ms: int) -> int:
    """The conservative end of a lock whose response arrived at ``arrival_ms``."""
    return arrival_ms + lock_ms - lock_margin_ms(lock_ms)


@attrs_repr
@attrs.define(eq=False, slots=True, repr=False)
class HeldSpan:
    """One acquired range of a partition, as long as any of it is held."""

    partition: TopicIdPartition
    node_id: int
    #: the share session with ``node_id`` that acquired it
    generation: int
    first: int
    last: int
    delivery_count: int
    acquired_at_ms: int
    lock_ms: int
    #: conservative end of the current lock (moved by each renewal)
    lock_expires_ms: int
    #: offsets settled (acknowledgement completed); None while none is
    settled: set[int] | None = None
    #: offsets whose acknowledgement is on its way (not renewed any more)
    acking: set[int] | None = None
    #: offsets whose RENEW is in flight
    renewing: set[int] | None = None
    #: no more renewals (the limit was reached or a renewal failed)
    renewal_over: bool = False

    @property
    def size(self) -> int:
        return self.last - self.first + 1

    def held(self) -> Iterator[int]:
        """The offsets still held."""
        settled = self.settled
        if not settled:
            return iter(range(self.first, self.last + 1))
        return (o for o in range(self.first, self.last + 1) if o not in settled)

    def renewable(self) -> list[int]:
        """Held offsets that are neither being acknowledged nor being renewed."""
        skip: set[int] = set()
        for s in (self.settled, self.acking, self.renewing):
            if s:
                skip |= s
        return [o for o in range(self.first, self.last + 1) if o not in skip]

    @property
    def done(self) -> bool:
        return self.settled is not None and len(self.settled) >= self.size


class HeldRecords:
    """Every record this consumer holds, per partition (see the module docstring)."""

    def __init__(self, *, track_acks: bool = False) -> None:
        #: also remember acknowledgements on their way (auto-renewal needs it)
        self._track_acks = track_acks
        self._spans: dict[TopicIdPartition, list[HeldSpan]] = {}

    # -- queries -----------------------------------------------------------------

    def spans(self) -> Iterator[HeldSpan]:
        for spans in self._spans.values():
            yield from spans

    def held_count(self) -> int:
        return sum(sum(1 for _ in s.held()) for s in self.spans())

    def __bool__(self) -> bool:
        return bool(self._spans)

    def next_expiry_ms(self) -> int | None:
        """When the next lock ends (spans being renewed are left out: their answer comes first)."""
        return min((s.lock_expires_ms for s in self.spans() if not s.renewing), default=None)

    def locked_until(self, tip: TopicIdPartition, offsets: Iterable[int], until_ms: int) -> bool:
        """Whether every one of ``offsets`` is held under a lock that lasts past
        ``until_ms``: False when one of them is not held any more (its lock ran out,
        or its session was replaced) or its lock ends by then."""
        spans = self._spans.get(tip, ())
        for o in offsets:
            if not any(s.first <= o <= s.last and s.lock_expires_ms > until_ms for s in spans):
                return False
        return True

    # -- acquisition ----------------------------------------------------------------

    def acquire(
        self,
        tip: TopicIdPartition,
        node_id: int,
        generation: int,
        ranges: list[tuple[int, int, int]],
        now_ms: int,
        lock_ms: int,
    ) -> tuple[list[tuple[int, int, int]], int]:
        """Record the ranges a ShareFetch answer acquired; returns the ranges that
        are new and how many offsets were resends of records already held (same
        node, share session and delivery count), which are left out."""
        spans = self._spans.setdefault(tip, [])
        fresh: list[tuple[int, int, int]] = []
        resent = 0
        for first, last, count in ranges:
            same = [
                s for s in spans
                if s.node_id == node_id and s.generation == generation
                and s.delivery_count == count and s.first <= last and first <= s.last
            ]
            if not same:
                fresh.append((first, last, count))
                continue
            held: set[int] = set()
            for s in same:
                held.update(o for o in s.held() if first <= o <= last)
            resent += len(held)
            fresh.extend(held_ranges_without(first, last, count, held))
        expires = lock_expiry_ms(now_ms, lock_ms)
        for first, last, count in fresh:
            spans.append(HeldSpan(
                tip, node_id, generation, first, last, count, now_ms, lock_ms, expires
            ))
        if not spans:
            del self._spans[tip]
        return fresh, resent

    # -- acknowledgements -------------------------------------------------------------

    def acks_sent(self, tip: TopicIdPartition, offsets: Iterable[int]) -> None:
        """Acknowledgements of these offsets are on their way: never renew them."""
        if not self._track_acks:
            return
        spans = self._spans.get(tip)
        if not spans:
            return
        for o in offsets:
            for s in spans:
                if s.first <= o <= s.last:
                    if s.acking is None:
                        s.acking = set()
                    s.acking.add(o)

    def acks_sent_ranges(self, tip: TopicIdPartition, ranges: list[tuple[int, int]]) -> None:
        """:meth:`acks_sent` for the offsets of ``(first, last)`` ranges, without a
        Python step per offset (explicit acknowledgements arrive as ranges)."""
        if not self._track_acks:
            return
        for s in self._spans.get(tip, ()):
            for first, last in ranges:
                lo, hi = max(first, s.first), min(last, s.last)
                if lo <= hi:
                    if s.acking is None:
                        s.acking = set()
                    s.acking.update(range(lo, hi + 1))

    def ack_returned(self, tip: TopicIdPartition, offsets: Iterable[int]) -> None:
        """The application RENEWed these offsets itself and holds them again."""
        wanted = set(offsets)
        for s in self._spans.get(tip, ()):
            if s.acking:
                s.acking -= wanted

    def settle_ranges(self, tip: TopicIdPartition, ranges: list[tuple[int, int]]) -> None:
        """:meth:`settle` for the offsets of sorted, disjoint ``(first, last)``
        ranges, without going offset by offset when they cover whole spans."""
        spans = self._spans.get(tip)
        if not spans or not ranges:
            return
        covered: list[tuple[int, int]] = []  # the ranges' union
        for first, last in ranges:
            if covered and covered[-1][1] + 1 >= first:
                covered[-1] = (covered[-1][0], max(covered[-1][1], last))
            else:
                covered.append((first, last))
        kept: list[HeldSpan] = []
        for s in spans:
            overlapping = [(f, la) for f, la in covered if f <= s.last and la >= s.first]
            if not overlapping:
                kept.append(s)
                continue
            if s.settled is None and any(f <= s.first and la >= s.last for f, la in overlapping):
                continue  # the common case: the whole span acknowledged at once
            if s.settled is None:
                s.settled = set()
            for f, la in overlapping:
                s.settled.update(range(max(f, s.first), min(la, s.last) + 1))
            if not s.done:
                kept.append(s)
        if kept:
            self._spans[tip] = kept
        else:
            del self._spans[tip]

    def settle(self, tip: TopicIdPartition, offsets: Iterable[int]) -> None:
        """These offsets' acknowledgements completed (either way): no longer held."""
        spans = self._spans.get(tip)
        if not spans:
            return
        ordered = sorted(offsets)
        if not ordered:
            return
        kept: list[HeldSpan] = []
        for s in spans:
            lo = bisect.bisect_left(ordered, s.first)
            hi = bisect.bisect_right(ordered, s.last)
            if hi > lo:
                if s.settled is None and hi - lo >= s.size:
                    continue  # the common case: the whole span acknowledged at once
                if s.settled is None:
                    s.settled = set()
                s.settled.update(ordered[lo:hi])
                if s.done:
                    continue
            kept.append(s)
        if kept:
            self._spans[tip] = kept
        else:
            del self._spans[tip]

    # -- renewal --------------------------------------------------------------------------

    def renew_sent(self, span: HeldSpan, offsets: list[int]) -> None:
        if span.renewing is None:
            span.renewing = set()
        span.renewing.update(offsets)

    def renewed(
        self, tip: TopicIdPartition, offsets: Iterable[int], sent_ms: int,
        lock_ms: int | None,
    ) -> None:
        """RENEW of these offsets succeeded: their lock runs again from ``sent_ms``
        at the latest (the broker renewed it after the request left); ``lock_ms``
        is the duration the answer reported (None: unchanged)."""
        wanted = set(offsets)
        for s in self._spans.get(tip, ()):
            if s.renewing and s.renewing & wanted:
                s.renewing -= wanted
                if lock_ms is not None and lock_ms > 0:
                    s.lock_ms = lock_ms
                s.lock_expires_ms = max(s.lock_expires_ms, lock_expiry_ms(sent_ms, s.lock_ms))

    def renew_failed(self, tip: TopicIdPartition, offsets: Iterable[int]) -> list[HeldSpan]:
        """RENEW of these offsets failed: no more renewals for their spans, which
        are returned (their lock ends at its old deadline, if it has not)."""
        wanted = set(offsets)
        out: list[HeldSpan] = []
        for s in self._spans.get(tip, ()):
            if s.renewing and s.renewing & wanted:
                s.renewing -= wanted
                s.renewal_over = True
                out.append(s)
        return out

    # -- endings ------------------------------------------------------------------------

    def expire(self, now_ms: int) -> list[HeldSpan]:
        """Drop and return the spans whose lock has ended (and is not being renewed)."""
        gone: list[HeldSpan] = []
        for tip in list(self._spans):
            spans = self._spans[tip]
            kept = [s for s in spans if s.lock_expires_ms > now_ms or s.renewing]
            if len(kept) != len(spans):
                gone.extend(s for s in spans if s not in kept)
                if kept:
                    self._spans[tip] = kept
                else:
                    del self._spans[tip]
        return gone

    def session_replaced(self, node_id: int, generation: int) -> None:
        """A new share session with ``node_id``: the older ones' locks are gone."""
        for tip in list(self._spans):
            kept = [
                s for s in self._spans[tip]
                if s.node_id != node_id or s.generation >= generation
            ]
            if kept:
                self._spans[tip] = kept
            else:
                del self._spans[tip]

    def clear(self) -> None:
        self._spans.clear()


def held_ranges_without(
    first: int, last: int, count: int, skip: set[int] | frozenset[int]
) -> Iterator[tuple[int, int, int]]:
    """``first..last`` (delivery count ``count``) as ranges of the offsets not in ``skip``."""
    start: int | None = None
    for o in range(first, last + 1):
        if o in skip:
            if start is not None:
                yield (start, o - 1, count)
                start = None
        elif start is None:
            start = o
    if start is not None:
        yield (start, last, count)
