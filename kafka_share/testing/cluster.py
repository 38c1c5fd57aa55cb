"""The backend-independent interface of a Kafka cluster used by tests."""

# Imports inside functions are deliberate: confluent-kafka, testcontainers and the
# heavier harness modules load only when used, never when the package is imported.
# ruff: noqa: PLC0415

from __future__ import annotations

import abc
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING

from kafka_share.testing.errors import UnsupportedOperationError

if TYPE_CHECKING:
    from kafka_share.testing.admin import KafkaAdmin

__all__ = ["KafkaCluster"]


class KafkaCluster(abc.ABC):
    """A Kafka cluster a test can talk to, whatever runs it.

    Backends: :class:`~kafka_share.testing.LocalKafkaCluster` (JVM processes from
    Maven jars), :class:`~kafka_share.testing.ContainerKafkaCluster` (the
    ``apache/kafka`` image) and :class:`~kafka_share.testing.ExternalKafkaCluster`
    (an already running cluster). Use it as a context manager, or call
    :meth:`start` and :meth:`stop`.
    """

    #: Whether share groups are enabled (``share.version >= 1``) on this cluster.
    share_enabled: bool = True

    @property
    @abc.abstractmethod
    def bootstrap_servers(self) -> str:
        """Comma-separated ``host:port`` list for clients' ``bootstrap.servers``."""

    @property
    @abc.abstractmethod
    def nodes(self) -> dict[int, str]:
        """Node id -> ``host:port`` of its client listener."""

    @property
    def kafka_version(self) -> str | None:
        """The Kafka release the cluster runs, when the backend knows it."""
        return None

    @abc.abstractmethod
    def start(self) -> None:
        """Start the cluster and return once it answers a metadata request."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop every node cleanly (SIGTERM, then SIGKILL after a grace period)."""

    def kill_node(self, node_id: int) -> None:
        """Kill one node abruptly (SIGKILL); its data stays for :meth:`start_node`."""
        raise UnsupportedOperationError(f"{type(self).__name__} cannot kill nodes")

    def stop_node(self, node_id: int) -> None:
        """Stop one node cleanly; its data stays for :meth:`start_node`."""
        raise UnsupportedOperationError(f"{type(self).__name__} cannot stop single nodes")

    def start_node(self, node_id: int) -> None:
        """Start a stopped or killed node again on its own data and ports."""
        raise UnsupportedOperationError(f"{type(self).__name__} cannot start single nodes")

    def restart_node(self, node_id: int, *, kill: bool = False) -> None:
        """Stop (or, with ``kill=True``, SIGKILL) a node and start it again on the same data."""
        if kill:
            self.kill_node(node_id)
        else:
            self.stop_node(node_id)
        self.start_node(node_id)

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the broker log(s), for error messages."""
        return f"({type(self).__name__} has no broker log to show)"

    def log_mark(self) -> dict[int, int]:
        """Where each node's log ends now, for :meth:`log_since` (empty when the
        backend has no log files to read)."""
        return {}

    def log_since(self, mark: Mapping[int, int], lines: int = 200) -> str:
        """What the broker log(s) gained since ``mark`` (:meth:`log_mark`), at most
        the last ``lines`` lines per node; empty when nothing or no log."""
        return ""

    def admin(self) -> KafkaAdmin:
        """A :class:`~kafka_share.testing.KafkaAdmin` for this cluster, closed when the
        cluster stops (closing it earlier is fine too)."""
        from kafka_share.testing.admin import KafkaAdmin

        admin = KafkaAdmin(self.bootstrap_servers)
        # Held until stop(): its admin client has sockets, which must be closed,
        # not left to the garbage collector.
        self.__dict__.setdefault("_handed_out_admins", []).append(admin)
        return admin

    def _close_admins(self) -> None:
        """Close the admins :meth:`admin` handed out (every ``stop`` calls this)."""
        for admin in self.__dict__.pop("_handed_out_admins", []):
            admin.close()

    def __enter__(self) -> KafkaCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
