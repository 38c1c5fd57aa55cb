"""The KIP-714 telemetry protocol as a sans-IO state machine, driven by hand: the
test plays the engine (``poll`` with an explicit ``now_ms``) and the broker (the
answers, or transport failures), with a fixed jitter. Every state change the
sender makes is watched and checked against ``TRANSITIONS``."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.proto.metrics.v1 import metrics_pb2

from kafka_share.errors import (
    AuthenticationError,
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
    UnsupportedVersionError,
)
from kafka_share.protocol.error_codes import ErrorCode
from kafka_share.protocol.messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from kafka_share.records.compression import CompressionType, compress, decompress
from kafka_share.share.unsent import Channel, UnsentRequest
from kafka_share.telemetry.collector import TelemetryCollector
from kafka_share.telemetry.sender import (
    DEFAULT_PUSH_INTERVAL_MS,
    TRANSITIONS,
    TelemetrySender,
    TelemetryState,
)

S = TelemetryState
ZERO = uuid.UUID(int=0)
INSTANCE = uuid.UUID("3f2504e0-4f89-41d3-9a0c-0305e82c3301")
OTHER_INSTANCE = uuid.UUID("9b2c6a1e-0d6f-4c1b-8a4e-2f1d6c7e8a90")
INTERVAL = 10_000
JITTER = 0.25  # first push after round(0.75 * interval)
FIRST_PUSH_WAIT = 7_500
RESOURCE = {"group_id": "g", "group_member_id": "member-1"}
CONSUMED = "org.apache.kafka.consumer.share.fetch.manager.records.consumed.total"
IDLE = "org.apache.kafka.consumer.share.poll.idle.ratio.avg"
LOGGER = "kafka_share.telemetry"


class WatchedSender(TelemetrySender):
    """Records every change of ``state``, however it is made."""

    moves: list[tuple[TelemetryState, TelemetryState]]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        object.__setattr__(self, "moves", [])
        super().__init__(*args, **kwargs)

    def __setattr__(self, name: str, value: object) -> None:
        if name == "state" and "state" in self.__dict__:
            assert isinstance(value, TelemetryState)
            self.moves.append((self.state, value))
        super().__setattr__(name, value)


_made: list[WatchedSender] = []


@pytest.fixture(autouse=True)
def _every_move_is_allowed() -> Iterator[None]:
    """After each test: every state change of every sender it made was in TRANSITIONS."""
    _made.clear()
    yield
    for sender in _made:
        illegal = [(a, b) for a, b in sender.moves if b not in TRANSITIONS[a]]
        assert illegal == [], f"moves outside TRANSITIONS: {illegal}"


class Registry:
    """The consumer's metric registry, values set by the test."""

    def __init__(self) -> None:
        self.values: dict[str, float] = {"records-consumed-total": 10.0,
                                         "poll-idle-ratio-avg": 0.5}

    def snapshot(self, now_ms: int) -> dict[str, float]:
        return dict(self.values)


class Nodes:
    """``any_node``: hands out the given node ids in turn, counting calls."""

    def __init__(self, *ids: int) -> None:
        self._ids = list(ids) or [1]
        self.calls = 0

    def __call__(self) -> int:
        node = self._ids[min(self.calls, len(self._ids) - 1)]
        self.calls += 1
        return node


def make_sender(
    *, jitter: float = JITTER, registry: Registry | None = None
) -> WatchedSender:
    registry = registry or Registry()
    collector = TelemetryCollector(
        registry.snapshot,
        {"records-consumed-total": "consumer-share-fetch-manager-metrics",
         "poll-idle-ratio-avg": "consumer-share-metrics"},
        unix_offset_ms=1_700_000_000_000, created_ms=0,
    )
    sender = WatchedSender(collector, resource=RESOURCE, random_source=lambda: jitter)
    _made.append(sender)
    return sender


def subscription(**fields: Any) -> GetTelemetrySubscriptionsResponse:
    """A GetTelemetrySubscriptions answer that asks for every metric."""
    values: dict[str, Any] = {
        "client_instance_id": INSTANCE,
        "subscription_id": 77,
        "accepted_compression_types": [CompressionType.ZSTD, CompressionType.GZIP],
        "push_interval_ms": INTERVAL,
        "telemetry_max_bytes": 1_048_576,
        "delta_temporality": True,
        "requested_metrics": ["*"],
    }
    values.update(fields)
    return GetTelemetrySubscriptionsResponse(**values)


def send(
    sender: TelemetrySender, now_ms: int, nodes: Callable[[], int] | None = None
) -> UnsentRequest[Any]:
    request = sender.poll(now_ms, nodes or Nodes(1))
    assert request is not None, f"nothing to send at {now_ms} in state {state_of(sender)}"
    return request


def subscribed(
    now_ms: int = 0, nodes: Nodes | None = None, **fields: Any
) -> tuple[WatchedSender, Nodes]:
    """A sender whose first subscription (``fields``) was answered at ``now_ms``."""
    sender = make_sender()
    nodes = nodes or Nodes(1)
    send(sender, now_ms, nodes).answer(subscription(**fields), None, now_ms)
    return sender, nodes


def pushing(now_ms: int = 0, **fields: Any) -> tuple[WatchedSender, Nodes, UnsentRequest[Any]]:
    """A sender with its first push in flight, sent at ``now_ms + FIRST_PUSH_WAIT``."""
    sender, nodes = subscribed(now_ms, **fields)
    push = send(sender, now_ms + FIRST_PUSH_WAIT, nodes)
    assert isinstance(push.request, PushTelemetryRequest)
    assert state_of(sender) is S.PUSH_IN_PROGRESS
    return sender, nodes, push


