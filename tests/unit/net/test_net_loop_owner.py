"""LoopOwnership: which thread runs the consumer's I/O loop, and every move between them."""

from __future__ import annotations

import itertools

import pytest

from kafka_share._net.loop_owner import (
    AWAY_MS,
    INSIDE_CHECK_MS,
    TRANSITIONS,
    LoopOwner,
    LoopOwnership,
)


def at(owner: LoopOwner, left_ms: float = 0.0) -> LoopOwnership:
    o = LoopOwnership()
    o._owner = owner
    o._left_ms = left_ms
    return o


def test_it_starts_with_the_network_thread() -> None:
    assert LoopOwnership().owner is LoopOwner.NETWORK


def test_the_first_poll_asks_and_the_network_thread_hands_over_after_its_round() -> None:
    o = LoopOwnership()
    assert o.enter() is False
    assert o.owner is LoopOwner.HANDING_OVER
    assert o.reclaim(0) is True  # the network thread still runs its round
    assert o.hand_over() is True
    assert o.owner is LoopOwner.APPLICATION
    assert o.hand_over() is False  # nothing more to hand over


def test_between_polls_the_application_keeps_the_loop_and_takes_it_back_without_asking() -> None:
    o = at(LoopOwner.APPLICATION)
    o.leave(1_000)
    assert o.owner is LoopOwner.AWAY
    assert o.enter() is True
    assert o.owner is LoopOwner.APPLICATION


def test_the_network_thread_reclaims_only_after_away_ms() -> None:
    o = at(LoopOwner.APPLICATION)
    o.leave(1_000)
    assert o.check_after_ms(1_005) == AWAY_MS - 5
    assert o.reclaim(1_000 + AWAY_MS - 1) is False
    assert o.owner is LoopOwner.AWAY
    assert o.reclaim(1_000 + AWAY_MS) is True
    assert o.owner is LoopOwner.NETWORK


def test_the_network_thread_never_reclaims_from_a_poll_in_progress() -> None:
    o = at(LoopOwner.APPLICATION)
    assert o.reclaim(10**9) is False
    assert o.owner is LoopOwner.APPLICATION
    assert o.check_after_ms(0) == INSIDE_CHECK_MS


def test_release_gives_the_loop_to_the_network_thread_and_says_whether_to_wake_it() -> None:
    for held in (LoopOwner.APPLICATION, LoopOwner.AWAY):
        o = at(held)
        assert o.release() is True
        assert o.owner is LoopOwner.NETWORK
    o = LoopOwnership()
    assert o.release() is False
    o = at(LoopOwner.HANDING_OVER)
    assert o.release() is False
    assert o.owner is LoopOwner.HANDING_OVER


def test_cancel_undoes_a_request_the_network_thread_did_not_answer() -> None:
    o = at(LoopOwner.HANDING_OVER)
    assert o.cancel() is True
    assert o.owner is LoopOwner.NETWORK
    o = at(LoopOwner.APPLICATION)  # handed over meanwhile: the loop is the application's
    assert o.cancel() is False
    assert o.owner is LoopOwner.APPLICATION


def test_leave_outside_the_loop_changes_nothing() -> None:
    for owner in (LoopOwner.NETWORK, LoopOwner.HANDING_OVER, LoopOwner.AWAY):
        o = at(owner, left_ms=5)
        o.leave(99)
        assert o.owner is owner
        assert o._left_ms == 5


def test_a_second_request_or_a_nested_poll_is_refused() -> None:
    for owner in (LoopOwner.HANDING_OVER, LoopOwner.APPLICATION):
        with pytest.raises(RuntimeError, match="cannot move"):
            at(owner).enter()


def test_every_move_the_methods_make_is_in_the_transition_table() -> None:
    """Drive every method from every state: each resulting move is allowed, and
    every allowed move is made by some method."""
    made: set[tuple[LoopOwner, LoopOwner]] = set()
    calls = [
        lambda o: o.enter(), lambda o: o.cancel(), lambda o: o.leave(0),
        lambda o: o.release(), lambda o: o.hand_over(), lambda o: o.reclaim(10**9),
    ]
    for owner, call in itertools.product(LoopOwner, calls):
        o = at(owner)
        try:
            call(o)
        except RuntimeError:
            continue
        if o.owner is not owner:
            assert o.owner in TRANSITIONS[owner]
            made.add((owner, o.owner))
    allowed = {(a, b) for a, targets in TRANSITIONS.items() for b in targets}
    assert made == allowed
