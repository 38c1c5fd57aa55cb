"""ShareConsumer API rules that need no broker: config errors and misuse."""

from __future__ import annotations

import threading
import time

import pytest

from kafka_share import (
    AcknowledgeType,
    ConfigError,
    ConsumerRecord,
    IllegalStateError,
    ShareConsumer,
    TimestampType,
)
from tests.fresh import run_fresh
from tests.unit.share.helpers import as_dict

# Nothing listens here: these tests never need an answer from a broker.
NOWHERE = "127.0.0.1:9"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("auto.offset.reset", "earliest"),
        ("enable.auto.commit", "false"),
        ("group.instance.id", "static-1"),
        ("isolation.level", "read_committed"),
        ("partition.assignment.strategy", "range"),
        ("session.timeout.ms", "45000"),
        ("heartbeat.interval.ms", "3000"),
        ("group.protocol", "consumer"),
    ],
)
def test_keys_a_share_consumer_rejects(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        ShareConsumer({"bootstrap.servers": NOWHERE, "group.id": "g", key: value})


def test_unknown_key_and_bad_enum_values_name_the_key() -> None:
    with pytest.raises(ConfigError, match=r"max\.poll\.recrods.*max\.poll\.records"):
        ShareConsumer({"bootstrap.servers": NOWHERE, "group.id": "g", "max.poll.recrods": 5})
    with pytest.raises(ConfigError, match=r"share\.acknowledgement\.mode"):
        ShareConsumer(bootstrap_servers=NOWHERE, group_id="g",
                      share_acknowledgement_mode="EXPLICIT")
    with pytest.raises(ConfigError, match=r"share\.acquire\.mode"):
        ShareConsumer(bootstrap_servers=NOWHERE, group_id="g", share_acquire_mode="greedy")
    with pytest.raises(ConfigError, match=r"group\.id"):
        ShareConsumer(bootstrap_servers=NOWHERE)


def test_no_thread_is_left_behind_by_a_bad_config() -> None:
    before = {t.name for t in threading.enumerate()}
    with pytest.raises(ConfigError):
        ShareConsumer(bootstrap_servers=NOWHERE, group_id="g", fetch_max_wait_ms=-1)
    after = {t.name for t in threading.enumerate()}
    assert not {n for n in after - before if n.startswith("kafka-share-network")}


def _record() -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord("t", 0, 5, 0, TimestampType.CREATE_TIME, b"k", b"v", (), None, 1)


def test_misuse_without_a_broker() -> None:
    with ShareConsumer(bootstrap_servers=NOWHERE, group_id="g",
                       share_acknowledgement_mode="explicit") as c:
        with pytest.raises(IllegalStateError, match="not subscribed"):
            c.poll(0)
        with pytest.raises(IllegalStateError, match="cannot be acknowledged"):
            c.acknowledge(_record())
        with pytest.raises(IllegalStateError, match="cannot be acknowledged"):
            c.acknowledge_offset("t", 0, 5, AcknowledgeType.REJECT)
        with pytest.raises(TypeError, match="single string"):
            c.subscribe("orders")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="negative"):
            c.poll(-1)
        assert c.commit_sync(timeout=1.0) == {}
    with pytest.raises(IllegalStateError, match="already been closed"):
        c.poll(0)
    c.close()  # closing twice is harmless


def test_implicit_mode_refuses_acknowledge() -> None:
    with ShareConsumer(bootstrap_servers=NOWHERE, group_id="g") as c, pytest.raises(
        IllegalStateError, match="Implicit acknowledgement"
    ):
        c.acknowledge(_record())


