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


def test_fetch_ahead_policy_follows_response_size_and_application_pace() -> None:
    from kafka_share.consumer import may_fetch_ahead

    # A fast application and a small response: fetch ahead.
    assert may_fetch_ahead(967, 0.005, 30_000)
    # A response bigger than half the broker's default lock limit: never.
    assert not may_fetch_ahead(1001, 0.0, 30_000)
    # 1000 records at 3.75 ms each take 3.75 s, twice that is a quarter of 30 s.
    assert may_fetch_ahead(1000, 3.75, 30_000)
    assert not may_fetch_ahead(1000, 3.8, 30_000)
    # A shorter lock tightens the bound.
    assert not may_fetch_ahead(1000, 3.75, 15_000)
    # A slow handler: one record per second, 10 records, 30 s lock -> no.
    assert not may_fetch_ahead(10, 1000.0, 30_000)


def test_a_small_response_means_caught_up_and_no_fetch_ahead() -> None:
    from kafka_share.consumer import caught_up

    assert caught_up(1, 100, 500)  # a live trickle: long-poll instead
    assert not caught_up(967, 990_000, 500)  # a backlog of 1 KiB records
    assert not caught_up(97, 1_000_000, 500)  # 10 KiB records: cut by bytes
    assert not caught_up(500, 50_000, 500)  # a full poll's worth of small records
