"""AsyncShareConsumer without a broker: the asyncio shell and the facade's contract.

The broker address is unreachable; where records are needed the test plays the
network's part by adding completed fetches to the fetch buffer (as the
synchronous facade's unit tests do).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from kafka_share import AcknowledgeType, IllegalStateError, WakeupError
from kafka_share import aio as aio_facade
from kafka_share._handoff.events import AcknowledgeSyncEvent, CompletedShareFetch, FetchEvent
from kafka_share._net import aio as aio_shell
from kafka_share.aio import AsyncShareConsumer
from kafka_share.models import TopicIdPartition
from kafka_share.records.builder import NewRecord, build_batch
from tests.unit.app.helpers import take_acknowledged
from tests.unit.share.helpers import as_dict

TIP = TopicIdPartition(uuid.UUID(int=21), "jobs", 0)
NODE = 1
T = TypeVar("T")
LOOPS = ["asyncio", "uvloop"]


def _refusing_address() -> str:
    """An address on which connections are refused at once (nothing listens)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"127.0.0.1:{port}"


def run(main: Coroutine[Any, Any, T], loop: str = "asyncio") -> T:
    if loop == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        return uvloop.run(main)  # type: ignore[no-any-return]
    return asyncio.run(main)


def fetch(base: int, count: int, per_batch: int = 50) -> CompletedShareFetch:
    """``count`` records from ``base``, in batches of ``per_batch``."""
    data = bytearray()
    for start in range(base, base + count, per_batch):
        n = min(per_batch, base + count - start)
        data += build_batch(
            [NewRecord(key=None, value=f"v{start + i}".encode()) for i in range(n)],
            base_offset=start,
        )
    return CompletedShareFetch(NODE, TIP, memoryview(bytes(data)), [(base, base + count - 1, 1)])


async def consumer(**config: Any) -> AsyncShareConsumer[Any, Any]:
    c: AsyncShareConsumer[Any, Any] = AsyncShareConsumer(
        bootstrap_servers=_refusing_address(), group_id="g", **config
    )
    await c.subscribe(["jobs"])
    return c


def test_creating_it_outside_an_event_loop_says_so() -> None:
    with pytest.raises(RuntimeError, match="inside a running event loop"):
        AsyncShareConsumer(bootstrap_servers="127.0.0.1:9", group_id="g")


@pytest.mark.slow
@pytest.mark.parametrize("loop", LOOPS)
def test_unreachable_brokers_do_not_busy_loop_the_event_loop(loop: str) -> None:
    """Every retry has a backoff on the loop's timer too: polling for 5 s with no
    broker costs almost no CPU, and the loop stays free for other tasks."""

    async def main() -> tuple[float, float, int]:
        c: AsyncShareConsumer[Any, Any] = AsyncShareConsumer(
            bootstrap_servers=f"{_refusing_address()},{_refusing_address()}", group_id="g",
            reconnect_backoff_ms=50, reconnect_backoff_max_ms=1000,
        )
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        tick = asyncio.create_task(ticker())
        try:
            await c.subscribe(["t"])
            cpu0, wall0 = time.process_time(), time.monotonic()
            deadline = wall0 + 5.0
            while time.monotonic() < deadline:
                assert (await c.poll(max(0.0, deadline - time.monotonic()))).count() == 0
            cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        finally:
            tick.cancel()
            await c.close(timeout=1.0)
        return cpu, wall, ticks

    cpu, wall, ticks = run(main(), loop)
    print(f"CPU while unreachable ({loop}): {cpu:.3f} s in {wall:.1f} s")
    # Includes the ticker's 500 wake-ups; a spinning shell would use the whole core.
    assert cpu < 0.10 * wall, f"{cpu:.2f} s of CPU in {wall:.1f} s"
    assert ticks > 300, "the ticker was starved"


@pytest.mark.parametrize(
    "turns_before_cancel", [2, 1], ids=["between-slices", "before-collecting"]
)
def test_a_cancelled_poll_loses_no_record(
    monkeypatch: pytest.MonkeyPatch, turns_before_cancel: int
) -> None:
    monkeypatch.setattr("kafka_share.aio.SLICE_MS", 0)  # yield at every chance
    monkeypatch.setattr("kafka_share.aio.SLICE_RECORDS", 100)

    async def main() -> list[int]:
        c = await consumer(max_poll_records=500)
        c._core._fetch_buffer.add_all([fetch(0, 1000)])
        task = asyncio.create_task(c.poll(1.0))
        # The poll yields first (the loop's turn), then after each slice: one
        # turn cancels it before it collected anything, two after its first slice.
        for _ in range(turns_before_cancel):
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        carried = c._carry.count() if c._carry is not None else 0
        assert carried == (100 if turns_before_cancel == 2 else 0)
        offsets: list[int] = []
        for _ in range(4):
            offsets.extend(r.offset for r in await c.poll(0.2))
        await c.close(timeout=0.5)
        return offsets

    offsets = run(main())
    assert offsets == list(range(1000)), "records lost or delivered twice"


