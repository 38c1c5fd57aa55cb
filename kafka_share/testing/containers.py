"""A single-node cluster in the official ``apache/kafka`` Docker image (testcontainers).

testcontainers' ``KafkaContainer`` only drives Confluent images, so this uses
the generic ``DockerContainer`` and configures the broker entirely through the
image's ``KAFKA_*`` environment variables.
"""

# Imports inside functions are deliberate: confluent-kafka, testcontainers and the
# heavier harness modules load only when used, never when the package is imported.
# ruff: noqa: PLC0415

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from typing import Any

from kafka_share.testing.cluster import KafkaCluster
from kafka_share.testing.config import SHARE_TEST_DEFAULTS
from kafka_share.testing.errors import BrokerStartError, UnsupportedOperationError
from kafka_share.testing.local import _free_ports, default_kafka_version
from kafka_share.testing.readiness import wait_until_ready
from kafka_share.testing.versions import KafkaVersion, parse_kafka_version

__all__ = [
    "ContainerKafkaCluster",
    "container_env",
    "docker_available",
    "loopback_published",
    "property_env_name",
]

_CLIENT_PORT = 9092  # inside the container; mapped to a free host port


def property_env_name(key: str) -> str:
    """The ``apache/kafka`` image's env name for a broker property.

    The image maps ``_`` to ``.``, ``__`` to ``_`` and ``___`` to ``-``. The
    inverse escapes existing underscores first, so the underscores introduced
    for dashes and dots are not doubled again.
    """
    return "KAFKA_" + key.replace("_", "__").replace("-", "___").replace(".", "_").upper()


def container_env(
    version: KafkaVersion,
    host_port: int,
    *,
    host: str = "127.0.0.1",
    extra_config: Mapping[str, str] | None = None,
    share_enabled: bool = True,
) -> dict[str, str]:
    """Environment for a single combined node whose client listener is ``host:host_port``.

    Clients connect through the mapped port, so the PLAINTEXT listener
    advertises the host side; brokers talk among themselves on an internal
    listener. The image formats storage without ``--feature`` flags, so share
    groups come from the release default: on from Kafka 4.2.
    """
    if not share_enabled:
        raise UnsupportedOperationError(
            "the container backend cannot format a cluster with share groups disabled; "
            "use LocalKafkaCluster(share_enabled=False)"
        )
    if not version.share_on_by_default:
        raise UnsupportedOperationError(
            f"the apache/kafka:{version} image formats with share.version=0 and this backend "
            "cannot pass --feature share.version=1; use Kafka 4.2+ or the jar backend"
        )
    props: dict[str, str] = {
        "node.id": "1",
        "process.roles": "broker,controller",
        "controller.quorum.voters": "1@localhost:9093",
        "listeners": f"PLAINTEXT://0.0.0.0:{_CLIENT_PORT},CONTROLLER://0.0.0.0:9093,"
        "INTERNAL://0.0.0.0:9094",
        "advertised.listeners": f"PLAINTEXT://{host}:{host_port},INTERNAL://localhost:9094",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,"
        "INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "controller.listener.names": "CONTROLLER",
        "auto.create.topics.enable": "true",
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "share.coordinator.state.topic.num.partitions": "1",
        **SHARE_TEST_DEFAULTS,
        **(extra_config or {}),
    }
    env = {property_env_name(key): value for key, value in props.items()}
    env["CLUSTER_ID"] = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    env["KAFKA_HEAP_OPTS"] = "-Xms256m -Xmx1g"
    return env


def loopback_published(container: Any, port: int, host_port: int) -> Any:
    """Publish the container's ``port`` as ``127.0.0.1:host_port`` only: a test
    broker with no authentication must not be reachable from the network (a
    plain port binding listens on every interface)."""
    # docker-py takes (host ip, host port) for a binding; testcontainers passes
    # its ports mapping through as given.
    container.ports[str(port)] = ("127.0.0.1", host_port)
    return container


def docker_available() -> bool:
    """Whether a Docker engine answers (testcontainers installed and the daemon reachable)."""
    try:
        import docker  # type: ignore[import-untyped,import-not-found,unused-ignore]

        client = docker.from_env(timeout=3)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


class ContainerKafkaCluster(KafkaCluster):
    """One Kafka node in ``apache/kafka:<version>`` (needs a Docker engine and Kafka 4.2+)."""

    def __init__(
        self,
        *,
        kafka_version: str | None = None,
        extra_config: Mapping[str, str] | None = None,
        share_enabled: bool = True,
        image: str | None = None,
        start_timeout_s: float = 120.0,
    ) -> None:
        self._version = parse_kafka_version(kafka_version or default_kafka_version())
        self.image = image or f"apache/kafka:{self._version}"
        self.extra_config = dict(extra_config or {})
        self.share_enabled = share_enabled
        self.start_timeout_s = start_timeout_s
        self._container: Any = None
        self._host_port: int | None = None

    @property
    def kafka_version(self) -> str:
        return str(self._version)

    @property
    def bootstrap_servers(self) -> str:
        if self._host_port is None:
            raise BrokerStartError("the container is not started")
        return f"127.0.0.1:{self._host_port}"

    @property
    def nodes(self) -> dict[int, str]:
        return {1: self.bootstrap_servers}

    def start(self) -> None:
        from testcontainers.core.container import DockerContainer

        (host_port,) = _free_ports(1)
        env = container_env(
            self._version,
            host_port,
            extra_config=self.extra_config,
            share_enabled=self.share_enabled,
        )
        container = loopback_published(DockerContainer(self.image), _CLIENT_PORT, host_port)
        for name, value in env.items():
            container = container.with_env(name, value)
        container.start()
        self._container, self._host_port = container, host_port
        try:
            wait_until_ready(
                self.bootstrap_servers,
                expected_brokers=1,
                timeout_s=self.start_timeout_s,
                describe_log=lambda: self.log_tail(40),
            )
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self._close_admins()
        if self._container is not None:
            self._container.stop()
            self._container = None
            self._host_port = None

    def log_tail(self, lines: int = 40) -> str:
        if self._container is None:
            return "(container not running)"
        stdout, stderr = self._container.get_logs()
        text = (stdout + stderr).decode("utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])
