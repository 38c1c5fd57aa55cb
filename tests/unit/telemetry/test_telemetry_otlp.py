"""The hand-written OTLP encoder, read back with the official ``opentelemetry-proto``
classes: the bytes a PushTelemetry request carries must be what any OTLP reader
(the broker's metrics reporter) parses, field for field."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.metrics.v1 import metrics_pb2

from kafka_share.telemetry.otlp import AggregationTemporality, MetricPoint, encode_metrics_data

NS = 1_000_000
#: a Unix time in nanoseconds (2023-11): far above 2**32, as every real timestamp is
T0 = 1_700_000_000_000 * NS


def parse(data: bytes) -> metrics_pb2.MetricsData:
    parsed: metrics_pb2.MetricsData = metrics_pb2.MetricsData.FromString(data)
    return parsed


def encode(
    points: list[MetricPoint],
    resource: Mapping[str, str] | None = None,
    temporality: AggregationTemporality = AggregationTemporality.DELTA,
) -> metrics_pb2.MetricsData:
    return parse(encode_metrics_data(points, resource=resource or {}, temporality=temporality))


def only_metrics(data: metrics_pb2.MetricsData) -> list[metrics_pb2.Metric]:
    """The metrics of the single resource and scope the encoder writes."""
    assert len(data.resource_metrics) == 1
    scopes = data.resource_metrics[0].scope_metrics
    assert len(scopes) == 1
    return list(scopes[0].metrics)


def attributes(kvs: Iterable[Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for kv in kvs:
        assert kv.value.WhichOneof("value") == "string_value"
        out[kv.key] = kv.value.string_value
    return out


def test_resource_attributes_in_order_and_no_scope() -> None:
    """The resource carries the client's identity (group, member, rack); Java sets
    no instrumentation scope, so the single ScopeMetrics has none either."""
    resource = {"group_id": "orders", "group_member_id": "m-1", "client_rack": "rack-a"}
    data = encode([MetricPoint("a", 1.0, T0, T0)], resource)
    rm = data.resource_metrics[0]
    assert [(kv.key, kv.value.string_value) for kv in rm.resource.attributes] == [
        ("group_id", "orders"), ("group_member_id", "m-1"), ("client_rack", "rack-a"),
    ]
    assert all(kv.value.WhichOneof("value") == "string_value" for kv in rm.resource.attributes)
    assert len(rm.scope_metrics) == 1
    assert not rm.scope_metrics[0].HasField("scope")


def test_metric_names_in_the_order_given() -> None:
    names = [
        "org.apache.kafka.consumer.share.fetch.manager.records.consumed.total",
        "org.apache.kafka.consumer.share.poll.idle.ratio.avg",
        "org.apache.kafka.consumer.share.coordinator.heartbeat.rate",
    ]
    data = encode([MetricPoint(n, float(i), T0, T0) for i, n in enumerate(names)])
    assert [m.name for m in only_metrics(data)] == names


def test_gauge_point() -> None:
    """A non-sum is a gauge with one double data point and both timestamps."""
    data = encode([MetricPoint("g", 0.25, T0 + 5 * NS, T0)])
    (metric,) = only_metrics(data)
    assert metric.WhichOneof("data") == "gauge"
    (point,) = metric.gauge.data_points
    assert point.WhichOneof("value") == "as_double"
    assert point.as_double == 0.25
    assert point.time_unix_nano == T0 + 5 * NS
    assert point.start_time_unix_nano == T0
    assert list(point.attributes) == []


@pytest.mark.parametrize(
    ("temporality", "expected"),
    [
        (AggregationTemporality.DELTA, metrics_pb2.AGGREGATION_TEMPORALITY_DELTA),
        (AggregationTemporality.CUMULATIVE, metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE),
    ],
)
def test_sum_is_monotonic_with_the_temporality_asked(
    temporality: AggregationTemporality, expected: int
) -> None:
    """Counters are monotonic sums; the broker's temporality goes on every sum."""
    data = encode([MetricPoint("s", 42.0, T0 + NS, T0, is_sum=True)], temporality=temporality)
    (metric,) = only_metrics(data)
    assert metric.WhichOneof("data") == "sum"
    assert metric.sum.is_monotonic is True
    assert metric.sum.aggregation_temporality == expected
    (point,) = metric.sum.data_points
    assert point.as_double == 42.0
    assert (point.start_time_unix_nano, point.time_unix_nano) == (T0, T0 + NS)


def test_gauges_and_sums_mixed_keep_their_kind() -> None:
    data = encode([
        MetricPoint("g", 1.0, T0, T0),
        MetricPoint("s", 2.0, T0, T0, is_sum=True),
        MetricPoint("g2", 3.0, T0, T0),
    ])
    assert [(m.name, m.WhichOneof("data")) for m in only_metrics(data)] == [
        ("g", "gauge"), ("s", "sum"), ("g2", "gauge"),
    ]


