"""Connections dropped at random points never hang the consumer and lose nothing.

Regression for a connection closed while *sending*: its socket stayed registered in
the selector until the end of the poll, so a new connection reusing the descriptor
number made ``selector.register`` raise and killed the network thread. Closed
connections are now unregistered at once and reaped before reconnecting.

The chaos scenario (issue 5, scenario 5) runs a dedicated single-node cluster
behind a :class:`TcpProxy` advertised as the broker's address.
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from share_helpers import poll_until, proxied_cluster

from kafka_share import AcknowledgeType, ShareConsumer, TopicIdPartition
from kafka_share._net.client import NetworkClient, Purpose, monotonic_ms
from kafka_share.errors import KafkaError, NetworkError
from kafka_share.protocol.messages import MetadataRequest, MetadataResponse
from kafka_share.testing import KafkaAdmin, LocalKafkaCluster, unique_name
from kafka_share.testing.proxy import TAMPER_KINDS, TcpProxy

pytestmark = pytest.mark.integration


class _Outcome:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, KafkaError | None]] = []

    def __call__(self, response: Any, error: KafkaError | None) -> None:
        self.calls.append((response, error))


@pytest.fixture
def proxy_to_session_broker(kafka_cluster: Any) -> Iterator[TcpProxy]:
    first = kafka_cluster.bootstrap_servers.split(",")[0]
    with TcpProxy(first, max_lifetime_s=60) as proxy:
        yield proxy


def test_send_after_the_link_dropped_does_not_kill_the_network_client(
    proxy_to_session_broker: TcpProxy,
) -> None:
    """Deterministic repro of bug 1 at the NetworkClient level (real broker, via the proxy)."""
    proxy = proxy_to_session_broker
    client = NetworkClient(
        client_id="pending-bug-1",
        address_of=lambda node: (proxy.host, proxy.port),
        connect_timeout_ms=5000,
        request_timeout_ms=5000,
        reconnect_backoff_ms=0,
        reconnect_backoff_max_ms=0,
    )
    try:
        first = _Outcome()
        assert client.send(1, Purpose.CONTROL, MetadataRequest(topics=[]), first, monotonic_ms())
        deadline = time.monotonic() + 10
        while not first.calls and time.monotonic() < deadline:
            client.poll(50)
        assert first.calls and isinstance(first.calls[0][0], MetadataResponse), first.calls

        assert proxy.cut_all() == 1
        time.sleep(0.3)  # the RST has arrived; nobody has polled yet

        # This send hits the reset socket: the connection closes inside send().
        second = _Outcome()
        client.send(1, Purpose.CONTROL, MetadataRequest(topics=[]), second, monotonic_ms())
        assert second.calls and isinstance(second.calls[0][1], NetworkError), second.calls
        # The next send must open a fresh connection and work. Today it raises
        # KeyError ("... (FD n) is already registered") from selector.register.
        third = _Outcome()
        client.send(1, Purpose.CONTROL, MetadataRequest(topics=[]), third, monotonic_ms())
        deadline = time.monotonic() + 10
        while not third.calls and time.monotonic() < deadline:
            client.poll(50)
        assert third.calls and isinstance(third.calls[0][0], MetadataResponse), third.calls
    finally:
        client.close()


# -- issue 5, scenario 5: random connection drops (fails today: bug 1) ------------------

POLL_S = 1.0
COMMIT_S = 3.0
CLOSE_S = 5.0
# Scheduling slack on a loaded 2-core machine (a JVM broker and a GC beside us).
MARGIN_S = 1.0
CHAOS_S = 20.0


@pytest.fixture(scope="module")
def proxied() -> Iterator[tuple[LocalKafkaCluster, TcpProxy]]:
    with proxied_cluster(seed=20250) as pair:
        yield pair


@pytest.fixture(scope="module")
def admin(proxied: tuple[LocalKafkaCluster, TcpProxy]) -> KafkaAdmin:
    return proxied[0].admin()  # closed when the cluster stops


class _StackSampler:
    """Where the main thread spends its time (sampled every 10 ms): a busy loop
    names itself in a failing assertion."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self._stop = threading.Event()
        self._target = threading.main_thread().ident
        self._thread = threading.Thread(target=self._run, name="stack-sampler", daemon=True)

    def __enter__(self) -> _StackSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(2)

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            frame = sys._current_frames().get(self._target)
            if frame is not None:
                stack = traceback.extract_stack(frame)[-5:]
                self.counts[" <- ".join(f"{f.name}:{f.lineno}" for f in reversed(stack))] += 1

    def top(self) -> list[tuple[str, int]]:
        return self.counts.most_common(3)


