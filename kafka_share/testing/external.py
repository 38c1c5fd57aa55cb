"""A cluster somebody else runs, reached through ``KAFKA_SHARE_BOOTSTRAP_SERVERS``."""

# Imports inside functions are deliberate: confluent-kafka, testcontainers and the
# heavier harness modules load only when used, never when the package is imported.
# ruff: noqa: PLC0415

from __future__ import annotations

import os

from kafka_share.testing.cluster import KafkaCluster
from kafka_share.testing.errors import HarnessError, UnsupportedOperationError
from kafka_share.testing.readiness import wait_until_ready

__all__ = ["BOOTSTRAP_ENV", "ExternalKafkaCluster"]

BOOTSTRAP_ENV = "KAFKA_SHARE_BOOTSTRAP_SERVERS"


class ExternalKafkaCluster(KafkaCluster):
    """An already running cluster: :meth:`start` only checks that it answers.

    It must have share groups enabled (``share.version=1``, the default for
    clusters created by Kafka 4.2+). Nodes cannot be killed or restarted from here.
    """

    def __init__(self, bootstrap_servers: str | None = None, *, timeout_s: float = 60.0) -> None:
        servers = bootstrap_servers or os.environ.get(BOOTSTRAP_ENV, "")
        if not servers.strip():
            raise HarnessError(
                f"ExternalKafkaCluster needs bootstrap servers: pass them or set {BOOTSTRAP_ENV}"
            )
        self._bootstrap = servers.strip()
        self.timeout_s = timeout_s
        self._nodes: dict[int, str] = {}

    @property
    def bootstrap_servers(self) -> str:
        return self._bootstrap

    @property
    def nodes(self) -> dict[int, str]:
        return dict(self._nodes)

    def start(self) -> None:
        """Wait until the cluster answers a metadata request; learn its nodes."""
        from confluent_kafka.admin import AdminClient

        wait_until_ready(self._bootstrap, expected_brokers=1, timeout_s=self.timeout_s)
        metadata = AdminClient({"bootstrap.servers": self._bootstrap}).list_topics(timeout=10)
        self._nodes = {
            broker.id: f"{broker.host}:{broker.port}" for broker in metadata.brokers.values()
        }

    def stop(self) -> None:
        """Nothing to stop: the cluster belongs to someone else (the admins
        :meth:`admin` handed out are closed)."""
        self._close_admins()

    def _refuse(self, what: str) -> UnsupportedOperationError:
        return UnsupportedOperationError(
            f"cannot {what} of an external cluster ({self._bootstrap}); use the jar backend "
            "(KAFKA_SHARE_TEST_BACKEND=jar) for tests that kill or restart brokers"
        )

    def kill_node(self, node_id: int) -> None:
        raise self._refuse(f"kill node {node_id}")

    def stop_node(self, node_id: int) -> None:
        raise self._refuse(f"stop node {node_id}")

    def start_node(self, node_id: int) -> None:
        raise self._refuse(f"start node {node_id}")