def test_other_thread_is_refused_while_one_uses_the_consumer() -> None:
    with ShareConsumer(bootstrap_servers=NOWHERE, group_id="g") as c:
        c.subscribe(["t"])
        errors: list[BaseException] = []
        started = threading.Event()

        def use_from_other_thread() -> None:
            started.wait(5)
            time.sleep(0.3)  # the owner is inside its one-second poll by now
            try:
                c.subscription()
            except BaseException as exc:
                errors.append(exc)

        t = threading.Thread(target=use_from_other_thread)
        t.start()
        # poll blocks for a second on this thread; the other thread calls in meanwhile.
        started.set()
        c.poll(1.0)
        t.join(5)
        assert errors and isinstance(errors[0], IllegalStateError)
        assert "multi-threaded" in str(errors[0])


def test_wakeup_from_another_thread_interrupts_poll() -> None:
    from kafka_share import WakeupError

    with ShareConsumer(bootstrap_servers=NOWHERE, group_id="g") as c:
        c.subscribe(["t"])
        timer = threading.Timer(0.3, c.wakeup)
        timer.start()
        with pytest.raises(WakeupError):
            c.poll(10.0)
        timer.join()
        assert list(c.poll(0)) == []  # the wakeup was consumed


def test_unusable_tls_files_are_refused_when_the_consumer_is_made() -> None:
    with pytest.raises(ConfigError, match=r"ssl\.cafile='/nonexistent/ca\.pem'"):
        ShareConsumer(bootstrap_servers=NOWHERE, group_id="g", security_protocol="SSL",
                      ssl_cafile="/nonexistent/ca.pem")


def test_acknowledge_accepts_the_wire_values_of_the_types_too() -> None:
    with ShareConsumer(bootstrap_servers=NOWHERE, group_id="g",
                       share_acknowledgement_mode="explicit") as c:
        for ack_type in (1, 2, 3, AcknowledgeType.ACCEPT):
            with pytest.raises(IllegalStateError, match="cannot be acknowledged"):
                c.acknowledge(_record(), ack_type)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="invalid acknowledge type"):
            c.acknowledge(_record(), 7)  # type: ignore[arg-type]


# -- poll() without a timeout blocks (issue 10, defect 11) ----------------------------


def test_poll_without_a_timeout_blocks_until_wakeup() -> None:
    from kafka_share import WakeupError

    with ShareConsumer(bootstrap_servers=NOWHERE, group_id="g") as c:
        c.subscribe(["t"])
        timer = threading.Timer(0.5, c.wakeup)
        timer.start()
        started = time.monotonic()
        try:
            with pytest.raises(WakeupError):
                c.poll()
        finally:
            timer.join()
        assert time.monotonic() - started >= 0.45


def test_close_from_another_thread_ends_a_poll_without_a_timeout() -> None:
    from kafka_share import WakeupError

    c: ShareConsumer[bytes, bytes] = ShareConsumer(bootstrap_servers=NOWHERE, group_id="g")
    c.subscribe(["t"])
    closer = threading.Timer(0.3, c.close, kwargs={"timeout": 2.0})
    closer.start()
    started = time.monotonic()
    try:
        with pytest.raises(WakeupError, match="close"):
            c.poll()
    finally:
        closer.join(10)
    assert not closer.is_alive()
    assert time.monotonic() - started < 5.0
    with pytest.raises(IllegalStateError, match="already been closed"):
        c.poll(0)


# -- a fatal error is not a busy loop (issue 10, defect 10) ---------------------------


def _inject_fatal(c: ShareConsumer[bytes, bytes]) -> None:
    """What the network thread does when the member becomes FATAL."""
    from kafka_share._handoff.events import ErrorEvent
    from kafka_share.errors import GroupAuthorizationFailedError

    c._core._fetch_buffer.add_background(
        ErrorEvent(GroupAuthorizationFailedError("Not authorized to access group g"), fatal=True)
    )


