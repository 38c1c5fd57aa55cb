"""Client telemetry (KIP-714) as a sans-IO state machine: subscribe, push, close.

With ``enable.metrics.push`` on (the default, as in Java), the consumer asks a
broker which of its metrics the cluster wants (GetTelemetrySubscriptions) and
pushes them on the interval it is given (PushTelemetry, OTLP ``MetricsData``,
compressed with the first type the broker accepts). The broker's answer also
assigns the client instance id ``client_instance_id()`` returns.

:class:`TelemetrySender` follows Java's ``ClientTelemetryReporter``:

* states and moves in :data:`TRANSITIONS`; a move outside it disables
  telemetry (a bug, logged) rather than raising on the network thread;
* the first push waits a random 0.5-1.5 of the push interval after each
  subscription (brokers are not hit by every client at once), later pushes
  the interval;
* error codes in an answer: INVALID_REQUEST, INVALID_RECORD, UNSUPPORTED_VERSION
  and unknown codes disable telemetry; UNKNOWN_SUBSCRIPTION_ID and
  UNSUPPORTED_COMPRESSION_TYPE subscribe again at once (the second also stops
  using that compression); TELEMETRY_TOO_LARGE and THROTTLING_QUOTA_EXCEEDED
  subscribe again after the push interval;
* a broker that does not offer the APIs (none does without a metrics reporter
  that receives telemetry) disables telemetry quietly, at debug level: that is
  the usual case and not a problem; a lost connection or timeout subscribes
  again after the push interval (5 minutes before the first subscription);
* at close, one last push marked terminating, if a subscription asks for
  metrics; answers that arrive while terminating are not acted on.

It returns requests (``UnsentRequest``) and never reads the clock: the metrics
are collected at the ``now_ms`` it is polled with.
"""

from __future__ import annotations

import enum
import logging
import random
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from kafka_share._log import Logger
from kafka_share._reprs import attrs_repr
from kafka_share.errors import KafkaError, UnsupportedVersionError, error_for_code
from kafka_share.protocol.error_codes import ErrorCode
from kafka_share.protocol.messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from kafka_share.records.compression import CompressionType, compress
from kafka_share.share.unsent import Channel, UnsentRequest
from kafka_share.telemetry.collector import MetricSelector, TelemetryCollector
from kafka_share.telemetry.otlp import AggregationTemporality, encode_metrics_data

__all__ = ["DEFAULT_PUSH_INTERVAL_MS", "TRANSITIONS", "TelemetrySender", "TelemetryState"]

log = logging.getLogger("kafka_share.telemetry")

#: The push interval before a broker has said one (Java's default).
DEFAULT_PUSH_INTERVAL_MS = 300_000
_ZERO_UUID = uuid.UUID(int=0)

#: Answer codes that end telemetry for this client.
_DISABLING = frozenset({
    ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_RECORD, ErrorCode.UNSUPPORTED_VERSION,
})
#: Answer codes after which the client subscribes again at once.
_RESUBSCRIBE_NOW = frozenset({
    ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
})
#: Answer codes after which the client subscribes again after the push interval.
_RESUBSCRIBE_LATER = frozenset({
    ErrorCode.TELEMETRY_TOO_LARGE, ErrorCode.THROTTLING_QUOTA_EXCEEDED,
})


class TelemetryState(enum.Enum):
    """Where the client is in the telemetry protocol (Java's ``ClientTelemetryState``)."""

    SUBSCRIPTION_NEEDED = "subscription needed"
    SUBSCRIPTION_IN_PROGRESS = "subscription in progress"
    PUSH_NEEDED = "push needed"
    PUSH_IN_PROGRESS = "push in progress"
    TERMINATING_PUSH_NEEDED = "terminating push needed"
    TERMINATING_PUSH_IN_PROGRESS = "terminating push in progress"
    TERMINATED = "terminated"


