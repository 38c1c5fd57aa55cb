"""Run in a child process by ``test_wakeup_signal_stress.py``: SIGALRMs whose
handler calls ``ShareConsumer.wakeup()`` while the main thread is blocked in
``poll`` or ``commit_sync``.

Prints one JSON line: how many wakeups ended a call with ``WakeupError`` and the
latency from the handler to the raise. A deadlock shows as the child never
finishing (the parent kills it); a lost wakeup as a call that returns or
raises something else, or a latency close to the call's timeout.
"""

from __future__ import annotations

import json
import random
import signal
import sys
import time
import uuid
from types import FrameType

from kafka_share import ShareConsumer, TimestampType, WakeupError
from kafka_share.consumer import _ThreadWaiting
from kafka_share.models import ConsumerRecord, TopicIdPartition

#: Nothing listens here: poll finds no records and commit_sync waits for a
#: broker that never answers, so both block in their real waiting code.
NOWHERE = "127.0.0.1:9"
CALL_TIMEOUT_S = 5.0


class InertNetworkThread:
    """Stands in for the network thread in "quiet" mode: takes every event and
    answers none, except those ``close`` waits for. Nothing competes for the
    GIL, so the measured latency is the application thread's own."""

    member_id = "stress-member"
    assignment: frozenset[object] = frozenset()

    def submit(self, event: object) -> None:
        future = getattr(event, "future", None)
        if future is not None and type(event).__name__ != "AcknowledgeSyncEvent":
            future.set_result({} if type(event).__name__ == "AcknowledgeOnCloseEvent" else None)

    def flush(self) -> None:
        pass

    # It never lends the loop: the application thread waits as for a network
    # thread that runs it.
    runs_loop = False

    def enter_loop(self) -> bool:
        return False

    def leave_loop(self) -> None:
        pass

    def drive(self, max_wait_ms: int) -> bool:
        return False

    def wake_loop(self) -> None:
        pass

    def stop(self, timeout_ms: int) -> None:
        pass

    def stop_now(self) -> None:
        pass

    def supports_share_v2(self) -> bool:
        return True


def main(iterations: int, mode: str) -> None:
    rng = random.Random(932)
    consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
        bootstrap_servers=NOWHERE, group_id="stress", share_acknowledgement_mode="explicit",
        request_timeout_ms=30_000,
    )
    if mode == "quiet":
        consumer._thread.stop(1000)
        inert = InertNetworkThread()
        consumer._thread = inert  # type: ignore[assignment]
        consumer._core._attach(inert, _ThreadWaiting(inert))  # type: ignore[arg-type]
    consumer.subscribe(["stress"])
    tip = TopicIdPartition(uuid.uuid4(), "stress", 0)
    fired: list[float] = []

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        fired.append(time.perf_counter())
        consumer.wakeup()

    signal.signal(signal.SIGALRM, on_alarm)
    latencies_ms: dict[str, list[float]] = {"poll": [], "commit_sync": []}
    failures: list[str] = []
    for i in range(iterations):
        what = "poll" if i % 2 == 0 else "commit_sync"
        if what == "commit_sync":
            # A record "delivered by node 1" and acknowledged, so commit_sync has
            # something to send and waits for the (unreachable) broker.
            record: ConsumerRecord[bytes, bytes] = ConsumerRecord(
                "stress", 0, i, 0, TimestampType.CREATE_TIME, b"k", b"v", (), None, 1
            )
            consumer._core._in_flight.add_records(tip, 1, [record])
            consumer.acknowledge(record)
        before = len(fired)
        signal.setitimer(signal.ITIMER_REAL, rng.uniform(0.0002, 0.004))
        try:
            if what == "poll":
                consumer.poll(CALL_TIMEOUT_S)
            else:
                consumer.commit_sync(CALL_TIMEOUT_S)
            failures.append(f"{what} #{i} returned instead of raising WakeupError")
        except WakeupError:
            raised = time.perf_counter()
            if len(fired) != before + 1:
                failures.append(f"{what} #{i}: WakeupError without a signal")
            else:
                latencies_ms[what].append((raised - fired[-1]) * 1000.0)
        except Exception as exc:  # reported, not raised: the parent asserts
            failures.append(f"{what} #{i} raised {exc!r}")
        signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    consumer.close(timeout=1.0)
    every = latencies_ms["poll"] + latencies_ms["commit_sync"]
    print(json.dumps({
        "wakeups": len(every),
        "poll": len(latencies_ms["poll"]),
        "commit_sync": len(latencies_ms["commit_sync"]),
        "max_ms": max(every, default=0.0),
        "p50_ms": sorted(every)[len(every) // 2] if every else 0.0,
        "p99_ms": sorted(every)[len(every) * 99 // 100] if every else 0.0,
        "failures": failures[:10],
    }))


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
