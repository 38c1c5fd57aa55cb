"""Finding the group coordinator (FindCoordinator with key type GROUP).

A share group is coordinated by the ordinary group coordinator: the lookup
uses key type 0 (GROUP) with the group id as key. Key type 2 (SHARE) addresses
the share-state coordinator, which only brokers talk to.

One lookup is in flight at a time; a failed lookup is retried after an
exponential backoff. A heartbeat error such as NOT_COORDINATOR makes the caller
call :meth:`CoordinatorManager.mark_unknown`, which starts a new lookup.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

import attrs

from kafka_share._log import Logger
from kafka_share._reprs import attrs_repr
from kafka_share.protocol.api_keys import ApiKey
from kafka_share.protocol.error_codes import ErrorCode
from kafka_share.protocol.messages import FindCoordinatorRequest, FindCoordinatorResponse
from kafka_share.share.backoff import ExponentialBackoff, RequestState
from kafka_share.share.unsent import VersionedRequest

__all__ = [
    "COORDINATOR_KEY_TYPE_GROUP",
    "CoordinatorAnswer",
    "CoordinatorManager",
    "CoordinatorNode",
    "coordinator_answer",
    "find_coordinator_request",
]

log = logging.getLogger(__name__)

#: FindCoordinator ``KeyType`` for consumer and share groups.
COORDINATOR_KEY_TYPE_GROUP: Final = 0

#: Errors after which the lookup cannot succeed by retrying; the consumer raises them.
_FATAL_LOOKUP_ERRORS: Final = frozenset(
    {ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.INVALID_REQUEST, ErrorCode.UNSUPPORTED_VERSION}
)
_NO_LOOKUP_DUE_MS: Final = 2**31 - 1


@attrs_repr
@attrs.frozen(slots=True, repr=False)
class CoordinatorNode:
    """Where the group coordinator lives."""

    node_id: int
    host: str
    port: int


@attrs_repr
@attrs.frozen(slots=True, repr=False)
class CoordinatorAnswer:
    """A FindCoordinator answer for one group key, whatever the response version."""

    error_code: int
    node_id: int
    host: str
    port: int
    message: str | None


def find_coordinator_request(group_id: str) -> VersionedRequest:
    """FindCoordinator for ``group_id`` (key type GROUP); the fields depend on the
    version: ``coordinator_keys`` from v4, ``key`` before."""

    def build(version: int) -> FindCoordinatorRequest:
        if version >= 4:
            return FindCoordinatorRequest(
                key_type=COORDINATOR_KEY_TYPE_GROUP, coordinator_keys=[group_id]
            )
        return FindCoordinatorRequest(key=group_id, key_type=COORDINATOR_KEY_TYPE_GROUP)

    return VersionedRequest(ApiKey.FIND_COORDINATOR, build)


def coordinator_answer(response: FindCoordinatorResponse) -> CoordinatorAnswer:
    """The answer for the one key asked (v4+ lists it in ``coordinators``)."""
    if response.coordinators:
        c = response.coordinators[0]
        return CoordinatorAnswer(c.error_code, c.node_id, c.host, c.port, c.error_message)
    return CoordinatorAnswer(
        response.error_code, response.node_id, response.host, response.port,
        response.error_message,
    )


class CoordinatorManager:
    """Coordinator discovery state for one group.

    Args:
        group_id: the group; it is the lookup key.
        retry_backoff_ms: ``retry.backoff.ms``.
        retry_backoff_max_ms: ``retry.backoff.max.ms``.
        random_source: jitter source for the backoff (tests inject one).
        logger: a logger carrying the consumer's identity.
    """

    key_type: Final = COORDINATOR_KEY_TYPE_GROUP

    def __init__(
        self,
        group_id: str,
        *,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1_000,
        random_source: Callable[[], float] | None = None,
        logger: Logger | None = None,
    ) -> None:
        self._log: Logger = logger or log
        if not group_id:
            raise ValueError("group_id must be a non-empty string")
        self.key = group_id
        self._coordinator: CoordinatorNode | None = None
        self._request = RequestState(
            ExponentialBackoff(retry_backoff_ms, retry_backoff_max_ms, random_source=random_source)
        )

    @property
    def coordinator(self) -> CoordinatorNode | None:
        """The coordinator, or None while unknown."""
        return self._coordinator

    @property
    def known(self) -> bool:
        return self._coordinator is not None

    @property
    def in_flight(self) -> bool:
        return self._request.in_flight

    def mark_unknown(self) -> None:
        """Forget the coordinator (NOT_COORDINATOR, disconnect): look it up again."""
        if self._coordinator is not None:
            self._log.info("Group coordinator %s is unavailable; rediscovering", self._coordinator)
        self._coordinator = None

    def poll(self, now_ms: int) -> bool:
        """True if a FindCoordinator request must be sent now; the caller sends it
        (key type :data:`COORDINATOR_KEY_TYPE_GROUP`, key :attr:`key`)."""
        if self._coordinator is not None or not self._request.can_send(now_ms):
            return False
        self._request.on_send(now_ms)
        return True

    def time_until_next_lookup_ms(self, now_ms: int) -> int:
        """How long until :meth:`poll` could return True."""
        if self._coordinator is not None or self._request.in_flight:
            return _NO_LOOKUP_DUE_MS
        return self._request.remaining_backoff_ms(now_ms)

    def on_response(
        self, now_ms: int, error_code: int, node_id: int, host: str, port: int
    ) -> int | None:
        """Apply the FindCoordinator answer for the group.

        Returns None normally; an error code the consumer must raise when the
        lookup cannot succeed by retrying (GROUP_AUTHORIZATION_FAILED, ...). Other
        errors (COORDINATOR_NOT_AVAILABLE while the group topic is created, ...)
        are retried after the backoff.
        """
        if error_code == ErrorCode.NONE:
            if node_id < 0 or not host or not 0 < port < 65536:
                self._log.warning(
                    "FindCoordinator returned an unusable coordinator %d at %s:%d; retrying",
                    node_id,
                    host,
                    port,
                )
                self._request.on_failure(now_ms)
                return None
            self._request.on_success(now_ms)
            self._coordinator = CoordinatorNode(node_id, host, port)
            self._log.info("Discovered group coordinator %s:%d (id %d)", host, port, node_id)
            return None
        self._request.on_failure(now_ms)
        if error_code in _FATAL_LOOKUP_ERRORS:
            return error_code
        self._log.debug("FindCoordinator failed with error %d; retrying after backoff", error_code)
        return None

    def on_failure(self, now_ms: int) -> None:
        """The lookup failed in transport: retry after the backoff."""
        self._request.on_failure(now_ms)
