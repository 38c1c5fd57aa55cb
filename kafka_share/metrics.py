"""Consumer metrics under Java's share-consumer metric names.

Both threads record into one :class:`ShareConsumerMetrics` (a lock guards it;
recording happens per request or per poll, never per record). Rates, averages
and maxima are computed over ``metrics.num.samples`` samples of
``metrics.sample.window.ms`` each, like Java's sampled stats, so their memory is
a few objects however often they record; totals are cumulative.

``ShareConsumer.metrics()`` returns a flat ``{name: value}`` snapshot. Names are
Java's (groups ``consumer-share-metrics``, ``consumer-share-fetch-manager-metrics``
and ``consumer-share-coordinator-metrics``); :data:`METRIC_GROUPS` maps each name
to its group.

A worker (``kafka_share.workers``) adds its own metrics to its consumer's, in a
:class:`WorkerMetrics` registry (group ``kafka-share-worker-metrics``, names in
:data:`WORKER_METRIC_GROUPS`): records handled per outcome, handler time.
"""

from __future__ import annotations

import math
import threading
from typing import Final

__all__ = ["METRIC_GROUPS", "WORKER_METRIC_GROUPS", "ShareConsumerMetrics", "WorkerMetrics"]

_CONSUMER = "consumer-share-metrics"
_FETCH = "consumer-share-fetch-manager-metrics"
_COORDINATOR = "consumer-share-coordinator-metrics"
_WORKER = "kafka-share-worker-metrics"

#: Every metric name ``metrics()`` reports, with its Java metric group.
METRIC_GROUPS: Final[dict[str, str]] = {
    "last-poll-seconds-ago": _CONSUMER,
    "time-between-poll-avg": _CONSUMER,
    "time-between-poll-max": _CONSUMER,
    "poll-idle-ratio-avg": _CONSUMER,
    "fetch-size-avg": _FETCH,
    "fetch-size-max": _FETCH,
    "bytes-consumed-rate": _FETCH,
    "bytes-consumed-total": _FETCH,
    "records-per-request-avg": _FETCH,
    "records-per-request-max": _FETCH,
    "records-consumed-rate": _FETCH,
    "records-consumed-total": _FETCH,
    "acknowledgements-send-rate": _FETCH,
    "acknowledgements-send-total": _FETCH,
    "acknowledgements-error-rate": _FETCH,
    "acknowledgements-error-total": _FETCH,
    "records-dropped-lock-expired-rate": _FETCH,
    "records-dropped-lock-expired-total": _FETCH,
    "records-dropped-session-lost-rate": _FETCH,
    "records-dropped-session-lost-total": _FETCH,
    "records-dropped-resent-rate": _FETCH,
    "records-dropped-resent-total": _FETCH,
    "acquisition-lock-renewals-rate": _FETCH,
    "acquisition-lock-renewals-total": _FETCH,
    "acquisition-lock-renewal-errors-rate": _FETCH,
    "acquisition-lock-renewal-errors-total": _FETCH,
    "fetch-latency-avg": _FETCH,
    "fetch-latency-max": _FETCH,
    "fetch-rate": _FETCH,
    "fetch-total": _FETCH,
    "fetch-throttle-time-avg": _FETCH,
    "fetch-throttle-time-max": _FETCH,
    "rebalance-total": _COORDINATOR,
    "rebalance-rate-per-hour": _COORDINATOR,
    "heartbeat-response-time-max": _COORDINATOR,
    "heartbeat-rate": _COORDINATOR,
    "heartbeat-total": _COORDINATOR,
    "last-heartbeat-seconds-ago": _COORDINATOR,
}


class _Sample:
    """One sub-window of a :class:`_Sampled`: its events from ``start_ms`` on."""

    __slots__ = ("count", "max", "start_ms", "sum")

    def __init__(self, value: float, now_ms: int) -> None:
        self.start_ms = now_ms
        self.count = 1
        self.sum = value
        self.max = value


