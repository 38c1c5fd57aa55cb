"""The I/O loop moving between the application thread and the network thread, on a
real broker: every record once, whoever runs the loop when it arrives, and an
interrupted wait that leaves the consumer usable."""

from __future__ import annotations

import _thread
import random
import signal
import threading
import time
from typing import Any

import pytest
from share_helpers import poll_until

from kafka_share._net.loop_owner import AWAY_MS, LoopOwner

pytestmark = pytest.mark.integration


def test_polls_with_pauses_around_the_take_back_deliver_every_record_once(
    topic_factory: Any, share_group: str, kafka_produce: Any, consumer_factory: Any
) -> None:
    topic = topic_factory(partitions=2)
    kafka_produce(topic, [b"a" * 50 for _ in range(2_000)], partition=0)
    kafka_produce(topic, [b"b" * 50 for _ in range(2_000)], partition=1)
    c = consumer_factory(share_group, max_poll_records=100)
    c.subscribe([topic])
    rng = random.Random(932)
    seen: list[tuple[int, int]] = []
    owners: set[LoopOwner] = set()
    deadline = time.monotonic() + 90
    polls = 0
    while len(seen) < 4_000 and time.monotonic() < deadline:
        seen.extend((r.partition, r.offset) for r in c.poll(0.5))
        polls += 1
        owners.add(c._thread._ownership.owner)
        # Pauses below and above AWAY_MS: the application keeps the loop, or the
        # network thread takes it back and hands it over again at the next poll.
        time.sleep(rng.choice([0, 0, 0.005, AWAY_MS / 1000 * 0.5, AWAY_MS / 1000 * 3]))
        owners.add(c._thread._ownership.owner)
        if polls % 7 == 0:
            c.commit_sync(timeout=10.0)  # releases the loop to the network thread
            owners.add(c._thread._ownership.owner)
    assert len(seen) == 4_000
    assert len(set(seen)) == 4_000, "a record was delivered twice"
    assert {LoopOwner.AWAY, LoopOwner.NETWORK} <= owners


def test_a_keyboard_interrupt_while_poll_waits_leaves_the_consumer_usable(
    topic_factory: Any, share_group: str, kafka_produce: Any, consumer_factory: Any,
    request: pytest.FixtureRequest,
) -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("KeyboardInterrupt goes to the main thread")
    # A runner started with SIGINT ignored (a background job of a shell without
    # job control, nohup) makes interrupt_main() do nothing: handle it here.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    request.addfinalizer(lambda: signal.signal(signal.SIGINT, previous))
    topic = topic_factory(partitions=1)
    c = consumer_factory(share_group)
    c.subscribe([topic])
    assert list(c.poll(0.5)) == []  # joined; the application holds the loop
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        c.poll(10)  # waits in the loop's own select: nothing half done
    assert time.monotonic() - started < 5
    timer.join()
    assert c._thread._ownership.owner is LoopOwner.NETWORK
    assert c._thread._driver.died is None
    kafka_produce(topic, [b"after"] * 5, partition=0)
    assert len(poll_until(c, lambda s: len(s) >= 5, timeout_s=30)) == 5
    c.commit_sync(timeout=10.0)
