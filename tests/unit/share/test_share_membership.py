"""MembershipManager: transitions, heartbeat contents and timing, errors."""

from __future__ import annotations

import logging
import re
import uuid

import pytest

from kafka_share.errors import IllegalStateError
from kafka_share.models import TopicIdPartition
from kafka_share.protocol.error_codes import ErrorCode
from kafka_share.share.membership import (
    ALLOWED_PREVIOUS,
    NO_HEARTBEAT_DUE_MS,
    SHARE_GROUP_NOT_ENABLED_MESSAGE,
    MembershipManager,
    MemberState,
    generate_member_id,
    resolve_assignment,
)
from tests.unit.share.helpers import fatal_error, heartbeat_in_flight

S = MemberState
T1 = uuid.UUID(int=11)
T2 = uuid.UUID(int=22)
INTERVAL = 5_000


def manager(**kwargs: object) -> MembershipManager:
    defaults: dict[str, object] = {
        "max_poll_interval_ms": 60_000,
        "retry_backoff_ms": 100,
        "retry_backoff_max_ms": 1_000,
        "random_source": lambda: 0.5,  # jitter factor exactly 1.0
    }
    defaults.update(kwargs)
    return MembershipManager("group", **defaults)  # type: ignore[arg-type]


def joined(m: MembershipManager | None = None, now: int = 0) -> MembershipManager:
    """A member that joined at epoch 1 with T1-[0, 1] and acknowledged it."""
    m = m or manager()
    m.subscribe(["foo"])
    m.on_poll(now)
    plan = m.poll(now, coordinator_known=True)
    assert plan is not None
    m.on_heartbeat_response(now, 0, None, 1, INTERVAL, [(T1, [0, 1])])
    ack = m.poll(now, coordinator_known=True)
    assert ack is not None
    assert m.state is S.STABLE
    return m


def ok(m: MembershipManager, now: int, epoch: int, assignment: object = None) -> object:
    return m.on_heartbeat_response(now, 0, None, epoch, INTERVAL, assignment)  # type: ignore[arg-type]


# -- identity ------------------------------------------------------------------


def test_member_id_is_22_char_base64url() -> None:
    member_id = generate_member_id()
    assert len(member_id) == 22
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", member_id)
    assert generate_member_id() != member_id
    assert len(manager().member_id) == 22


def test_explicit_member_id_is_kept_and_validated() -> None:
    assert manager(member_id="abc").member_id == "abc"
    with pytest.raises(ValueError, match="36"):
        manager(member_id="x" * 37)
    with pytest.raises(ValueError, match="group_id"):
        MembershipManager("")


# -- the transition table --------------------------------------------------------


def test_table_matches_java() -> None:
    assert ALLOWED_PREVIOUS[S.JOINING] == {S.FENCED, S.UNSUBSCRIBED, S.STALE}
    assert ALLOWED_PREVIOUS[S.ACKNOWLEDGING] == {S.RECONCILING}
    assert ALLOWED_PREVIOUS[S.LEAVING] == {S.PREPARE_LEAVING}
    assert ALLOWED_PREVIOUS[S.STALE] == {S.LEAVING}
    assert ALLOWED_PREVIOUS[S.UNSUBSCRIBED] == {S.PREPARE_LEAVING, S.LEAVING, S.FENCED}
    assert S.FENCED not in ALLOWED_PREVIOUS[S.FATAL]
    assert set(ALLOWED_PREVIOUS) == set(MemberState)


@pytest.mark.parametrize(
    ("start", "target"),
    [
        (S.UNSUBSCRIBED, S.STABLE),
        (S.UNSUBSCRIBED, S.LEAVING),
        (S.STABLE, S.ACKNOWLEDGING),
        (S.STABLE, S.STALE),
        (S.JOINING, S.UNSUBSCRIBED),
        (S.FATAL, S.JOINING),
        (S.STALE, S.STABLE),
        (S.LEAVING, S.JOINING),
    ],
)
def test_illegal_transitions_raise(start: MemberState, target: MemberState) -> None:
    m = manager()
    m._state = start
    with pytest.raises(IllegalStateError, match=f"{start.name} -> {target.name}"):
        m._transition(target)
    assert m.state is start


def test_every_table_entry_is_accepted() -> None:
    for target, previous in ALLOWED_PREVIOUS.items():
        for start in previous:
            m = manager()
            m._state = start
            m._transition(target)
            assert m.state is target


# -- joining -------------------------------------------------------------------


