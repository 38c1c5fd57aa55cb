"""Telemetry inside the share consumer's engine: built from the configuration and
the metric registry, polled with the engine's other requests, counted in its
sleep, and silent against brokers that do not offer it (the usual cluster)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
from opentelemetry.proto.metrics.v1 import metrics_pb2

from kafka_share.config import parse_config
from kafka_share.errors import UnsupportedVersionError
from kafka_share.metrics import ShareConsumerMetrics
from kafka_share.protocol.messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from kafka_share.records.compression import CompressionType, decompress
from kafka_share.share.engine import MAX_WAIT_MS, ConsumerEngine
from kafka_share.share.unsent import UnsentRequest
from kafka_share.telemetry.sender import TelemetryState
from tests.fakes.cluster import EngineDriver, FakeCluster, RecordingSink

INSTANCE = uuid.UUID("3f2504e0-4f89-41d3-9a0c-0305e82c3301")
UNIX_OFFSET_MS = 1_700_000_000_000


class CountingCluster(FakeCluster):
    """The fake cluster (a broker without telemetry), counting telemetry requests
    (it leaves them out of ``received``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.telemetry_requests = 0

    def answer(self, req: UnsentRequest[Any]) -> tuple[Any, Any]:
        if isinstance(req.request, GetTelemetrySubscriptionsRequest):
            self.telemetry_requests += 1
        return super().answer(req)


def engine(
    sink: RecordingSink | None = None, *, metrics: ShareConsumerMetrics | None = None,
    **settings: object,
) -> ConsumerEngine:
    """A ConsumerEngine as FakeCluster's driver builds one, with a metric registry."""
    config: dict[str, object] = {
        "bootstrap_servers": "boot:9092", "group_id": "g", "fetch_max_wait_ms": 500,
    }
    config.update(settings)
    return ConsumerEngine(
        parse_config(None, **config),
        member_id="member-1",
        sink=sink or RecordingSink(),
        share_fetch_version=lambda node: 2,
        metrics=metrics or ShareConsumerMetrics(),
        random_source=lambda: 0.5,
        unix_offset_ms=UNIX_OFFSET_MS,
    )


def telemetry_requests(out: list[UnsentRequest[Any]]) -> list[UnsentRequest[Any]]:
    return [r for r in out
            if isinstance(r.request, (GetTelemetrySubscriptionsRequest, PushTelemetryRequest))]


def test_against_a_broker_without_telemetry_it_ends_disabled_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The usual cluster offers no telemetry: the consumer asks once, stops,
    tells the application nothing, logs nothing above debug, and consumes."""
    caplog.set_level(logging.DEBUG)
    cluster = CountingCluster(records_per_partition=30)
    driver = EngineDriver(cluster)
    driver.engine = engine(driver.sink)
    assert driver.engine.telemetry is not None
    driver.subscribe()
    driver.run_for(5_000, until=cluster.all_accepted)
    assert cluster.all_accepted()
    telemetry = driver.engine.telemetry
    assert isinstance(telemetry.disabled, UnsupportedVersionError)
    assert telemetry.client_instance_id is None
    assert driver.sink.errors == []
    assert cluster.telemetry_requests == 1
    assert driver.engine.telemetry_closed
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert loud == []
    # Nothing more is asked later either.
    driver.run_for(2 * 300_000)
    assert cluster.telemetry_requests == 1
    assert driver.sink.errors == []


def test_without_metrics_push_there_is_no_telemetry() -> None:
    e = engine(enable_metrics_push=False)
    assert e.telemetry is None
    assert e.telemetry_closed
    assert telemetry_requests(e.poll(0)) == []


def test_without_a_metric_registry_there_is_no_telemetry() -> None:
    """EngineDriver builds its engine without metrics: nothing to push."""
    driver = EngineDriver(FakeCluster())
    assert driver.engine.telemetry is None


def push_payload(request: PushTelemetryRequest) -> metrics_pb2.MetricsData:
    raw = decompress(request.compression_type, request.metrics)
    parsed: metrics_pb2.MetricsData = metrics_pb2.MetricsData.FromString(raw)
    return parsed


def subscribe_telemetry(e: ConsumerEngine, now_ms: int, push_interval_ms: int) -> None:
    """The engine's first poll asks for a subscription; answer it."""
    (request,) = telemetry_requests(e.poll(now_ms))
    assert isinstance(request.request, GetTelemetrySubscriptionsRequest)
    request.answer(GetTelemetrySubscriptionsResponse(
        client_instance_id=INSTANCE, subscription_id=3,
        accepted_compression_types=[CompressionType.GZIP], push_interval_ms=push_interval_ms,
        telemetry_max_bytes=1_048_576, delta_temporality=True, requested_metrics=["*"],
    ), None, now_ms)


@pytest.mark.parametrize("rack", [None, "rack-a"])
def test_first_poll_subscribes_and_the_push_carries_the_members_identity(
    rack: str | None,
) -> None:
    e = engine() if rack is None else engine(client_rack=rack)
    assert e.telemetry is not None
    out = e.poll(0)
    (request,) = telemetry_requests(out)
    assert isinstance(request.request, GetTelemetrySubscriptionsRequest)
    assert request.request.client_instance_id == uuid.UUID(int=0)
    assert request.node_id == e.cluster.any_node()
    request.answer(GetTelemetrySubscriptionsResponse(
        client_instance_id=INSTANCE, subscription_id=3,
        accepted_compression_types=[CompressionType.GZIP], push_interval_ms=4_000,
        telemetry_max_bytes=1_048_576, delta_temporality=True, requested_metrics=["*"],
    ), None, 0)
    assert e.telemetry.client_instance_id == INSTANCE
    # First push after round((0.5 + 0.5) * 4000) ms.
    assert telemetry_requests(e.poll(3_999)) == []
    (push,) = telemetry_requests(e.poll(4_000))
    assert isinstance(push.request, PushTelemetryRequest)
    assert push.request.client_instance_id == INSTANCE
    assert push.request.subscription_id == 3
    assert push.request.compression_type == CompressionType.GZIP
    data = push_payload(push.request)
    (rm,) = data.resource_metrics
    resource = {kv.key: kv.value.string_value for kv in rm.resource.attributes}
    expected = {"group_id": "g", "group_member_id": "member-1"}
    if rack is not None:
        expected["client_rack"] = rack
    assert resource == expected
    names = {m.name for sm in rm.scope_metrics for m in sm.metrics}
    assert "org.apache.kafka.consumer.share.fetch.manager.records.consumed.total" in names
    assert "org.apache.kafka.consumer.share.coordinator.heartbeat.rate" in names
    assert "org.apache.kafka.consumer.share.poll.idle.ratio.avg" in names
    # The engine's monotonic time is turned into Unix time.
    point = next(m for sm in rm.scope_metrics for m in sm.metrics
                 if m.name.endswith("records.consumed.total")).sum.data_points[0]
    assert point.time_unix_nano == (4_000 + UNIX_OFFSET_MS) * 1_000_000
    assert point.start_time_unix_nano == UNIX_OFFSET_MS * 1_000_000


def test_pushed_values_are_the_registrys() -> None:
    metrics = ShareConsumerMetrics()
    e = engine(metrics=metrics)
    subscribe_telemetry(e, 0, 4_000)
    metrics.record_consumed(12, 1_200, 1_000)
    (push,) = telemetry_requests(e.poll(4_000))
    data = push_payload(push.request)
    values = {m.name: m for sm in data.resource_metrics[0].scope_metrics for m in sm.metrics}
    consumed = values["org.apache.kafka.consumer.share.fetch.manager.records.consumed.total"]
    assert consumed.sum.data_points[0].as_double == 12.0
    assert consumed.sum.aggregation_temporality == metrics_pb2.AGGREGATION_TEMPORALITY_DELTA
    size = values["org.apache.kafka.consumer.share.fetch.manager.bytes.consumed.total"]
    assert size.sum.data_points[0].as_double == 1_200.0


def test_the_engine_sleeps_no_longer_than_the_telemetry_wait() -> None:
    e = engine()
    assert e.telemetry is not None
    # Before the first subscription: due now.
    assert e.time_until_next_ms(0) == 0
    (request,) = telemetry_requests(e.poll(0))
    # In flight: telemetry does not shorten the sleep.
    assert e.time_until_next_ms(0) == MAX_WAIT_MS
    request.answer(GetTelemetrySubscriptionsResponse(
        client_instance_id=INSTANCE, subscription_id=3, push_interval_ms=3_000,
        telemetry_max_bytes=1_048_576, delta_temporality=True, requested_metrics=["*"],
    ), None, 0)
    # The first push is due in round((0.5 + 0.5) * 3000) ms, before MAX_WAIT_MS.
    assert e.time_until_next_ms(0) == 3_000
    assert e.time_until_next_ms(1_000) == 2_000
    assert e.time_until_next_ms(3_500) == 0
    (push,) = telemetry_requests(e.poll(3_500))
    assert e.time_until_next_ms(3_500) == MAX_WAIT_MS
    push.answer(PushTelemetryResponse(), None, 3_600)
    assert e.time_until_next_ms(3_600) == 3_000
    assert e.telemetry.state is TelemetryState.PUSH_NEEDED


def test_a_longer_telemetry_wait_leaves_the_engines_cap_in_charge() -> None:
    e = engine()
    subscribe_telemetry(e, 0, 60_000)
    assert e.time_until_next_ms(0) == MAX_WAIT_MS
    assert e.time_until_next_ms(59_000) == 1_000


def test_close_sends_the_terminating_push() -> None:
    e = engine()
    subscribe_telemetry(e, 0, 60_000)
    assert not e.telemetry_closed
    e.close({}, 30_000, object())
    assert not e.telemetry_closed
    assert e.time_until_next_ms(10) == 0
    (last,) = telemetry_requests(e.poll(10))
    assert isinstance(last.request, PushTelemetryRequest)
    assert last.request.terminating is True
    assert not e.telemetry_closed
    last.answer(PushTelemetryResponse(), None, 20)
    assert e.telemetry_closed
    assert telemetry_requests(e.poll(10**9)) == []


def test_close_before_any_subscription_needs_no_push() -> None:
    e = engine()
    e.close({}, 30_000, object())
    assert e.telemetry_closed
    assert telemetry_requests(e.poll(0)) == []
