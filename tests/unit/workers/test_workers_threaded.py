"""kafka_share.workers.ShareWorker on MockShareConsumer: outcomes, concurrency,
limits, retries in place, stopping (stop(), signals, the bound), metrics."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import tenacity

from kafka_share import AcknowledgeType, ConfigError, ConsumerRecord
from kafka_share.metrics import METRIC_GROUPS, WORKER_METRIC_GROUPS
from kafka_share.testing import MockShareConsumer
from kafka_share.workers import Handled, ShareWorker
from kafka_share.workers._common import BatchSize

Record = ConsumerRecord[bytes, bytes]
ACCEPT, RELEASE, REJECT = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT


class Mocks:
    """A consumer factory for workers: a MockShareConsumer with ``values`` on topic t."""

    def __init__(self, values: list[bytes], **config: object) -> None:
        self.values = values
        self.config = config
        self.made: list[MockShareConsumer[bytes, bytes]] = []

    def __call__(self, config: dict[str, object]) -> MockShareConsumer[bytes, bytes]:
        consumer: MockShareConsumer[bytes, bytes] = MockShareConsumer({**config, **self.config})
        consumer.add_records("t", self.values)
        self.made.append(consumer)
        return consumer

    @property
    def consumer(self) -> MockShareConsumer[bytes, bytes]:
        return self.made[-1]

    def final(self) -> dict[int, AcknowledgeType]:
        """Each offset's last committed acknowledgement."""
        return {offset: t for (_, _, offset), t in self.consumer.committed().items()}


def values(n: int, prefix: str = "v") -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(n)]


def worker(handler: Callable[[Record], object], mocks: Mocks, **kwargs: Any) -> ShareWorker[
    bytes, bytes
]:
    return ShareWorker(handler, topics=["t"], consumer_factory=mocks, **kwargs)


def test_each_record_acknowledged_by_its_outcome() -> None:
    mocks = Mocks([b"ok", b"retry", b"poison", b"ok2"])

    def handle(record: Record) -> str:
        if record.value == b"retry" and record.delivery_count == 1:
            raise TimeoutError("busy")
        if record.value == b"poison":
            raise ValueError("cannot parse")
        return record.value.decode().upper()

    w = worker(handle, mocks, concurrency=2, retryable=(TimeoutError,))
    got = list(w.handled(idle_timeout_s=0.2, first_record_timeout_s=0))
    by = {(h.record.value, h.record.delivery_count): h for h in got}
    assert set(by) == {(b"ok", 1), (b"retry", 1), (b"poison", 1), (b"ok2", 1), (b"retry", 2)}
    assert (by[b"ok", 1].outcome, by[b"ok", 1].result, by[b"ok", 1].error) == (ACCEPT, "OK", None)
    assert by[b"retry", 1].outcome is RELEASE
    assert by[b"retry", 1].error_text == "TimeoutError: busy"
    assert by[b"retry", 2].outcome is ACCEPT
    assert by[b"poison", 1].outcome is REJECT
    assert by[b"poison", 1].error_text == "ValueError: cannot parse"
    assert mocks.final() == {0: ACCEPT, 1: ACCEPT, 2: REJECT, 3: ACCEPT}
    assert mocks.consumer.available() == []
    assert mocks.consumer.closed


def test_run_returns_a_summary_and_metrics_count_outcomes() -> None:
    mocks = Mocks([b"a", b"b", b"poison"])

    def handle(record: Record) -> None:
        time.sleep(0.005)
        if record.value == b"poison":
            raise ValueError("no")

    w = worker(handle, mocks)
    summary = w.run(idle_timeout_s=0.2, handle_signals=False)
    assert (summary.accepted, summary.released, summary.rejected) == (2, 0, 1)
    assert summary.handled == 3 and summary.stopped_by == "idle_timeout_s"
    metrics = w.metrics()
    assert set(metrics) == set(METRIC_GROUPS) | set(WORKER_METRIC_GROUPS)
    assert metrics["records-accepted-total"] == 2
    assert metrics["records-rejected-total"] == 1
    assert metrics["records-released-total"] == 0
    assert 4 <= metrics["handler-time-avg"] < 1000 and metrics["handler-time-max"] >= 5
    assert metrics["handlers-running"] == 0