def test_subscribe_only_joins_on_poll() -> None:
    m = manager(rack_id="rack-a")
    m.subscribe(["b", "a"])
    assert m.state is S.UNSUBSCRIBED
    assert m.poll(0, coordinator_known=True) is None
    m.on_poll(0)
    assert m.state is S.JOINING
    plan = m.poll(0, coordinator_known=True)
    assert plan is not None
    assert plan.group_id == "group"
    assert plan.member_id == m.member_id
    assert plan.member_epoch == 0
    assert plan.rack_id == "rack-a"
    assert plan.subscribed_topic_names == ("a", "b")
    assert heartbeat_in_flight(m)
    assert m.poll(1, coordinator_known=True) is None  # one in flight


def test_no_heartbeat_without_coordinator() -> None:
    m = manager()
    m.subscribe(["a"])
    m.on_poll(0)
    assert m.poll(0, coordinator_known=False) is None
    assert m.time_until_next_heartbeat_ms(0, coordinator_known=False) == NO_HEARTBEAT_DUE_MS
    assert m.time_until_next_heartbeat_ms(0) == 0


def test_empty_rack_is_sent_as_none() -> None:
    m = manager(rack_id="")
    m.subscribe(["a"])
    m.on_poll(0)
    plan = m.poll(0, coordinator_known=True)
    assert plan is not None
    assert plan.rack_id is None


def test_join_assignment_reconcile_acknowledge_stable() -> None:
    m = manager(rack_id="r")
    m.subscribe(["foo"])
    m.on_poll(0)
    m.poll(0, coordinator_known=True)
    outcome = m.on_heartbeat_response(10, 0, None, 1, INTERVAL, [(T1, [0, 1]), (T2, [3])])
    assert outcome.assignment_changed  # type: ignore[union-attr]
    assert m.state is S.ACKNOWLEDGING
    assert m.member_epoch == 1
    assert m.assigned == {T1: frozenset({0, 1}), T2: frozenset({3})}
    assert m.heartbeat_interval_ms == INTERVAL
    # ACKNOWLEDGING heartbeats at once, with the epoch and no unchanged fields.
    ack = m.poll(10, coordinator_known=True)
    assert ack is not None
    assert ack.member_epoch == 1
    assert ack.rack_id is None
    assert ack.subscribed_topic_names is None
    assert m.state is S.STABLE


def test_join_with_empty_assignment_goes_stable() -> None:
    m = manager()
    m.subscribe(["foo"])
    m.on_poll(0)
    m.poll(0, coordinator_known=True)
    outcome = m.on_heartbeat_response(0, 0, None, 1, INTERVAL, [])
    assert not outcome.assignment_changed
    assert m.state is S.STABLE
    assert m.assigned == {}


def test_stable_heartbeats_on_the_interval() -> None:
    m = joined(now=0)
    assert m.poll(1, coordinator_known=True) is None  # the ack is in flight
    ok(m, 20, 1)
    assert m.time_until_next_heartbeat_ms(20) == INTERVAL - 20
    assert m.poll(INTERVAL - 1, coordinator_known=True) is None
    plan = m.poll(INTERVAL, coordinator_known=True)
    assert plan is not None
    assert plan.member_epoch == 1
    assert m.time_until_next_heartbeat_ms(INTERVAL + 1) == 59_999 - INTERVAL  # poll timer


def test_interval_change_resets_the_timer() -> None:
    m = joined(now=0)
    m.on_heartbeat_response(100, 0, None, 1, 2_000, None)
    assert m.heartbeat_interval_ms == 2_000
    assert m.time_until_next_heartbeat_ms(100) == 2_000
    assert m.poll(2_100, coordinator_known=True) is not None


def test_new_assignment_in_stable_reconciles() -> None:
    m = joined()
    ok(m, 1, 1)
    m.poll(INTERVAL, coordinator_known=True)
    outcome = ok(m, INTERVAL, 2, [(T1, [0, 1, 2])])
    assert outcome.assignment_changed  # type: ignore[attr-defined]
    assert m.state is S.ACKNOWLEDGING
    assert m.member_epoch == 2
    assert m.assigned == {T1: frozenset({0, 1, 2})}


def test_same_assignment_keeps_stable() -> None:
    m = joined()
    ok(m, 1, 1)
    m.poll(INTERVAL, coordinator_known=True)
    outcome = ok(m, INTERVAL, 1, [(T1, [1, 0])])
    assert not outcome.assignment_changed  # type: ignore[attr-defined]
    assert m.state is S.STABLE


def test_subscription_change_is_sent_once() -> None:
    m = joined()
    ok(m, 1, 1)
    m.subscribe(["foo", "bar"])
    plan = m.poll(INTERVAL, coordinator_known=True)
    assert plan is not None
    assert plan.subscribed_topic_names == ("bar", "foo")
    ok(m, INTERVAL, 1)
    plan = m.poll(2 * INTERVAL, coordinator_known=True)
    assert plan is not None
    assert plan.subscribed_topic_names is None