class _Sampled:
    """Java's ``SampledStat``: up to ``num_samples`` samples, each gathering the
    events of ``sample_window_ms`` from its first one; a sample whose start is
    ``num_samples`` windows old no longer counts. Memory stays a few objects
    however many events are recorded (a consumer polling 10,000 times a second,
    a worker timing each record); only the bounds of the window are coarse, as
    in Java: it spans between ``num_samples - 1`` and ``num_samples`` windows."""

    __slots__ = ("_current", "_num_samples", "_samples", "_window_ms", "total")

    def __init__(self, sample_window_ms: int, num_samples: int) -> None:
        self._window_ms = sample_window_ms
        self._num_samples = num_samples
        self._samples: list[_Sample] = []
        self._current = 0
        self.total = 0.0

    def record(self, value: float, now_ms: int) -> None:
        self.total += value
        samples = self._samples
        if samples:
            sample = samples[self._current]
            if now_ms - sample.start_ms < self._window_ms:
                sample.count += 1
                sample.sum += value
                sample.max = max(sample.max, value)
                return
            self._current = (self._current + 1) % self._num_samples
        if self._current < len(samples):
            samples[self._current] = _Sample(value, now_ms)
        else:
            samples.append(_Sample(value, now_ms))

    def _live(self, now_ms: int) -> list[_Sample]:
        cutoff = now_ms - self._window_ms * self._num_samples
        return [sample for sample in self._samples if sample.start_ms > cutoff]

    def avg(self, now_ms: int) -> float:
        live = self._live(now_ms)
        count = sum(sample.count for sample in live)
        return sum(sample.sum for sample in live) / count if count else math.nan

    def max(self, now_ms: int) -> float:
        return max((sample.max for sample in self._live(now_ms)), default=math.nan)

    def rate_per_s(self, now_ms: int, created_ms: int) -> float:
        """Events' values per second over the window. The divisor is the span the
        live samples cover (at least ``num_samples - 1`` windows, Java's floor, so
        a burst after an idle spell is not read as a spike), and no more than the
        time since ``created_ms``."""
        live = self._live(now_ms)
        if not live:
            return 0.0
        covered_ms = max(now_ms - min(sample.start_ms for sample in live),
                         self._window_ms * (self._num_samples - 1))
        elapsed_ms = min(covered_ms, now_ms - created_ms)
        return sum(sample.sum for sample in live) / max(1.0, elapsed_ms / 1000.0)


