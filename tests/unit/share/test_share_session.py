"""ShareSession: epochs, partition diff, ack-only, resets and in-flight rules."""

from __future__ import annotations

import uuid

import pytest

from kafka_share.errors import IllegalStateError
from kafka_share.models import AcknowledgeType, TopicIdPartition
from kafka_share.protocol.error_codes import ErrorCode
from kafka_share.share.acknowledgements import AckBatch, Acknowledgements
from kafka_share.share.session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    ShareSession,
    next_epoch,
)
from tests.unit.share.helpers import is_close, is_empty, is_new_session, would_be_empty

FOO = uuid.UUID(int=1)
BAR = uuid.UUID(int=2)
FOO2 = uuid.UUID(int=3)  # "foo" recreated

foo0 = TopicIdPartition(FOO, "foo", 0)
foo1 = TopicIdPartition(FOO, "foo", 1)
bar0 = TopicIdPartition(BAR, "bar", 0)
foo0_new = TopicIdPartition(FOO2, "foo", 0)


def acks(*offsets: int, t: AcknowledgeType = AcknowledgeType.ACCEPT) -> Acknowledgements:
    a = Acknowledgements()
    for o in offsets:
        a.add(o, t)
    return a


def established(*partitions: TopicIdPartition) -> ShareSession:
    session = ShareSession(node_id=1)
    session.build_fetch(partitions)
    assert session.handle_response(ErrorCode.NONE)
    return session


def test_next_epoch_rules() -> None:
    assert next_epoch(0) == 1
    assert next_epoch(41) == 42
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_initial_request_lists_every_partition() -> None:
    session = ShareSession(node_id=3)
    assert session.is_new
    plan = session.build_fetch([foo0, foo1, bar0])
    assert plan.node_id == 3
    assert plan.epoch == INITIAL_EPOCH
    assert is_new_session(plan)
    assert list(plan.topics) == [foo0, foo1, bar0]
    assert all(batches == [] for batches in plan.topics.values())
    assert plan.forgotten == ()
    assert session.in_flight
    assert session.partitions == (foo0, foo1, bar0)
    assert session.topic_names == {FOO: "foo", BAR: "bar"}


def test_initial_request_refuses_acks() -> None:
    session = ShareSession(node_id=1)
    pending = {foo0: acks(1, 2)}
    plan = session.build_fetch([foo0], pending)
    assert plan.acknowledgements == {}
    assert plan.unsendable == pending
    assert plan.topics == {foo0: []}
    assert not plan.is_renew_ack


def test_epoch_advances_on_success() -> None:
    session = established(foo0)
    assert session.epoch == 1
    plan = session.build_fetch([foo0])
    assert plan.epoch == 1
    assert plan.topics == {}
    assert is_empty(plan)
    assert session.handle_response(ErrorCode.NONE)
    assert session.epoch == 2


def test_epoch_wraps_to_one() -> None:
    session = established(foo0)
    session._epoch = 2**31 - 1
    session.build_fetch([foo0])
    session.handle_response(ErrorCode.NONE)
    assert session.epoch == 1


def test_incremental_add_and_forget() -> None:
    session = established(foo0, foo1)
    plan = session.build_fetch([foo1, bar0])
    assert plan.epoch == 1
    assert list(plan.topics) == [bar0]
    assert plan.added == (bar0,)
    assert plan.removed == (foo0,)
    assert plan.forgotten == (foo0,)
    assert set(session.partitions) == {foo1, bar0}


def test_replaced_topic_forgets_old_id_and_adds_new() -> None:
    session = established(foo0, bar0)
    plan = session.build_fetch([foo0_new, bar0])
    assert plan.replaced == (foo0,)
    assert plan.forgotten == (foo0,)
    assert list(plan.topics) == [foo0_new]
    assert plan.added == (foo0_new,)
    assert session.topic_names[FOO2] == "foo"
    assert FOO not in session.topic_names


def test_acks_for_session_partition_ride_in_topics() -> None:
    session = established(foo0)
    a = acks(5, 6, 7)
    plan = session.build_fetch([foo0], {foo0: a})
    assert plan.topics == {foo0: [AckBatch(5, 7, (1,))]}
    assert plan.forgotten == ()
    assert plan.acknowledgements == {foo0: a}
    assert plan.unsendable == {}


def test_ack_only_partition_goes_in_topics_and_forgotten() -> None:
    session = established(foo0)
    a = acks(3)
    plan = session.build_fetch([foo0], {bar0: a})
    assert plan.topics == {bar0: [AckBatch(3, 3, (1,))]}
    assert plan.forgotten == (bar0,)
    assert bar0 not in session.partitions


def test_removed_partition_with_acks_listed_once_in_forgotten() -> None:
    session = established(foo0, foo1)
    plan = session.build_fetch([foo0], {foo1: acks(9)})
    assert plan.forgotten == (foo1,)
    assert plan.topics == {foo1: [AckBatch(9, 9, (1,))]}


def test_empty_acknowledgements_are_ignored() -> None:
    session = established(foo0)
    plan = session.build_fetch([foo0], {foo0: Acknowledgements()})
    assert plan.acknowledgements == {}
    assert plan.topics == {}