@pytest.mark.parametrize(
    "time_ns",
    [0, 1, 2**32 - 1, 2**32, 2**32 + 1, T0, 2**63, 2**64 - 1],
)
def test_timestamps_are_full_64_bit(time_ns: int) -> None:
    """fixed64 timestamps: nothing is cut at 32 bits, up to the largest uint64."""
    data = encode([MetricPoint("t", 1.0, time_ns, time_ns // 2, is_sum=True)])
    (point,) = only_metrics(data)[0].sum.data_points
    assert point.time_unix_nano == time_ns
    assert point.start_time_unix_nano == time_ns // 2


@pytest.mark.parametrize(
    "value", [0.0, -0.0, 1.5, -3.25, 1e300, -1e-300, 2.0**53 + 2, math.inf, -math.inf]
)
def test_double_values(value: float) -> None:
    """as_double is always written (a zero too: it is a oneof member with presence)."""
    (metric,) = only_metrics(encode([MetricPoint("v", value, T0, T0)]))
    (point,) = metric.gauge.data_points
    assert point.WhichOneof("value") == "as_double"
    assert point.as_double == value
    assert math.copysign(1.0, point.as_double) == math.copysign(1.0, value)


def test_nan_value() -> None:
    """Metrics not yet recorded are NaN (as in Java) and must still encode."""
    (metric,) = only_metrics(encode([MetricPoint("n", math.nan, T0, T0)]))
    (point,) = metric.gauge.data_points
    assert point.WhichOneof("value") == "as_double"
    assert math.isnan(point.as_double)


def test_no_points_is_one_empty_scope_under_the_resource() -> None:
    """An empty push (nothing selected, or a payload over the size limit) still
    carries the resource."""
    data = encode([], {"group_id": "g"})
    assert len(data.resource_metrics) == 1
    assert attributes(data.resource_metrics[0].resource.attributes) == {"group_id": "g"}
    assert only_metrics(data) == []


def test_no_points_and_no_resource_attributes() -> None:
    data = encode([], {})
    assert list(data.resource_metrics[0].resource.attributes) == []
    assert only_metrics(data) == []


def test_data_point_attributes() -> None:
    data = encode([MetricPoint("a", 1.0, T0, T0, attributes={"topic": "t", "partition": "3"})])
    (point,) = only_metrics(data)[0].gauge.data_points
    assert attributes(point.attributes) == {"topic": "t", "partition": "3"}


def test_unicode_text_is_utf8() -> None:
    data = encode([MetricPoint("métrique.été", 1.0, T0, T0)], {"rack": "zone-ä-1 ✓"})
    assert only_metrics(data)[0].name == "métrique.été"
    assert attributes(data.resource_metrics[0].resource.attributes) == {"rack": "zone-ä-1 ✓"}


def test_long_strings_use_multi_byte_lengths() -> None:
    """Lengths over 127 need a multi-byte varint."""
    name = "x" * 300
    value = "v" * 20_000
    data = encode([MetricPoint(name, 1.0, T0, T0)], {"k": value})
    assert only_metrics(data)[0].name == name
    assert attributes(data.resource_metrics[0].resource.attributes) == {"k": value}


def test_empty_string_attribute_is_still_a_string_value() -> None:
    """An attribute whose value is "" is a string attribute, not an empty AnyValue:
    ``string_value`` is a oneof member, so proto3 writes it even when empty (as
    Java's generated code does); without it a reader sees a null attribute."""
    data = encode([], {"client_rack": ""})
    (kv,) = data.resource_metrics[0].resource.attributes
    assert kv.key == "client_rack"
    assert kv.value.WhichOneof("value") == "string_value"


def expected_message(
    points: list[MetricPoint], resource: Mapping[str, str], temporality: AggregationTemporality
) -> metrics_pb2.MetricsData:
    """The same MetricsData built with the official classes."""
    out = metrics_pb2.MetricsData()
    rm = out.resource_metrics.add()
    rm.resource.SetInParent()  # written even without attributes
    for key, value in resource.items():
        kv = rm.resource.attributes.add()
        kv.key = key
        kv.value.string_value = value
    scope = rm.scope_metrics.add()
    for p in points:
        metric = scope.metrics.add()
        metric.name = p.name
        if p.is_sum:
            metric.sum.is_monotonic = True
            metric.sum.aggregation_temporality = int(temporality)
            dp = metric.sum.data_points.add()
        else:
            dp = metric.gauge.data_points.add()
        dp.start_time_unix_nano = p.start_time_ns
        dp.time_unix_nano = p.time_ns
        dp.as_double = p.value
        for key, value in p.attributes.items():
            kv = dp.attributes.add()
            kv.key = key
            kv.value.string_value = value
    return out


#: attribute values are never empty here: that case has its own test above
_attrs = st.dictionaries(st.text(max_size=12), st.text(min_size=1, max_size=12), max_size=3)
_points = st.builds(
    MetricPoint,
    name=st.text(max_size=40),
    value=st.floats(allow_nan=False),
    time_ns=st.integers(0, 2**64 - 1),
    start_time_ns=st.integers(0, 2**64 - 1),
    is_sum=st.booleans(),
    attributes=_attrs,
)


@settings(max_examples=150, deadline=None)
@given(
    points=st.lists(_points, max_size=6),
    resource=_attrs,
    temporality=st.sampled_from([AggregationTemporality.DELTA,
                                 AggregationTemporality.CUMULATIVE]),
)
def test_any_points_round_trip(
    points: list[MetricPoint], resource: dict[str, str], temporality: AggregationTemporality
) -> None:
    """Whatever names, values, times and attributes: the parsed message equals the
    one the official classes build."""
    raw = encode_metrics_data(points, resource=resource, temporality=temporality)
    parsed = parse(raw)
    expected = expected_message(points, resource, temporality)
    assert parsed == expected
