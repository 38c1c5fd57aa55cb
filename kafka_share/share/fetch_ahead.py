"""When the consumer fetches ahead: a pure policy object (no clock, no I/O).

In ``batch_optimized`` acquire mode the application thread may ask for the next
ShareFetch response while records of the current one are still being handed
out, so the broker works while the application decodes and processes
(librdkafka asks at the same moment). Asking too eagerly costs: every record of
a prefetched response is locked for this consumer, the broker limits how many
records of a partition may be in flight
(``group.share.partition.max.record.locks``, default 2000, counted from the
oldest unacknowledged offset), and a slow application lets prefetched records
time out and come back with a higher delivery count.

The rules, each a method below:

* **Small response** (:meth:`FetchAheadPolicy.caught_up`): fewer records than
  one poll takes and under :data:`AHEAD_MIN_BYTES` means the consumer is at the
  log end; a fetch ahead would only come back empty and delay the long-polling
  fetch that brings the next record.
* **Room under the lock limit and within the lock**
  (:meth:`FetchAheadPolicy.may_fetch_ahead`): only while the response being
  delivered acquired at most :data:`AHEAD_MAX_HELD` records, or its node has
  other partitions for this consumer (the limit is per share-partition: a fetch
  ahead acquires records of those while this one is at its limit), and only
  while, at the application's measured pace, both responses would be processed
  within a quarter of the acquisition lock.
* **Pace within the lock** (:meth:`FetchAheadPolicy.max_records`): once the
  application is measured to take longer than half the acquisition lock for
  ``max.poll.records`` records, a fetch asks for only as many records as it
  processes in half the lock (ShareFetch ``MaxRecords``), so a slow application
  does not acquire records whose locks run out before it gets to them. (In
  ``batch_optimized`` mode the broker may still round up to a whole producer
  batch; records whose lock ran out before delivery are then dropped by the
  collector, or renewed under ``share.auto.renew``.)
* **Hand out only what can be acknowledged in time**
  (:meth:`FetchAheadPolicy.hand_out_margin_ms`): a buffered record is handed to
  the application only if its lock lasts past the time the application takes
  for a poll's records, twice over, plus :data:`ACK_ALLOWANCE_MS` for the
  acknowledgement's way to the broker; one closer to its end is dropped as if it
  had run out (the broker hands it out again when it does). Otherwise a record
  handed out just before its lock ends is processed, and its acknowledgement is
  refused while another consumer already has it.
* **Once per response** (:meth:`FetchAheadPolicy.ahead_while_delivering`): if
  that fetch comes back empty, the next one waits until the response is drained,
  so an idle consumer does not send an empty ShareFetch per poll.

Time comes in as ``now_ms`` (any monotonic millisecond clock, fractions
allowed); the consumer passes its own clock.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = [
    "ACK_ALLOWANCE_MS",
    "AHEAD_MAX_HELD",
    "AHEAD_MIN_BYTES",
    "DEFAULT_LOCK_MS",
    "PACE_LOCK_FRACTION",
    "FetchAheadPolicy",
    "caught_up",
    "may_fetch_ahead",
]

#: A fetch ahead goes out only while the response being delivered acquired at
#: most this many records: half the broker's default per-partition limit
#: (``group.share.partition.max.record.locks``, 2000). The broker counts a
#: partition's in-flight records from the oldest unacknowledged one, so while a
#: bigger response is being delivered a fetch ahead would find no room, come
#: back empty, and cost a round trip that delays this consumer's acks. Unless
#: the node has other partitions for this consumer: the limit is per
#: share-partition, so the fetch ahead acquires theirs (six partitions, 100 B
#: records, ~2,500-record responses, benchmarks/peers/worker.py interleaved:
#: 0.61-0.64M -> 0.72-0.81M records/s).
AHEAD_MAX_HELD = 1000
#: A response this large (or with max.poll.records records) is worth fetching
#: ahead of; a smaller one means the consumer has caught up with the log.
AHEAD_MIN_BYTES = 256 * 1024
#: A fetch asks for at most the records the application processes, at its
#: measured pace, in this fraction of the acquisition lock (the rest is slack for
#: the wait in the buffer behind the records before them, and for a pace that
#: varies).
PACE_LOCK_FRACTION = 0.5
#: The broker's default ``group.share.record.lock.duration.ms``, until a
#: response tells the real one.
DEFAULT_LOCK_MS = 30_000
#: Time allowed for an acknowledgement to reach the broker once the application
#: has made it (the next poll's fetch, or a ShareAcknowledge, and its way there).
ACK_ALLOWANCE_MS = 100


def caught_up(acquired: int, size_bytes: int, max_poll_records: int) -> bool:
    """Whether a response this small means the consumer has reached the log end:
    fewer records than one poll takes and under ``AHEAD_MIN_BYTES`` (a response
    of large records is cut by bytes, not by count)."""
    return acquired < max_poll_records and size_bytes < AHEAD_MIN_BYTES


def may_fetch_ahead(
    acquired: int, ms_per_record: float, lock_timeout_ms: int, company: bool = False
) -> bool:
    """Whether to lock the next response while ``acquired`` records of one
    partition are still to be delivered: only for small responses
    (``AHEAD_MAX_HELD``) unless ``company`` (the node has other partitions for
    this consumer, which have room under their own limits), and only if, at the
    application's pace, both responses would be processed within a quarter of
    the acquisition lock, so prefetched records do not time out and come back
    with a higher delivery count (a slow handler switches fetching ahead off)."""
    if acquired > AHEAD_MAX_HELD and not company:
        return False
    return ms_per_record * 2 * acquired <= lock_timeout_ms / 4


def _alone() -> bool:
    """No other partition on the node (the default ``company``)."""
    return False


class FetchAheadPolicy:
    """The fetch-ahead decisions of one consumer, and the pace they depend on.

    Application thread only. The consumer tells it when a poll starts and how
    many records it returned (:meth:`poll_started`, :meth:`poll_returned`), and
    the acquisition lock the broker reported (:meth:`note_lock_timeout`); it
    asks :meth:`ahead_while_delivering` and :meth:`ahead_on_drained`.
    """

    __slots__ = ("_ahead_for", "_lock_timeout_ms", "_max_poll_records", "_ms_per_record",
                 "_returned")

    def __init__(self, max_poll_records: int) -> None:
        self._max_poll_records = max_poll_records
        #: when the last poll returned (ms) and how many records
        self._returned: tuple[float, int] | None = None
        #: moving average of the application's time per record between polls
        self._ms_per_record = 0.0
        self._lock_timeout_ms: int | None = None
        #: the response being delivered when the last fetch ahead went out
        self._ahead_for: object | None = None

    @property
    def ms_per_record(self) -> float:
        """The application's measured time per record between polls."""
        return self._ms_per_record

    # -- what the consumer tells it ---------------------------------------------

    def poll_started(self, now_ms: float) -> None:
        """A poll started: the time since the last one returned, divided by the
        records it returned, is a sample of the application's pace."""
        returned = self._returned
        if returned is None:
            return
        self._returned = None
        returned_at_ms, count = returned
        if count:
            sample = (now_ms - returned_at_ms) / count
            # A moving average: one slow record does not switch fetching ahead off.
            self._ms_per_record = 0.5 * (self._ms_per_record + sample)

    def poll_returned(self, now_ms: float, count: int) -> None:
        """A poll returned ``count`` records at ``now_ms``."""
        self._returned = (now_ms, count)

    def note_lock_timeout(self, timeout_ms: int | None) -> None:
        """The acquisition lock duration a broker reported (ignored if unknown)."""
        if timeout_ms is not None and timeout_ms > 0:
            self._lock_timeout_ms = timeout_ms

    def sent_for(self, response: object | None) -> None:
        """A fetch ahead went out while ``response`` (an opaque token) was being
        delivered."""
        self._ahead_for = response

    # -- what the consumer asks ------------------------------------------------------

    def caught_up(self, acquired: int, size_bytes: int) -> bool:
        return caught_up(acquired, size_bytes, self._max_poll_records)

    def max_records(self) -> int | None:
        """How many records the next fetch should ask for at most: those the
        application processes, at its measured pace, within
        ``PACE_LOCK_FRACTION`` of the lock. None (ask for ``max.poll.records``)
        while the pace is unknown or that is at least ``max.poll.records``."""
        if self._ms_per_record <= 0:
            return None
        lock_ms = self._lock_timeout_ms or DEFAULT_LOCK_MS
        fits = int(lock_ms * PACE_LOCK_FRACTION / self._ms_per_record)
        if fits >= self._max_poll_records:
            return None
        return max(1, fits)

    def hand_out_margin_ms(self, count: int) -> float:
        """How long before its lock ends a record is no longer handed out, for a
        poll of ``count`` records: twice the application's measured time for
        them, plus :data:`ACK_ALLOWANCE_MS`; at most a quarter of the lock, so a
        slow application still gets records (``share.auto.renew`` is for those)."""
        lock_ms = self._lock_timeout_ms or DEFAULT_LOCK_MS
        return min(lock_ms / 4, 2 * self._ms_per_record * count + ACK_ALLOWANCE_MS)

    def may_fetch_ahead(self, acquired: int, company: Callable[[], bool] = _alone) -> bool:
        """:func:`may_fetch_ahead` at the measured pace and lock; ``company`` (does
        the node have other partitions for this consumer?) is asked only for a
        response above :data:`AHEAD_MAX_HELD`, where it decides."""
        return may_fetch_ahead(
            acquired, self._ms_per_record, self._lock_timeout_ms or DEFAULT_LOCK_MS,
            acquired > AHEAD_MAX_HELD and company(),
        )

    def ahead_while_delivering(
        self, response: object | None, acquired: int | None, nothing_queued: bool,
        company: Callable[[], bool] = _alone,
    ) -> bool:
        """Fetch ahead now, while ``response`` (``acquired`` records) is being
        delivered? Only for a response of several polls' worth (not a caught-up
        trickle), once per response, within :meth:`may_fetch_ahead` (``company``:
        its node has other partitions for this consumer), and only with no other
        response queued: at most one waits behind the one being delivered."""
        return (
            response is not None
            and acquired is not None
            and acquired >= self._max_poll_records
            and response is not self._ahead_for
            and nothing_queued
            and self.may_fetch_ahead(acquired, company)
        )

    def ahead_on_drained(
        self, acquired: int, size_bytes: int, company: Callable[[], bool] = _alone
    ) -> bool:
        """Fetch ahead now that the last queued response (``acquired`` records,
        ``size_bytes`` of records) was taken, before decoding it? Not after a
        small response (the consumer has caught up: it is drained first, then
        fetched for as usual), else within :meth:`may_fetch_ahead` (``company``:
        its node has other partitions for this consumer)."""
        return not self.caught_up(acquired, size_bytes) and self.may_fetch_ahead(
            acquired, company
        )