def test_concurrency_handlers_run_at_once_and_never_more() -> None:
    mocks = Mocks(values(64))
    lock = threading.Lock()
    running = [0]
    most = [0]

    def handle(record: Record) -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1

    started = time.monotonic()
    summary = worker(handle, mocks, concurrency=8).run(max_records=64, handle_signals=False)
    elapsed = time.monotonic() - started
    assert summary.accepted == 64 and summary.stopped_by == "max_records"
    assert most[0] == 8
    # 64 x 20 ms over 8 threads is 160 ms; serial would be 1.3 s.
    assert elapsed < 0.8


def test_max_records_handles_exactly_that_many() -> None:
    mocks = Mocks(values(30), **{"max.poll.records": 7})
    seen: list[bytes] = []
    summary = worker(lambda r: seen.append(r.value), mocks).run(
        max_records=10, handle_signals=False
    )
    assert summary.accepted == 10 and len(seen) == 10
    assert len(mocks.consumer.available()) == 20


def test_worker_config_defaults_and_refusals() -> None:
    w = ShareWorker(print, {"bootstrap.servers": "h:1", "group.id": "g"}, topics=["t"],
                    concurrency=20)
    assert w.config["share.acknowledgement.mode"] == "explicit"
    assert w.config["share.acquire.mode"] == "record_limit"
    assert w.config["share.auto.renew"] is True
    assert w.config["max.poll.records"] == 500  # a cap: each poll asks for fewer
    many = ShareWorker(print, {"bootstrap.servers": "h:1", "group.id": "g"}, topics=["t"],
                       concurrency=200)
    assert many.config["max.poll.records"] == 800
    mine = ShareWorker(print, {"bootstrap.servers": "h:1", "group.id": "g",
                               "max_poll_records": 5, "share.auto.renew": False},
                       topics=["t"])
    assert "max.poll.records" not in mine.config and mine.config["max_poll_records"] == 5
    assert mine.config["share.auto.renew"] is False
    with pytest.raises(ValueError, match=r"share\.acknowledgement\.mode cannot be set"):
        ShareWorker(print, {"bootstrap.servers": "h:1", "group.id": "g",
                            "share.acknowledgement.mode": "implicit"}, topics=["t"])
    with pytest.raises(ConfigError, match=r"group\.id"):
        ShareWorker(print, {"bootstrap.servers": "h:1"}, topics=["t"])
    with pytest.raises(ConfigError, match=r"max\.poll\.recordz"):
        ShareWorker(print, {"bootstrap.servers": "h:1", "group.id": "g",
                            "max.poll.recordz": 1}, topics=["t"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"handler": 3}, "handler must be callable"),
        ({"topics": "t"}, "topics must be a non-empty list"),
        ({"topics": []}, "topics must be a non-empty list"),
        ({"concurrency": 0}, "concurrency must be a positive int"),
        ({"concurrency": True}, "concurrency must be a positive int"),
        ({"retryable": TimeoutError}, "retryable must be a tuple"),
        ({"retryable": (TimeoutError, 3)}, "retryable must be a tuple"),
        ({"stop_timeout_s": -1}, "stop_timeout_s must be a number >= 0"),
        ({"retry": 3}, "retry must be a tenacity.Retrying"),
        ({"retry": tenacity.AsyncRetrying()}, "retry must be a tenacity.Retrying"),
    ],
)
def test_bad_arguments_are_named(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"handler": print, "topics": ["t"], **kwargs}
    handler = args.pop("handler")
    with pytest.raises(ValueError, match=message):
        ShareWorker(handler, consumer_factory=Mocks([]), **args)


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"max_records": 0}, "max_records must be a positive int"),
        ({"max_seconds": 0}, "max_seconds must be a positive number"),
        ({"idle_timeout_s": "1"}, "idle_timeout_s must be a positive number"),
    ],
)
def test_bad_limits_are_named(limits: dict[str, Any], message: str) -> None:
    mocks = Mocks([])
    with pytest.raises(ValueError, match=message):
        worker(print, mocks).run(handle_signals=False, **limits)
    assert mocks.made == []  # refused before a consumer was made


