"""The consumer's metrics as telemetry points: Java's telemetry names (a broker's
subscription selects by them), which metrics a subscription selects, and the
delta bookkeeping of counters (each push carries only what happened since the
last one, over the window it claims)."""

from __future__ import annotations

import math

import pytest

from kafka_share.metrics import METRIC_GROUPS
from kafka_share.telemetry.collector import MetricSelector, TelemetryCollector, telemetry_name
from kafka_share.telemetry.otlp import MetricPoint

CONSUMER = "consumer-share-metrics"
FETCH = "consumer-share-fetch-manager-metrics"
COORDINATOR = "consumer-share-coordinator-metrics"

CONSUMED = "org.apache.kafka.consumer.share.fetch.manager.records.consumed.total"
IDLE = "org.apache.kafka.consumer.share.poll.idle.ratio.avg"
HEARTBEATS = "org.apache.kafka.consumer.share.coordinator.heartbeat.total"

ALL = MetricSelector.of(["*"])
NS = 1_000_000
#: engine time 0 is this Unix time (ms)
OFFSET_MS = 1_700_000_000_000
CREATED_MS = 1_000


def ns(ms: int) -> int:
    return (ms + OFFSET_MS) * NS


@pytest.mark.parametrize(
    ("group", "name", "expected"),
    [
        (FETCH, "records-consumed-total",
         "org.apache.kafka.consumer.share.fetch.manager.records.consumed.total"),
        (CONSUMER, "poll-idle-ratio-avg", "org.apache.kafka.consumer.share.poll.idle.ratio.avg"),
        (COORDINATOR, "heartbeat-rate",
         "org.apache.kafka.consumer.share.coordinator.heartbeat.rate"),
        (FETCH, "fetch-latency-max",
         "org.apache.kafka.consumer.share.fetch.manager.fetch.latency.max"),
        (COORDINATOR, "last-heartbeat-seconds-ago",
         "org.apache.kafka.consumer.share.coordinator.last.heartbeat.seconds.ago"),
    ],
)
def test_telemetry_name_is_javas(group: str, name: str, expected: str) -> None:
    """A broker's subscription names metrics as Java's TelemetryMetricNamingConvention
    does: the group without "-metrics", dashes as dots, under org.apache.kafka."""
    assert telemetry_name(group, name) == expected


def test_telemetry_name_lowercases() -> None:
    assert telemetry_name("Consumer-Share-Metrics", "Poll-Idle-Ratio-Avg") == IDLE


def test_every_consumer_metric_has_a_distinct_telemetry_name() -> None:
    """Two metrics under one wire name would overwrite each other at the broker."""
    names = [telemetry_name(group, name) for name, group in METRIC_GROUPS.items()]
    assert len(set(names)) == len(names)
    for wire in names:
        assert wire.startswith("org.apache.kafka.consumer.share.")
        assert "-" not in wire
        assert ".metrics." not in wire
        assert wire == wire.lower()


def test_empty_selection_selects_nothing() -> None:
    none = MetricSelector.of([])
    assert not none.selects_any
    assert not none.selects(CONSUMED)
    assert not none.selects("")


def test_star_selects_everything() -> None:
    assert ALL.selects_any
    assert ALL.selects(CONSUMED)
    assert ALL.selects("anything.at.all")
    assert ALL.selects("")


def test_prefixes_select_by_prefix() -> None:
    selector = MetricSelector.of([
        "org.apache.kafka.consumer.share.fetch.manager.records",
        "org.apache.kafka.consumer.share.coordinator.",
    ])
    assert selector.selects_any
    assert selector.selects(CONSUMED)
    assert selector.selects(HEARTBEATS)
    assert not selector.selects(IDLE)
    assert not selector.selects("org.apache.kafka.consumer.share.fetch.manager.fetch.rate")
    # A prefix is a prefix, not a substring.
    assert not MetricSelector.of(["records.consumed"]).selects(CONSUMED)


