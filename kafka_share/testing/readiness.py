"""Waiting until a cluster really answers (a metadata round trip, not an open port)."""

# Imports inside functions are deliberate: confluent-kafka, testcontainers and the
# heavier harness modules load only when used, never when the package is imported.
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
    """Poll Metadata until ``expected_brokers`` brokers are listed; return seconds waited.

    ``check_alive`` is called between attempts and should raise (e.g.
    :class:`BrokerStartError`) when a process has died, so a crash is reported
    at once instead of after the timeout.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    started = time.monotonic()
    deadline = started + timeout_s
    # log_level 0: "connection refused" while the broker boots is expected noise.
    client = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 0})
    last_problem = "no answer yet"
    while True:
        if check_alive is not None:
            check_alive()
        try:
            metadata = client.list_topics(timeout=1.0)
        except KafkaException as exc:
            last_problem = str(exc)
        else:
            if len(metadata.brokers) >= expected_brokers:
                # A second, different round trip: DescribeCluster goes through the
                # request handlers the metadata cache alone does not exercise.
                try:
                    client.describe_cluster(request_timeout=5).result()
                except KafkaException as exc:
                    last_problem = f"DescribeCluster failed: {exc}"
                else:
                    return time.monotonic() - started
            else:
                last_problem = (
                    f"metadata lists {len(metadata.brokers)} of {expected_brokers} brokers"
                )
        if time.monotonic() >= deadline:
            tail = describe_log() if describe_log is not None else ""
            raise BrokerStartError(
                f"Kafka at {bootstrap_servers} did not become ready within {timeout_s:.0f} s "
                f"({last_problem})" + (f"\n--- broker log tail ---\n{tail}" if tail else "")
            )
        time.sleep(0.2)
