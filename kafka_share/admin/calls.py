"""Sans-IO admin calls: where a request goes, and when it is retried.

An :class:`AdminRpc` is one logical admin request (a DescribeShareGroupOffsets
for a group, a CreateTopics, ...) with its own deadline. It decides which node
the request goes to (any broker, the group's coordinator, or a given node),
looks the coordinator up first when needed (FindCoordinator), and retries
retriable failures with exponential backoff until the deadline, as Java's
``KafkaAdminClient`` does. It never performs I/O and never reads the clock:
:meth:`AdminRpc.poll` takes ``now_ms`` and returns what to send; the driver
passes each answer to the handler with the time it arrived.

:class:`Routing` is the state all calls of one admin client share: the cluster
metadata (bootstrap servers, then real brokers) and the known coordinators.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import attrs

from kafka_share._reprs import attrs_repr
from kafka_share.cluster import BrokerInfo, ClusterMetadata
from kafka_share.errors import (
    CoordinatorNotAvailableError,
    KafkaError,
    KafkaTimeoutError,
    NotCoordinatorError,
    error_for_code,
)
from kafka_share.protocol.messages import FindCoordinatorResponse
from kafka_share.share.backoff import ExponentialBackoff
from kafka_share.share.coordinator import coordinator_answer, find_coordinator_request

__all__ = ["AdminRpc", "DoNotRetry", "Outgoing", "Route", "RouteKind", "Routing"]

T = TypeVar("T")
R = TypeVar("R")


class DoNotRetry(Exception):  # noqa: N818 (a signal, not an error of its own)
    """Raised by a call's ``parse`` to fail with ``error`` at once, even if its class
    is retriable (e.g. UNKNOWN_TOPIC_OR_PARTITION when deleting a topic that does not
    exist: retrying cannot help, as in Java's admin client)."""

    def __init__(self, error: KafkaError) -> None:
        super().__init__(str(error))
        self.error = error


class RouteKind(enum.Enum):
    #: Any broker (cluster-wide requests: metadata, configs, topics).
    ANY = "any"
    #: The coordinator of ``Route.group_id``.
    COORDINATOR = "coordinator"
    #: The broker ``Route.node_id`` (e.g. a partition leader).
    NODE = "node"


@attrs_repr
@attrs.frozen(repr=False)
class Route:
    kind: RouteKind
    group_id: str | None = None
    node_id: int | None = None

    @classmethod
    def any(cls) -> Route:
        return cls(RouteKind.ANY)

    @classmethod
    def coordinator(cls, group_id: str) -> Route:
        return cls(RouteKind.COORDINATOR, group_id=group_id)

    @classmethod
    def node(cls, node_id: int) -> Route:
        return cls(RouteKind.NODE, node_id=node_id)


class Routing:
    """What every call of one admin client knows about where to send requests."""

    def __init__(self, cluster: ClusterMetadata) -> None:
        self.cluster = cluster
        #: group id -> coordinator node id
        self.coordinators: dict[str, int] = {}

    def coordinator_node(self, group_id: str) -> BrokerInfo | None:
        node_id = self.coordinators.get(group_id)
        if node_id is None:
            return None
        return self.cluster.brokers.get(node_id)

    def forget_coordinator(self, group_id: str) -> None:
        self.coordinators.pop(group_id, None)


@attrs_repr
@attrs.frozen(eq=False, repr=False)
class Call(Generic[R, T]):
    """How to make one admin request and read its answer, of ``response_type``."""

    response_type: type[R]
    build: Callable[[], Any]
    parse: Callable[[R], T]


@attrs_repr
@attrs.frozen(eq=False, repr=False)
class Outgoing:
    """A request to send: to ``node_id``, answered through ``handler``."""

    node_id: int
    request: Any
    #: Called once with (response, None, now_ms) or (None, error, now_ms).
    handler: Callable[[Any, KafkaError | None, int], None]
    #: The request's own timeout: the request timeout, cut to the call's deadline.
    timeout_ms: int


class AdminRpc(Generic[T]):
    """One admin request with routing, retries and a deadline.

    Args:
        name: what the call does, for error messages (e.g. ``"describe share
            group 'g'"``).
        route: where the request goes.
        call: ``build`` makes the request (a message, or a
            :class:`VersionedRequest`), called for every attempt; ``parse``
            turns the response (of ``response_type``: another type fails the
            call) into the result, raising a
            :class:`~kafka_share.errors.KafkaError` for error codes. A
            retriable error is retried; ``NOT_COORDINATOR`` and
            ``COORDINATOR_NOT_AVAILABLE`` also make the coordinator be looked
            up again.
        routing: shared routing state.
        now_ms: when the call starts.
        timeout_ms: the call's whole budget, retries included.
        request_timeout_ms: the longest any single attempt may take.
        backoff: the wait between attempts.
        needs: the ACLs the call needs (e.g. ``"DESCRIBE on GROUP 'g'"``),
            added to the message of an ``*_AUTHORIZATION_FAILED`` error so
            that it names the operation and resource to grant.
    """

    def __init__(
        self,
        name: str,
        route: Route,
        call: Call[Any, T],
        *,
        routing: Routing,
        now_ms: int,
        timeout_ms: int,
        request_timeout_ms: int,
        backoff: ExponentialBackoff,
        needs: str = "",
    ) -> None:
        if route.kind is RouteKind.COORDINATOR and not route.group_id:
            raise ValueError("a coordinator route needs a group id")
        if route.kind is RouteKind.NODE and route.node_id is None:
            raise ValueError("a node route needs a node id")
        self.name = name
        self.needs = needs
        self.route = route
        self._call = call
        self._routing = routing
        self._started_ms = now_ms
        self.deadline_ms = now_ms + max(0, timeout_ms)
        self._request_timeout_ms = request_timeout_ms
        self._backoff = backoff
        self._attempts = 0
        self._not_before_ms = now_ms
        self._in_flight = False
        self._last_error: KafkaError | None = None
        self.done = False
        self._result: T | None = None
        self.error: KafkaError | None = None

    # -- outcome -------------------------------------------------------------------------

    @property
    def attempts(self) -> int:
        """Failed attempts so far (coordinator lookups included)."""
        return self._attempts

    def result(self) -> T:
        """The result; raises the call's error if it failed. Only once :attr:`done`."""
        if not self.done:
            raise RuntimeError(f"{self.name}: not done yet")
        if self.error is not None:
            raise self.error
        return self._result  # type: ignore[return-value]

    def _succeed(self, value: T) -> None:
        self.done = True
        self._result = value

    def _fail(self, error: KafkaError) -> None:
        self.done = True
        if self.needs and getattr(error, "name", "").endswith("_AUTHORIZATION_FAILED"):
            # The broker says only that a right is missing; say which one to grant.
            text = str(error)
            bare = text == f"{getattr(error, 'name', '')} (error code {getattr(error, 'code', '')})"
            error = type(error)(f"{text}{':' if bare else ';'} {self.name} needs {self.needs}")
        self.error = error

    # -- driving ---------------------------------------------------------------------------

    def poll(self, now_ms: int) -> list[Outgoing]:
        """What to send now (at most one request is in flight per call)."""
        if self.done or self._in_flight:
            return []
        if now_ms >= self.deadline_ms:
            self._time_out()
            return []
        if now_ms < self._not_before_ms:
            return []
        timeout_ms = max(1, min(self._request_timeout_ms, self.deadline_ms - now_ms))
        if self.route.kind is RouteKind.COORDINATOR:
            assert self.route.group_id is not None
            if self._routing.coordinator_node(self.route.group_id) is None:
                self._in_flight = True
                return [self._find_coordinator(timeout_ms)]
            node_id = self._routing.coordinators[self.route.group_id]
        elif self.route.kind is RouteKind.NODE:
            assert self.route.node_id is not None
            node_id = self.route.node_id
        else:
            node_id = self._routing.cluster.any_node()
        self._in_flight = True
        return [Outgoing(node_id, self._call.build(), self._on_response, timeout_ms)]

    def time_until_next_ms(self, now_ms: int) -> int | None:
        """How long the driver may wait before calling :meth:`poll` again (None: done).

        While a request is in flight the answer arrives through the handler; the
        deadline still bounds the wait.
        """
        if self.done:
            return None
        if self._in_flight:
            return max(0, self.deadline_ms - now_ms)
        return max(0, min(self._not_before_ms, self.deadline_ms) - now_ms)

    def _time_out(self) -> None:
        budget_s = (self.deadline_ms - self._started_ms) / 1000
        if budget_s >= 0.1:
            # The budget is the caller's timeout less the moment between taking the
            # deadline and starting the call: say 1 s, not 0.999 s.
            budget_s = round(budget_s, 1)
        text = f"{self.name} did not complete within {budget_s:g} s"
        if self._last_error is not None:
            text += f" ({self._attempts} attempt(s); last error: {self._last_error})"
        self._fail(KafkaTimeoutError(text))

    def _retry(self, error: KafkaError, now_ms: int) -> None:
        self._last_error = error
        self._not_before_ms = now_ms + self._backoff.backoff_ms(self._attempts)
        self._attempts += 1
        if self._not_before_ms >= self.deadline_ms:
            self._time_out()

    def _on_response(self, response: Any, error: KafkaError | None, now_ms: int) -> None:
        self._in_flight = False
        if self.done:
            return
        if error is not None:
            self._on_failure(error, now_ms, transport=True)
            return
        if self._failed_as_not(self._call.response_type, response):
            return
        try:
            value = self._call.parse(response)
        except DoNotRetry as exc:
            self._fail(exc.error)
            return
        except KafkaError as exc:
            self._on_failure(exc, now_ms)
            return
        self._succeed(value)

    def _failed_as_not(self, expected: type[Any], response: object) -> bool:
        """Whether ``response`` is not of ``expected`` type, the call then failed
        (a bug, not a condition to retry): the one check of an answer's type."""
        if isinstance(response, expected):
            return False
        self._fail(KafkaError(
            f"{self.name}: a {type(response).__name__} came back for a request "
            f"expecting a {expected.__name__}"
        ))
        return True

    def _on_failure(self, error: KafkaError, now_ms: int, *, transport: bool = False) -> None:
        """``transport``: the request got no answer (connection failed, timed out)."""
        group_id = self.route.group_id
        if group_id is not None and (
            transport or isinstance(error, (NotCoordinatorError, CoordinatorNotAvailableError))
        ):
            self._routing.forget_coordinator(group_id)
        if transport and self.route.kind is RouteKind.ANY:
            self._routing.cluster.rotate_node()
        if error.retriable:
            self._retry(error, now_ms)
        else:
            self._fail(error)

    # -- coordinator lookup ------------------------------------------------------------------

    def _find_coordinator(self, timeout_ms: int) -> Outgoing:
        group_id = self.route.group_id
        assert group_id is not None
        node = self._routing.cluster.any_node()

        def handle(response: Any, error: KafkaError | None, now_ms: int) -> None:
            self._in_flight = False
            if self.done:
                return
            if error is not None:
                self._routing.cluster.rotate_node()
                self._on_failure(error, now_ms, transport=True)
                return
            if self._failed_as_not(FindCoordinatorResponse, response):
                return
            answer = coordinator_answer(response)
            code, node_id, host, port = answer.error_code, answer.node_id, answer.host, answer.port
            message = answer.message
            if code != 0:
                self._on_failure(error_for_code(code, message), now_ms)
                return
            brokers = self._routing.cluster.brokers
            if node_id not in brokers:
                brokers[node_id] = BrokerInfo(node_id, host, port)
            self._routing.coordinators[group_id] = node_id

        return Outgoing(node, find_coordinator_request(group_id), handle, timeout_ms)