def test_retries_in_place_with_a_tenacity_policy() -> None:
    mocks = Mocks([b"flaky", b"down", b"poison"])
    calls: Counter[bytes] = Counter()

    def handle(record: Record) -> None:
        calls[record.value] += 1
        if record.value == b"flaky" and calls[b"flaky"] < 3:
            raise TimeoutError("busy")
        if record.value == b"down":
            raise TimeoutError("still down")
        if record.value == b"poison":
            raise ValueError("bad")

    policy = tenacity.Retrying(stop=tenacity.stop_after_attempt(3), wait=tenacity.wait_none())
    got = list(worker(handle, mocks, retryable=(TimeoutError,), retry=policy).handled(
        max_records=3
    ))
    outcomes = {h.record.value: (h.outcome, h.error_text) for h in got}
    assert outcomes == {
        b"flaky": (ACCEPT, None),
        b"down": (RELEASE, "TimeoutError: still down"),  # the last error, as itself
        b"poison": (REJECT, "ValueError: bad"),
    }
    # A poison record is never retried in place; the others up to the policy's stop.
    assert calls == {b"flaky": 3, b"down": 3, b"poison": 1}
    assert all(h.record.delivery_count == 1 for h in got)


def test_a_stop_ends_retries_in_place_and_their_waits() -> None:
    mocks = Mocks([b"down"])
    calls = [0]
    w: ShareWorker[bytes, bytes]

    def handle(record: Record) -> None:
        calls[0] += 1
        if calls[0] == 1:  # the stop comes during the 5 s wait that follows
            threading.Timer(0.2, w.stop).start()
        raise TimeoutError("down")

    policy = tenacity.Retrying(stop=tenacity.stop_after_attempt(50), wait=tenacity.wait_fixed(5))
    w = worker(handle, mocks, retryable=(TimeoutError,), retry=policy)
    started = time.monotonic()
    summary = w.run(handle_signals=False)
    assert time.monotonic() - started < 3
    assert calls[0] <= 2 and summary.released == 1 and summary.stopped_by == "stop()"
    assert mocks.final() == {0: RELEASE}


class Gate:
    """A handler that blocks until the test opens the gate (or ``max_s``)."""

    def __init__(self, max_s: float = 20.0) -> None:
        self.opened = threading.Event()
        self.lock = threading.Lock()
        self.started: list[bytes] = []
        self.finished: list[bytes] = []
        self.max_s = max_s

    def __call__(self, record: Record) -> None:
        with self.lock:
            self.started.append(record.value)
        self.opened.wait(self.max_s)
        with self.lock:
            self.finished.append(record.value)

    def wait_started(self, n: int) -> None:
        deadline = time.monotonic() + 5
        while len(self.started) < n and time.monotonic() < deadline:
            time.sleep(0.005)
        assert len(self.started) >= n


def run_in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    return thread, out


def test_stop_releases_unstarted_at_once_and_lets_running_handlers_finish() -> None:
    # The first poll asks for 4 waves of handlers: 16 records.
    mocks = Mocks(values(16))
    gate = Gate()
    w = worker(gate, mocks, concurrency=4)
    thread, out = run_in_thread(lambda: w.run(handle_signals=False))
    gate.wait_started(4)
    w.stop()
    # The 16 records no handler started are released while the 4 still run.
    deadline = time.monotonic() + 3
    while len([t for t in dict(mocks.consumer.acknowledged()).values() if t is RELEASE]) < 12:
        assert time.monotonic() < deadline, "unstarted records were not released"
        time.sleep(0.01)
    assert thread.is_alive() and gate.finished == []
    gate.opened.set()
    thread.join(5)
    summary = out[0]
    assert (summary.accepted, summary.released_on_stop, summary.abandoned) == (4, 12, 0)
    assert summary.stopped_by == "stop()"
    final = mocks.final()
    accepted = {o for o, t in final.items() if t is ACCEPT}
    assert {f"v{o}".encode() for o in accepted} == set(gate.started)
    # Nothing lost: every record is accepted, or back in the group.
    assert len(accepted) + len(mocks.consumer.available()) == 16
    assert mocks.consumer.closed


def test_handlers_running_past_the_stop_bound_are_abandoned_and_released() -> None:
    mocks = Mocks(values(6), **{"max.poll.records": 6})
    gate = Gate(max_s=10)
    w = worker(gate, mocks, concurrency=2, stop_timeout_s=0.3)
    thread, out = run_in_thread(lambda: w.run(handle_signals=False))
    gate.wait_started(2)
    stopped = time.monotonic()
    w.stop()
    thread.join(5)
    assert time.monotonic() - stopped < 2
    summary = out[0]
    assert (summary.accepted, summary.released_on_stop, summary.abandoned) == (0, 6, 2)
    assert len(mocks.consumer.available()) == 6
    gate.opened.set()