_S = TelemetryState
#: The moves allowed from each state.
TRANSITIONS: Mapping[TelemetryState, frozenset[TelemetryState]] = {
    _S.SUBSCRIPTION_NEEDED: frozenset({_S.SUBSCRIPTION_IN_PROGRESS, _S.TERMINATED}),
    _S.SUBSCRIPTION_IN_PROGRESS: frozenset({
        _S.PUSH_NEEDED, _S.SUBSCRIPTION_NEEDED, _S.TERMINATING_PUSH_NEEDED, _S.TERMINATED,
    }),
    _S.PUSH_NEEDED: frozenset({
        _S.PUSH_IN_PROGRESS, _S.SUBSCRIPTION_NEEDED, _S.TERMINATING_PUSH_NEEDED, _S.TERMINATED,
    }),
    _S.PUSH_IN_PROGRESS: frozenset({
        _S.PUSH_NEEDED, _S.SUBSCRIPTION_NEEDED, _S.TERMINATING_PUSH_NEEDED, _S.TERMINATED,
    }),
    _S.TERMINATING_PUSH_NEEDED: frozenset({_S.TERMINATING_PUSH_IN_PROGRESS, _S.TERMINATED}),
    _S.TERMINATING_PUSH_IN_PROGRESS: frozenset({_S.TERMINATED}),
    _S.TERMINATED: frozenset(),
}
_IN_PROGRESS = frozenset({
    _S.SUBSCRIPTION_IN_PROGRESS, _S.PUSH_IN_PROGRESS, _S.TERMINATING_PUSH_IN_PROGRESS,
})
_TERMINATING = frozenset({_S.TERMINATING_PUSH_NEEDED, _S.TERMINATING_PUSH_IN_PROGRESS})


@attrs_repr
@attrs.frozen(repr=False)
class TelemetrySubscription:
    """What a GetTelemetrySubscriptions answer said."""

    client_instance_id: uuid.UUID
    subscription_id: int
    accepted_compression_types: tuple[int, ...]
    push_interval_ms: int
    telemetry_max_bytes: int
    delta_temporality: bool
    selector: MetricSelector