def test_empty_prefix_selects_everything() -> None:
    selector = MetricSelector.of([""])
    assert selector.selects_any
    assert selector.selects(CONSUMED)
    assert selector.selects(IDLE)


def test_star_is_a_wildcard_only_alone() -> None:
    """As in Java: "*" means all metrics only as the single requested entry; among
    other prefixes it is a literal prefix."""
    selector = MetricSelector.of(["*", "org.apache.kafka.consumer.share.poll"])
    assert selector.selects(IDLE)
    assert not selector.selects(CONSUMED)


class Registry:
    """A metric registry whose values the test sets; records each snapshot time."""

    def __init__(self, values: dict[str, float]) -> None:
        self.values = values
        self.asked: list[int] = []

    def snapshot(self, now_ms: int) -> dict[str, float]:
        self.asked.append(now_ms)
        return dict(self.values)


GROUPS = {
    "records-consumed-total": FETCH,
    "poll-idle-ratio-avg": CONSUMER,
    "heartbeat-total": COORDINATOR,
}


def collector(registry: Registry) -> TelemetryCollector:
    return TelemetryCollector(
        registry.snapshot, GROUPS, unix_offset_ms=OFFSET_MS, created_ms=CREATED_MS
    )


def by_name(points: list[MetricPoint]) -> dict[str, MetricPoint]:
    out = {p.name: p for p in points}
    assert len(out) == len(points), "a metric appears twice"
    return out


def test_points_carry_names_kinds_and_unix_times() -> None:
    registry = Registry({"records-consumed-total": 10, "poll-idle-ratio-avg": 0.5,
                         "heartbeat-total": 3})
    points = by_name(collector(registry).collect(5_000, ALL, delta=False))
    assert registry.asked == [5_000]
    assert set(points) == {CONSUMED, IDLE, HEARTBEATS}
    consumed = points[CONSUMED]
    assert consumed.is_sum
    assert consumed.value == 10.0
    assert isinstance(consumed.value, float)
    assert consumed.time_ns == ns(5_000)
    assert consumed.start_time_ns == ns(CREATED_MS)
    assert consumed.time_ns > 2**60  # the unix offset was applied
    idle = points[IDLE]
    assert not idle.is_sum
    assert idle.value == 0.5
    assert (idle.start_time_ns, idle.time_ns) == (ns(CREATED_MS), ns(5_000))
    assert dict(consumed.attributes) == {}


def test_metrics_outside_the_group_table_are_not_pushed() -> None:
    """Only metrics with a known group have a telemetry name."""
    registry = Registry({"records-consumed-total": 1, "no-such-metric-total": 7})
    points = collector(registry).collect(2_000, ALL, delta=True)
    assert [p.name for p in points] == [CONSUMED]


def test_only_selected_metrics() -> None:
    registry = Registry({"records-consumed-total": 1, "poll-idle-ratio-avg": 0.1,
                         "heartbeat-total": 2})
    selector = MetricSelector.of(["org.apache.kafka.consumer.share.coordinator"])
    assert [p.name for p in collector(registry).collect(2_000, selector, delta=True)] == [
        HEARTBEATS
    ]
    assert collector(registry).collect(2_000, MetricSelector.of([]), delta=True) == []


def test_delta_first_push_is_the_full_value_since_creation_then_differences() -> None:
    """Delta temporality: the first push of a counter is everything since the
    metrics began; each later one the change since the previous collection,
    starting there."""
    registry = Registry({"records-consumed-total": 10, "poll-idle-ratio-avg": 0.5})
    c = collector(registry)

    first = by_name(c.collect(5_000, ALL, delta=True))
    assert first[CONSUMED].value == 10.0
    assert first[CONSUMED].start_time_ns == ns(CREATED_MS)
    assert first[CONSUMED].time_ns == ns(5_000)

    registry.values = {"records-consumed-total": 25, "poll-idle-ratio-avg": 0.75}
    second = by_name(c.collect(9_000, ALL, delta=True))
    assert second[CONSUMED].value == 15.0
    assert second[CONSUMED].start_time_ns == ns(5_000)
    assert second[CONSUMED].time_ns == ns(9_000)
    # A gauge is its current value, never a difference.
    assert second[IDLE].value == 0.75
    assert not second[IDLE].is_sum

    third = by_name(c.collect(12_000, ALL, delta=True))
    assert third[CONSUMED].value == 0.0
    assert (third[CONSUMED].start_time_ns, third[CONSUMED].time_ns) == (ns(9_000), ns(12_000))


