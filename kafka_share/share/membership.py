"""Share-group membership: the ShareGroupHeartbeat state machine.

Theory of operation
-------------------
The member id is generated here once (a random UUID in Kafka's base64url form)
and kept for the life of the consumer, across fencing and rejoins. The member
epoch is 0 to join, -1 to leave, and otherwise whatever the broker returned.

States and the moves between them (Java ``MemberState``; :data:`ALLOWED_PREVIOUS`
is the one table and :meth:`MembershipManager._transition` the one place that
changes state)::

    UNSUBSCRIBED --subscribe + on_poll--> JOINING --response with epoch--> RECONCILING
    RECONCILING --assignment applied--> ACKNOWLEDGING --heartbeat built--> STABLE
    STABLE --new assignment--> RECONCILING ...
    in group --FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID--> FENCED --> JOINING (epoch 0, same id)
    in group --unsubscribe / leave--> PREPARE_LEAVING --> LEAVING --heartbeat built--> UNSUBSCRIBED
    in group --max.poll.interval.ms expired--> PREPARE_LEAVING --> LEAVING --> STALE
    STALE --on_poll--> JOINING
    any --fatal error--> FATAL (terminal)

Share groups have no rebalance callbacks and no revocation handshake: a new
assignment is applied as soon as it arrives, and the next heartbeat (sent at
once, in ACKNOWLEDGING) acknowledges it through the epoch.

Heartbeat timing: immediately in JOINING, ACKNOWLEDGING and LEAVING, otherwise
when the interval from the last response has passed since the last send; at
most one heartbeat in flight; none while the coordinator is unknown or in
UNSUBSCRIBED, FENCED, STALE or FATAL. After a failure the next heartbeat waits
for an exponential backoff. Unlike Java, the "immediate" states respect that
backoff too, so a join that keeps failing with COORDINATOR_LOAD_IN_PROGRESS does
not spin.

Topic ids in the assignment are kept as ids; :func:`resolve_assignment` maps
them to names with whatever metadata the caller has and reports the ids still
unknown, so they stay pending until a metadata refresh resolves them.
"""

from __future__ import annotations

import base64
import enum
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

import attrs

from kafka_share._log import Logger
from kafka_share._reprs import attrs_repr
from kafka_share.errors import IllegalStateError
from kafka_share.models import TopicIdPartition
from kafka_share.protocol.error_codes import ErrorCode
from kafka_share.share.backoff import ExponentialBackoff, RequestState

__all__ = [
    "ALLOWED_PREVIOUS",
    "JOIN_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_MEMBER_EPOCH",
    "SHARE_GROUP_NOT_ENABLED_MESSAGE",
    "HeartbeatOutcome",
    "HeartbeatPlan",
    "MemberState",
    "MembershipError",
    "MembershipManager",
    "ResolvedAssignment",
    "generate_member_id",
    "resolve_assignment",
]

log = logging.getLogger(__name__)

JOIN_GROUP_MEMBER_EPOCH: Final = 0
LEAVE_GROUP_MEMBER_EPOCH: Final = -1

#: Wait used by :meth:`MembershipManager.time_until_next_heartbeat_ms` when no
#: heartbeat is due at all.
NO_HEARTBEAT_DUE_MS: Final = 2**31 - 1

SHARE_GROUP_NOT_ENABLED_MESSAGE: Final = (
    "The cluster does not support the share group protocol. To use share groups, the "
    "cluster must have the share group protocol enabled. On Kafka 4.1 or later enable it "
    "with: kafka-features.sh --bootstrap-server <broker> upgrade --feature share.version=1"
)

_FATAL_ERRORS: Final = frozenset(
    {
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.GROUP_MAX_SIZE_REACHED,
        ErrorCode.UNSUPPORTED_ASSIGNOR,
        ErrorCode.UNSUPPORTED_VERSION,
        ErrorCode.GROUP_ID_NOT_FOUND,
    }
)