def test_back_to_back_polls_that_find_records_buffered_let_other_tasks_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each poll finds its records decoded or buffered and never waits: without a
    # yield of its own, an application polling in a loop would starve every
    # other task on the loop until the buffer ran dry.
    monkeypatch.setattr("kafka_share.aio.SLICE_MS", 0)

    async def main() -> int:
        c = await consumer(max_poll_records=100)
        c._core._fetch_buffer.add_all([fetch(0, 1000)])
        turns = 0

        async def other_task() -> None:
            nonlocal turns
            while True:
                turns += 1
                await asyncio.sleep(0)

        other = asyncio.create_task(other_task())
        await asyncio.sleep(0)
        turns = 0
        for _ in range(5):
            assert (await c.poll(1.0)).count() == 100
        other.cancel()
        await c.close(timeout=0.5)
        return turns

    assert run(main()) >= 4


def test_loop_turns_notes_the_turn_the_application_gives_the_loop() -> None:
    # A poll yields only when the loop has had no turn for SLICE_MS: a turn the
    # application gave it between two polls counts, so that poll need not.
    async def main() -> tuple[bool, bool, bool]:
        turns = aio_facade._LoopTurns(asyncio.get_running_loop())
        turns.at -= 1.0
        stale = turns.due()
        turns.watch()
        turns.watch()  # one callback at a time
        before_the_turn = turns.due()
        await asyncio.sleep(0)
        return stale, before_the_turn, turns.due()

    assert run(main()) == (True, True, False)


def test_a_cancelled_waiting_poll_leaves_the_consumer_usable() -> None:
    async def main() -> list[int]:
        c = await consumer()
        task = asyncio.create_task(c.poll(10.0))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        c._core._fetch_buffer.add_all([fetch(0, 3)])
        got = [r.offset for r in await c.poll(1.0)]
        await c.close(timeout=0.5)
        return got

    assert run(main()) == [0, 1, 2]


def test_a_cancelled_commit_sync_keeps_its_acknowledgements_with_the_engine() -> None:
    async def main() -> None:
        c = await consumer(share_acknowledgement_mode="explicit")
        c._core._fetch_buffer.add_all([fetch(0, 2)])
        records = list(await c.poll(1.0))
        for r in records:
            c.acknowledge(r, AcknowledgeType.ACCEPT)
        task = asyncio.create_task(c.commit_sync(timeout=30.0))
        await asyncio.sleep(0.2)  # waiting for the (unreachable) broker
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The acks left the batch for the engine, which still holds the commit.
        (event,) = [e for e in c._shell._driver._pending if isinstance(e, AcknowledgeSyncEvent)]
        assert as_dict(event.acks[TIP].acknowledgements) == {0: 1, 1: 1}
        assert take_acknowledged(c._core._in_flight) == {}
        # Usable afterwards: the next poll goes on (the batch is all acknowledged).
        assert (await c.poll(0)).count() == 0
        await c.close(timeout=0.5)

    run(main())


@pytest.mark.parametrize("loop", LOOPS)
def test_close_from_another_task_ends_a_pending_poll_with_a_clear_error(loop: str) -> None:
    async def main() -> None:
        c = await consumer()
        pending = asyncio.create_task(c.poll())
        await asyncio.sleep(0.1)
        started = time.monotonic()
        await c.close(timeout=2.0)
        with pytest.raises(WakeupError, match=r"poll\(\) was interrupted by close\(\)"):
            await pending
        assert time.monotonic() - started < 2.5
        with pytest.raises(IllegalStateError, match="closed"):
            await c.poll(0)

    run(main(), loop)


def test_wakeup_from_another_thread_ends_a_pending_poll() -> None:
    async def main() -> None:
        c = await consumer()
        threading.Timer(0.2, c.wakeup).start()
        with pytest.raises(WakeupError, match="wakeup"):
            await c.poll(10.0)
        assert (await c.poll(0)).count() == 0  # the wakeup was consumed
        await c.close(timeout=0.5)

    run(main())


def test_another_task_cannot_use_the_consumer_while_a_call_awaits() -> None:
    async def main() -> None:
        c = await consumer(share_acknowledgement_mode="explicit")
        pending = asyncio.create_task(c.poll(5.0))
        await asyncio.sleep(0.05)
        with pytest.raises(IllegalStateError, match=r"another task \(awaiting poll\(\)\)"):
            await c.poll(0)
        with pytest.raises(IllegalStateError, match="another task"):
            c.commit_async()
        c.wakeup()
        with pytest.raises(WakeupError):
            await pending
        await c.close(timeout=0.5)

    run(main())