def test_stop_with_force_does_not_wait_for_running_handlers() -> None:
    mocks = Mocks(values(4))
    gate = Gate(max_s=10)
    w = worker(gate, mocks, concurrency=2)
    thread, out = run_in_thread(lambda: w.run(handle_signals=False))
    gate.wait_started(2)
    w.stop()
    time.sleep(0.1)
    assert thread.is_alive()  # waiting for the two running handlers
    w.stop(force=True)
    thread.join(2)
    assert not thread.is_alive() and out[0].abandoned == 2
    gate.opened.set()


class _StopLogged(logging.Handler):
    """Set once the worker logs that its stop began (the records no handler
    started are released by then)."""

    def __init__(self) -> None:
        super().__init__()
        self.begun = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "records not started released" in record.getMessage():
            self.begun.set()


@contextlib.contextmanager
def _stop_logged() -> Iterator[_StopLogged]:
    """A :class:`_StopLogged` on the workers' logger, at INFO, for the block."""
    handler = _StopLogged()
    log = logging.getLogger("kafka_share.workers")
    level = log.level
    log.setLevel(logging.INFO)  # the stop's line is INFO
    log.addHandler(handler)
    try:
        yield handler
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


def test_sigterm_stops_in_order_and_a_second_signal_forces() -> None:
    mocks = Mocks(values(8))  # the first poll: 4 waves of 2 handlers
    gate = Gate(max_s=10)
    w = worker(gate, mocks, concurrency=2)
    previous = signal.getsignal(signal.SIGTERM)

    def signals(stop: _StopLogged) -> None:
        gate.wait_started(2)
        os.kill(os.getpid(), signal.SIGTERM)
        # The second signal once the first has begun the stop, however late the
        # main thread gets to it (two signals before it looks would count once).
        assert stop.begun.wait(10), "the worker did not begin its stop"
        os.kill(os.getpid(), signal.SIGTERM)

    with _stop_logged() as stop:
        sender = threading.Thread(target=signals, args=(stop,))
        sender.start()
        summary = w.run()  # the main thread: handle_signals installs handlers
        sender.join()
    assert summary.stopped_by == "SIGTERM"
    assert (summary.released_on_stop, summary.abandoned) == (8, 2)
    assert signal.getsignal(signal.SIGTERM) is previous
    gate.opened.set()


def test_sigint_lets_running_handlers_finish() -> None:
    mocks = Mocks(values(3), **{"max.poll.records": 3})

    with _stop_logged() as stop:

        def handle(record: Record) -> None:
            if record.offset == 0:
                os.kill(os.getpid(), signal.SIGINT)
                # Running until the stop has begun, however late the main thread
                # gets to the signal: records 1 and 2 are still waiting for this
                # (the only) handler thread then, so they are released, not started.
                assert stop.begun.wait(10), "the worker did not begin its stop"

        summary = worker(handle, mocks).run()
    assert summary.stopped_by == "SIGINT"
    assert (summary.accepted, summary.released_on_stop) == (1, 2)
    assert mocks.final() == {0: ACCEPT, 1: RELEASE, 2: RELEASE}


def test_signal_handlers_need_the_main_thread() -> None:
    mocks = Mocks([b"a"])
    w = worker(lambda r: None, mocks)
    thread, out = run_in_thread(lambda: _raises(lambda: w.run(max_records=1)))
    thread.join(5)
    assert isinstance(out[0], RuntimeError)
    assert "handle_signals=False" in str(out[0]) and "main thread" in str(out[0])
    assert mocks.made == []
    thread, out = run_in_thread(lambda: w.run(max_records=1, handle_signals=False))
    thread.join(5)
    assert out[0].accepted == 1


def _raises(fn: Callable[[], Any]) -> BaseException | None:
    try:
        fn()
    except BaseException as exc:
        return exc
    return None


def test_system_exit_from_a_handler_releases_its_record_and_stops() -> None:
    mocks = Mocks(values(3), **{"max.poll.records": 1})

    def handle(record: Record) -> None:
        if record.offset == 1:
            raise SystemExit(3)

    with pytest.raises(SystemExit):
        worker(handle, mocks).run(handle_signals=False)
    assert mocks.final() == {0: ACCEPT, 1: RELEASE}
    assert len(mocks.consumer.available()) == 2 and mocks.consumer.closed