class ShareConsumerMetrics:
    """Thread-safe metric registry of one consumer."""

    def __init__(self, *, sample_window_ms: int = 30_000, num_samples: int = 2,
                 created_ms: int = 0) -> None:
        self._sample_window_ms = max(1, sample_window_ms)
        self._num_samples = num_samples
        self._lock = threading.Lock()
        self._stats: dict[str, _Sampled] = {}
        self._created_ms = created_ms
        self._last_poll_ms: int | None = None
        self._last_between_ms = 0
        self._last_heartbeat_ms: int | None = None
        self._poll_wait_started_ms: int | None = None

    @property
    def created_ms(self) -> int:
        """When the registry began (the start of every cumulative metric)."""
        return self._created_ms

    def _record(self, name: str, value: float, now_ms: int) -> None:
        stat = self._stats.get(name)
        if stat is None:
            stat = self._stats[name] = _Sampled(self._sample_window_ms, self._num_samples)
        stat.record(value, now_ms)

    # -- recording (either thread) --------------------------------------------------

    def record_poll_start(self, now_ms: int) -> None:
        with self._lock:
            if self._last_poll_ms is not None:
                self._last_between_ms = now_ms - self._last_poll_ms
                self._record("time-between-poll", self._last_between_ms, now_ms)
            self._last_poll_ms = now_ms
            self._poll_wait_started_ms = now_ms

    def record_poll_end(self, now_ms: int, *, waited_ms: int) -> None:
        """``waited_ms`` of the poll were spent blocked waiting for data."""
        with self._lock:
            started = self._poll_wait_started_ms
            if started is None:
                return
            self._poll_wait_started_ms = None
            total = max(1.0, self._last_between_ms + (now_ms - started))
            self._record("poll-idle-ratio", min(1.0, waited_ms / total), now_ms)

    def record_consumed(self, records: int, size_bytes: int, now_ms: int) -> None:
        with self._lock:
            self._record("records-consumed", records, now_ms)
            self._record("bytes-consumed", size_bytes, now_ms)

    def record_fetch(
        self, now_ms: int, *, latency_ms: float, size_bytes: int, records: int,
        throttle_time_ms: int,
    ) -> None:
        with self._lock:
            self._record("fetch", 1, now_ms)
            self._record("fetch-latency", latency_ms, now_ms)
            self._record("fetch-size", size_bytes, now_ms)
            self._record("records-per-request", records, now_ms)
            self._record("fetch-throttle-time", throttle_time_ms, now_ms)

    def record_acknowledgements(self, sent: int, errors: int, now_ms: int) -> None:
        with self._lock:
            if sent:
                self._record("acknowledgements-send", sent, now_ms)
            if errors:
                self._record("acknowledgements-error", errors, now_ms)

    def record_dropped(self, reason: str, records: int, now_ms: int) -> None:
        """``records`` were dropped instead of being handed to the application:
        ``reason`` is ``lock-expired`` (their acquisition lock ran out while they
        were buffered), ``session-lost`` (their share session is gone) or
        ``resent`` (a broker sent records this consumer already holds again)."""
        if records:
            with self._lock:
                self._record(f"records-dropped-{reason}", records, now_ms)

    def record_renewals(self, sent: int, errors: int, now_ms: int) -> None:
        """Auto-renewal sent RENEWs for ``sent`` records; ``errors`` were refused."""
        with self._lock:
            if sent:
                self._record("acquisition-lock-renewals", sent, now_ms)
            if errors:
                self._record("acquisition-lock-renewal-errors", errors, now_ms)

    def record_heartbeat(self, now_ms: int, response_time_ms: float) -> None:
        with self._lock:
            self._record("heartbeat", 1, now_ms)
            self._record("heartbeat-response-time", response_time_ms, now_ms)
            self._last_heartbeat_ms = now_ms

    def record_rebalance(self, now_ms: int) -> None:
        with self._lock:
            self._record("rebalance", 1, now_ms)

    # -- reading ---------------------------------------------------------------------

    def snapshot(self, now_ms: int) -> dict[str, float]:
        """All metrics as ``{java-name: value}``; NaN where nothing was recorded yet."""
        with self._lock:
            empty = _Sampled(self._sample_window_ms, self._num_samples)

            def stat(name: str) -> _Sampled:
                return self._stats.get(name) or empty

            def rate(name: str) -> float:
                return stat(name).rate_per_s(now_ms, self._created_ms)

            out: dict[str, float] = {
                "last-poll-seconds-ago": _seconds_since(self._last_poll_ms, now_ms),
                "time-between-poll-avg": stat("time-between-poll").avg(now_ms),
                "time-between-poll-max": stat("time-between-poll").max(now_ms),
                "poll-idle-ratio-avg": stat("poll-idle-ratio").avg(now_ms),
                "fetch-size-avg": stat("fetch-size").avg(now_ms),
                "fetch-size-max": stat("fetch-size").max(now_ms),
                "bytes-consumed-rate": rate("bytes-consumed"),
                "bytes-consumed-total": stat("bytes-consumed").total,
                "records-per-request-avg": stat("records-per-request").avg(now_ms),
                "records-per-request-max": stat("records-per-request").max(now_ms),
                "records-consumed-rate": rate("records-consumed"),
                "records-consumed-total": stat("records-consumed").total,
                "acknowledgements-send-rate": rate("acknowledgements-send"),
                "acknowledgements-send-total": stat("acknowledgements-send").total,
                "acknowledgements-error-rate": rate("acknowledgements-error"),
                "acknowledgements-error-total": stat("acknowledgements-error").total,
                "fetch-latency-avg": stat("fetch-latency").avg(now_ms),
                **{
                    f"{name}-{kind}": (rate(name) if kind == "rate" else stat(name).total)
                    for name in (
                        "records-dropped-lock-expired", "records-dropped-session-lost",
                        "records-dropped-resent", "acquisition-lock-renewals",
                        "acquisition-lock-renewal-errors",
                    )
                    for kind in ("rate", "total")
                },
                "fetch-latency-max": stat("fetch-latency").max(now_ms),
                "fetch-rate": rate("fetch"),
                "fetch-total": stat("fetch").total,
                "fetch-throttle-time-avg": stat("fetch-throttle-time").avg(now_ms),
                "fetch-throttle-time-max": stat("fetch-throttle-time").max(now_ms),
                "rebalance-total": stat("rebalance").total,
                "rebalance-rate-per-hour": rate("rebalance") * 3600.0,
                "heartbeat-response-time-max": stat("heartbeat-response-time").max(now_ms),
                "heartbeat-rate": rate("heartbeat"),
                "heartbeat-total": stat("heartbeat").total,
                "last-heartbeat-seconds-ago": _seconds_since(self._last_heartbeat_ms, now_ms),
            }
        return out