def payload(request: PushTelemetryRequest) -> metrics_pb2.MetricsData:
    raw = decompress(request.compression_type, request.metrics)
    parsed: metrics_pb2.MetricsData = metrics_pb2.MetricsData.FromString(raw)
    return parsed


def consumed_sum(request: PushTelemetryRequest) -> Any:
    """The pushed ``records-consumed-total`` sum (one in every push of it)."""
    (consumed,) = [m for m in payload(request).resource_metrics[0].scope_metrics[0].metrics
                   if m.name == CONSUMED]
    return consumed.sum


def resubscribe(
    sender: TelemetrySender, nodes: Nodes, now_ms: int,
    push: UnsentRequest[Any] | None = None, **fields: Any,
) -> None:
    """``push`` (else the push due at ``now_ms``) answered UNKNOWN_SUBSCRIPTION_ID
    at ``now_ms``, and the subscription asked for at once answered with ``fields``."""
    (push or send(sender, now_ms, nodes)).answer(
        PushTelemetryResponse(error_code=ErrorCode.UNKNOWN_SUBSCRIPTION_ID), None, now_ms)
    send(sender, now_ms, nodes).answer(subscription(**fields), None, now_ms)


def state_of(sender: TelemetrySender) -> TelemetryState:
    # A function call, so type checkers do not narrow the state across calls.
    return sender.state


def metric_names(request: PushTelemetryRequest) -> list[str]:
    data = payload(request)
    return [m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics]


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


# -- the state table ---------------------------------------------------------------------


def test_transitions_cover_every_state_and_terminated_is_final() -> None:
    assert set(TRANSITIONS) == set(TelemetryState)
    assert TRANSITIONS[S.TERMINATED] == frozenset()
    for state, exits in TRANSITIONS.items():
        assert exits <= set(TelemetryState)
        assert state not in exits
        if state is not S.TERMINATED:
            # Closing must be possible from anywhere.
            assert S.TERMINATED in exits


def test_the_watch_sees_moves() -> None:
    """The autouse check is not vacuous: the watched sender records its moves."""
    sender = make_sender()
    send(sender, 0)
    assert sender.moves == [(S.SUBSCRIPTION_NEEDED, S.SUBSCRIPTION_IN_PROGRESS)]


# -- subscribing ---------------------------------------------------------------------------


def test_first_poll_asks_for_a_subscription_with_the_zero_uuid() -> None:
    sender = make_sender()
    assert state_of(sender) is S.SUBSCRIPTION_NEEDED
    assert sender.client_instance_id is None
    assert sender.time_until_next_ms(0) == 0
    nodes = Nodes(7)
    request = send(sender, 0, nodes)
    assert isinstance(request.request, GetTelemetrySubscriptionsRequest)
    assert request.request.client_instance_id == ZERO
    assert request.node_id == 7
    assert request.channel is Channel.CONTROL
    assert request.response_type is GetTelemetrySubscriptionsResponse
    assert nodes.calls == 1
    assert state_of(sender) is S.SUBSCRIPTION_IN_PROGRESS
    # One request at a time: nothing more until it is answered.
    assert sender.poll(0, nodes) is None
    assert sender.poll(10**9, nodes) is None
    assert sender.time_until_next_ms(0) is None
    assert nodes.calls == 1


def test_the_answer_sets_the_client_instance_id() -> None:
    sender, _ = subscribed()
    assert sender.client_instance_id == INSTANCE
    assert sender.subscription is not None
    assert sender.subscription.subscription_id == 77
    assert sender.disabled is None


def test_requests_stick_to_the_first_node() -> None:
    sender, nodes = subscribed(0, Nodes(4, 5, 6))
    assert nodes.calls == 1
    now = FIRST_PUSH_WAIT
    for _ in range(3):
        push = send(sender, now, nodes)
        assert push.node_id == 4
        push.answer(PushTelemetryResponse(), None, now)
        now += INTERVAL
    assert nodes.calls == 1
    # A re-subscription goes there too.
    push = send(sender, now, nodes)
    push.answer(PushTelemetryResponse(error_code=ErrorCode.UNKNOWN_SUBSCRIPTION_ID), None, now)
    again = send(sender, now, nodes)
    assert isinstance(again.request, GetTelemetrySubscriptionsRequest)
    assert again.node_id == 4
    assert nodes.calls == 1


@pytest.mark.parametrize(
    ("jitter", "wait"), [(0.0, 5_000), (0.25, 7_500), (0.5, 10_000), (0.9999, 14_999)]
)
def test_first_push_waits_a_jittered_interval_then_the_interval(jitter: float, wait: int) -> None:
    """0.5-1.5 intervals before the first push (clients started together spread
    out), then one interval after each answered push."""
    sender = make_sender(jitter=jitter)
    nodes = Nodes(1)
    send(sender, 100, nodes).answer(subscription(), None, 100)
    assert state_of(sender) is S.PUSH_NEEDED
    assert sender.time_until_next_ms(100) == wait
    assert sender.time_until_next_ms(100 + wait - 1) == 1
    assert sender.poll(100 + wait - 1, nodes) is None
    push = send(sender, 100 + wait, nodes)
    assert isinstance(push.request, PushTelemetryRequest)
    assert sender.time_until_next_ms(100 + wait) is None
    answered = 100 + wait + 30
    push.answer(PushTelemetryResponse(), None, answered)
    assert state_of(sender) is S.PUSH_NEEDED
    assert sender.time_until_next_ms(answered) == INTERVAL
    assert sender.poll(answered + INTERVAL - 1, nodes) is None
    second = send(sender, answered + INTERVAL, nodes)
    assert isinstance(second.request, PushTelemetryRequest)