def test_a_fatal_error_is_raised_at_once_then_not_in_a_busy_loop() -> None:
    from kafka_share.errors import GroupAuthorizationFailedError

    with ShareConsumer(bootstrap_servers=NOWHERE, group_id="g") as c:
        c.subscribe(["t"])
        _inject_fatal(c)
        started = time.monotonic()
        with pytest.raises(GroupAuthorizationFailedError, match="closed and recreated"):
            c.poll(5.0)
        assert time.monotonic() - started < 1.0  # the first time: at once
        # A catch-and-continue loop: each later poll waits out its timeout first.
        iterations = 0
        started = time.monotonic()
        while time.monotonic() - started < 1.0:
            iterations += 1
            with pytest.raises(GroupAuthorizationFailedError, match="closed and recreated"):
                c.poll(timeout=0.2)
        assert iterations <= 6


def test_the_wait_before_repeating_a_fatal_error_is_ended_by_wakeup() -> None:
    from kafka_share import WakeupError
    from kafka_share.errors import GroupAuthorizationFailedError

    with ShareConsumer(bootstrap_servers=NOWHERE, group_id="g") as c:
        c.subscribe(["t"])
        _inject_fatal(c)
        with pytest.raises(GroupAuthorizationFailedError):
            c.poll(0)
        timer = threading.Timer(0.2, c.wakeup)
        timer.start()
        started = time.monotonic()
        try:
            with pytest.raises(WakeupError):
                c.poll(30.0)
        finally:
            timer.join()
        assert time.monotonic() - started < 5.0


# -- bad input gets a clear error (issue 10, defect 12) -------------------------------


@pytest.mark.parametrize(
    "name", ["", ".", "..", "has space", "ünïcode", "slash/topic", "a" * 250, "colon:x"]
)
def test_illegal_topic_names_are_refused_at_subscribe(name: str) -> None:
    from kafka_share.errors import InvalidTopicError

    with ShareConsumer(bootstrap_servers=NOWHERE, group_id="g") as c:
        with pytest.raises(InvalidTopicError, match="Invalid topic name") as info:
            c.subscribe(["fine", name])
        assert repr(name) in str(info.value)
        assert c.subscription() == frozenset()


def test_legal_topic_names_are_accepted() -> None:
    with ShareConsumer(bootstrap_servers=NOWHERE, group_id="g") as c:
        names = {"orders", "a", "x" * 249, "with.dots_and-dashes.9", "...", "_internal"}
        c.subscribe(names)
        assert c.subscription() == frozenset(names)


@pytest.mark.parametrize(
    ("timeout", "error", "match"),
    [
        (float("nan"), ValueError, r"poll\(\) timeout .*NaN"),
        (-0.5, ValueError, r"poll\(\) timeout must not be negative, got -0\.5"),
        (float("-inf"), ValueError, r"poll\(\) timeout must not be negative"),
        (True, TypeError, r"poll\(\) timeout must be a number of seconds, got True"),
        ("1", TypeError, r"poll\(\) timeout must be a number of seconds, got '1'"),
    ],
)
def test_bad_poll_timeouts_name_the_argument(timeout: object, error: type, match: str) -> None:
    with ShareConsumer(bootstrap_servers=NOWHERE, group_id="g") as c:
        c.subscribe(["t"])
        with pytest.raises(error, match=match):
            c.poll(timeout)  # type: ignore[arg-type]
        with pytest.raises(error, match=match.replace("poll", "commit_sync")):
            c.commit_sync(timeout)  # type: ignore[arg-type]


def test_an_infinite_poll_timeout_means_no_timeout() -> None:
    from kafka_share import WakeupError

    with ShareConsumer(bootstrap_servers=NOWHERE, group_id="g") as c:
        c.subscribe(["t"])
        c.wakeup()
        with pytest.raises(WakeupError):
            c.poll(float("inf"))


