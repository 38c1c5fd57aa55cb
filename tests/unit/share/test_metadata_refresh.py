"""MetadataRefresh: how often a wanted Metadata request may go out."""

from __future__ import annotations

import itertools

from kafka_share.share.metadata_refresh import MetadataRefresh


def make() -> MetadataRefresh:
    return MetadataRefresh(retry_backoff_ms=100, retry_backoff_max_ms=1000,
                           random_source=lambda: 0.5)  # no jitter


def test_one_request_in_flight_at_a_time() -> None:
    r = make()
    assert r.may_send(0)
    r.on_send(0)
    assert not r.may_send(0)
    assert r.time_until_allowed_ms(0) is None  # the answer wakes the driver


def test_failures_back_off_exponentially_up_to_the_max() -> None:
    r = make()
    now = 0
    waits = []
    for _ in range(6):
        r.on_send(now)
        r.on_failure(now)
        wait = r.time_until_allowed_ms(now)
        assert wait is not None
        waits.append(wait)
        now += wait
    assert waits == [100, 200, 400, 800, 1000, 1000]
    assert r.failures == 6


def test_refreshes_asked_for_right_after_an_answer_wait_a_growing_while() -> None:
    """One dead leader: each failing fetch asks again at once; the answers cannot
    say anything new yet, so the requests thin out instead of storming."""
    r = make()
    now = 0
    sent = []
    while now < 10_000:
        if r.may_send(now):
            sent.append(now)
            r.on_send(now)
            r.on_success(now + 2)
        now += 1
    assert len(sent) <= 14
    gaps = [b - a for a, b in itertools.pairwise(sent)]
    assert gaps[:4] == [102, 202, 402, 802]


def test_the_streak_ends_after_a_quiet_period() -> None:
    r = make()
    for t in (0, 200, 500):
        assert r.may_send(t) or t == 0
        r.on_send(t)
        r.on_success(t)
    quiet = 500 + 2001
    r.on_send(quiet)
    r.on_success(quiet)
    assert r.time_until_allowed_ms(quiet) == 100