def test_renew_sets_is_renew_ack() -> None:
    session = established(foo0)
    plan = session.build_fetch([foo0], {foo0: acks(1, t=AcknowledgeType.RENEW)})
    assert plan.is_renew_ack


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.SHARE_SESSION_NOT_FOUND,
        ErrorCode.INVALID_SHARE_SESSION_EPOCH,
        ErrorCode.SHARE_SESSION_LIMIT_REACHED,
    ],
)
def test_session_errors_reset_to_new_session(code: int) -> None:
    session = established(foo0, foo1)
    session.build_fetch([foo0, foo1])
    assert session.handle_response(code) is False
    assert session.epoch == INITIAL_EPOCH
    assert not session.in_flight
    plan = session.build_fetch([foo0, foo1], {foo0: acks(1)})
    assert is_new_session(plan)
    assert list(plan.topics) == [foo0, foo1]  # the full set again
    assert foo0 in plan.unsendable


def test_other_top_level_error_still_advances() -> None:
    session = established(foo0)
    session.build_fetch([foo0])
    assert session.handle_response(ErrorCode.GROUP_AUTHORIZATION_FAILED) is False
    assert session.epoch == 2


def test_transport_error_resets() -> None:
    session = established(foo0)
    session.build_fetch([foo0])
    session.handle_error()
    assert session.epoch == INITIAL_EPOCH
    assert not session.in_flight
    # An idle disconnect (nothing in flight) also resets.
    session2 = established(foo0)
    session2.handle_error()
    assert session2.is_new


def test_one_request_in_flight() -> None:
    session = ShareSession(node_id=7)
    session.build_fetch([foo0])
    with pytest.raises(IllegalStateError, match="already in flight"):
        session.build_fetch([foo0])
    with pytest.raises(IllegalStateError, match="already in flight"):
        session.build_acknowledge({foo0: acks(1)})
    with pytest.raises(IllegalStateError, match="already in flight"):
        session.build_close()
    session.handle_response(ErrorCode.NONE)
    with pytest.raises(IllegalStateError, match="no share request"):
        session.handle_response(ErrorCode.NONE)


def test_acknowledge_never_at_epoch_zero() -> None:
    session = ShareSession(node_id=1)
    assert session.build_acknowledge({foo0: acks(1)}) is None
    assert not session.in_flight


def test_acknowledge_uses_and_advances_the_epoch() -> None:
    session = established(foo0)
    a = acks(1, 2)
    plan = session.build_acknowledge({foo0: a, bar0: Acknowledgements()})
    assert plan is not None
    assert plan.epoch == 1
    assert plan.topics == {foo0: [AckBatch(1, 2, (1,))]}
    assert plan.acknowledgements == {foo0: a}
    assert not is_close(plan)
    assert session.in_flight
    session.handle_response(ErrorCode.NONE)
    assert session.epoch == 2
    # Nothing to send: no request, nothing in flight.
    assert session.build_acknowledge({foo0: Acknowledgements()}) is None
    assert not session.in_flight


def test_close_uses_final_epoch_and_ends_the_session() -> None:
    session = established(foo0)
    plan = session.build_close({foo0: acks(4, t=AcknowledgeType.RELEASE)})
    assert plan.epoch == FINAL_EPOCH
    assert is_close(plan)
    assert plan.topics == {foo0: [AckBatch(4, 4, (2,))]}
    assert session.handle_response(ErrorCode.NONE)
    assert session.closed
    with pytest.raises(IllegalStateError, match="closed"):
        session.build_fetch([foo0])


def test_close_on_new_session_is_still_sent() -> None:
    session = ShareSession(node_id=1)
    plan = session.build_close()
    assert plan.epoch == FINAL_EPOCH
    assert plan.topics == {}
    assert session.handle_response(ErrorCode.SHARE_SESSION_NOT_FOUND) is False
    assert session.closed


def test_close_failure_in_transport_also_ends_it() -> None:
    session = established(foo0)
    session.build_close()
    session.handle_error()
    assert session.closed
    assert not session.in_flight


def test_would_be_empty() -> None:
    session = ShareSession(node_id=1)
    assert would_be_empty(session, [])
    assert not would_be_empty(session, [foo0])
    # On a new session acks cannot go, so they do not make it non-empty.
    assert would_be_empty(session, [], {foo0: acks(1)})
    session.build_fetch([foo0])
    session.handle_response(ErrorCode.NONE)
    assert would_be_empty(session, [foo0])
    assert would_be_empty(session, [foo0], {foo0: Acknowledgements()})
    assert not would_be_empty(session, [foo0], {foo0: acks(1)})
    assert not would_be_empty(session, [foo0, bar0])
    assert not would_be_empty(session, [])  # would forget foo0
    assert not would_be_empty(session, [foo0_new])  # replaced
    assert not session.in_flight  # a query changes nothing


def test_same_partition_under_two_ids_is_rejected() -> None:
    session = ShareSession(node_id=1)
    with pytest.raises(ValueError, match="two topic ids"):
        session.build_fetch([foo0, foo0_new])
    assert not session.in_flight
