"""A poll's rounds: take the acknowledgements made so far, collect records from
the fetch buffer, decide when to fetch (and when to fetch ahead), and send the
acks, riding on a fetch or on their own."""

from __future__ import annotations

import time
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kafka_share._app.acks import _merge_acks
from kafka_share._app.checks import _now_ms
from kafka_share._app.collector import CollectResult, DrainedHook, FetchCollector
from kafka_share._app.decoding import start_wanted_load
from kafka_share._app.in_flight import InFlightBatch
from kafka_share._handoff.events import (
    AcknowledgeAsyncEvent,
    AcksByPartition,
    ApplicationEvent,
    CompletedShareFetch,
    FetchEvent,
    NodeAcknowledgements,
)
from kafka_share._handoff.fetch_buffer import FetchBuffer
from kafka_share.config import AcquireMode, ShareConsumerConfig
from kafka_share.errors import KafkaError
from kafka_share.metrics import ShareConsumerMetrics
from kafka_share.models import ConsumerRecord, ConsumerRecords, TopicIdPartition
from kafka_share.share.acknowledgements import Acknowledgements
from kafka_share.share.consume import ACK_LINGER_MS
from kafka_share.share.fetch_ahead import FetchAheadPolicy

if TYPE_CHECKING:
    from kafka_share._app.core import EngineShell, FacadeWaiting

K = TypeVar("K")
V = TypeVar("V")