def test_undeserializable_records_are_rejected_without_the_handler() -> None:
    def value(data: bytes) -> str:
        if data == b"\xff":
            raise ValueError("not utf-8")
        return data.decode()

    consumer: MockShareConsumer[bytes, str] = MockShareConsumer(
        share_acknowledgement_mode="explicit", value_deserializer=value
    )
    consumer.add_records("t", [b"a", b"\xff", b"b"])
    seen: list[str] = []
    w: ShareWorker[bytes, str] = ShareWorker(
        lambda r: seen.append(r.value), topics=["t"], consumer_factory=lambda cfg: consumer
    )
    summary = w.run(idle_timeout_s=0.2, handle_signals=False)
    assert seen == ["a", "b"]
    assert (summary.accepted, summary.rejected) == (2, 1)
    assert {o: t for (_, _, o), t in consumer.committed().items()} == {
        0: ACCEPT, 1: REJECT, 2: ACCEPT,
    }


def test_outcomes_reach_the_broker_while_the_poll_is_being_handled() -> None:
    mocks = Mocks(values(2), **{"max.poll.records": 2})
    seen_committed = threading.Event()

    def handle(record: Record) -> None:
        if record.offset == 1:
            # The other record's ACCEPT is sent within 0.2 s, before this one ends.
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                try:
                    if ("t", 0, 0) in dict(mocks.consumer.committed()):
                        seen_committed.set()
                        return
                except RuntimeError:  # the mock changed under us: look again
                    pass
                time.sleep(0.01)

    worker(handle, mocks, concurrency=2).run(max_records=2, handle_signals=False)
    assert seen_committed.is_set()


def test_closing_the_generator_early_releases_what_was_not_acknowledged() -> None:
    mocks = Mocks(values(10), **{"max.poll.records": 10})
    w = worker(lambda r: time.sleep(0.01), mocks, concurrency=1)
    gen = w.handled()
    first = next(gen)
    assert isinstance(first, Handled) and first.outcome is ACCEPT
    gen.close()
    assert mocks.consumer.closed
    assert len(mocks.consumer.available()) + len(
        [t for t in mocks.final().values() if t is ACCEPT]
    ) == 10


def test_one_run_at_a_time_and_runs_again_after() -> None:
    mocks = Mocks(values(2))
    w = worker(lambda r: None, mocks)
    gen = w.handled(max_records=1)
    next(gen)
    with pytest.raises(RuntimeError, match="already running"):
        w.run(handle_signals=False)
    gen.close()
    assert w.run(max_records=1, handle_signals=False).accepted == 1
    assert len(mocks.made) == 2


def test_a_stop_before_run_ends_that_run_at_once_and_only_that_one() -> None:
    mocks = Mocks(values(3))
    w = worker(lambda r: None, mocks)
    w.stop()
    summary = w.run(handle_signals=False)
    assert (summary.handled, summary.stopped_by) == (0, "stop()")
    assert len(mocks.consumer.available()) == 3 and mocks.consumer.closed
    assert w.run(max_records=3, handle_signals=False).accepted == 3


def test_a_stop_while_polling_ends_the_poll() -> None:
    consumer: MockShareConsumer[bytes, bytes] = MockShareConsumer(
        share_acknowledgement_mode="explicit"
    )
    w: ShareWorker[bytes, bytes] = ShareWorker(
        lambda r: None, topics=["t"], consumer_factory=lambda cfg: consumer
    )
    # The mock never waits: the stop comes from inside a poll, as a signal would.
    consumer.schedule_poll_task(w.stop)
    summary = w.run(handle_signals=False)
    assert summary.stopped_by == "stop()" and consumer.closed


def test_handled_checks_its_limits_when_called() -> None:
    with pytest.raises(ValueError, match="max_records must be a positive int"):
        worker(print, Mocks([])).handled(max_records=-1)


def test_polls_ask_for_enough_waves_of_handlers_to_last_a_while() -> None:
    size = BatchSize(concurrency=16, max_poll_records=500)
    assert size.records(None) == 64  # 4 waves before a handler time is known
    for _ in range(50):
        size.handled(0.02)
    assert size.records(None) == 16 * 15  # 15 x 20 ms = 0.3 s
    assert size.records(100) == 100 and size.records(0) == 1
    for _ in range(200):
        size.handled(5.0)
    assert size.records(None) == 64  # slow handlers: 4 waves, records wait little
    fast = BatchSize(concurrency=2, max_poll_records=50)
    for _ in range(50):
        fast.handled(0.0001)
    assert fast.records(None) == 50  # max.poll.records is the cap