def test_acknowledge_errors_say_why() -> None:
    import uuid

    from kafka_share.models import TopicIdPartition

    with ShareConsumer(bootstrap_servers=NOWHERE, group_id="g",
                       share_acknowledgement_mode="explicit") as c:
        rec = _record()
        with pytest.raises(IllegalStateError, match=r"cannot be acknowledged: t-0 offset 5 "
                           r"was not returned by the last poll"):
            c.acknowledge(rec)
        # Delivered (as the collector would), acknowledged and sent by a commit.
        c._core._in_flight.add_records(TopicIdPartition(uuid.uuid4(), "t", 0), 1, [rec])
        c.acknowledge(rec)
        c._core._rounds.take_acks()
        with pytest.raises(IllegalStateError, match="already acknowledged"):
            c.acknowledge(rec)
        with pytest.raises(IllegalStateError, match=r"acknowledge_offset\(\) only takes"):
            c.acknowledge_offset("t", 0, 5, AcknowledgeType.REJECT)
    with pytest.raises(IllegalStateError, match="closed"):
        c.acknowledge(rec)
    with ShareConsumer(bootstrap_servers=NOWHERE, group_id="g") as c, pytest.raises(
        IllegalStateError, match=r"Implicit acknowledgement.*share\.acknowledgement\.mode"
    ):
        c.acknowledge(_record())


def test_acknowledging_an_earlier_delivery_of_a_record_says_so() -> None:
    import uuid

    from kafka_share.models import TopicIdPartition

    with ShareConsumer(bootstrap_servers=NOWHERE, group_id="g",
                       share_acknowledgement_mode="explicit") as c:
        redelivered = _record()._replace(delivery_count=2)
        c._core._in_flight.add_records(TopicIdPartition(uuid.uuid4(), "t", 0), 1, [redelivered])
        with pytest.raises(IllegalStateError, match=r"earlier delivery.*delivery count 1.*2"):
            c.acknowledge(_record())


def test_poll_arrow_misuse_without_a_broker() -> None:
    with (
        ShareConsumer(
            bootstrap_servers=NOWHERE, group_id="g", value_deserializer=bytes.decode
        ) as consumer,
        pytest.raises(IllegalStateError, match="without key_deserializer/value_deserializer"),
    ):
        consumer.poll_arrow(0)
    with ShareConsumer(bootstrap_servers=NOWHERE, group_id="g") as consumer:
        with pytest.raises(IllegalStateError, match="not subscribed"):
            consumer.poll_arrow(0)
        with pytest.raises(IllegalStateError, match=r"polled with poll_arrow\(\)"):
            consumer.poll(0)  # the kind is fixed by the first poll, even a failed one
        with pytest.raises(IllegalStateError, match="Implicit acknowledgement"):
            consumer.acknowledge_arrow(object())


def test_poll_arrow_without_pyarrow_names_the_extra() -> None:
    script = (
        "import sys; sys.modules['pyarrow'] = None\n"
        "from kafka_share import ShareConsumer\n"
        f"c = ShareConsumer(bootstrap_servers={NOWHERE!r}, group_id='g')\n"
        "try:\n"
        "    c.poll_arrow(0)\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
        "finally:\n"
        "    c.close(timeout=1)\n"
    )
    assert "pip install 'kafka-share[arrow]'" in run_fresh(script)


