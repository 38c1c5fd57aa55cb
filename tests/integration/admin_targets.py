"""Where the admin and CLI integration tests run: PLAINTEXT and a secured listener.

The ``target`` fixture is parametrized: every test that takes it runs once
against the session's PLAINTEXT broker (``kafka_cluster``) and once against
the SASL_SSL listener of the session's secured broker (``secure_kafka``:
SCRAM-SHA-512 over TLS, ACLs on), with the same assertions. Both brokers are
session fixtures started on first use, so ``-k PLAINTEXT`` starts only the
first. The secured settings come from a Java ``.properties`` file, the one the
CLI gets through ``--command-config``; the Admin tests read the same file.

Topics, records and group configs of test set-up go through the cluster's
own PLAINTEXT listener (the harness's anonymous super user), so that only the
code under test talks to the secured listener.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kafka_share import ShareConsumer
from kafka_share.admin import Admin
from kafka_share.commands.common import read_properties
from kafka_share.testing import KafkaAdmin, unique_name

#: The listeners every ``target`` test runs over (test ids end in ``[PLAINTEXT]`` etc.).
TARGETS = ("PLAINTEXT", "SASL_SSL")


def secured_properties(secure_kafka: Any, path: Path, *, user: str = "alice",
                       password: str | None = None) -> Path:
    """Write a ``--command-config`` file for the secured broker's SASL_SSL listener.

    Java's key names and layout (``sasl.jaas.config`` continued over lines, a
    PEM trust store), as a Kafka user would write it for Kafka's own tools.
    """
    secret = secure_kafka.users[user] if password is None else password
    path.write_text(
        "# SASL_SSL with SCRAM-SHA-512 (written like a Kafka tools client.properties)\n"
        f"bootstrap.servers={secure_kafka.listeners['SASL_SSL']}\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        f'    username="{user}" \\\n'
        f'    password="{secret}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={secure_kafka.pki.ca_file}\n",
        encoding="utf-8",
    )
    path.chmod(0o600)
    return path


@dataclass
class Target:
    """One listener to test against (see the module doc)."""

    name: str
    bootstrap: str
    #: Client settings besides ``bootstrap.servers`` (empty for PLAINTEXT).
    security: dict[str, object]
    #: The ``--command-config`` file (None for PLAINTEXT).
    properties: Path | None
    #: Set-up helpers on the cluster's PLAINTEXT listener.
    harness: KafkaAdmin

    @property
    def config(self) -> dict[str, object]:
        """The full client config (Java key names)."""
        return {**self.security, "bootstrap.servers": self.bootstrap}

    def admin(self, **extra: object) -> Admin:
        return Admin({**self.config, **extra})

    def cli_args(self) -> list[str]:
        """The connection options of a ``kafka-share`` command line."""
        args = ["--bootstrap-server", self.bootstrap]
        if self.properties is not None:
            args += ["--command-config", str(self.properties)]
        return args


@pytest.fixture(scope="session", params=TARGETS)
def target_listener(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Target]:
    """One :class:`Target` per listener, for the whole session."""
    if request.param == "PLAINTEXT":
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        yield Target("PLAINTEXT", bootstrap, {}, None, request.getfixturevalue("kafka_admin"))
        return
    secure = request.getfixturevalue("secure_kafka")
    path = secured_properties(secure, tmp_path_factory.mktemp("secured") / "client.properties")
    security: dict[str, object] = dict(read_properties(path))
    bootstrap = str(security.pop("bootstrap.servers"))
    harness = KafkaAdmin(secure.bootstrap_servers)
    try:
        yield Target(request.param, bootstrap, security, path, harness)
    finally:
        harness.close()


@dataclass
class TargetTest:
    """A :class:`Target` for one test: topics, groups and consumers cleaned up after it."""

    on: Target
    _topics: list[str] = field(default_factory=list)
    _consumers: list[ShareConsumer[Any, Any]] = field(default_factory=list)

    def topic(self, partitions: int = 1) -> str:
        name = self.on.harness.create_topic(None, partitions)
        self._topics.append(name)
        return name

    @property
    def produce(self) -> Callable[..., Any]:
        """``produce(topic, values, *, partition=, key=, headers=)`` (via PLAINTEXT)."""
        return self.on.harness.produce

    def group(self, prefix: str = "admin-group") -> str:
        """A fresh share group starting at the earliest offset."""
        group_id = unique_name(prefix)
        self.on.harness.set_group_config(group_id, {"share.auto.offset.reset": "earliest"})
        return group_id

    def consumer(self, group_id: str, /, **config: Any) -> ShareConsumer[Any, Any]:
        """A share consumer over the target listener (closed after the test)."""
        consumer: ShareConsumer[Any, Any] = ShareConsumer(
            self.on.config, group_id=group_id, **config
        )
        self._consumers.append(consumer)
        return consumer

    def close(self) -> None:
        for consumer in self._consumers:
            try:
                consumer.close(timeout=5.0)
            except Exception:
                pass
        for name in self._topics:
            try:
                self.on.harness.delete_topic(name)
            except Exception:
                pass  # cleanup must not hide the test's own result


@pytest.fixture
def target(target_listener: Target) -> Iterator[TargetTest]:
    """The test's :class:`TargetTest` (runs once per listener in ``TARGETS``)."""
    test = TargetTest(target_listener)
    try:
        yield test
    finally:
        test.close()
