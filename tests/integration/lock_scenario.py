"""The lock-expiry scenario of the lock-aware consumption tests, as a function a
test (or a comparison run against another version of the client) can call.

One partition of small records, a group whose acquisition lock is short, one
kafka-share consumer and one confluent-kafka ShareConsumer in the same group,
each spending the same time per record. Every delivery is recorded with its
delivery count and when the application got it, so a test can tell a
duplicate that is legitimate (the lock ran out while the application worked
on the record) from one kafka-share should never produce (it handed out a
record the broker had already given to the other consumer).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import attrs

from kafka_share import ShareConsumer


@attrs.define
class Delivery:
    offset: int
    delivery_count: int
    #: time.monotonic() when the application got it
    at_s: float


@attrs.define
class ScenarioResult:
    ours: list[Delivery]
    theirs: list[Delivery]
    ack_errors: list[str]
    metrics: dict[str, float]

    def duplicates(self) -> set[int]:
        return {d.offset for d in self.ours} & {d.offset for d in self.theirs}

    def lost_by(self) -> tuple[set[int], set[int]]:
        """Duplicates by whose lock ran out: (offsets that went from kafka-share to
        the other consumer, i.e. the other got a higher delivery count; offsets
        that went from the other consumer to kafka-share)."""
        ours: dict[int, list[int]] = {}
        theirs: dict[int, list[int]] = {}
        for d in self.ours:
            ours.setdefault(d.offset, []).append(d.delivery_count)
        for d in self.theirs:
            theirs.setdefault(d.offset, []).append(d.delivery_count)
        from_ours = {o for o in ours.keys() & theirs.keys() if min(ours[o]) < max(theirs[o])}
        from_theirs = {o for o in ours.keys() & theirs.keys() if min(theirs[o]) < max(ours[o])}
        return from_ours, from_theirs

    def handed_out_after_expiry(self) -> list[tuple[Delivery, Delivery]]:
        """kafka-share deliveries of a record the other consumer had already been
        given again (a higher delivery count, earlier): the lock had run out."""
        first_theirs: dict[int, Delivery] = {}
        for d in sorted(self.theirs, key=lambda d: d.at_s):
            first_theirs.setdefault(d.offset, d)
        out = []
        for d in self.ours:
            other = first_theirs.get(d.offset)
            if other is not None and other.delivery_count > d.delivery_count \
                    and other.at_s < d.at_s:
                out.append((d, other))
        return out


def _work(records: int, per_record_s: float) -> None:
    # time.sleep per record would cost ~60 us of timer slack each; one sleep
    # for the batch keeps the pace right.
    time.sleep(records * per_record_s)


def run_scenario(
    bootstrap: str,
    group: str,
    topic: str,
    total: int,
    *,
    per_record_s: float = 0.0005,
    ours_config: Mapping[str, Any] | None = None,
    theirs_config: Mapping[str, Any] | None = None,
    timeout_s: float = 60.0,
    settle_s: float = 2.0,
) -> ScenarioResult:
    """Consume ``total`` records of ``topic`` with both consumers until every
    offset was seen (plus ``settle_s``, for late duplicates)."""
    from confluent_kafka import ShareConsumer as ConfluentShareConsumer

    ours: list[Delivery] = []
    theirs: list[Delivery] = []
    ack_errors: list[str] = []
    stop = threading.Event()
    lock = threading.Lock()

    def seen() -> int:
        with lock:
            return len({d.offset for d in ours} | {d.offset for d in theirs})

    def other() -> None:
        consumer = ConfluentShareConsumer(
            {"bootstrap.servers": bootstrap, "group.id": group, **dict(theirs_config or {})}
        )
        try:
            consumer.subscribe([topic])
            while not stop.is_set():
                messages = [m for m in consumer.poll(0.2) if m.error() is None]
                now = time.monotonic()
                with lock:
                    theirs.extend(
                        Delivery(m.offset(), _confluent_delivery_count(m), now)
                        for m in messages
                    )
                _work(len(messages), per_record_s)
        finally:
            consumer.close()

    def on_ack(offsets: dict[Any, set[int]], error: Exception | None) -> None:
        if error is not None:
            ack_errors.append(f"{sorted(o for s in offsets.values() for o in s)[:5]}: {error}")

    thread = threading.Thread(target=other, daemon=True)
    consumer: ShareConsumer[Any, Any] = ShareConsumer(
        bootstrap_servers=bootstrap, group_id=group, max_poll_records=50,
        **dict(ours_config or {}),
    )
    try:
        consumer.set_acknowledgement_commit_callback(on_ack)
        consumer.subscribe([topic])
        thread.start()
        deadline = time.monotonic() + timeout_s
        settle_until: float | None = None
        while time.monotonic() < deadline:
            records = consumer.poll(0.2)
            now = time.monotonic()
            with lock:
                ours.extend(Delivery(r.offset, r.delivery_count, now) for r in records)
            _work(records.count(), per_record_s)
            if settle_until is None and seen() >= total:
                settle_until = time.monotonic() + settle_s
            if settle_until is not None and time.monotonic() >= settle_until:
                break
        results = consumer.commit_sync(timeout=10.0)
        ack_errors.extend(f"commit_sync {tip}: {e}" for tip, e in results.items() if e)
        metrics = consumer.metrics()
    finally:
        stop.set()
        consumer.close(timeout=5.0)
        thread.join(15.0)
    return ScenarioResult(ours, theirs, ack_errors, metrics)


def _confluent_delivery_count(message: Any) -> int:
    count = getattr(message, "delivery_count", None)
    value = count() if callable(count) else count
    return int(value) if value is not None else 1