class PollRounds(Generic[K, V]):
    """The rounds of the running poll, and what they carry from one poll to the
    next (the fetch-ahead policy, an error to raise, the lock duration)."""

    def __init__(
        self,
        config: ShareConsumerConfig,
        fetch_buffer: FetchBuffer[CompletedShareFetch],
        in_flight: InFlightBatch,
        collector: FetchCollector[K, V],
        metrics: ShareConsumerMetrics,
        shell: EngineShell,
        waiting: FacadeWaiting,
    ) -> None:
        self._config = config
        self._fetch_buffer = fetch_buffer
        self._in_flight = in_flight
        self._collector = collector
        self._metrics = metrics
        self._shell = shell
        self._waiting = waiting
        # record_limit never locks records before the application asks for them;
        # batch_optimized fetches ahead while the application is fast enough,
        # unless fetch.ahead=manual leaves that to prefetch().
        self._prefetch = (config.share_acquire_mode is AcquireMode.BATCH_OPTIMIZED
                          and config.fetch_ahead == "auto")
        #: fetch.ahead=manual: poll(0) hands out what is buffered and fetches nothing
        self._manual = config.fetch_ahead == "manual"
        #: a poll's acks while it may still send them with a fetch ahead (None: sent)
        self._ahead_acks: AcksByPartition | None = None
        #: when to fetch ahead (batch_optimized), and the application's pace
        self._ahead = FetchAheadPolicy(config.max_poll_records)
        #: a fetch was sent during the current poll
        self.fetch_sent = False
        self.pending_error: KafkaError | None = None
        self.waited_ms = 0
        #: the running poll's ``max_records`` (None: ``max.poll.records``)
        self.limit: int | None = None
        #: when the running poll gives up (None: no timeout, or not polling)
        self._poll_deadline_ms: int | None = None
        #: the running poll may fetch (not a poll(0) under fetch.ahead=manual)
        self._poll_fetches = True
        self.acquisition_lock_timeout_ms: int | None = None

    def begin(self, timeout_ms: int | None, max_records: int | None) -> int:
        """Start a poll's measurements and limits; returns its start time."""
        started = _now_ms()
        self.limit = max_records
        self._poll_deadline_ms = None if timeout_ms is None else started + timeout_ms
        self._poll_fetches = not (self._manual and timeout_ms == 0)
        self._ahead.poll_started(time.monotonic() * 1000.0)
        self._metrics.record_poll_start(started)
        self.waited_ms = 0
        return started

    def end(self, records: ConsumerRecords[K, V]) -> None:
        self.limit = None
        self._poll_deadline_ms = None
        self._metrics.record_poll_end(_now_ms(), waited_ms=self.waited_ms)
        self._ahead.poll_returned(time.monotonic() * 1000.0, records.count())
        start_wanted_load()  # numpy, if this poll's decoding asked for it

    def fetch_cap(self, limit: int | None = None) -> int | None:
        """The records the next fetch asks for at most: the application's pace
        (:class:`FetchAheadPolicy`) and ``limit`` (by default the running poll's
        ``max_records``); None: ``max.poll.records``."""
        pace = self._ahead.max_records()
        if limit is None:
            limit = self.limit
        if limit is None:
            return pace
        return limit if pace is None else min(pace, limit)

    def _fetch_until_ms(self) -> int | None:
        """When a poll's fetch round ends: record_limit acquires only for a poll
        that waits, so the round ends with it (see ShareConsumeManager.on_fetch);
        batch_optimized keeps fetching in the background."""
        return None if self._prefetch else self._poll_deadline_ms

    def poll_once(
        self, limit: int | None = None, *, have_records: bool = False
    ) -> ConsumerRecords[K, V] | None:
        """One round: send the acks taken so far, hand out records if there are
        some (None if not), and ask for more when the buffer runs dry.

        ``limit``: at most this many records (a slice of a poll); ``have_records``:
        the poll already holds records of earlier slices, so an error found now is
        raised by the next poll instead of hiding them."""
        acks = self.take_acks()
        if self._in_flight.has_renewing():
            # Renewed records come back first; no new records meanwhile.
            if acks:
                self._submit(AcknowledgeAsyncEvent(acks, self._api_deadline()))
            returned = self._in_flight.take_ready()
            return self._records_of(returned) if returned else None
        buffered_before = self._collector.has_buffered()
        acks, on_drained = self._fetch_ahead_now(acks)
        batch, acks = self._collect(acks, on_drained, limit, holding=have_records)
        # Otherwise fetch when nothing was buffered (Java), or, in prefetch
        # mode, as soon as this poll drained the buffer, unless it hands out
        # records: those are acknowledged only by the next poll (or the
        # application), and a ShareFetch acknowledging only part of a large
        # response's records keeps the broker on it for tens of milliseconds
        # (measured: ~35 ms for a 9,000-record response less its last 82, even
        # with max_wait_ms 0), where one acknowledging all of them is answered
        # in ~3 ms. The next poll sends it, with these records' acks. This also
        # keeps a large max.poll.records from stalling: records still held count
        # towards the broker's per-partition lock limit, and a fetch sent while
        # they reach it would wait fetch.max.wait.ms for nothing, once per
        # response. (A fetch ahead of a small response is the policy's decision,
        # above.)
        want_fetch = (
            self._poll_fetches
            and not self.fetch_sent
            and (not buffered_before or (self._prefetch and not batch.records and not have_records))
            and not self._collector.has_buffered()
        )
        if not batch.records and batch.error is None:
            if want_fetch or acks:
                # No records: the poll waits next, and that wait sends the fetch.
                self._send_acks(acks, fetch=want_fetch, then_waits=True)
                self.fetch_sent = self.fetch_sent or want_fetch
            return None
        if batch.error is None:
            # GAP acks found while decoding go out with this round.
            acks, elsewhere = _merge_acks(acks, self.take_acks())
            if elsewhere:  # a leader move: to the new node on their own
                self._send_acks(elsewhere, fetch=False, linger=True)
        # A failed record's default RELEASE/REJECT waits in the batch until the
        # application has seen its error (InFlightBatch.settle_failed), so it
        # can still override it.
        self._send_acks(acks, fetch=want_fetch, linger=True)
        self.fetch_sent = self.fetch_sent or want_fetch
        if batch.error is not None:
            if not batch.records and not have_records:
                self._in_flight.mark_failed_raised()
                raise batch.error
            self.pending_error = batch.error
        self.note_lock_timeout(batch.acquisition_lock_timeout_ms)
        self._metrics.record_consumed(len(batch.records), batch.size_bytes, _now_ms())
        return batch.records

    def _fetch_ahead_now(
        self, acks: AcksByPartition
    ) -> tuple[AcksByPartition, DrainedHook | None]:
        """Fetch ahead (batch_optimized) while records are still to be delivered,
        so the broker works while this thread decodes and the application
        processes; this poll's acks ride on it. The policy
        (:class:`FetchAheadPolicy`) decides; otherwise the decision is taken
        again when :meth:`_collect` takes the last queued response (the hook).

        Returns the acks still to send and the hook for the collector.
        """
        if not self._prefetch:
            return acks, None
        collector = self._collector
        delivering = collector.delivering()
        if not self.fetch_sent and self._ahead.ahead_while_delivering(
            delivering, collector.delivering_acquired(), self._fetch_buffer.is_empty(),
            partial(collector.delivering_has_company, self._shell.assignment),
        ):
            self._ahead.sent_for(delivering)
            self.send_fetch_ahead(acks, self.fetch_cap())
            self.fetch_sent = True
            return {}, None
        # A response taken from the queue means the fetch before it was
        # answered, so the hook may ask again even if this poll sent one.
        self._ahead_acks = acks
        return acks, self._ahead_on_drained

    def _collect(
        self,
        acks: AcksByPartition,
        on_drained: DrainedHook | None,
        limit: int | None = None,
        *,
        holding: bool = False,
    ) -> tuple[CollectResult[K, V], AcksByPartition]:
        """Collect the records of this poll (``holding``: it holds records of an
        earlier slice); returns them and the acks still to send."""
        most = self._config.max_poll_records
        self._collector.expiry_margin_ms = self._ahead.hand_out_margin_ms(
            most if limit is None else min(limit, most)
        )
        try:
            batch = self._collector.collect(on_drained, limit=limit, holding=holding)
        except BaseException:
            # Whatever raised (a KeyboardInterrupt in a deserializer...), the
            # acks this poll took from the batch still go out.
            if on_drained is not None and self._ahead_acks is None:
                acks = {}  # they went out with the fetch ahead
            self._ahead_acks = None
            self._send_acks(acks, fetch=False)
            raise
        if on_drained is not None:
            if self._ahead_acks is None:  # the hook sent them with a fetch ahead
                acks = {}
                self.fetch_sent = True
                self._ahead.sent_for(self._collector.delivering())
            self._ahead_acks = None
        return batch, acks

    def _records_of(
        self, by_partition: dict[TopicIdPartition, list[ConsumerRecord[Any, Any]]]
    ) -> ConsumerRecords[K, V]:
        return ConsumerRecords(by_partition)

    def take_acks(self) -> AcksByPartition:
        taken = self._in_flight.take_acknowledgements()
        out: AcksByPartition = {}
        generations = self._in_flight.generations
        for tip, (node_id, offsets, ranges) in taken.items():
            out[tip] = NodeAcknowledgements(node_id, Acknowledgements.from_types(
                offsets, ranges=ranges, session_generation=generations.get(tip)
            ))
        return out

    def _ahead_on_drained(
        self, acquired: int, size: int, node_id: int, partition: TopicIdPartition,
        holding: bool,
    ) -> bool:
        """Collector hook: the last queued response (of ``partition``, from
        ``node_id``) was just taken, not decoded. True: leave it for the next poll.

        A small response means the consumer has caught up with the log: nothing
        is waiting to be prefetched, and a fetch ahead would only come back empty
        and delay the long-polling fetch that brings the next record. Such a
        response is drained first, then fetched for as usual.

        A fetch ahead carries the acks taken when this poll began. If the poll
        already holds records (``holding``: the tail of the response before), their
        acks would follow on a later request, and the broker, acknowledged part of
        a record batch, tracks that batch record by record: measured on six
        partitions of 100 B records, 2.5x its CPU (0.33-0.45 -> 0.72-0.95 s for
        600,000 records) and 400-480k instead of 530-600k records/s. So the poll
        ends there, and the next one takes this response and fetches ahead with
        the acks of every record before it.
        """
        if self._ahead_acks is None or not self._ahead.ahead_on_drained(
            acquired, size,
            partial(self._collector.has_company, node_id, partition, self._shell.assignment),
        ):
            return False
        if holding:
            return True
        acks, self._ahead_acks = self._ahead_acks, None
        self.send_fetch_ahead(acks, self.fetch_cap())
        return False

    def send_fetch_ahead(self, acks: AcksByPartition, max_records: int | None) -> None:
        """Submit a fetch ahead carrying ``acks``, asking for at most
        ``max_records`` (each facade hands it over to its I/O shell in its own way)."""
        self._waiting.send_fetch_ahead(acks, max_records, self._api_deadline())

    def _send_acks(
        self, acks: AcksByPartition, *, fetch: bool, linger: bool = False,
        then_waits: bool = False,
    ) -> None:
        """Ride on a fetch, or go out as a ShareAcknowledge.

        ``linger``: the buffer still holds records, so more acks follow within
        milliseconds; the network thread keeps these for up to ``ACK_LINGER_MS``
        and puts them on the next ShareFetch to their node if one goes out by then,
        instead of a ShareAcknowledge each that the fetch would queue behind.
        ``then_waits``: the poll waits for I/O next (see ``FetchEvent.then_waits``).
        """
        if fetch:
            self._submit(FetchEvent(acks, max_records=self.fetch_cap(),
                                    until_ms=self._fetch_until_ms(), then_waits=then_waits))
        elif acks:
            self._submit(AcknowledgeAsyncEvent(
                acks, self._api_deadline(), linger_ms=ACK_LINGER_MS if linger else 0
            ))

    def note_lock_timeout(self, timeout_ms: int | None) -> None:
        if timeout_ms is not None and timeout_ms > 0:
            self.acquisition_lock_timeout_ms = timeout_ms
            self._ahead.note_lock_timeout(timeout_ms)

    def _api_deadline(self) -> int:
        return _now_ms() + self._config.default_api_timeout_ms

    def _submit(self, event: ApplicationEvent) -> None:
        self._shell.submit(event)