class TelemetrySender:
    """The telemetry protocol of one client (see the module docstring).

    Args:
        collector: the client's metrics as points.
        resource: the OTLP resource attributes (group id, member id, rack).
        random_source: jitter source in [0, 1) (tests inject one).
        logger: a logger carrying the client's identity.
    """

    def __init__(
        self,
        collector: TelemetryCollector,
        *,
        resource: Mapping[str, str],
        random_source: Callable[[], float] | None = None,
        logger: Logger | None = None,
    ) -> None:
        self._collector = collector
        self._resource = dict(resource)
        self._random = random_source or random.random
        self._log: Logger = logger or log
        self.state = TelemetryState.SUBSCRIPTION_NEEDED
        self.subscription: TelemetrySubscription | None = None
        #: why telemetry stopped for good (None: it runs)
        self.disabled: KafkaError | None = None
        self._last_request_ms: int | None = None
        self._interval_ms = 0
        #: the node every request goes to while it answers (Java's sticky node)
        self._node: int | None = None
        self._unsupported_compression: set[int] = set()

    # -- what the driver and the application see --------------------------------------

    @property
    def client_instance_id(self) -> uuid.UUID | None:
        """The id the cluster gave this client (None until its first answer)."""
        sub = self.subscription
        return None if sub is None else sub.client_instance_id

    @property
    def close_done(self) -> bool:
        """Nothing more to send: the terminating push (if any) was answered."""
        return self.disabled is not None or self.state is TelemetryState.TERMINATED

    def _move(self, to: TelemetryState) -> bool:
        if to not in TRANSITIONS[self.state]:
            self._disable(KafkaError(f"internal error: telemetry state {self.state.value} "
                                     f"cannot move to {to.value}"), level=logging.WARNING)
            return False
        self.state = to
        return True

    def _disable(self, why: KafkaError, *, level: int) -> None:
        if self.disabled is None:
            self.disabled = why
            self._log.log(level, "client telemetry disabled: %s", why)

    # -- the round ------------------------------------------------------------------------

    def poll(self, now_ms: int, any_node: Callable[[], int]) -> UnsentRequest[Any] | None:
        """The request to send now, if any; ``any_node`` picks a node when the
        last one is gone."""
        if self.disabled is not None:
            return None
        wait = self.time_until_next_ms(now_ms)
        if wait is None or wait > 0:
            return None
        if self._node is None:
            self._node = any_node()
        if self.state is TelemetryState.SUBSCRIPTION_NEEDED:
            return self._subscription_request(self._node)
        return self._push_request(self._node, now_ms)

    def time_until_next_ms(self, now_ms: int) -> int | None:
        """How long until :meth:`poll` sends something (None: not until an answer
        arrives or ever)."""
        if self.disabled is not None or self.state in _IN_PROGRESS:
            return None
        if self.state is TelemetryState.TERMINATED:
            return None
        if self.state is TelemetryState.TERMINATING_PUSH_NEEDED:
            return 0
        if self._last_request_ms is None:
            return 0
        return max(0, self._last_request_ms + self._interval_ms - now_ms)

    def initiate_close(self) -> None:
        """The client closes: one last push, marked terminating, if a subscription
        asks for metrics (else nothing)."""
        if self.disabled is not None or self.state in _TERMINATING:
            return
        if self.state is TelemetryState.TERMINATED:
            return
        sub = self.subscription
        if (self.state is TelemetryState.SUBSCRIPTION_NEEDED or sub is None
                or not sub.selector.selects_any):
            # Nothing subscribed to push, or waiting to subscribe again after a
            # failure (Java skips the last push there too).
            self._move(TelemetryState.TERMINATED)
            return
        self._move(TelemetryState.TERMINATING_PUSH_NEEDED)

    # -- subscribing ----------------------------------------------------------------------

    def _subscription_request(
        self, node: int
    ) -> UnsentRequest[GetTelemetrySubscriptionsResponse]:
        self._move(TelemetryState.SUBSCRIPTION_IN_PROGRESS)
        request = GetTelemetrySubscriptionsRequest(
            client_instance_id=self.client_instance_id or _ZERO_UUID
        )
        def failed(error: KafkaError, now_ms: int) -> None:
            self._on_failure(error, now_ms, terminating=False)

        return UnsentRequest(
            node, Channel.CONTROL, request, GetTelemetrySubscriptionsResponse,
            self._on_subscription, failed,
        )

    def _on_subscription(self, response: GetTelemetrySubscriptionsResponse, now_ms: int) -> None:
        if self.state is not TelemetryState.SUBSCRIPTION_IN_PROGRESS:
            return  # closing meanwhile
        if response.error_code != ErrorCode.NONE:
            self._on_error_code(response.error_code, now_ms)
            return
        if response.client_instance_id == _ZERO_UUID:
            self._disable(KafkaError("the broker answered GetTelemetrySubscriptions without "
                                     "a client instance id"), level=logging.WARNING)
            return
        interval_ms = response.push_interval_ms
        if interval_ms <= 0:
            self._log.warning("the broker asked for telemetry every %d ms; pushing every %d ms",
                              interval_ms, DEFAULT_PUSH_INTERVAL_MS)
            interval_ms = DEFAULT_PUSH_INTERVAL_MS
        previous = self.subscription
        if previous is not None and previous.delta_temporality != response.delta_temporality:
            self._collector.reset()
        sub = self.subscription = TelemetrySubscription(
            client_instance_id=response.client_instance_id,
            subscription_id=response.subscription_id,
            accepted_compression_types=tuple(response.accepted_compression_types),
            push_interval_ms=interval_ms,
            telemetry_max_bytes=response.telemetry_max_bytes,
            delta_temporality=response.delta_temporality,
            selector=MetricSelector.of(response.requested_metrics),
        )
        if previous is None or previous.client_instance_id != sub.client_instance_id:
            self._log.info("client telemetry registered with client instance id %s",
                           sub.client_instance_id)
        self._log.debug(
            "telemetry subscription %d: metrics %s every %d ms, compression %s, %s",
            sub.subscription_id, list(sub.selector.prefixes) or "none", interval_ms,
            list(sub.accepted_compression_types),
            "delta" if sub.delta_temporality else "cumulative",
        )
        self._last_request_ms = now_ms
        if sub.selector.selects_any:
            self._move(TelemetryState.PUSH_NEEDED)
            # The first push after a subscription waits 0.5-1.5 intervals, so
            # that clients started together do not push together.
            self._interval_ms = round((0.5 + self._random()) * interval_ms)
        else:
            self._move(TelemetryState.SUBSCRIPTION_NEEDED)
            self._interval_ms = interval_ms

    # -- pushing --------------------------------------------------------------------------

    def _push_request(self, node: int, now_ms: int) -> UnsentRequest[PushTelemetryResponse]:
        sub = self.subscription
        assert sub is not None
        terminating = self.state is TelemetryState.TERMINATING_PUSH_NEEDED
        self._move(TelemetryState.TERMINATING_PUSH_IN_PROGRESS if terminating
                   else TelemetryState.PUSH_IN_PROGRESS)
        points = self._collector.collect(now_ms, sub.selector, delta=sub.delta_temporality)
        raw = encode_metrics_data(
            points, resource=self._resource,
            temporality=(AggregationTemporality.DELTA if sub.delta_temporality
                         else AggregationTemporality.CUMULATIVE),
        )
        if len(raw) > sub.telemetry_max_bytes:
            # The broker would refuse it (and an oversized payload after
            # decompression disables telemetry): push nothing this time.
            self._log.warning("telemetry payload of %d bytes is over the broker's "
                              "telemetry.max.bytes (%d): not pushed", len(raw),
                              sub.telemetry_max_bytes)
            raw = encode_metrics_data([], resource=self._resource,
                                      temporality=AggregationTemporality.DELTA)
        codec, payload = self._compressed(raw, sub)
        request = PushTelemetryRequest(
            client_instance_id=sub.client_instance_id, subscription_id=sub.subscription_id,
            terminating=terminating, compression_type=codec, metrics=payload,
        )

        def answered(response: PushTelemetryResponse, now_ms: int) -> None:
            self._on_push(response, codec, now_ms, terminating=terminating)

        def failed(error: KafkaError, now_ms: int) -> None:
            self._on_failure(error, now_ms, terminating=terminating)

        return UnsentRequest(
            node, Channel.CONTROL, request, PushTelemetryResponse, answered, failed
        )

    def _compressed(self, raw: bytes, sub: TelemetrySubscription) -> tuple[int, bytes]:
        """The first compression the broker accepts that has not failed, else none."""
        for codec in sub.accepted_compression_types:
            if codec in self._unsupported_compression or codec not in _COMPRESSIONS:
                continue
            try:
                return codec, compress(codec, raw)
            except Exception as exc:  # a codec library missing or broken: send it plain
                self._unsupported_compression.add(codec)
                self._log.debug("telemetry compression %s failed (%s): not used again",
                                CompressionType(codec).name.lower(), exc)
        return CompressionType.NONE, raw

    def _on_push(
        self, response: PushTelemetryResponse, codec: int, now_ms: int, *, terminating: bool
    ) -> None:
        if terminating:
            # The last push's answer, whatever it says, ends telemetry.
            self._move(TelemetryState.TERMINATED)
            return
        if self.state is not TelemetryState.PUSH_IN_PROGRESS:
            return  # an earlier push answered while closing: not acted on
        if response.error_code != ErrorCode.NONE:
            if response.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE:
                self._unsupported_compression.add(codec)
            self._on_error_code(response.error_code, now_ms)
            return
        sub = self.subscription
        assert sub is not None
        self._last_request_ms = now_ms
        self._interval_ms = sub.push_interval_ms
        self._move(TelemetryState.PUSH_NEEDED)

    # -- failures -------------------------------------------------------------------------

    def _on_error_code(self, code: int, now_ms: int) -> None:
        error = error_for_code(code, "the broker's answer to a telemetry request")
        if code in _DISABLING or not (code in _RESUBSCRIBE_NOW or code in _RESUBSCRIBE_LATER):
            self._disable(error, level=logging.WARNING)
            return
        sub = self.subscription
        if code in _RESUBSCRIBE_NOW:
            self._interval_ms = 0
        else:
            self._interval_ms = sub.push_interval_ms if sub else DEFAULT_PUSH_INTERVAL_MS
        self._log.debug("telemetry answer %s: subscribing again in %d ms", error.name,
                        self._interval_ms)
        self._last_request_ms = now_ms
        self._move(TelemetryState.SUBSCRIPTION_NEEDED)

    def _on_failure(self, error: KafkaError, now_ms: int, *, terminating: bool) -> None:
        self._node = None
        if terminating:
            self._move(TelemetryState.TERMINATED)
            return
        if self.state in _TERMINATING or self.state is TelemetryState.TERMINATED:
            return  # an earlier request failed while closing: not acted on
        if isinstance(error, UnsupportedVersionError):
            # No broker offers telemetry unless a metrics reporter receives it:
            # the common case, not worth more than a debug line.
            self._disable(UnsupportedVersionError(
                "the cluster does not offer client telemetry (KIP-714): its brokers need a "
                "metrics reporter that receives it (a ClientTelemetryExporterProvider)"
            ), level=logging.DEBUG)
            return
        if not error.retriable:
            self._disable(error, level=logging.WARNING)
            return
        sub = self.subscription
        self._interval_ms = sub.push_interval_ms if sub else DEFAULT_PUSH_INTERVAL_MS
        self._last_request_ms = now_ms
        self._log.debug("telemetry request failed (%s): subscribing again in %d ms", error,
                        self._interval_ms)
        if self.state in _IN_PROGRESS:
            self._move(TelemetryState.SUBSCRIPTION_NEEDED)


#: The compression types a push may use (the record-batch codecs, as Java's).
_COMPRESSIONS = frozenset(CompressionType) - {CompressionType.NONE}