class MemberState(enum.Enum):
    """Where the member is in the group's lifecycle."""

    #: Not in the group and not trying to be.
    UNSUBSCRIBED = "UNSUBSCRIBED"
    #: Joining (or rejoining) with epoch 0.
    JOINING = "JOINING"
    #: A new assignment arrived and is being applied.
    RECONCILING = "RECONCILING"
    #: The assignment is applied; the next heartbeat acknowledges it.
    ACKNOWLEDGING = "ACKNOWLEDGING"
    #: In the group with its assignment acknowledged.
    STABLE = "STABLE"
    #: The broker fenced the member; it releases its assignment and rejoins.
    FENCED = "FENCED"
    #: About to leave (no callbacks in share groups, so this is brief).
    PREPARE_LEAVING = "PREPARE_LEAVING"
    #: The leave heartbeat (epoch -1) is due.
    LEAVING = "LEAVING"
    #: Left because ``max.poll.interval.ms`` expired; rejoins on the next poll.
    STALE = "STALE"
    #: Unrecoverable error; the consumer raises it from poll.
    FATAL = "FATAL"


_S = MemberState

#: For each state, the states it may be entered from (Java ``MemberState``).
ALLOWED_PREVIOUS: Final[Mapping[MemberState, frozenset[MemberState]]] = {
    _S.UNSUBSCRIBED: frozenset({_S.PREPARE_LEAVING, _S.LEAVING, _S.FENCED}),
    _S.JOINING: frozenset({_S.FENCED, _S.UNSUBSCRIBED, _S.STALE}),
    _S.RECONCILING: frozenset({_S.STABLE, _S.JOINING, _S.ACKNOWLEDGING, _S.RECONCILING}),
    _S.ACKNOWLEDGING: frozenset({_S.RECONCILING}),
    _S.STABLE: frozenset({_S.JOINING, _S.ACKNOWLEDGING, _S.RECONCILING}),
    _S.FENCED: frozenset(
        {_S.JOINING, _S.STABLE, _S.RECONCILING, _S.ACKNOWLEDGING, _S.PREPARE_LEAVING, _S.LEAVING}
    ),
    _S.PREPARE_LEAVING: frozenset(
        {_S.JOINING, _S.STABLE, _S.RECONCILING, _S.ACKNOWLEDGING, _S.UNSUBSCRIBED}
    ),
    _S.LEAVING: frozenset({_S.PREPARE_LEAVING}),
    _S.STALE: frozenset({_S.LEAVING}),
    _S.FATAL: frozenset(
        {
            _S.JOINING,
            _S.STABLE,
            _S.RECONCILING,
            _S.ACKNOWLEDGING,
            _S.PREPARE_LEAVING,
            _S.LEAVING,
            _S.UNSUBSCRIBED,
        }
    ),
}

_IN_GROUP: Final = frozenset({_S.JOINING, _S.RECONCILING, _S.ACKNOWLEDGING, _S.STABLE})
_HEARTBEAT_NOW: Final = frozenset({_S.JOINING, _S.ACKNOWLEDGING})
_NOT_HEARTBEATING: Final = frozenset(
    {_S.UNSUBSCRIBED, _S.FENCED, _S.STALE, _S.FATAL, _S.PREPARE_LEAVING}
)


def generate_member_id() -> str:
    """A new member id: a random UUID as 22 base64url characters without padding.

    This is the form of Java's ``Uuid.toString()``.
    """
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


@attrs_repr
@attrs.frozen(slots=True, repr=False)
class MembershipError:
    """An error the consumer must raise from ``poll``.

    ``fatal`` errors end the membership (state FATAL) and are raised again on
    every later poll; non-fatal ones (TOPIC_AUTHORIZATION_FAILED) are raised
    once while the member stays in the group.
    """

    error_code: int
    message: str
    fatal: bool


@attrs_repr
@attrs.frozen(slots=True, repr=False)
class HeartbeatPlan:
    """The fields of one ShareGroupHeartbeat request.

    ``rack_id`` and ``subscribed_topic_names`` are None when unchanged since the
    last heartbeat the broker accepted (the wire fields are nullable).
    """

    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None
    subscribed_topic_names: tuple[str, ...] | None

    @property
    def is_leave(self) -> bool:
        return self.member_epoch == LEAVE_GROUP_MEMBER_EPOCH


@attrs_repr
@attrs.frozen(slots=True, repr=False)
class HeartbeatOutcome:
    """What the caller must do after a heartbeat response.

    Attributes:
        coordinator_unknown: mark the coordinator unknown and rediscover it.
        error: an error to raise from ``poll`` (see :class:`MembershipError`).
        assignment_changed: the assignment (``MembershipManager.assigned``)
            changed; update what is fetched.
    """

    coordinator_unknown: bool = False
    error: MembershipError | None = None
    assignment_changed: bool = False