def _seconds_since(then_ms: int | None, now_ms: int) -> float:
    return math.nan if then_ms is None else (now_ms - then_ms) / 1000.0


#: The outcomes a worker counts, each with a ``-rate`` and a ``-total`` metric:
#: records its handler accepted, released (a retryable error) or rejected; and
#: records it released without handling them because it was stopping.
_WORKER_COUNTS: Final = (
    "records-accepted", "records-released", "records-rejected", "records-released-on-stop",
)
#: Every metric name ``ShareWorker.metrics()`` adds to its consumer's, with its group.
WORKER_METRIC_GROUPS: Final[dict[str, str]] = {
    **{f"{name}-{kind}": _WORKER for name in _WORKER_COUNTS for kind in ("rate", "total")},
    "handler-time-avg": _WORKER,
    "handler-time-max": _WORKER,
    "handlers-running": _WORKER,
}


class WorkerMetrics:
    """Thread-safe metric registry of one worker (``kafka_share.workers``): outcomes
    and handler time (ms), over the same sliding window as its consumer's metrics.

    Recorded once per handled record, on the worker's polling thread: a record's
    handler is a thread hand-off at least, which costs far more than this.
    """

    def __init__(self, *, sample_window_ms: int = 30_000, num_samples: int = 2,
                 created_ms: int = 0) -> None:
        window_ms = max(1, sample_window_ms)
        self._lock = threading.Lock()
        self._stats: dict[str, _Sampled] = {
            name: _Sampled(window_ms, num_samples) for name in _WORKER_COUNTS
        }
        self._handler_time = _Sampled(window_ms, num_samples)
        self._created_ms = created_ms
        self._running = 0

    def record_handled(self, outcome: str, handler_time_ms: float, now_ms: int) -> None:
        """A handler finished: ``outcome`` is ``accepted``, ``released`` or ``rejected``."""
        with self._lock:
            self._stats[f"records-{outcome}"].record(1, now_ms)
            self._handler_time.record(handler_time_ms, now_ms)

    def record_released_on_stop(self, records: int, now_ms: int) -> None:
        """``records`` were released unhandled (not started, or still running at the
        stop's bound)."""
        if records:
            with self._lock:
                self._stats["records-released-on-stop"].record(records, now_ms)

    def set_running(self, handlers: int) -> None:
        """How many handlers are running now."""
        self._running = handlers

    def snapshot(self, now_ms: int) -> dict[str, float]:
        """All worker metrics as ``{name: value}``; NaN where nothing was recorded yet."""
        with self._lock:
            out: dict[str, float] = {}
            for name, stat in self._stats.items():
                out[f"{name}-rate"] = stat.rate_per_s(now_ms, self._created_ms)
                out[f"{name}-total"] = stat.total
            out["handler-time-avg"] = self._handler_time.avg(now_ms)
            out["handler-time-max"] = self._handler_time.max(now_ms)
            out["handlers-running"] = float(self._running)
        return out