def _thread_cpu() -> dict[str, float]:
    """CPU seconds of each Python thread of this process (by name)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for thread in threading.enumerate():
        try:
            fields = Path(f"/proc/self/task/{thread.native_id}/stat").read_text()
        except OSError:
            continue
        utime, stime = fields.rsplit(")", 1)[1].split()[11:13]
        out[thread.name] = (int(utime) + int(stime)) / tick
    return out


class _Timed:
    """Longest observed duration of each kind of call."""

    def __init__(self) -> None:
        self.longest: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def run(self, what: str, limit_s: float, fn: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            took = time.monotonic() - started
            self.longest[what] = max(self.longest.get(what, 0.0), took)
            self.calls[what] = self.calls.get(what, 0) + 1
            assert took <= limit_s + MARGIN_S, f"{what} took {took:.2f} s (timeout {limit_s} s)"


def test_random_connection_drops_never_hang_calls_and_lose_nothing(
    proxied: tuple[LocalKafkaCluster, TcpProxy], admin: KafkaAdmin
) -> None:
    _, proxy = proxied
    topic = admin.create_topic(partitions=2)
    group = unique_name("chaos")
    admin.set_group_config(
        group,
        {
            "share.auto.offset.reset": "earliest",
            "share.record.lock.duration.ms": "2000",
            # Each cut fails a round of acks and counts a delivery: leave room so
            # no record is archived by the delivery limit (default 5) under chaos.
            "share.delivery.count.limit": "10",
        },
    )
    produced = admin.produce(topic, [f"a{i}".encode() for i in range(600)])
    outcomes: list[tuple[dict[TopicIdPartition, set[int]], KafkaError | None]] = []
    timed = _Timed()

    consumer: ShareConsumer[Any, Any] = ShareConsumer(
        bootstrap_servers=proxy.bootstrap,
        group_id=group,
        share_acknowledgement_mode="explicit",
        max_poll_records=10,
    )
    closed = False
    try:
        consumer.set_acknowledgement_commit_callback(lambda o, e: outcomes.append((o, e)))
        consumer.subscribe([topic])
        proxy.start_chaos(min_interval_s=0.5, max_interval_s=2.0, duration_s=CHAOS_S)
        chaos_until = time.monotonic() + CHAOS_S
        produced_more = False
        expected: set[tuple[int, int]] = {(p.partition, p.offset) for p in produced}
        accepted: set[tuple[int, int]] = set()
        seen: set[tuple[int, int]] = set()
        quiet_since = time.monotonic()
        rounds = 0
        deadline = time.monotonic() + CHAOS_S + 60
        while time.monotonic() < deadline:
            if not produced_more and time.monotonic() > chaos_until - CHAOS_S / 2:
                # More records mid-chaos (the producer goes through the proxy too).
                more = admin.produce(topic, [f"b{i}".encode() for i in range(200)])
                expected |= {(p.partition, p.offset) for p in more}
                produced_more = True
            batch = list(timed.run("poll", POLL_S, consumer.poll, POLL_S))
            for r in batch:
                seen.add((r.partition, r.offset))
                consumer.acknowledge(r, AcknowledgeType.ACCEPT)
            rounds += 1
            if batch:
                quiet_since = time.monotonic()
            if batch:
                time.sleep(0.05)  # some "processing", so consumption spans the chaos
                if rounds % 3 == 0:
                    timed.run("commit_sync", COMMIT_S, consumer.commit_sync, COMMIT_S)
            accepted = {
                (tip.partition, o)
                for offsets, e in outcomes
                if e is None
                for tip, s in offsets.items()
                for o in s
            }
            if expected <= accepted and produced_more and time.monotonic() >= chaos_until:
                break
            # An ack whose response was lost in a cut is reported as failed although
            # the broker may have applied it: such records are never redelivered.
            # So once chaos is over, every record was delivered, and nothing came
            # back for longer than the lock (2 s) plus slack, nothing is left.
            if (
                expected <= seen
                and produced_more
                and time.monotonic() >= chaos_until + 1
                and time.monotonic() - quiet_since > 5.0
            ):
                timed.run("commit_sync", COMMIT_S, consumer.commit_sync, COMMIT_S)
                break
        unseen = expected - seen
        assert not unseen, f"{len(unseen)} records never delivered, e.g. {sorted(unseen)[:10]}"
        assert len(accepted) >= len(expected) * 0.9, (len(accepted), len(expected))
        assert proxy.cuts >= 5, f"only {proxy.cuts} connections were cut"
        failures = [e for _, e in outcomes if e is not None]
        assert all(isinstance(e, KafkaError) and str(e) for e in failures), failures

        # close() while connections keep dropping.
        proxy.stop_chaos()
        proxy.start_chaos(min_interval_s=0.1, max_interval_s=0.3, duration_s=CLOSE_S + 2)
        time.sleep(0.5)
        timed.run("close", CLOSE_S, consumer.close, CLOSE_S)
        closed = True
    finally:
        proxy.stop_chaos()
        if not closed:
            consumer.close(timeout=5)
    print(f"cuts={proxy.cuts} longest={timed.longest} calls={timed.calls}")


@pytest.mark.parametrize("kind", TAMPER_KINDS)
def test_a_broker_that_answers_garbage_gets_a_reconnect_not_a_hang(
    proxied: tuple[LocalKafkaCluster, TcpProxy], admin: KafkaAdmin, kind: str
) -> None:
    """The next response is truncated, carries a wrong correlation id or a 2 GiB
    size prefix, or never completes: the consumer drops that connection (at once,
    or at request.timeout.ms for the stall), reconnects and goes on, with every
    call bounded and no busy loop while it waits."""
    _, proxy = proxied
    topic = admin.create_topic(partitions=1)
    group = unique_name("tamper")
    admin.set_group_config(group, {"share.auto.offset.reset": "earliest",
                                   "share.record.lock.duration.ms": "2000"})
    expected = {p.offset for p in admin.produce(topic, [f"t{i}".encode() for i in range(50)])}
    request_timeout_s = 4.0
    consumer: ShareConsumer[Any, Any] = ShareConsumer(
        bootstrap_servers=proxy.bootstrap, group_id=group, max_poll_records=10,
        request_timeout_ms=int(request_timeout_s * 1000),
    )
    timed = _Timed()
    errors: list[KafkaError] = []
    try:
        consumer.subscribe([topic])
        seen = {r.offset for r in poll_until(consumer, lambda s: len(s) >= 1, timeout_s=30)}
        tampered = proxy.tampered
        # The consumer's next response (not the broker's own: it reaches itself
        # through the proxy too); new records make one come.
        proxy.tamper(kind, client_id_prefix="kafka-share-tamper")
        more = admin.produce(topic, [f"u{i}".encode() for i in range(50)])
        expected |= {p.offset for p in more}
        threads_before = _thread_cpu()
        cpu_before, wall_before = time.process_time(), time.monotonic()
        deadline = time.monotonic() + request_timeout_s + 30
        after_produced = False
        with _StackSampler() as sampler:
            while not (after_produced and expected <= seen) and time.monotonic() < deadline:
                if not after_produced and proxy.tampered > tampered:
                    # Records produced once the broken response went out: the
                    # consumer must get them over the connection it made again.
                    after = admin.produce(topic, [f"v{i}".encode() for i in range(20)])
                    expected |= {p.offset for p in after}
                    after_produced = True
                try:
                    seen |= {r.offset for r in timed.run("poll", POLL_S, consumer.poll, POLL_S)}
                except KafkaError as exc:  # allowed, if it says what happened
                    errors.append(exc)
        cpu_s = time.process_time() - cpu_before
        wall_s = time.monotonic() - wall_before
        threads_after = _thread_cpu()
    finally:
        consumer.close(timeout=5)
    assert proxy.running, "the proxy stopped"
    assert proxy.tampered == tampered + 1, "no response was tampered with"
    missing = sorted(expected - seen)
    assert not missing, f"after {kind!r}: {len(missing)} records never came, e.g. {missing[:5]}"
    assert all(str(e) for e in errors), errors
    # Waiting for a reconnect (or for the stalled request's timeout) must not spin:
    # the consumer's threads used a fraction of the time it waited.
    by_thread = sorted(
        ((round(cpu - threads_before.get(name, 0.0), 2), name)
         for name, cpu in threads_after.items()), reverse=True,
    )[:3]
    assert cpu_s < 0.5 * wall_s + 0.5, (
        f"{cpu_s:.2f} s of CPU in {wall_s:.2f} s: {by_thread}; main thread: {sampler.top()}"
    )
    print(f"{kind}: {len(errors)} errors, back in {wall_s:.1f} s, cpu {cpu_s:.2f} s, "
          f"longest poll {timed.longest['poll']:.2f} s, {errors[:1]}")
