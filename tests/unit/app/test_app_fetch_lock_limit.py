"""A poll that hands out the last records of a response does not fetch: the next
poll does, carrying their acks.

With ``max.poll.records`` at or above ``group.share.partition.max.record.locks``
(2000 by default), the draining poll alone holds the limit: a fetch sent then
(carrying only the earlier polls' acks) finds the share-partition full, the
broker parks it for ``fetch.max.wait.ms`` and this poll's acks wait behind it,
once per response (throughput fell from ~300,000 to ~17,000 records/s). The
broker address is unreachable; the test plays the network's part by adding
completed fetches to the buffer and records what the consumer hands to its I/O
shell.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from typing import Any

import pytest

from kafka_share import ShareConsumer
from kafka_share._handoff.events import AcknowledgeAsyncEvent, CompletedShareFetch, FetchEvent
from kafka_share.aio import AsyncShareConsumer
from kafka_share.models import TopicIdPartition
from kafka_share.records.builder import NewRecord, build_batch
from kafka_share.share.fetch_ahead import AHEAD_MAX_HELD
from tests.unit.share.helpers import as_dict

TIP = TopicIdPartition(uuid.UUID(int=31), "jobs", 0)
TIP1 = TopicIdPartition(uuid.UUID(int=31), "jobs", 1)
NODE = 1
MAX_POLL = 2000


def _refusing_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def response(
    count: int, per_batch: int = 500, tip: TopicIdPartition = TIP
) -> CompletedShareFetch:
    """One ShareFetch response of ``tip`` acquiring offsets ``0 .. count - 1``."""
    data = bytearray()
    for start in range(0, count, per_batch):
        n = min(per_batch, count - start)
        data += build_batch(
            [NewRecord(key=None, value=b"v") for _ in range(n)], base_offset=start
        )
    return CompletedShareFetch(NODE, tip, memoryview(bytes(data)), [(0, count - 1, 1)])


class Recorder:
    """What the consumer hands to its I/O shell: (kind, acknowledged offsets of
    TIP), copied when handed over (the engine merges later acks into the same
    objects)."""

    def __init__(self, c: Any) -> None:
        self.events: list[tuple[type, set[int]]] = []
        real = c._core._shell.submit

        def submit(event: Any) -> None:
            acks = getattr(event, "acks", {})
            offsets = set(as_dict(acks[TIP].acknowledgements)) if TIP in acks else set()
            self.events.append((type(event), offsets))
            real(event)

        c._core._shell.submit = submit

    def take(self) -> list[tuple[type, set[int]]]:
        out, self.events = self.events, []
        return out


def fetches(events: list[tuple[type, set[int]]]) -> list[set[int]]:
    """The acknowledged offsets each FetchEvent carries."""
    return [offsets for kind, offsets in events if kind is FetchEvent]


def acked(events: list[tuple[type, set[int]]]) -> set[int]:
    out: set[int] = set()
    for kind, offsets in events:
        if kind in (FetchEvent, AcknowledgeAsyncEvent):
            out |= offsets
    return out


def scenario(
    total: int, poll: Any, acknowledge: Any, recorder: Recorder
) -> list[list[tuple[type, set[int]]]]:
    """Poll until ``total`` records arrived, then once more (nothing buffered);
    returns the events of each poll."""
    per_poll: list[list[tuple[type, set[int]]]] = []
    got = 0
    while got < total:
        records = list(poll())
        got += len(records)
        for r in records:
            acknowledge(r)
        per_poll.append(recorder.take())
    poll()  # the buffer is empty: this poll fetches
    per_poll.append(recorder.take())
    return per_poll


@pytest.mark.parametrize("mode", ["implicit", "explicit"])
def test_the_poll_holding_more_than_half_the_lock_limit_leaves_the_fetch_to_the_next(
    mode: str,
) -> None:
    total = MAX_POLL + AHEAD_MAX_HELD + 500  # the draining poll hands out 1500
    c: ShareConsumer[Any, Any] = ShareConsumer(
        bootstrap_servers=_refusing_address(), group_id="g", max_poll_records=MAX_POLL,
        share_acknowledgement_mode=mode,
    )
    with c:
        c.subscribe(["jobs"])
        recorder = Recorder(c)
        c._core._fetch_buffer.add_all([response(total)])
        ack = c.acknowledge if mode == "explicit" else (lambda r: None)
        first, draining, after = scenario(total, lambda: c.poll(0.05), ack, recorder)
        assert fetches(first) == []
        # The draining poll holds 1500 records: a fetch now would find the
        # share-partition at its limit. Its acks (the first poll's) go out anyway.
        assert fetches(draining) == []
        assert acked(draining) == set(range(MAX_POLL))
        # The next poll fetches, carrying the acks of every record held.
        assert fetches(after) == [set(range(MAX_POLL, total))]


def test_the_async_consumer_leaves_the_fetch_to_the_next_poll_too() -> None:
    """The asyncio consumer collects a poll in slices of 500 records: the slice
    that drains the buffer does not fetch either."""
    total = MAX_POLL + AHEAD_MAX_HELD + 500

    async def main() -> list[list[tuple[type, set[int]]]]:
        c: AsyncShareConsumer[Any, Any] = AsyncShareConsumer(
            bootstrap_servers=_refusing_address(), group_id="g", max_poll_records=MAX_POLL
        )
        await c.subscribe(["jobs"])
        recorder = Recorder(c)
        c._core._fetch_buffer.add_all([response(total)])
        per_poll: list[list[tuple[type, set[int]]]] = []
        got = 0
        while got < total:
            got += (await c.poll(0.05)).count()
            per_poll.append(recorder.take())
        await c.poll(0.05)
        per_poll.append(recorder.take())
        await c.close(timeout=0.5)
        return per_poll

    first, draining, after = asyncio.run(main())
    assert fetches(first) == []
    # The first slice of a poll hands the last poll's acks over (to ride on the
    # next fetch if one goes out soon); the draining slice does not fetch.
    assert acked(draining) == set(range(MAX_POLL))
    assert fetches(draining) == []
    assert fetches(after) == [set(range(MAX_POLL, total))]


@pytest.mark.parametrize("other_assigned", [True, False])
def test_a_large_response_is_fetched_ahead_of_when_its_node_serves_another_partition(
    other_assigned: bool,
) -> None:
    """The record-lock limit is per share-partition: when the node of a response
    of more than AHEAD_MAX_HELD records has just served this consumer another
    partition that is still assigned, the poll that takes the response fetches
    ahead (the broker can acquire that partition's records); otherwise it leaves
    the fetch to the poll after the response is drained."""
    c: ShareConsumer[Any, Any] = ShareConsumer(
        bootstrap_servers=_refusing_address(), group_id="g", max_poll_records=500,
    )
    with c:
        c.subscribe(["jobs"])
        assigned = {TIP.topic_partition, TIP1.topic_partition} if other_assigned else {
            TIP.topic_partition
        }
        c._core._shell._driver.assignment = frozenset(assigned)
        recorder = Recorder(c)
        c._core._fetch_buffer.add_all(
            [response(500, tip=TIP1), response(AHEAD_MAX_HELD + 500)]
        )
        assert len(c.poll(0.05)) == 500  # TIP1's records; TIP's response still queued
        assert fetches(recorder.take()) == []
        assert {r.partition for r in c.poll(0.05)} == {TIP.partition}  # takes TIP's response
        assert fetches(recorder.take()) == ([set()] if other_assigned else [])


def _two_responses(c: Any, first: int) -> None:
    """TIP's response of ``first`` records, then TIP1's of 700 (the last queued,
    worth a fetch ahead when taken: more than a poll takes, at most
    AHEAD_MAX_HELD), with both partitions assigned."""
    c._core._shell._driver.assignment = frozenset({TIP.topic_partition, TIP1.topic_partition})
    c._core._fetch_buffer.add_all([response(first), response(700, tip=TIP1)])


@pytest.mark.parametrize("mode", ["implicit", "explicit"])
def test_a_fetch_ahead_carries_the_acks_of_every_record_of_the_response_before(
    mode: str,
) -> None:
    """The poll holding the tail of a response does not take the last queued one
    (whose taking fetches ahead with the acks made so far): the broker, had it
    been acknowledged part of a record batch, would track the batch record by
    record. The next poll takes it, and its fetch ahead carries the tail's acks."""
    c: ShareConsumer[Any, Any] = ShareConsumer(
        bootstrap_servers=_refusing_address(), group_id="g", max_poll_records=500,
        share_acknowledgement_mode=mode,
    )
    with c:
        c.subscribe(["jobs"])
        recorder = Recorder(c)
        _two_responses(c, 700)
        ack = c.acknowledge if mode == "explicit" else (lambda r: None)
        polls = []
        for _ in range(3):
            records = list(c.poll(0.05))
            for r in records:
                ack(r)
            polls.append(({(r.partition, r.offset) for r in records}, recorder.take()))
        (head, _), (tail, at_tail), (other, at_other) = polls
        assert head == {(0, o) for o in range(500)}
        assert tail == {(0, o) for o in range(500, 700)}  # not TIP1's: they wait
        assert fetches(at_tail) == []
        assert acked(at_tail) == set(range(500))  # lingering, to ride on the next fetch
        assert other == {(1, o) for o in range(500)}
        assert fetches(at_other) == [set(range(500, 700))]


def test_the_async_consumer_s_later_slices_leave_the_last_response_too() -> None:
    """The asyncio consumer collects a poll in slices: a slice after one that
    handed out records holds them too (``holding``)."""

    async def main() -> list[tuple[int, list[tuple[type, set[int]]]]]:
        c: AsyncShareConsumer[Any, Any] = AsyncShareConsumer(
            bootstrap_servers=_refusing_address(), group_id="g", max_poll_records=600
        )
        await c.subscribe(["jobs"])
        recorder = Recorder(c)
        # The second poll's first slice (500 records) ends TIP's response.
        _two_responses(c, 1100)
        polls = []
        for _ in range(3):
            records = await c.poll(0.05)
            polls.append((records.count(), recorder.take()))
        await c.close(timeout=0.5)
        return polls

    (head, _), (tail, at_tail), (other, at_other) = asyncio.run(main())
    assert (head, tail, other) == (600, 500, 600)
    assert fetches(at_tail) == []
    assert fetches(at_other) == [set(range(600, 1100))]