def test_overdue_wait_is_zero_not_negative() -> None:
    sender, _ = subscribed(0)
    assert sender.time_until_next_ms(FIRST_PUSH_WAIT + 50_000) == 0


def test_a_subscription_without_metrics_does_not_push_and_asks_again_after_the_interval() -> None:
    sender, nodes = subscribed(1_000, requested_metrics=[])
    assert state_of(sender) is S.SUBSCRIPTION_NEEDED
    assert sender.client_instance_id == INSTANCE
    assert sender.time_until_next_ms(1_000) == INTERVAL  # no jitter here
    assert sender.poll(1_000 + INTERVAL - 1, nodes) is None
    again = send(sender, 1_000 + INTERVAL, nodes)
    assert isinstance(again.request, GetTelemetrySubscriptionsRequest)
    # The instance id the cluster gave is sent back.
    assert again.request.client_instance_id == INSTANCE
    # Still nothing wanted: still no push.
    again.answer(subscription(requested_metrics=[]), None, 1_000 + INTERVAL)
    assert state_of(sender) is S.SUBSCRIPTION_NEEDED


def test_a_later_subscription_that_asks_for_metrics_starts_pushing() -> None:
    sender, nodes = subscribed(0, requested_metrics=[])
    send(sender, INTERVAL, nodes).answer(subscription(subscription_id=78), None, INTERVAL)
    assert state_of(sender) is S.PUSH_NEEDED
    push = send(sender, INTERVAL + FIRST_PUSH_WAIT, nodes)
    assert isinstance(push.request, PushTelemetryRequest)
    assert push.request.subscription_id == 78


@pytest.mark.parametrize("interval", [0, -1, -300_000])
def test_a_non_positive_push_interval_falls_back_to_five_minutes(
    interval: int, caplog: pytest.LogCaptureFixture
) -> None:
    sender = make_sender(jitter=0.5)
    nodes = Nodes(1)
    send(sender, 0, nodes).answer(subscription(push_interval_ms=interval), None, 0)
    assert DEFAULT_PUSH_INTERVAL_MS == 300_000
    assert sender.subscription is not None
    assert sender.subscription.push_interval_ms == 300_000
    assert sender.time_until_next_ms(0) == 300_000
    push = send(sender, 300_000, nodes)
    push.answer(PushTelemetryResponse(), None, 300_000)
    assert sender.time_until_next_ms(300_000) == 300_000
    assert any("300000" in m for m in warnings_of(caplog))


def test_a_zero_instance_id_in_an_answer_disables() -> None:
    sender = make_sender()
    nodes = Nodes(1)
    send(sender, 0, nodes).answer(subscription(client_instance_id=ZERO), None, 0)
    assert sender.disabled is not None
    assert sender.client_instance_id is None
    assert sender.poll(10**9, nodes) is None
    assert sender.time_until_next_ms(0) is None
    assert sender.close_done


# -- pushing -------------------------------------------------------------------------------


def test_push_request_fields_and_payload() -> None:
    _, _, push = pushing(0)
    request = push.request
    assert isinstance(request, PushTelemetryRequest)
    assert push.channel is Channel.CONTROL
    assert push.response_type is PushTelemetryResponse
    assert request.client_instance_id == INSTANCE
    assert request.subscription_id == 77
    assert request.terminating is False
    assert request.compression_type == CompressionType.ZSTD  # first accepted
    data = payload(request)
    (rm,) = data.resource_metrics
    assert {kv.key: kv.value.string_value for kv in rm.resource.attributes} == RESOURCE
    metrics = {m.name: m for sm in rm.scope_metrics for m in sm.metrics}
    assert set(metrics) == {CONSUMED, IDLE}
    consumed = metrics[CONSUMED]
    assert consumed.WhichOneof("data") == "sum"
    assert consumed.sum.aggregation_temporality == metrics_pb2.AGGREGATION_TEMPORALITY_DELTA
    assert consumed.sum.data_points[0].as_double == 10.0
    assert consumed.sum.data_points[0].time_unix_nano == (
        (FIRST_PUSH_WAIT + 1_700_000_000_000) * 1_000_000
    )
    assert metrics[IDLE].WhichOneof("data") == "gauge"
    assert metrics[IDLE].gauge.data_points[0].as_double == 0.5


def test_cumulative_subscription_pushes_cumulative_sums() -> None:
    _, _, push = pushing(0, delta_temporality=False)
    assert consumed_sum(push.request).aggregation_temporality == (
        metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE
    )


def test_only_requested_metrics_are_pushed() -> None:
    _, _, push = pushing(0, requested_metrics=["org.apache.kafka.consumer.share.poll"])
    assert metric_names(push.request) == [IDLE]


