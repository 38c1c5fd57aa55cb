"""OTLP ``MetricsData`` as protobuf bytes: what a PushTelemetry request carries.

KIP-714 clients push their metrics in the OpenTelemetry protocol's metrics
format (``opentelemetry/proto/metrics/v1/metrics.proto``). This module writes
the small part of it a client needs (one resource, gauges and sums
of number data points) with a hand-written protobuf encoder, so the package
needs neither ``protobuf`` nor generated code: the messages are a handful of
fields, and the tests read the bytes back with the official ``opentelemetry-proto``
classes to hold the encoding to the spec.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable, Mapping, Sequence

import attrs

from kafka_share._reprs import attrs_repr

__all__ = ["AggregationTemporality", "MetricPoint", "encode_metrics_data"]

_VARINT = 0
_FIXED64 = 1
_LENGTH = 2


class AggregationTemporality(enum.IntEnum):
    """OTLP's ``AggregationTemporality`` of a sum."""

    UNSPECIFIED = 0
    DELTA = 1
    CUMULATIVE = 2


@attrs_repr
@attrs.frozen(repr=False)
class MetricPoint:
    """One metric's value at one time.

    A ``sum`` is a monotonic counter (``*-total``): its value is cumulative, or
    the change since ``start_time_ns`` when pushed with DELTA temporality. Any
    other metric is a gauge (rates, averages, maxima, ages).
    """

    name: str
    value: float
    time_ns: int
    start_time_ns: int
    is_sum: bool = False
    attributes: Mapping[str, str] = attrs.field(factory=dict)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _tag(field: int, wire_type: int) -> bytes:
    return _varint(field << 3 | wire_type)


def _bytes_field(field: int, payload: bytes) -> bytes:
    return _tag(field, _LENGTH) + _varint(len(payload)) + payload


def _string_field(field: int, text: str) -> bytes:
    return _bytes_field(field, text.encode()) if text else b""


def _key_value(key: str, value: str) -> bytes:
    # AnyValue.string_value: written even when empty (a oneof member left out
    # would read as no value at all).
    any_value = _bytes_field(1, value.encode())
    return _string_field(1, key) + _bytes_field(2, any_value)


def _attributes(field: int, attributes: Mapping[str, str]) -> bytes:
    return b"".join(_bytes_field(field, _key_value(k, v)) for k, v in attributes.items())


def _data_point(point: MetricPoint) -> bytes:
    # NumberDataPoint: attributes = 7, start_time_unix_nano = 2 (fixed64),
    # time_unix_nano = 3 (fixed64), as_double = 4 (double).
    return (
        _attributes(7, point.attributes)
        + _tag(2, _FIXED64) + struct.pack("<Q", point.start_time_ns)
        + _tag(3, _FIXED64) + struct.pack("<Q", point.time_ns)
        + _tag(4, _FIXED64) + struct.pack("<d", point.value)
    )


def _metric(point: MetricPoint, temporality: AggregationTemporality) -> bytes:
    data_points = _bytes_field(1, _data_point(point))
    if point.is_sum:
        # Sum: data_points = 1, aggregation_temporality = 2, is_monotonic = 3.
        body = data_points + _tag(2, _VARINT) + _varint(temporality) + _tag(3, _VARINT) + b"\x01"
        data = _bytes_field(7, body)
    else:
        data = _bytes_field(5, data_points)  # Gauge: data_points = 1
    return _string_field(1, point.name) + data


def encode_metrics_data(
    points: Sequence[MetricPoint],
    *,
    resource: Mapping[str, str],
    temporality: AggregationTemporality,
) -> bytes:
    """``MetricsData`` with one ``ResourceMetrics`` holding ``points`` in one
    ``ScopeMetrics`` without a scope (Java sets none either)."""
    metrics: Iterable[bytes] = (_bytes_field(2, _metric(p, temporality)) for p in points)
    scope_metrics = b"".join(metrics)
    resource_metrics = (
        _bytes_field(1, _attributes(1, resource))  # Resource.attributes = 1
        + _bytes_field(2, scope_metrics)
    )
    return _bytes_field(1, resource_metrics)