def test_async_for_accepts_a_record_when_the_iteration_moves_on() -> None:
    async def main() -> dict[int, int]:
        c = await consumer()
        c._core._fetch_buffer.add_all([fetch(0, 5)])
        seen = []
        async for record in c:
            seen.append(record.offset)
            if record.offset == 2:
                break  # 0 and 1 accepted; 2 (being processed) and 3, 4 not
        assert seen == [0, 1, 2]
        (_, acks), = take_acknowledged(c._core._in_flight).values()
        await c.close(timeout=0.5)
        return acks

    assert run(main()) == {0: int(AcknowledgeType.ACCEPT), 1: int(AcknowledgeType.ACCEPT)}


def test_async_for_ends_when_another_task_closes_the_consumer() -> None:
    async def main() -> list[int]:
        c = await consumer()
        c._core._fetch_buffer.add_all([fetch(0, 2)])
        seen: list[int] = []

        async def iterate() -> None:
            async for record in c:
                seen.append(record.offset)

        task = asyncio.create_task(iterate())
        await asyncio.sleep(0.2)
        await c.close(timeout=1.0)
        await asyncio.wait_for(task, 2.0)  # ended, without an error
        return seen

    assert run(main()) == [0, 1]


def test_a_blocked_loop_is_reported_at_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(aio_shell, "DEFAULT_BLOCKED_WARN_MS", 200)

    async def main() -> int:
        c = await consumer()
        await c.poll(0.1)
        time.sleep(1.5)  # blocks the loop: the shell's timer is due within 1 s
        await c.poll(0.1)
        blocked = c.blocked_loop_max_ms
        await c.close(timeout=0.5)
        return blocked

    with caplog.at_level(logging.WARNING, logger="kafka_share"):
        blocked = run(main())
    assert blocked >= 400
    [warning] = [r for r in caplog.records if "event loop was blocked" in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert "session timeout" in warning.getMessage()


def test_a_bug_in_the_shell_fails_the_consumer_instead_of_hanging_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def main() -> None:
        c = await consumer()

        def crash(now_ms: int) -> int:
            raise RuntimeError("boom")

        monkeypatch.setattr(c._shell._driver.engine, "time_until_next_ms", crash)
        c._shell._schedule_round()
        with pytest.raises(Exception, match=r"event-loop driver failed.*boom"):
            await c.poll(2.0)
        # Raised again by every later poll, after its timeout, without spinning.
        cpu0, wall0 = time.process_time(), time.monotonic()
        with pytest.raises(Exception, match=r"event-loop driver failed.*boom"):
            await c.poll(0.5)
        assert time.monotonic() - wall0 >= 0.45
        assert time.process_time() - cpu0 < 0.2, "the repeated fatal error spun the loop"
        await c.close(timeout=0.5)

    run(main())


def test_a_poll_of_its_own_ends_an_async_for_batch() -> None:
    async def main() -> tuple[list[int], list[int]]:
        c = await consumer()
        c._core._fetch_buffer.add_all([fetch(0, 5)])
        async for record in c:
            if record.offset == 1:
                break
        c._core._fetch_buffer.add_all([fetch(5, 3)])
        polled = [r.offset for r in await c.poll(1.0)]  # accepts 0..4 (implicit mode)
        c._core._fetch_buffer.add_all([fetch(8, 2)])
        iterated = []
        async for record in c:
            iterated.append(record.offset)
            if record.offset == 9:
                break
        await c.close(timeout=0.5)
        return polled, iterated

    assert run(main()) == ([5, 6, 7], [8, 9])


@pytest.mark.parametrize("mode", ["implicit", "explicit"])
def test_the_fetch_after_a_large_response_carries_the_acks_of_all_its_records(
    mode: str,
) -> None:
    """A response too large to fetch ahead of (over AHEAD_MAX_HELD records) is
    fetched for by the poll after the one that hands out its last records, so
    that ShareFetch acknowledges all of them: one that left the last ones
    acquired kept the broker on it for tens of milliseconds."""

    async def main() -> tuple[list[list[list[int]]], list[int]]:
        c = await consumer(max_poll_records=500, share_acknowledgement_mode=mode)
        #: the offsets acknowledged by each FetchEvent submitted
        submitted: list[list[int]] = []
        real = c._shell.submit

        def submit(event: Any) -> None:
            if isinstance(event, FetchEvent):  # the acks as submitted (merged later)
                acks = event.acks.get(TIP)
                submitted.append(sorted(as_dict(acks.acknowledgements)) if acks else [])
            real(event)

        c._shell.submit = submit  # type: ignore[method-assign]
        c._core._fetch_buffer.add_all([fetch(0, 1200)])
        per_poll: list[list[list[int]]] = []
        counts: list[int] = []
        for _ in range(4):
            submitted.clear()
            records = await c.poll(0.05)
            counts.append(records.count())
            per_poll.append(list(submitted))
            for r in records:
                if mode == "explicit":
                    c.acknowledge(r)
        await c.close(timeout=0.5)
        return per_poll, counts

    per_poll, counts = run(main())
    assert counts == [500, 500, 200, 0]
    assert per_poll[2] == [], "the poll handing out the last records fetched before their acks"
    assert per_poll[3] == [list(range(1000, 1200))]


def test_a_poll_runs_one_engine_round_for_its_poll_and_fetch_events() -> None:
    """A poll's PollEvent is applied without a round of its own: the FetchEvent's
    round covers both; a poll that hands over nothing else runs the owed round
    before it returns, so the engine still sees the poll at once."""

    async def main() -> tuple[list[str], list[str]]:
        c = await consumer()
        shell = c._shell
        log: list[str] = []
        real_submit, real_round = shell.submit, shell._run_round

        def submit(event: Any) -> None:
            log.append(type(event).__name__)
            real_submit(event)

        def run_round() -> None:
            log.append("round")
            real_round()

        shell.submit = submit  # type: ignore[method-assign]
        shell._run_round = run_round  # type: ignore[method-assign]
        try:
            await c.poll(0)  # nothing buffered: the poll fetches
            fetching = list(log)
            log.clear()
            c._core._fetch_buffer.add_all([fetch(0, 3)])
            # a buffered response is drained before fetching again
            c._core._rounds._prefetch = False
            assert (await c.poll(0)).count() == 3
            return fetching, list(log)
        finally:
            await c.close(timeout=1.0)

    fetching, returning = run(main())
    assert fetching == ["PollEvent", "FetchEvent", "round"]
    assert returning[0] == "PollEvent" and returning.count("round") == 1
    assert returning[-1] == "round"


def test_subscribe_by_pattern_checks_its_arguments_and_counts_as_subscribed() -> None:
    async def main() -> None:
        c: AsyncShareConsumer[Any, Any] = AsyncShareConsumer(
            bootstrap_servers=_refusing_address(), group_id="g"
        )
        try:
            with pytest.raises(ValueError, match=r"invalid topic pattern '\['"):
                await c.subscribe(pattern="[")
            with pytest.raises(TypeError, match="not both"):
                await c.subscribe(["a"], pattern="a.*")
            with pytest.raises(TypeError, match="needs topics"):
                await c.subscribe()
            await c.subscribe(pattern="jobs-.*")
            assert c.subscription() == frozenset()  # nothing matched yet
            assert (await c.poll(0)).count() == 0  # subscribed: no "not subscribed"
            await c.unsubscribe()
            with pytest.raises(IllegalStateError, match="not subscribed"):
                await c.poll(0)
        finally:
            await c.close(timeout=1.0)

    run(main())


def test_receive_marks_are_raised_while_the_application_is_away_and_lowered_before_the_loop_selects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After a round the application asked for (its poll's), it decodes and
    processes while the loop reads nothing: the shell raises the sockets'
    receive marks then, so the broker can send a whole response meanwhile, and
    lowers them on the loop's next iteration, or when the application waits,
    before its selector runs (a smaller response must wake it). Every poll here
    yields to the loop first (SLICE_MS 0): a yield after its rounds would lower
    what they raised before the application is away."""
    monkeypatch.setattr("kafka_share.aio.SLICE_MS", 0)

    async def main() -> None:
        c = await consumer(max_poll_records=100)
        shell = c._shell
        client = shell._client
        seen: list[str] = []

        def raising() -> None:
            seen.append("raise")
            client.low_water_raised = True

        def lowering() -> None:
            if client.low_water_raised:
                seen.append("lower")
            client.low_water_raised = False

        monkeypatch.setattr(client, "raise_low_water_away", raising)
        monkeypatch.setattr(client, "lower_low_water", lowering)
        c._core._fetch_buffer.add_all([fetch(0, 300)])
        assert (await c.poll(1.0)).count() == 100
        # Raised by the poll's rounds, after its own yield: still raised on return.
        assert seen[-1] == "raise" and client.low_water_raised
        await asyncio.sleep(0)  # the loop's next iteration
        assert seen[-1] == "lower" and not client.low_water_raised
        assert (await c.poll(1.0)).count() == 100
        assert client.low_water_raised
        waiting = shell.wait(1000)
        waiting.send(None)  # up to the await of its future: the selector runs next
        assert seen[-1] == "lower" and not client.low_water_raised
        waiting.close()
        await c.close(timeout=0.5)

    run(main())