def test_deltas_between_pushes() -> None:
    registry = Registry()
    sender = make_sender(registry=registry)
    nodes = Nodes(1)
    send(sender, 0, nodes).answer(subscription(), None, 0)
    first = send(sender, FIRST_PUSH_WAIT, nodes)
    first.answer(PushTelemetryResponse(), None, FIRST_PUSH_WAIT)
    registry.values["records-consumed-total"] = 16.0
    second = send(sender, FIRST_PUSH_WAIT + INTERVAL, nodes)
    assert consumed_sum(second.request).data_points[0].as_double == 6.0


@pytest.mark.parametrize(
    ("accepted", "expected"),
    [
        ([CompressionType.ZSTD, CompressionType.GZIP], CompressionType.ZSTD),
        ([CompressionType.GZIP, CompressionType.ZSTD], CompressionType.GZIP),
        ([CompressionType.LZ4, CompressionType.SNAPPY], CompressionType.LZ4),
        ([CompressionType.SNAPPY], CompressionType.SNAPPY),
        ([], CompressionType.NONE),
        ([9, CompressionType.GZIP], CompressionType.GZIP),  # an id this client does not know
    ],
)
def test_compression_is_the_first_accepted_type(accepted: list[int], expected: int) -> None:
    _, _, push = pushing(0, accepted_compression_types=accepted)
    assert push.request.compression_type == expected
    assert set(metric_names(push.request)) == {CONSUMED, IDLE}