@attrs_repr
@attrs.frozen(slots=True, repr=False)
class ResolvedAssignment:
    """An assignment with topic names: the partitions whose topic id is known
    and the topic ids still waiting for metadata."""

    partitions: frozenset[TopicIdPartition]
    unresolved: frozenset[uuid.UUID]


def resolve_assignment(
    assigned: Mapping[uuid.UUID, frozenset[int]], topic_names: Mapping[uuid.UUID, str]
) -> ResolvedAssignment:
    """Map an assignment by topic id to partitions, using the known topic names."""
    partitions: set[TopicIdPartition] = set()
    unresolved: set[uuid.UUID] = set()
    for topic_id, parts in assigned.items():
        name = topic_names.get(topic_id)
        if name is None:
            unresolved.add(topic_id)
            continue
        partitions.update(TopicIdPartition(topic_id, name, p) for p in parts)
    return ResolvedAssignment(frozenset(partitions), frozenset(unresolved))


class MembershipManager:
    """The member's side of a share group (see the module docstring).

    Args:
        group_id: ``group.id``.
        member_id: the member id; generated once when None.
        rack_id: ``client.rack``; an empty string counts as no rack.
        max_poll_interval_ms: ``max.poll.interval.ms``.
        retry_backoff_ms: ``retry.backoff.ms``.
        retry_backoff_max_ms: ``retry.backoff.max.ms``.
        random_source: jitter source for the backoff (tests inject one).
    """

    def __init__(
        self,
        group_id: str,
        *,
        member_id: str | None = None,
        rack_id: str | None = None,
        max_poll_interval_ms: int = 300_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1_000,
        random_source: Callable[[], float] | None = None,
        logger: Logger | None = None,
    ) -> None:
        if not group_id:
            raise ValueError("group_id must be a non-empty string")
        if member_id is not None and not 0 < len(member_id) <= 36:
            raise ValueError(
                f"member_id must be 1 to 36 characters (the broker rejects others), "
                f"got {member_id!r}"
            )
        if max_poll_interval_ms <= 0:
            raise ValueError(f"max_poll_interval_ms must be > 0, got {max_poll_interval_ms}")
        self.group_id = group_id
        self._log: Logger = logger or log
        self.member_id = member_id or generate_member_id()
        self.rack_id = rack_id or None
        self.max_poll_interval_ms = max_poll_interval_ms
        self._state = MemberState.UNSUBSCRIBED
        self._member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self._subscription: frozenset[str] = frozenset()
        self._assigned: dict[uuid.UUID, frozenset[int]] = {}
        self._request = RequestState(
            ExponentialBackoff(retry_backoff_ms, retry_backoff_max_ms, random_source=random_source)
        )
        self._interval_ms = 0
        self._next_heartbeat_ms = 0
        self._last_poll_ms: int | None = None
        self._poll_timer_expired = False
        self._sent_rack = False
        self._sent_subscription: frozenset[str] | None = None
        self._fatal_error: MembershipError | None = None

    # -- read-only state ------------------------------------------------------

    @property
    def state(self) -> MemberState:
        return self._state

    @property
    def member_epoch(self) -> int:
        return self._member_epoch

    @property
    def assigned(self) -> dict[uuid.UUID, frozenset[int]]:
        """The current assignment by topic id (a copy)."""
        return dict(self._assigned)

    @property
    def heartbeat_interval_ms(self) -> int:
        """The interval from the last successful response (0 before any)."""
        return self._interval_ms

    @property
    def in_group(self) -> bool:
        """True while the member is joining or holds a place in the group."""
        return self._state in _IN_GROUP

    def __repr__(self) -> str:
        return (
            f"MembershipManager(group={self.group_id!r}, member={self.member_id}, "
            f"state={self._state.name}, epoch={self._member_epoch})"
        )

    # -- the one place that changes state -------------------------------------

    def _transition(self, new: MemberState) -> None:
        if self._state not in ALLOWED_PREVIOUS[new]:
            raise IllegalStateError(
                f"invalid share group member state transition {self._state.name} -> {new.name}"
            )
        self._log.debug("Member %s: %s -> %s", self.member_id, self._state.name, new.name)
        self._state = new

    # -- application side -----------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        """Set the subscription. The join happens on the next :meth:`on_poll`.

        An empty subscription is an unsubscribe.

        Raises:
            ValueError: a topic name is empty.
        """
        names = frozenset(topics)
        if any(not t for t in names):
            raise ValueError("topic names in a subscription must be non-empty")
        if not names:
            self.unsubscribe()
            return
        if names != self._subscription and self._state in _IN_GROUP:
            # The broker learns the new topics from the next heartbeat: send it
            # now rather than an interval later (a pattern's new topic joins sooner).
            self._next_heartbeat_ms = 0
        self._subscription = names

    def unsubscribe(self) -> None:
        """Drop the subscription and leave the group (one heartbeat with epoch -1)."""
        self._subscription = frozenset()
        state = self._state
        if state in _IN_GROUP:
            self._start_leaving(poll_timer_expired=False)
        elif state is MemberState.FENCED:
            self._assigned = {}
            self._transition(MemberState.UNSUBSCRIBED)
        # UNSUBSCRIBED, STALE, FATAL, PREPARE_LEAVING, LEAVING: nothing to do.

    def leave(self) -> None:
        """Leave the group on close; same as :meth:`unsubscribe`."""
        self.unsubscribe()

    def on_poll(self, now_ms: int) -> None:
        """The application polled: reset the poll timer and join if needed."""
        self._last_poll_ms = now_ms
        if self._subscription and self._state in (MemberState.UNSUBSCRIBED, MemberState.STALE):
            if self._state is MemberState.STALE:
                self._log.info("Member %s rejoins the group after a poll timeout", self.member_id)
            self._transition_to_joining()

    def fail(self, error_code: int, message: str) -> MembershipError:
        """Make the member FATAL for an error found outside a response (for example
        the broker offers no ShareGroupHeartbeat v1)."""
        return self._to_fatal(error_code, message)

    # -- heartbeat scheduling -------------------------------------------------

    def poll(self, now_ms: int, coordinator_known: bool) -> HeartbeatPlan | None:
        """The heartbeat to send now, if any. Building it counts as sending it.

        Also enforces ``max.poll.interval.ms``: when it has expired the member
        sends a leave heartbeat and becomes STALE until the next :meth:`on_poll`.
        """
        if not coordinator_known or self._state in _NOT_HEARTBEATING:
            return None
        if self._state in _IN_GROUP and self._poll_expired(now_ms):
            self._log.warning(
                "Consumer poll timeout has expired. This means the time between subsequent "
                "calls to poll() was longer than the configured max.poll.interval.ms (%d), "
                "which typically implies that the poll loop is spending too much time "
                "processing messages. The member leaves the group and rejoins on the next "
                "poll.",
                self.max_poll_interval_ms,
            )
            self._start_leaving(poll_timer_expired=True)
        if self._state is MemberState.LEAVING:
            # The leave goes out at once whatever is in flight; its response is ignored.
            return self._build(now_ms)
        if self._request.in_flight:
            return None
        if self._request.remaining_backoff_ms(now_ms) > 0:
            return None
        if self._state in _HEARTBEAT_NOW or now_ms >= self._next_heartbeat_ms:
            return self._build(now_ms)
        return None

    def time_until_next_heartbeat_ms(self, now_ms: int, coordinator_known: bool = True) -> int:
        """How long the caller may sleep before :meth:`poll` could send something.

        With the coordinator unknown nothing can be sent, so this is never 0 then
        (the coordinator lookup has its own timer); that avoids a busy loop.
        """
        state = self._state
        if not coordinator_known:
            return NO_HEARTBEAT_DUE_MS
        if state is MemberState.LEAVING:
            return 0
        if state not in _IN_GROUP:
            return NO_HEARTBEAT_DUE_MS
        poll_left = NO_HEARTBEAT_DUE_MS
        if self._last_poll_ms is not None:
            poll_left = max(self._last_poll_ms + self.max_poll_interval_ms - now_ms, 0)
        if self._request.in_flight:
            return poll_left
        wait = self._request.remaining_backoff_ms(now_ms)
        if state not in _HEARTBEAT_NOW:
            wait = max(wait, self._next_heartbeat_ms - now_ms, 0)
        return min(wait, poll_left)

    def _poll_expired(self, now_ms: int) -> bool:
        return (
            self._last_poll_ms is not None
            and now_ms - self._last_poll_ms >= self.max_poll_interval_ms
        )

    def _build(self, now_ms: int) -> HeartbeatPlan:
        state = self._state
        rack = None
        if not self._sent_rack:
            rack = self.rack_id
            self._sent_rack = True
        topics: tuple[str, ...] | None = None
        if state is not MemberState.LEAVING and (
            state is MemberState.JOINING or self._subscription != self._sent_subscription
        ):
            topics = tuple(sorted(self._subscription))
            self._sent_subscription = self._subscription
        plan = HeartbeatPlan(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self._member_epoch,
            rack_id=rack,
            subscribed_topic_names=topics,
        )
        if state is MemberState.LEAVING:
            # Nothing waits for the leave response, so it does not occupy the
            # request slot; the member is out of the group as soon as it is built.
            self._request.reset()
            self._reset_sent_fields()
            if self._poll_timer_expired:
                self._transition(MemberState.STALE)
            else:
                self._transition(MemberState.UNSUBSCRIBED)
            return plan
        self._request.on_send(now_ms)
        self._next_heartbeat_ms = now_ms + self._interval_ms
        if state is MemberState.ACKNOWLEDGING:
            self._transition(MemberState.STABLE)
        return plan

    # -- responses ------------------------------------------------------------

    def on_heartbeat_failure(self, now_ms: int) -> None:
        """The heartbeat failed in transport (disconnect, timeout): back off."""
        self._request.on_failure(now_ms)
        self._next_heartbeat_ms = now_ms
        self._reset_sent_fields()

    def on_heartbeat_response(
        self,
        now_ms: int,
        error_code: int,
        error_message: str | None,
        member_epoch: int,
        heartbeat_interval_ms: int,
        assignment: Sequence[tuple[uuid.UUID, Sequence[int]]] | None,
    ) -> HeartbeatOutcome:
        """Apply a ShareGroupHeartbeat response.

        Args:
            now_ms: current time.
            error_code: the response ``ErrorCode``.
            error_message: the response ``ErrorMessage``.
            member_epoch: the response ``MemberEpoch``.
            heartbeat_interval_ms: the response ``HeartbeatIntervalMs``.
            assignment: ``Assignment.TopicPartitions`` as ``(topic_id,
                partitions)`` pairs, or None when the broker sent no assignment.
        """
        if error_code == ErrorCode.NONE:
            return self._on_success(now_ms, member_epoch, heartbeat_interval_ms, assignment)
        return self._on_error(now_ms, error_code, error_message)

    def _on_success(
        self,
        now_ms: int,
        member_epoch: int,
        heartbeat_interval_ms: int,
        assignment: Sequence[tuple[uuid.UUID, Sequence[int]]] | None,
    ) -> HeartbeatOutcome:
        self._request.on_success(now_ms)
        if heartbeat_interval_ms > 0 and heartbeat_interval_ms != self._interval_ms:
            self._log.info(
                "Member %s: heartbeat interval is now %d ms", self.member_id, heartbeat_interval_ms
            )
            self._interval_ms = heartbeat_interval_ms
            self._next_heartbeat_ms = now_ms + heartbeat_interval_ms
        if self._state not in _IN_GROUP or member_epoch < 0:
            # A response to a leave heartbeat, or one that arrived after the member left.
            self._log.debug(
                "Member %s ignores a heartbeat response in state %s (epoch %d)",
                self.member_id,
                self._state.name,
                member_epoch,
            )
            return HeartbeatOutcome()
        self._member_epoch = member_epoch
        if assignment is None:
            if self._state is MemberState.JOINING:
                # Joined; nothing new to apply: the member is stable with what it has.
                self._transition(MemberState.STABLE)
            return HeartbeatOutcome()
        new = _assignment_by_id(assignment)
        if new == self._assigned:
            if self._state is MemberState.JOINING:
                self._transition(MemberState.STABLE)
            return HeartbeatOutcome()
        # Share groups apply assignments at once: no callbacks, no revocation.
        self._transition(MemberState.RECONCILING)
        self._assigned = new
        self._transition(MemberState.ACKNOWLEDGING)
        self._log.info(
            "Member %s: new assignment at epoch %d: %s",
            self.member_id,
            member_epoch,
            {str(t): sorted(p) for t, p in new.items()},
        )
        return HeartbeatOutcome(assignment_changed=True)

    def _on_error(
        self, now_ms: int, error_code: int, error_message: str | None
    ) -> HeartbeatOutcome:
        state = self._state
        self._reset_sent_fields()
        if state in (MemberState.UNSUBSCRIBED, MemberState.STALE, MemberState.FATAL):
            # The response to a leave heartbeat (or a late one): nothing depends on it.
            self._request.on_failure(now_ms)
            self._log.debug(
                "Member %s ignores heartbeat error %d in state %s",
                self.member_id,
                error_code,
                state.name,
            )
            return HeartbeatOutcome()
        message = error_message or f"ShareGroupHeartbeat failed with error code {error_code}"

        if error_code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            # Retry as soon as the coordinator is found again.
            self._log.info(
                "Member %s: coordinator unavailable (error %d); rediscovering",
                self.member_id,
                error_code,
            )
            self._request.reset()
            self._next_heartbeat_ms = now_ms
            return HeartbeatOutcome(coordinator_unknown=True)

        if error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            self._retry_after_backoff(now_ms)
            return HeartbeatOutcome()

        if error_code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            return self._on_fenced(now_ms, error_code, message)

        if error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            # Raised from poll but the member stays; it recovers once ACLs are fixed.
            self._retry_after_backoff(now_ms)
            return HeartbeatOutcome(error=MembershipError(error_code, message, fatal=False))

        if error_code == ErrorCode.UNSUPPORTED_VERSION:
            message = SHARE_GROUP_NOT_ENABLED_MESSAGE
        self._request.on_failure(now_ms)
        return HeartbeatOutcome(error=self._to_fatal(error_code, message))

    def _retry_after_backoff(self, now_ms: int) -> None:
        self._request.on_failure(now_ms)
        self._next_heartbeat_ms = now_ms

    def _on_fenced(self, now_ms: int, error_code: int, message: str) -> HeartbeatOutcome:
        self._log.info(
            "Member %s was fenced (error %d: %s); releasing its assignment and rejoining "
            "with the same member id",
            self.member_id,
            error_code,
            message,
        )
        had_assignment = bool(self._assigned)
        self._transition(MemberState.FENCED)
        self._assigned = {}
        self._member_epoch = JOIN_GROUP_MEMBER_EPOCH
        if self._subscription:
            self._transition_to_joining()
        else:
            self._transition(MemberState.UNSUBSCRIBED)
        del now_ms
        return HeartbeatOutcome(assignment_changed=had_assignment)

    # -- helpers --------------------------------------------------------------

    def _to_fatal(self, error_code: int, message: str) -> MembershipError:
        error = MembershipError(error_code, message, fatal=True)
        if self._state is MemberState.FATAL:
            return self._fatal_error or error
        self._log.error(
            "Member %s: fatal share group error %d: %s", self.member_id, error_code, message
        )
        if self._state in ALLOWED_PREVIOUS[MemberState.FATAL]:
            self._transition(MemberState.FATAL)
        else:
            # Only reachable through fail() while STALE (FENCED is never observable:
            # it moves on at once). Java's table has no STALE -> FATAL, so take the
            # path the member would take anyway: rejoin, then fail.
            self._transition(MemberState.JOINING)
            self._transition(MemberState.FATAL)
        self._fatal_error = error
        self._assigned = {}
        return error

    def _transition_to_joining(self) -> None:
        self._transition(MemberState.JOINING)
        self._member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self._poll_timer_expired = False
        self._request.reset()
        self._reset_sent_fields()

    def _start_leaving(self, poll_timer_expired: bool) -> None:
        self._poll_timer_expired = poll_timer_expired
        self._transition(MemberState.PREPARE_LEAVING)
        self._assigned = {}
        self._member_epoch = LEAVE_GROUP_MEMBER_EPOCH
        self._transition(MemberState.LEAVING)

    def _reset_sent_fields(self) -> None:
        self._sent_rack = False
        self._sent_subscription = None


def _assignment_by_id(
    assignment: Sequence[tuple[uuid.UUID, Sequence[int]]],
) -> dict[uuid.UUID, frozenset[int]]:
    out: dict[uuid.UUID, frozenset[int]] = {}
    for topic_id, partitions in assignment:
        parts = frozenset(partitions)
        if not parts:
            continue
        out[topic_id] = out.get(topic_id, frozenset()) | parts
    return out
