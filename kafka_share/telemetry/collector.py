"""The consumer's metrics as telemetry points: Java's names, sums and gauges, deltas.

A KIP-714 subscription asks for metrics by name prefix. Names are Java's
telemetry names (``TelemetryMetricNamingConvention``): ``org.apache.kafka.``,
then the metric group without its ``-metrics`` suffix, then the metric name,
dashes turned to dots: ``consumer-share-fetch-manager-metrics`` /
``records-consumed-total`` ->
``org.apache.kafka.consumer.share.fetch.manager.records.consumed.total``.

Counters (``*-total``) are OTLP sums, pushed as the change since the last push
when the broker asks for delta temporality (Kafka's brokers always do), else as
the running total; every other metric is a gauge.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

import attrs

from kafka_share._reprs import attrs_repr
from kafka_share.telemetry.otlp import MetricPoint

__all__ = ["MetricSelector", "TelemetryCollector", "telemetry_name"]

_PREFIX = "org.apache.kafka."
_METRICS_WORD = re.compile(r"\.(metrics)")


def telemetry_name(group: str, name: str) -> str:
    """Java's telemetry name of metric ``name`` of group ``group``."""
    prefix = _METRICS_WORD.sub("", group.lower().replace("-", "."))
    return f"{_PREFIX}{prefix}.{name.lower().replace('-', '.')}"


@attrs_repr
@attrs.frozen(repr=False)
class MetricSelector:
    """Which metrics a subscription asks for: none, all (``*``), or by name prefix."""

    prefixes: tuple[str, ...]

    @classmethod
    def of(cls, requested: Sequence[str]) -> MetricSelector:
        return cls(tuple(requested))

    @property
    def selects_any(self) -> bool:
        return bool(self.prefixes)

    def selects(self, name: str) -> bool:
        if self.prefixes == ("*",):
            return True
        return any(name.startswith(p) for p in self.prefixes)


class TelemetryCollector:
    """Snapshots of the consumer's metric registry turned into points to push.

    Args:
        snapshot: ``now_ms`` -> ``{metric name: value}`` (the registry's).
        groups: metric name -> its Java metric group.
        unix_offset_ms: add to a ``now_ms`` to get Unix time in ms (the engine's
            clock is monotonic; OTLP's timestamps are Unix nanoseconds).
        created_ms: when the metrics began (the start of every cumulative sum).
    """

    def __init__(
        self,
        snapshot: Callable[[int], Mapping[str, float]],
        groups: Mapping[str, str],
        *,
        unix_offset_ms: int,
        created_ms: int,
    ) -> None:
        self._snapshot = snapshot
        self._names = {name: telemetry_name(group, name) for name, group in groups.items()}
        self._unix_offset_ms = unix_offset_ms
        self._created_ms = created_ms
        #: per sum, when it was last pushed and its value then (delta temporality)
        self._last_sent: dict[str, tuple[int, float]] = {}

    def reset(self) -> None:
        """Forget what was pushed (the broker changed temporality): the next delta
        starts from the creation time again, as Java's ledger does."""
        self._last_sent.clear()

    def _ns(self, ms: int) -> int:
        return (ms + self._unix_offset_ms) * 1_000_000

    def collect(self, now_ms: int, selector: MetricSelector, *, delta: bool) -> list[MetricPoint]:
        """The points ``selector`` asks for, at ``now_ms``."""
        values = self._snapshot(now_ms)
        points = []
        for name, total in values.items():
            value = total
            wire_name = self._names.get(name)
            if wire_name is None or not selector.selects(wire_name):
                continue
            is_sum = name.endswith("-total")
            start_ms = self._created_ms
            if is_sum and delta:
                # Each sum's delta covers the time since that sum was last pushed
                # (a collection that did not select it does not move its start).
                previous = self._last_sent.get(name)
                self._last_sent[name] = (now_ms, total)
                if previous is not None:
                    start_ms, sent = previous
                    value -= sent
            points.append(MetricPoint(
                name=wire_name, value=float(value), time_ns=self._ns(now_ms),
                start_time_ns=self._ns(start_ms), is_sum=is_sum,
            ))
        return points