def test_unsupported_compression_answer_stops_using_that_codec() -> None:
    """UNSUPPORTED_COMPRESSION_TYPE: subscribe again at once, and never use that
    codec again (the next accepted one, then none)."""
    sender, nodes, push = pushing(
        0, accepted_compression_types=[CompressionType.ZSTD, CompressionType.GZIP]
    )
    now = FIRST_PUSH_WAIT
    assert push.request.compression_type == CompressionType.ZSTD
    push.answer(PushTelemetryResponse(error_code=ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
                None, now)
    assert state_of(sender) is S.SUBSCRIPTION_NEEDED
    assert sender.time_until_next_ms(now) == 0
    resub = send(sender, now, nodes)
    assert isinstance(resub.request, GetTelemetrySubscriptionsRequest)
    assert resub.request.client_instance_id == INSTANCE
    resub.answer(subscription(), None, now)  # the same list again
    second = send(sender, now + FIRST_PUSH_WAIT, nodes)
    assert second.request.compression_type == CompressionType.GZIP
    assert set(metric_names(second.request)) == {CONSUMED, IDLE}
    now += FIRST_PUSH_WAIT
    second.answer(PushTelemetryResponse(error_code=ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
                  None, now)
    send(sender, now, nodes).answer(subscription(), None, now)
    third = send(sender, now + FIRST_PUSH_WAIT, nodes)
    assert third.request.compression_type == CompressionType.NONE
    assert set(metric_names(third.request)) == {CONSUMED, IDLE}


def test_a_codec_that_fails_to_compress_is_skipped_for_good(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tried: list[int] = []

    def broken_zstd(codec: int, data: bytes) -> bytes:
        tried.append(codec)
        if codec == CompressionType.ZSTD:
            raise RuntimeError("zstandard is broken")
        return compress(codec, data)

    monkeypatch.setattr("kafka_share.telemetry.sender.compress", broken_zstd)
    sender, nodes, push = pushing(0)
    assert push.request.compression_type == CompressionType.GZIP
    assert set(metric_names(push.request)) == {CONSUMED, IDLE}
    push.answer(PushTelemetryResponse(), None, FIRST_PUSH_WAIT)
    second = send(sender, FIRST_PUSH_WAIT + INTERVAL, nodes)
    assert second.request.compression_type == CompressionType.GZIP
    assert tried == [CompressionType.ZSTD, CompressionType.GZIP, CompressionType.GZIP]


def test_a_payload_over_the_size_limit_is_replaced_by_an_empty_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sender, _, push = pushing(0, telemetry_max_bytes=40,
                                  accepted_compression_types=[CompressionType.GZIP])
    request = push.request
    assert isinstance(request, PushTelemetryRequest)
    data = payload(request)
    (rm,) = data.resource_metrics
    # Still the resource, but no metrics.
    assert {kv.key: kv.value.string_value for kv in rm.resource.attributes} == RESOURCE
    assert metric_names(request) == []
    assert any("telemetry.max.bytes" in m for m in warnings_of(caplog))
    # The push still goes out and is answered as usual.
    push.answer(PushTelemetryResponse(), None, FIRST_PUSH_WAIT)
    assert state_of(sender) is S.PUSH_NEEDED


def test_temporality_change_resets_the_delta_ledger() -> None:
    """delta -> cumulative -> delta: the deltas start again from creation (Java
    resets its ledger when the temporality changes)."""
    registry = Registry()
    sender = make_sender(registry=registry)
    nodes = Nodes(1)
    now = 0
    send(sender, now, nodes).answer(subscription(delta_temporality=True), None, now)
    now += FIRST_PUSH_WAIT
    resubscribe(sender, nodes, now, delta_temporality=False)
    registry.values["records-consumed-total"] = 20.0
    now += FIRST_PUSH_WAIT
    cumulative = send(sender, now, nodes)
    assert consumed_sum(cumulative.request).data_points[0].as_double == 20.0
    resubscribe(sender, nodes, now, cumulative, delta_temporality=True)
    registry.values["records-consumed-total"] = 30.0
    now += FIRST_PUSH_WAIT
    consumed = consumed_sum(send(sender, now, nodes).request)
    # Without the reset it would be 30 - 10 (the last delta push).
    assert consumed.data_points[0].as_double == 30.0
    assert consumed.data_points[0].start_time_unix_nano == 1_700_000_000_000 * 1_000_000


def test_same_temporality_resubscription_keeps_the_ledger() -> None:
    registry = Registry()
    sender = make_sender(registry=registry)
    nodes = Nodes(1)
    send(sender, 0, nodes).answer(subscription(), None, 0)
    now = FIRST_PUSH_WAIT
    resubscribe(sender, nodes, now)
    registry.values["records-consumed-total"] = 25.0
    push = send(sender, now + FIRST_PUSH_WAIT, nodes)
    assert consumed_sum(push.request).data_points[0].as_double == 15.0


def test_a_new_instance_id_from_a_resubscription_is_used() -> None:
    sender, nodes, push = pushing(0)
    now = FIRST_PUSH_WAIT
    push.answer(PushTelemetryResponse(error_code=ErrorCode.UNKNOWN_SUBSCRIPTION_ID), None, now)
    send(sender, now, nodes).answer(
        subscription(client_instance_id=OTHER_INSTANCE, subscription_id=99), None, now)
    assert sender.client_instance_id == OTHER_INSTANCE
    second = send(sender, now + FIRST_PUSH_WAIT, nodes)
    assert second.request.client_instance_id == OTHER_INSTANCE
    assert second.request.subscription_id == 99


# -- error codes in answers ------------------------------------------------------------------

DISABLING = [
    ErrorCode.INVALID_REQUEST,
    ErrorCode.INVALID_RECORD,
    ErrorCode.UNSUPPORTED_VERSION,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,  # a known code the table does not list
    ErrorCode.UNKNOWN_SERVER_ERROR,
    30_000,  # a code this client does not know at all
]
RESUBSCRIBE_NOW = [ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE]
RESUBSCRIBE_LATER = [ErrorCode.TELEMETRY_TOO_LARGE, ErrorCode.THROTTLING_QUOTA_EXCEEDED]


def assert_disabled_for_good(sender: TelemetrySender, nodes: Nodes, now: int) -> None:
    calls = nodes.calls
    assert sender.disabled is not None
    assert isinstance(sender.disabled, KafkaError)
    assert sender.close_done
    assert sender.time_until_next_ms(now) is None
    for later in (now, now + INTERVAL, now + 10 * DEFAULT_PUSH_INTERVAL_MS):
        assert sender.poll(later, nodes) is None
    assert nodes.calls == calls
    sender.initiate_close()
    assert sender.poll(now, nodes) is None


@pytest.mark.parametrize("code", DISABLING)
def test_disabling_codes_in_a_subscription_answer(
    code: int, caplog: pytest.LogCaptureFixture
) -> None:
    sender = make_sender()
    nodes = Nodes(1)
    send(sender, 0, nodes).answer(subscription(error_code=code), None, 5)
    assert_disabled_for_good(sender, nodes, 5)
    assert any("disabled" in m for m in warnings_of(caplog))


@pytest.mark.parametrize("code", DISABLING)
def test_disabling_codes_in_a_push_answer(code: int) -> None:
    sender, nodes, push = pushing(0)
    push.answer(PushTelemetryResponse(error_code=code), None, FIRST_PUSH_WAIT)
    assert_disabled_for_good(sender, nodes, FIRST_PUSH_WAIT)
    assert str(code) in str(sender.disabled) or ErrorCode(code).name in str(sender.disabled)


@pytest.mark.parametrize("code", RESUBSCRIBE_NOW)
def test_resubscribe_now_codes_in_a_push_answer(code: int) -> None:
    sender, nodes, push = pushing(0)
    now = FIRST_PUSH_WAIT + 20
    push.answer(PushTelemetryResponse(error_code=code), None, now)
    assert sender.disabled is None
    assert state_of(sender) is S.SUBSCRIPTION_NEEDED
    assert sender.time_until_next_ms(now) == 0
    again = send(sender, now, nodes)
    assert isinstance(again.request, GetTelemetrySubscriptionsRequest)
    assert again.request.client_instance_id == INSTANCE
    assert again.node_id == push.node_id


@pytest.mark.parametrize("code", RESUBSCRIBE_NOW)
def test_resubscribe_now_codes_in_a_subscription_answer(code: int) -> None:
    sender = make_sender()
    nodes = Nodes(1)
    send(sender, 0, nodes).answer(subscription(error_code=code), None, 40)
    assert sender.disabled is None
    assert state_of(sender) is S.SUBSCRIPTION_NEEDED
    assert sender.time_until_next_ms(40) == 0
    again = send(sender, 40, nodes)
    assert again.request.client_instance_id == ZERO  # none assigned yet


@pytest.mark.parametrize("code", RESUBSCRIBE_LATER)
def test_resubscribe_later_codes_in_a_push_answer(code: int) -> None:
    sender, nodes, push = pushing(0)
    now = FIRST_PUSH_WAIT
    push.answer(PushTelemetryResponse(error_code=code), None, now)
    assert sender.disabled is None
    assert state_of(sender) is S.SUBSCRIPTION_NEEDED
    assert sender.time_until_next_ms(now) == INTERVAL
    assert sender.poll(now + INTERVAL - 1, nodes) is None
    again = send(sender, now + INTERVAL, nodes)
    assert isinstance(again.request, GetTelemetrySubscriptionsRequest)
    assert again.request.client_instance_id == INSTANCE


@pytest.mark.parametrize("code", RESUBSCRIBE_LATER)
def test_resubscribe_later_codes_before_any_subscription_wait_five_minutes(code: int) -> None:
    sender = make_sender()
    nodes = Nodes(1)
    send(sender, 0, nodes).answer(subscription(error_code=code), None, 0)
    assert state_of(sender) is S.SUBSCRIPTION_NEEDED
    assert sender.time_until_next_ms(0) == DEFAULT_PUSH_INTERVAL_MS
    assert sender.poll(DEFAULT_PUSH_INTERVAL_MS - 1, nodes) is None
    assert send(sender, DEFAULT_PUSH_INTERVAL_MS, nodes).request.client_instance_id == ZERO


# -- transport failures ------------------------------------------------------------------


def test_a_broker_without_telemetry_disables_it_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No broker offers the APIs without a telemetry reporter: the usual case, a
    debug line only."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    sender = make_sender()
    nodes = Nodes(1)
    send(sender, 0, nodes).answer(None, UnsupportedVersionError("not advertised"), 3)
    assert isinstance(sender.disabled, UnsupportedVersionError)
    assert_disabled_for_good(sender, nodes, 3)
    assert warnings_of(caplog) == []
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG and r.name == LOGGER]
    assert any("disabled" in r.getMessage() for r in debug)


def test_unsupported_version_on_a_push_disables_quietly_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sender, _, push = pushing(0)
    caplog.clear()
    push.answer(None, UnsupportedVersionError("gone after a broker downgrade"), FIRST_PUSH_WAIT)
    assert isinstance(sender.disabled, UnsupportedVersionError)
    assert warnings_of(caplog) == []


@pytest.mark.parametrize(
    "error", [NetworkError("connection refused"), KafkaTimeoutError("request timed out")]
)
def test_retriable_failure_before_a_subscription_waits_five_minutes_elsewhere(
    error: KafkaError,
) -> None:
    assert error.retriable
    sender = make_sender()
    nodes = Nodes(1, 2)
    first = send(sender, 0, nodes)
    assert first.node_id == 1
    first.answer(None, error, 30)
    assert sender.disabled is None
    assert state_of(sender) is S.SUBSCRIPTION_NEEDED
    assert sender.time_until_next_ms(30) == DEFAULT_PUSH_INTERVAL_MS
    assert sender.poll(30 + DEFAULT_PUSH_INTERVAL_MS - 1, nodes) is None
    again = send(sender, 30 + DEFAULT_PUSH_INTERVAL_MS, nodes)
    assert isinstance(again.request, GetTelemetrySubscriptionsRequest)
    # The sticky node was forgotten: any_node picks again.
    assert nodes.calls == 2
    assert again.node_id == 2


def test_retriable_failure_of_a_push_resubscribes_after_the_interval_elsewhere() -> None:
    sender = make_sender()
    nodes = Nodes(1, 2)
    send(sender, 0, nodes).answer(subscription(), None, 0)
    push = send(sender, FIRST_PUSH_WAIT, nodes)
    assert push.node_id == 1
    now = FIRST_PUSH_WAIT + 100
    push.answer(None, NetworkError("connection reset"), now)
    assert sender.disabled is None
    assert state_of(sender) is S.SUBSCRIPTION_NEEDED
    assert sender.time_until_next_ms(now) == INTERVAL
    assert sender.poll(now + INTERVAL - 1, nodes) is None
    again = send(sender, now + INTERVAL, nodes)
    assert isinstance(again.request, GetTelemetrySubscriptionsRequest)
    assert again.request.client_instance_id == INSTANCE
    assert again.node_id == 2
    assert nodes.calls == 2


@pytest.mark.parametrize(
    "error", [AuthenticationError("bad credentials"), KafkaError("something else")]
)
def test_non_retriable_failure_disables(error: KafkaError) -> None:
    assert not error.retriable
    sender, nodes, push = pushing(0)
    push.answer(None, error, FIRST_PUSH_WAIT)
    assert sender.disabled is error
    assert_disabled_for_good(sender, nodes, FIRST_PUSH_WAIT)


def test_an_answer_of_the_wrong_type_is_a_failure() -> None:
    """UnsentRequest turns a mismatched response into a (non-retriable) error."""
    sender = make_sender()
    nodes = Nodes(1)
    send(sender, 0, nodes).answer(PushTelemetryResponse(), None, 0)
    assert sender.disabled is not None
    assert sender.close_done


# -- closing -------------------------------------------------------------------------------


def test_close_with_a_subscription_sends_one_terminating_push() -> None:
    sender, nodes = subscribed(0)
    sender.initiate_close()
    assert state_of(sender) is S.TERMINATING_PUSH_NEEDED
    assert not sender.close_done
    assert sender.time_until_next_ms(1) == 0  # no waiting for the interval
    last = send(sender, 1, nodes)
    assert isinstance(last.request, PushTelemetryRequest)
    assert last.request.terminating is True
    assert last.request.client_instance_id == INSTANCE
    assert set(metric_names(last.request)) == {CONSUMED, IDLE}
    assert state_of(sender) is S.TERMINATING_PUSH_IN_PROGRESS
    assert sender.time_until_next_ms(1) is None
    assert sender.poll(10**9, nodes) is None
    assert not sender.close_done
    sender.initiate_close()  # again: nothing changes
    assert state_of(sender) is S.TERMINATING_PUSH_IN_PROGRESS
    last.answer(PushTelemetryResponse(), None, 50)
    assert state_of(sender) is S.TERMINATED
    assert sender.close_done
    assert sender.disabled is None
    assert sender.time_until_next_ms(50) is None
    assert sender.poll(10**9, nodes) is None
    terminating = [r for r in sender.moves if r[1] is S.TERMINATING_PUSH_IN_PROGRESS]
    assert len(terminating) == 1


@pytest.mark.parametrize(
    "outcome",
    [
        (None, NetworkError("connection lost")),
        (None, UnsupportedVersionError("not advertised")),
        (None, AuthenticationError("bad credentials")),
        (PushTelemetryResponse(error_code=ErrorCode.TELEMETRY_TOO_LARGE), None),
        (PushTelemetryResponse(error_code=ErrorCode.UNKNOWN_SUBSCRIPTION_ID), None),
        (PushTelemetryResponse(error_code=ErrorCode.INVALID_REQUEST), None),
    ],
)
def test_the_terminating_push_ends_telemetry_however_it_is_answered(
    outcome: tuple[PushTelemetryResponse | None, KafkaError | None],
    caplog: pytest.LogCaptureFixture,
) -> None:
    sender, nodes, push = pushing(0)
    push.answer(PushTelemetryResponse(), None, FIRST_PUSH_WAIT)
    sender.initiate_close()
    last = send(sender, FIRST_PUSH_WAIT + 1, nodes)
    assert last.request.terminating is True
    caplog.clear()
    response, error = outcome
    last.answer(response, error, FIRST_PUSH_WAIT + 2)
    assert state_of(sender) is S.TERMINATED
    assert sender.close_done
    assert sender.poll(10**9, nodes) is None
    assert sender.time_until_next_ms(10**9) is None
    assert warnings_of(caplog) == []


def test_close_without_a_subscription_terminates_at_once() -> None:
    sender = make_sender()
    nodes = Nodes(1)
    sender.initiate_close()
    assert state_of(sender) is S.TERMINATED
    assert sender.close_done
    assert sender.disabled is None
    assert sender.poll(0, nodes) is None
    assert sender.time_until_next_ms(0) is None
    assert nodes.calls == 0
    sender.initiate_close()
    assert state_of(sender) is S.TERMINATED


def test_close_while_the_first_subscription_is_in_flight_ignores_its_answer() -> None:
    sender = make_sender()
    nodes = Nodes(1)
    request = send(sender, 0, nodes)
    sender.initiate_close()
    assert state_of(sender) is S.TERMINATED
    assert sender.close_done
    request.answer(subscription(), None, 10)
    assert state_of(sender) is S.TERMINATED
    assert sender.subscription is None
    assert sender.poll(10**9, nodes) is None


def test_close_after_a_subscription_without_metrics_terminates_at_once() -> None:
    sender, nodes = subscribed(0, requested_metrics=[])
    sender.initiate_close()
    assert state_of(sender) is S.TERMINATED
    assert sender.close_done
    assert sender.poll(10**9, nodes) is None


def test_close_of_a_disabled_sender_is_done() -> None:
    sender = make_sender()
    send(sender, 0).answer(None, UnsupportedVersionError("not advertised"), 0)
    sender.initiate_close()
    assert sender.close_done
    assert sender.poll(0, Nodes(1)) is None


def test_a_push_answer_arriving_while_the_terminating_push_waits_is_ignored() -> None:
    """Close while a regular push is in flight: its answer (success or an error
    code) must not move the sender; the terminating push still goes out."""
    for response in (PushTelemetryResponse(),
                     PushTelemetryResponse(error_code=ErrorCode.UNKNOWN_SUBSCRIPTION_ID),
                     PushTelemetryResponse(error_code=ErrorCode.INVALID_REQUEST)):
        sender, nodes, push = pushing(0)
        sender.initiate_close()
        assert state_of(sender) is S.TERMINATING_PUSH_NEEDED
        push.answer(response, None, FIRST_PUSH_WAIT + 5)
        assert state_of(sender) is S.TERMINATING_PUSH_NEEDED
        assert sender.disabled is None
        last = send(sender, FIRST_PUSH_WAIT + 6, nodes)
        assert last.request.terminating is True


def test_a_subscription_answer_arriving_while_terminating_is_ignored() -> None:
    """Close while a re-subscription is in flight (an earlier subscription asks
    for metrics): the terminating push uses that subscription; the answer
    changes nothing."""
    sender, nodes, push = pushing(0)
    push.answer(PushTelemetryResponse(error_code=ErrorCode.UNKNOWN_SUBSCRIPTION_ID),
                None, FIRST_PUSH_WAIT)
    resub = send(sender, FIRST_PUSH_WAIT, nodes)
    assert state_of(sender) is S.SUBSCRIPTION_IN_PROGRESS
    sender.initiate_close()
    assert state_of(sender) is S.TERMINATING_PUSH_NEEDED
    resub.answer(subscription(client_instance_id=OTHER_INSTANCE, subscription_id=5), None,
                 FIRST_PUSH_WAIT + 1)
    assert state_of(sender) is S.TERMINATING_PUSH_NEEDED
    assert sender.client_instance_id == INSTANCE
    last = send(sender, FIRST_PUSH_WAIT + 2, nodes)
    assert last.request.terminating is True
    assert last.request.subscription_id == 77


def test_a_failure_arriving_while_the_terminating_push_waits_is_ignored() -> None:
    """Close while a regular push is in flight, then that push fails (the
    connection dropped): a failure is an answer too and must not end telemetry
    before the terminating push was even sent."""
    sender, nodes, push = pushing(0)
    sender.initiate_close()
    push.answer(None, NetworkError("connection reset"), FIRST_PUSH_WAIT + 5)
    assert state_of(sender) is S.TERMINATING_PUSH_NEEDED
    assert not sender.close_done
    last = sender.poll(FIRST_PUSH_WAIT + 6, nodes)
    assert last is not None
    assert isinstance(last.request, PushTelemetryRequest)
    assert last.request.terminating is True


def test_only_the_terminating_push_answer_completes_close() -> None:
    """Close while a regular push is in flight; the terminating push goes out at
    once, so two pushes are in flight. The regular push's answer must not be
    taken for the terminating push's: close is done only when that one is
    answered."""
    sender, nodes, push = pushing(0)
    sender.initiate_close()
    last = send(sender, FIRST_PUSH_WAIT + 1, nodes)
    assert last.request.terminating is True
    push.answer(PushTelemetryResponse(), None, FIRST_PUSH_WAIT + 2)
    assert state_of(sender) is S.TERMINATING_PUSH_IN_PROGRESS
    assert not sender.close_done
    last.answer(PushTelemetryResponse(), None, FIRST_PUSH_WAIT + 3)
    assert state_of(sender) is S.TERMINATED
    assert sender.close_done


@pytest.mark.parametrize(
    "how", ["network failure of a push", "UNKNOWN_SUBSCRIPTION_ID", "TELEMETRY_TOO_LARGE"]
)
def test_close_while_waiting_to_resubscribe(how: str, caplog: pytest.LogCaptureFixture) -> None:
    """Close in SUBSCRIPTION_NEEDED with an earlier subscription that asks for
    metrics (waiting to subscribe again after a failure): Java skips the
    terminating push there; the sender must end cleanly, not report an
    internal error."""
    sender, _, push = pushing(0)
    if how == "network failure of a push":
        push.answer(None, NetworkError("connection reset"), FIRST_PUSH_WAIT)
    else:
        push.answer(PushTelemetryResponse(error_code=ErrorCode[how]), None, FIRST_PUSH_WAIT)
    assert state_of(sender) is S.SUBSCRIPTION_NEEDED
    caplog.clear()
    sender.initiate_close()
    assert sender.disabled is None, f"disabled: {sender.disabled}"
    assert state_of(sender) is S.TERMINATED
    assert sender.close_done
    assert warnings_of(caplog) == []


def test_a_late_failure_after_close_changes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """Terminated while the first subscription was in flight; its failure arrives
    later: nothing to report any more."""
    sender = make_sender()
    nodes = Nodes(1)
    request = send(sender, 0, nodes)
    sender.initiate_close()
    assert state_of(sender) is S.TERMINATED
    caplog.clear()
    request.answer(None, AuthenticationError("bad credentials"), 10)
    assert state_of(sender) is S.TERMINATED
    assert sender.disabled is None
    assert warnings_of(caplog) == []


# -- waits per state -----------------------------------------------------------------------


def test_time_until_next_in_every_state() -> None:
    sender = make_sender()
    nodes = Nodes(1)
    assert state_of(sender) is S.SUBSCRIPTION_NEEDED
    assert sender.time_until_next_ms(0) == 0
    sub = send(sender, 0, nodes)
    assert state_of(sender) is S.SUBSCRIPTION_IN_PROGRESS
    assert sender.time_until_next_ms(0) is None
    sub.answer(subscription(), None, 0)
    assert state_of(sender) is S.PUSH_NEEDED
    assert sender.time_until_next_ms(1_000) == FIRST_PUSH_WAIT - 1_000
    push = send(sender, FIRST_PUSH_WAIT, nodes)
    assert state_of(sender) is S.PUSH_IN_PROGRESS
    assert sender.time_until_next_ms(FIRST_PUSH_WAIT) is None
    push.answer(PushTelemetryResponse(), None, FIRST_PUSH_WAIT)
    sender.initiate_close()
    assert state_of(sender) is S.TERMINATING_PUSH_NEEDED
    assert sender.time_until_next_ms(FIRST_PUSH_WAIT) == 0
    last = send(sender, FIRST_PUSH_WAIT, nodes)
    assert state_of(sender) is S.TERMINATING_PUSH_IN_PROGRESS
    assert sender.time_until_next_ms(FIRST_PUSH_WAIT) is None
    last.answer(PushTelemetryResponse(), None, FIRST_PUSH_WAIT)
    assert state_of(sender) is S.TERMINATED
    assert sender.time_until_next_ms(FIRST_PUSH_WAIT) is None
    assert {b for _, b in sender.moves} | {S.SUBSCRIPTION_NEEDED} == set(TelemetryState)


def test_a_full_life_visits_the_expected_states_in_order() -> None:
    sender, nodes, push = pushing(0)
    push.answer(PushTelemetryResponse(), None, FIRST_PUSH_WAIT)
    sender.initiate_close()
    send(sender, FIRST_PUSH_WAIT, nodes).answer(PushTelemetryResponse(), None, FIRST_PUSH_WAIT)
    assert [b for _, b in sender.moves] == [
        S.SUBSCRIPTION_IN_PROGRESS, S.PUSH_NEEDED, S.PUSH_IN_PROGRESS, S.PUSH_NEEDED,
        S.TERMINATING_PUSH_NEEDED, S.TERMINATING_PUSH_IN_PROGRESS, S.TERMINATED,
    ]