def test_acknowledge_fast_path_checks_the_record_and_leaves_ranges() -> None:
    # acknowledge() first looks for the record object itself in the span it
    # acknowledged last; partitions taken in turn, equal copies, older deliveries
    # and records sent already must all come out as the full check decides.
    import uuid

    from kafka_share.models import TopicIdPartition

    tips = [TopicIdPartition(uuid.uuid4(), "t", p) for p in (0, 1)]
    with ShareConsumer(bootstrap_servers=NOWHERE, group_id="g",
                       share_acknowledgement_mode="explicit") as c:
        records = [
            [_record()._replace(partition=p, offset=o, delivery_count=2)
             for o in range(p * 50, p * 50 + 20)]
            for p in (0, 1)
        ]
        for tip, recs in zip(tips, records, strict=True):
            c._core._in_flight.add_records(tip, 1, recs)
        for a, b in zip(records[0][:10], records[1][:10], strict=True):  # in turn
            c.acknowledge(a)
            c.acknowledge(b, AcknowledgeType.RELEASE)
        c.acknowledge(records[0][10]._replace(), AcknowledgeType.REJECT)  # an equal copy
        with pytest.raises(IllegalStateError, match="earlier delivery"):
            c.acknowledge(records[0][11]._replace(delivery_count=1))
        for r in records[0][11:] + records[1][10:]:
            c.acknowledge(r)
        acks = {tip: na.acknowledgements for tip, na in c._core._rounds.take_acks().items()}
        assert acks[tips[0]].offset_ranges() == [(0, 9), (10, 10), (11, 19)]
        assert as_dict(acks[tips[0]]) == {o: 3 if o == 10 else 1 for o in range(20)}
        assert acks[tips[1]].offset_ranges() == [(50, 59), (60, 69)]
        assert as_dict(acks[tips[1]]) == {o: 2 if o < 60 else 1 for o in range(50, 70)}
        for r in (records[0][19], records[1][0]):
            with pytest.raises(IllegalStateError, match="already acknowledged"):
                c.acknowledge(r)


@pytest.mark.parametrize("aio", [False, True])
def test_an_authentication_error_ends_a_waiting_call_at_once(aio: bool) -> None:
    # A commit_sync waiting on a broker whose connection failed authentication
    # used to sit until its deadline (default.api.timeout.ms); the error comes
    # at once now, and only once (the next poll does not raise it again).
    import asyncio

    from kafka_share._app.checks import _now_ms
    from kafka_share._handoff.events import AcknowledgeSyncEvent, ErrorEvent
    from kafka_share.aio import AsyncShareConsumer
    from kafka_share.errors import KafkaTimeoutError, SaslAuthenticationError

    error = SaslAuthenticationError("SCRAM-SHA-512: invalid credentials")
    event = AcknowledgeSyncEvent(deadline_ms=_now_ms() + 60_000)

    def check(consumer: object) -> None:
        wait = consumer._core._call_wait_ms  # type: ignore[attr-defined]
        assert wait(event, _now_ms() + 60_000, wakeable=True) is not None  # nothing yet
        consumer._core._fetch_buffer.add_background(ErrorEvent(error))  # type: ignore[attr-defined]
        with pytest.raises(SaslAuthenticationError, match="invalid credentials"):
            wait(event, _now_ms() + 60_000, wakeable=True)
        assert wait(event, _now_ms() + 60_000, wakeable=True) is not None
        with pytest.raises(KafkaTimeoutError):
            wait(event, _now_ms() - 1, wakeable=True)

    config = {"bootstrap.servers": NOWHERE, "group.id": "g"}
    if not aio:
        with ShareConsumer(config) as consumer:
            check(consumer)
        return

    async def main() -> None:
        async with AsyncShareConsumer(config) as consumer:
            check(consumer)

    asyncio.run(main())


def test_subscribe_by_pattern_checks_its_arguments_and_counts_as_subscribed() -> None:
    import re

    with ShareConsumer(bootstrap_servers=NOWHERE, group_id="g") as c:
        with pytest.raises(ValueError, match=r"invalid topic pattern 'a\('"):
            c.subscribe(pattern="a(")
        with pytest.raises(TypeError, match="not both"):
            c.subscribe(["a"], pattern="a.*")
        with pytest.raises(TypeError, match="needs topics"):
            c.subscribe()
        assert c.subscription() == frozenset()
        c.subscribe(pattern=re.compile("orders-.*"))
        # Nothing matched yet (no broker answers): subscribed all the same, so
        # poll waits for records instead of refusing.
        assert c.subscription() == frozenset()
        assert len(c.poll(0)) == 0
        c.subscribe(["t"])
        assert c.subscription() == {"t"}
        c.subscribe(pattern="t.*")
        assert c.subscription() == frozenset()
        c.unsubscribe()
        with pytest.raises(IllegalStateError, match="not subscribed"):
            c.poll(0)