def test_resolve_assignment_keeps_unknown_ids_pending() -> None:
    resolved = resolve_assignment({T1: frozenset({0, 1}), T2: frozenset({5})}, {T1: "foo"})
    assert resolved.partitions == {TopicIdPartition(T1, "foo", 0), TopicIdPartition(T1, "foo", 1)}
    assert resolved.unresolved == {T2}
    resolved = resolve_assignment({T1: frozenset({0}), T2: frozenset({5})}, {T1: "f", T2: "b"})
    assert resolved.unresolved == frozenset()
    assert len(resolved.partitions) == 2


# -- fencing -------------------------------------------------------------------


@pytest.mark.parametrize("code", [ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID])
def test_fenced_member_rejoins_with_same_id(code: int) -> None:
    m = joined(manager(rack_id="r"))
    member_id = m.member_id
    outcome = m.on_heartbeat_response(50, code, "fenced", -1, 0, None)
    assert outcome.assignment_changed
    assert outcome.error is None
    assert m.state is S.JOINING
    assert m.member_epoch == 0
    assert m.assigned == {}
    assert m.member_id == member_id
    plan = m.poll(50, coordinator_known=True)  # no backoff after fencing
    assert plan is not None
    assert plan.member_epoch == 0
    assert plan.member_id == member_id
    assert plan.subscribed_topic_names == ("foo",)
    assert plan.rack_id == "r"  # re-sent after the reset


# -- errors --------------------------------------------------------------------


@pytest.mark.parametrize("code", [ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE])
def test_coordinator_errors_ask_for_rediscovery(code: int) -> None:
    m = joined()
    outcome = m.on_heartbeat_response(10, code, None, 0, 0, None)
    assert outcome.coordinator_unknown
    assert m.state is S.STABLE
    assert m.poll(10, coordinator_known=False) is None
    assert m.poll(10, coordinator_known=True) is not None  # at once once found


def test_load_in_progress_backs_off_exponentially() -> None:
    m = manager()
    m.subscribe(["a"])
    m.on_poll(0)
    m.poll(0, coordinator_known=True)
    m.on_heartbeat_response(0, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None, 0, 0, None)
    assert m.state is S.JOINING
    assert m.time_until_next_heartbeat_ms(0) == 100
    assert m.poll(99, coordinator_known=True) is None
    assert m.poll(100, coordinator_known=True) is not None
    m.on_heartbeat_response(100, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None, 0, 0, None)
    assert m.time_until_next_heartbeat_ms(100) == 200
    assert m.poll(299, coordinator_known=True) is None
    assert m.poll(300, coordinator_known=True) is not None


def test_transport_failure_backs_off_and_resends_fields() -> None:
    m = joined(manager(rack_id="r"))
    m.on_heartbeat_failure(10)
    assert not heartbeat_in_flight(m)
    assert m.poll(50, coordinator_known=True) is None
    plan = m.poll(110, coordinator_known=True)
    assert plan is not None
    assert plan.rack_id == "r"
    assert plan.subscribed_topic_names == ("foo",)


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.GROUP_MAX_SIZE_REACHED,
        ErrorCode.UNSUPPORTED_ASSIGNOR,
        ErrorCode.GROUP_ID_NOT_FOUND,
        ErrorCode.UNKNOWN_SERVER_ERROR,
    ],
)
def test_fatal_errors(code: int) -> None:
    m = joined()
    outcome = m.on_heartbeat_response(10, code, "boom", 0, 0, None)
    assert outcome.error is not None
    assert outcome.error.fatal
    assert outcome.error.error_code == code
    assert outcome.error.message == "boom"
    assert m.state is S.FATAL
    assert fatal_error(m) == outcome.error
    assert m.assigned == {}
    assert m.poll(10_000, coordinator_known=True) is None
    m.on_poll(10_000)
    assert m.state is S.FATAL


def test_unsupported_version_explains_how_to_enable() -> None:
    m = manager()
    m.subscribe(["a"])
    m.on_poll(0)
    m.poll(0, coordinator_known=True)
    outcome = m.on_heartbeat_response(0, ErrorCode.UNSUPPORTED_VERSION, None, 0, 0, None)
    assert outcome.error is not None
    assert outcome.error.message == SHARE_GROUP_NOT_ENABLED_MESSAGE
    assert outcome.error.message.startswith(
        "The cluster does not support the share group protocol. To use share groups, the "
        "cluster must have the share group protocol enabled."
    )
    assert "share.version=1" in outcome.error.message
    assert m.state is S.FATAL


