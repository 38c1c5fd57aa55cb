"""The metric registries: Java's sampled windows, in fixed memory."""

from __future__ import annotations

import math
import tracemalloc

from kafka_share.metrics import ShareConsumerMetrics, WorkerMetrics


def _polls(metrics: ShareConsumerMetrics, start_ms: int, count: int, every_ms: int) -> int:
    now = start_ms
    for _ in range(count):
        metrics.record_poll_start(now)
        metrics.record_consumed(500, 50_000, now)
        metrics.record_poll_end(now, waited_ms=0)
        now += every_ms
    return now


def test_memory_stays_fixed_however_many_polls_a_window_holds() -> None:
    # 200,000 polls inside one 30 s window: a registry keeping every sample
    # until it ages out held ~50 MB here; sampled stats hold a few objects.
    metrics = ShareConsumerMetrics(created_ms=0)
    _polls(metrics, 0, 1_000, 0)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        _polls(metrics, 0, 200_000, 0)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 20_000, grown
    snapshot = metrics.snapshot(1_000)
    assert snapshot["records-consumed-total"] == 201_000 * 500
    assert snapshot["records-consumed-rate"] == 201_000 * 500  # one second since creation


def test_worker_metrics_memory_stays_fixed_per_handled_record() -> None:
    metrics = WorkerMetrics(created_ms=0)
    metrics.record_handled("accepted", 1.0, 0)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(200_000):
            metrics.record_handled("accepted", float(i % 7), i // 100)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 20_000, grown
    snapshot = metrics.snapshot(2_000)
    assert snapshot["records-accepted-total"] == 200_001
    assert snapshot["handler-time-max"] == 6.0


def test_average_and_maximum_cover_the_live_samples_only() -> None:
    metrics = ShareConsumerMetrics(sample_window_ms=1_000, num_samples=2, created_ms=0)
    metrics.record_fetch(0, latency_ms=90.0, size_bytes=10, records=1, throttle_time_ms=0)
    metrics.record_fetch(500, latency_ms=10.0, size_bytes=30, records=3, throttle_time_ms=0)
    metrics.record_fetch(1_200, latency_ms=20.0, size_bytes=20, records=2, throttle_time_ms=0)
    snapshot = metrics.snapshot(1_500)
    assert snapshot["fetch-latency-max"] == 90.0
    assert snapshot["fetch-latency-avg"] == 40.0
    assert snapshot["records-per-request-max"] == 3
    # the first sample (from 0 ms) is two windows old at 2,000 ms: only 1,200's counts
    snapshot = metrics.snapshot(2_000)
    assert snapshot["fetch-latency-max"] == 20.0
    assert snapshot["fetch-latency-avg"] == 20.0
    assert snapshot["fetch-total"] == 3
    # and at 3,200 none does: averages and maxima have nothing, totals stay
    snapshot = metrics.snapshot(3_200)
    assert math.isnan(snapshot["fetch-latency-avg"])
    assert math.isnan(snapshot["fetch-latency-max"])
    assert snapshot["fetch-rate"] == 0.0
    assert snapshot["fetch-total"] == 3


def test_samples_rotate_through_a_fixed_ring() -> None:
    metrics = ShareConsumerMetrics(sample_window_ms=100, num_samples=3, created_ms=0)
    for now in range(0, 10_000, 10):
        metrics.record_fetch(now, latency_ms=now, size_bytes=1, records=1, throttle_time_ms=0)
    snapshot = metrics.snapshot(10_000)
    # samples start at 9,700, 9,800 and 9,900; 9,700's is three windows old
    assert snapshot["fetch-latency-max"] == 9_990.0
    assert snapshot["fetch-latency-avg"] == sum(range(9_800, 10_000, 10)) / 20
    assert snapshot["fetch-total"] == 1_000


def test_rate_divides_by_the_span_its_samples_cover() -> None:
    metrics = ShareConsumerMetrics(sample_window_ms=30_000, num_samples=2, created_ms=0)
    # steady: 10 records a second for five minutes
    for second in range(300):
        metrics.record_consumed(10, 100, second * 1_000)
    assert metrics.snapshot(300_000)["records-consumed-rate"] == 10.0
    # early: the time since creation, not the whole window
    young = ShareConsumerMetrics(sample_window_ms=30_000, num_samples=2, created_ms=0)
    young.record_consumed(40, 400, 1_000)
    young.record_consumed(40, 400, 3_000)
    assert young.snapshot(4_000)["records-consumed-rate"] == 20.0
    # a burst after an idle hour is spread over at least num_samples - 1 windows
    metrics.record_consumed(3_000, 300, 3_600_000)
    assert metrics.snapshot(3_601_000)["records-consumed-rate"] == 100.0


def test_poll_idle_ratio_uses_the_last_time_between_polls() -> None:
    metrics = ShareConsumerMetrics(created_ms=0)
    metrics.record_poll_start(0)
    metrics.record_poll_end(100, waited_ms=100)
    metrics.record_poll_start(300)  # 300 ms since the last start
    metrics.record_poll_end(400, waited_ms=50)  # 50 of 300 + 100 ms
    snapshot = metrics.snapshot(400)
    assert snapshot["poll-idle-ratio-avg"] == (1.0 + 50 / 400) / 2
    assert snapshot["time-between-poll-avg"] == 300.0
    assert snapshot["time-between-poll-max"] == 300.0


def test_a_zero_sample_window_is_read_as_one_millisecond() -> None:
    metrics = ShareConsumerMetrics(sample_window_ms=0, num_samples=2, created_ms=0)
    metrics.record_heartbeat(10, 5.0)
    assert metrics.snapshot(11)["heartbeat-response-time-max"] == 5.0
    assert math.isnan(metrics.snapshot(12)["heartbeat-response-time-max"])
    assert metrics.snapshot(12)["heartbeat-total"] == 1
