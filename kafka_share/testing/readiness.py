"""Waiting until a cluster really answers (a metadata round trip, not an open port)."""

# Imports inside functions are deliberate: the admin client loads only when used.
# ruff: noqa: PLC0415

from __future__ import annotations

import time
from collections.abc import Callable

from kafka_share.testing.errors import BrokerStartError

__all__ = ["wait_until_ready"]


def wait_until_ready(
    bootstrap_servers: str,
    *,
    expected_brokers: int,
    timeout_s: float,
    check_alive: Callable[[], None] | None = None,
    describe_log: Callable[[], str] | None = None,
) -> float:
    """Ask the cluster until ``expected_brokers`` brokers answer; return seconds waited.

    ``check_alive`` is called between attempts and should raise (e.g.
    :class:`BrokerStartError`) when a process has died, so a crash is reported
    at once instead of after the timeout.
    """
    started = time.monotonic()
    deadline = started + timeout_s
    last_problem = "no answer yet"
    while True:
        if check_alive is not None:
            check_alive()
        problem = _ask(bootstrap_servers, expected_brokers)
        if problem is None:
            return time.monotonic() - started
        last_problem = problem
        if time.monotonic() >= deadline:
            tail = describe_log() if describe_log is not None else ""
            raise BrokerStartError(
                f"Kafka at {bootstrap_servers} did not become ready within {timeout_s:.0f} s "
                f"({last_problem})" + (f"\n--- broker log tail ---\n{tail}" if tail else "")
            )
        time.sleep(0.2)


def _ask(bootstrap_servers: str, expected_brokers: int) -> str | None:
    """One attempt: None when the cluster answers as expected, else what is wrong.

    A fresh client per attempt sends both requests to the bootstrap address
    itself (a restarted node must answer, not a peer that lists it).
    """
    # The pure-Python admin client: starting a broker (``kafka-share broker start``)
    # must not need confluent-kafka, which the testing extra keeps for producing only.
    from kafka_share.admin import Admin
    from kafka_share.errors import KafkaError

    # Short reconnect backoff: the broker is expected to refuse connections while it boots.
    with Admin(bootstrap_servers=bootstrap_servers, client_id="kafka-share-readiness",
               reconnect_backoff_max_ms=200) as client:
        try:
            cluster = client.describe_cluster(timeout=1.0)
        except KafkaError as exc:
            return str(exc)
        if len(cluster.nodes) < expected_brokers:
            return f"the cluster lists {len(cluster.nodes)} of {expected_brokers} brokers"
        # A second, different round trip: Metadata goes through the request
        # handlers DescribeCluster alone does not exercise.
        try:
            client.list_topics(timeout=5.0)
        except KafkaError as exc:
            return f"Metadata failed: {exc}"
    return None