def test_topic_authorization_is_raised_but_member_stays() -> None:
    m = joined()
    outcome = m.on_heartbeat_response(10, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "no", 0, 0, None)
    assert outcome.error is not None
    assert not outcome.error.fatal
    assert m.state is S.STABLE
    assert fatal_error(m) is None
    assert m.assigned == {T1: frozenset({0, 1})}
    assert m.poll(50, coordinator_known=True) is None  # backoff
    assert m.poll(110, coordinator_known=True) is not None


def test_fail_from_outside_a_response() -> None:
    m = manager()
    error = m.fail(ErrorCode.UNSUPPORTED_VERSION, "no ShareGroupHeartbeat v1")
    assert error.fatal
    assert m.state is S.FATAL
    assert m.fail(ErrorCode.INVALID_REQUEST, "again") == error  # the first one sticks


# -- leaving -------------------------------------------------------------------


def test_unsubscribe_sends_one_leave_heartbeat() -> None:
    m = joined()
    m.unsubscribe()
    assert m.state is S.LEAVING
    assert m.assigned == {}
    assert m.member_epoch == -1
    assert m.time_until_next_heartbeat_ms(0) == 0
    # The leave goes out even while the ack heartbeat is still in flight.
    plan = m.poll(1, coordinator_known=True)
    assert plan is not None
    assert plan.is_leave
    assert plan.member_epoch == -1
    assert plan.subscribed_topic_names is None
    assert m.state is S.UNSUBSCRIBED
    assert m.poll(2, coordinator_known=True) is None
    # Its response (and the late one of the ack heartbeat) changes nothing.
    assert m.on_heartbeat_response(3, 0, None, -1, INTERVAL, None).error is None
    assert m.on_heartbeat_response(3, ErrorCode.GROUP_ID_NOT_FOUND, None, -1, 0, None).error is None
    assert m.state is S.UNSUBSCRIBED


def test_leave_is_noop_when_not_in_group() -> None:
    m = manager()
    m.leave()
    assert m.state is S.UNSUBSCRIBED
    m.subscribe([])
    assert m.state is S.UNSUBSCRIBED


def test_leave_while_joining_still_sends_leave() -> None:
    m = manager()
    m.subscribe(["a"])
    m.on_poll(0)
    m.leave()
    assert m.state is S.LEAVING
    plan = m.poll(0, coordinator_known=True)
    assert plan is not None
    assert plan.member_epoch == -1


def test_resubscribe_after_leaving_rejoins_on_poll() -> None:
    m = joined()
    m.unsubscribe()
    m.poll(1, coordinator_known=True)
    m.subscribe(["bar"])
    m.on_poll(2)
    assert m.state is S.JOINING
    plan = m.poll(2, coordinator_known=True)
    assert plan is not None
    assert plan.member_epoch == 0
    assert plan.subscribed_topic_names == ("bar",)


# -- max.poll.interval.ms --------------------------------------------------------


def test_poll_timeout_leaves_goes_stale_and_rejoins(caplog: pytest.LogCaptureFixture) -> None:
    m = joined(now=0)
    ok(m, 0, 1)
    member_id = m.member_id
    # Heartbeats keep going while the app polls in time.
    assert m.poll(INTERVAL, coordinator_known=True) is not None
    ok(m, INTERVAL, 1)
    with caplog.at_level(logging.WARNING, logger="kafka_share.share.membership"):
        plan = m.poll(60_000, coordinator_known=True)
    assert plan is not None
    assert plan.member_epoch == -1
    assert "poll timeout has expired" in caplog.text
    assert m.state is S.STALE
    assert m.assigned == {}
    assert m.poll(70_000, coordinator_known=True) is None
    assert m.time_until_next_heartbeat_ms(70_000) == NO_HEARTBEAT_DUE_MS
    # The leave response arrives late and is ignored.
    ok(m, 70_001, -1)
    assert m.state is S.STALE
    m.on_poll(80_000)
    assert m.state is S.JOINING
    rejoin = m.poll(80_000, coordinator_known=True)
    assert rejoin is not None
    assert rejoin.member_epoch == 0
    assert rejoin.member_id == member_id
    assert rejoin.subscribed_topic_names == ("foo",)
    # A late leave response after the rejoin (epoch -1) does not count as joined.
    ok(m, 80_001, -1)
    assert m.state is S.JOINING


def test_poll_resets_the_poll_timer() -> None:
    m = joined(now=0)
    ok(m, 0, 1)
    m.on_poll(50_000)
    plan = m.poll(60_000, coordinator_known=True)
    assert plan is not None
    assert plan.member_epoch == 1  # a regular heartbeat, not a leave
    assert m.state is S.STABLE
    # The heartbeat is in flight, so only the poll timer bounds the wait.
    assert m.time_until_next_heartbeat_ms(60_000) == 50_000