def test_delta_of_fractional_totals() -> None:
    registry = Registry({"records-consumed-total": 0.5})
    c = collector(registry)
    c.collect(2_000, ALL, delta=True)
    registry.values["records-consumed-total"] = 2.25
    (point,) = c.collect(3_000, ALL, delta=True)
    assert point.value == 1.75


def test_cumulative_pushes_running_totals_from_creation() -> None:
    registry = Registry({"records-consumed-total": 10})
    c = collector(registry)
    (a,) = c.collect(5_000, ALL, delta=False)
    registry.values["records-consumed-total"] = 25
    (b,) = c.collect(9_000, ALL, delta=False)
    assert (a.value, b.value) == (10.0, 25.0)
    assert a.start_time_ns == b.start_time_ns == ns(CREATED_MS)
    assert (a.time_ns, b.time_ns) == (ns(5_000), ns(9_000))


def test_reset_starts_deltas_again_from_creation() -> None:
    """After the broker switches temporality, the ledger is forgotten: the next
    delta is the full value since creation, as in Java."""
    registry = Registry({"records-consumed-total": 10})
    c = collector(registry)
    c.collect(5_000, ALL, delta=True)
    registry.values["records-consumed-total"] = 30
    c.reset()
    (point,) = c.collect(9_000, ALL, delta=True)
    assert point.value == 30.0
    assert point.start_time_ns == ns(CREATED_MS)
    registry.values["records-consumed-total"] = 31
    (after,) = c.collect(10_000, ALL, delta=True)
    assert after.value == 1.0
    assert after.start_time_ns == ns(9_000)


def test_a_counter_first_seen_later_starts_at_creation() -> None:
    """A counter that appears in a later collection has no previous push: its
    first delta is its full value since creation."""
    registry = Registry({"poll-idle-ratio-avg": 0.5})
    c = collector(registry)
    c.collect(5_000, ALL, delta=True)
    registry.values["heartbeat-total"] = 4
    points = by_name(c.collect(9_000, ALL, delta=True))
    assert points[HEARTBEATS].value == 4.0
    assert points[HEARTBEATS].start_time_ns == ns(CREATED_MS)


def test_a_delta_claims_the_window_it_covers_when_a_collection_skipped_it() -> None:
    """A counter left out of one collection (the subscription stopped selecting
    it) and selected again: its delta is the change since it was last pushed, so
    the window it claims must start there too, not at the collection that skipped
    it (Java's ledger keeps the last time per metric)."""
    registry = Registry({"records-consumed-total": 10, "heartbeat-total": 1})
    c = collector(registry)
    c.collect(5_000, ALL, delta=True)
    registry.values = {"records-consumed-total": 20, "heartbeat-total": 2}
    only_heartbeats = MetricSelector.of(["org.apache.kafka.consumer.share.coordinator"])
    c.collect(9_000, only_heartbeats, delta=True)
    registry.values = {"records-consumed-total": 35, "heartbeat-total": 3}
    points = by_name(c.collect(12_000, ALL, delta=True))
    assert points[HEARTBEATS].value == 1.0
    assert points[HEARTBEATS].start_time_ns == ns(9_000)
    # records-consumed-total: 35 - 10 since its push at 5000.
    assert points[CONSUMED].value == 25.0
    assert points[CONSUMED].start_time_ns == ns(5_000)


def test_nan_gauges_pass_through() -> None:
    registry = Registry({"poll-idle-ratio-avg": math.nan})
    (point,) = collector(registry).collect(2_000, ALL, delta=True)
    assert math.isnan(point.value)
