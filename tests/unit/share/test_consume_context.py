"""ConsumeContext: the consumer's phase and its transition table."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from kafka_share.share.consume.context import ConsumePhase
from tests.unit.share.test_consume_manager import Env


def test_a_member_that_leaves_waits_for_the_next_assignment() -> None:
    env = Env()
    assert env.mgr._ctx.phase is ConsumePhase.MEMBER
    env.mgr.close_sessions()
    assert env.mgr._ctx.phase is ConsumePhase.WAITING_FOR_MEMBER
    assert env.mgr.poll(0) == []  # nothing to close, no member: no request
    env.mgr.member_ready = True
    assert env.mgr.member_ready


def test_closing_is_final_even_if_the_member_joins_meanwhile() -> None:
    env = Env()
    env.mgr.on_close({}, 1_000, Future())
    assert env.mgr._ctx.phase is ConsumePhase.CLOSING
    env.mgr.member_ready = True  # a join that completed while closing
    env.mgr.close_sessions()
    assert env.mgr._ctx.phase is ConsumePhase.CLOSING
    assert not env.mgr.member_ready
    env.mgr.fetch_more = True
    assert env.mgr.poll(0) == []  # a closing consumer never fetches


def test_a_move_the_table_forbids_is_refused() -> None:
    env = Env()
    env.mgr.on_close({}, 1_000, Future())
    with pytest.raises(AssertionError, match="closing -> member"):
        env.mgr._ctx.move_to(ConsumePhase.MEMBER)
