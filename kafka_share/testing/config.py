"""Broker configuration the harness generates: server.properties, log4j2, JVM flags.

Pure functions, so they are unit-tested without a broker and shared by the
local (jar) and container backends.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "BENCHMARK_JVM_OPTIONS",
    "DEFAULT_JVM_OPTIONS",
    "LOG4J2_PROPERTIES",
    "SHARE_TEST_DEFAULTS",
    "NodeAddress",
    "broker_properties",
    "format_features",
    "render_properties",
]

#: Share-group and group-coordinator settings that make tests fast without
#: making them flaky. Per-group ``share.record.lock.duration.ms`` can go down to
#: 1000 ms because the broker minimum is lowered; the default lock stays at
#: 15 s so a slow CI machine does not expire locks behind a test's back.
#: Heartbeat < session and min <= value <= max, as the broker enforces.
SHARE_TEST_DEFAULTS: Mapping[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.record.lock.duration.ms": "15000",
    "group.share.min.heartbeat.interval.ms": "1000",
    "group.share.heartbeat.interval.ms": "1000",
    "group.share.min.session.timeout.ms": "6000",
    "group.share.session.timeout.ms": "10000",
    "group.share.max.size": "1000",
    "group.consumer.min.heartbeat.interval.ms": "1000",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.session.timeout.ms": "10000",
    # A share-partition whose state initialisation was lost (the heartbeat that
    # recorded it "initializing" timed out in the coordinator's write, so the
    # request to the share coordinator was never sent) is tried again only
    # after this interval, and assigned only then: 30 s by default, which is
    # the length of most tests' waits. The broker never uses less than
    # offsets.commit.timeout.ms (5 s); versions without the setting ignore it.
    "group.share.initialize.retry.interval.ms": "5000",
}

#: Small heap and a fast-starting JVM: a test broker idles at a few hundred MB.
DEFAULT_JVM_OPTIONS: tuple[str, ...] = (
    "-Xms256m",
    "-Xmx1g",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
)

#: A benchmark's broker: the test broker's flags without ``TieredStopAtLevel=1``,
#: so the JVM compiles hot code with C2 as a production broker does. Benchmarks
#: measure clients, and a C1-only broker is the bottleneck over TLS (AES-GCM's
#: intrinsics are C2's): 29,000 against 149,000 records/s of 1 KiB over SSL for
#: the same client (``benchmarks/tls_throughput.py``). Start-up is slower, which
#: tests cannot afford and benchmarks can.
BENCHMARK_JVM_OPTIONS: tuple[str, ...] = tuple(
    option for option in DEFAULT_JVM_OPTIONS if option != "-XX:TieredStopAtLevel=1"
)

#: Console logging only (the harness sends the process output to a file).
#: WARN keeps the log short; the KafkaRaftServer INFO line "Kafka Server started"
#: is kept because it is the moment the broker considers itself up. The group
#: coordinator and the share-state persister log at INFO (joins, epoch bumps,
#: target assignments, state initialisation): a few thousand lines over the
#: whole test suite, and what a test that waited for an assignment needs.
LOG4J2_PROPERTIES = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
logger.raftserver.name = kafka.server.KafkaRaftServer
logger.raftserver.level = INFO
logger.storage.name = kafka.tools.StorageTool
logger.storage.level = INFO
logger.groups.name = org.apache.kafka.coordinator.group
logger.groups.level = INFO
logger.persister.name = org.apache.kafka.server.share.persister
logger.persister.level = INFO
"""


@dataclass(frozen=True)
class NodeAddress:
    """Where one node listens: ``broker_port`` for clients, ``controller_port`` for KRaft."""

    node_id: int
    host: str
    broker_port: int
    controller_port: int

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.broker_port}"


def broker_properties(
    node: NodeAddress,
    voters: list[NodeAddress],
    data_dir: Path | str,
    extra_config: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """server.properties for one combined-mode (broker + controller) KRaft node.

    ``voters`` are all controller nodes of the cluster (a static voter set, so the
    node is formatted without ``--standalone``). Internal topics get one
    partition and a replication factor of at most the cluster size.
    ``extra_config`` entries override everything else.
    """
    replication = str(min(len(voters), 3))
    props: dict[str, str] = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "controller.quorum.voters": ",".join(
            f"{v.node_id}@{v.host}:{v.controller_port}" for v in voters
        ),
        "listeners": (
            f"PLAINTEXT://{node.host}:{node.broker_port},"
            f"CONTROLLER://{node.host}:{node.controller_port}"
        ),
        "advertised.listeners": (
            f"PLAINTEXT://{node.host}:{node.broker_port},"
            f"CONTROLLER://{node.host}:{node.controller_port}"
        ),
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(data_dir),
        "num.partitions": "1",
        "num.network.threads": "2",
        "num.io.threads": "4",
        "num.recovery.threads.per.data.dir": "1",
        "auto.create.topics.enable": "true",
        "offsets.topic.replication.factor": replication,
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": replication,
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "1",
        "share.coordinator.state.topic.replication.factor": replication,
        "share.coordinator.state.topic.min.isr": "1",
        "share.coordinator.state.topic.num.partitions": "1",
        **SHARE_TEST_DEFAULTS,
    }
    if extra_config:
        for key, value in extra_config.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TypeError(
                    f"extra_config must map str to str, got {key!r}: {value!r} "
                    "(write numbers and booleans as strings, e.g. '1000', 'true')"
                )
            props[key] = value
    return props


def format_features(share_enabled: bool, share_version: int | None = None) -> list[str]:
    """``StorageTool format`` arguments that pin the share-group feature level.

    Always explicit: 4.1 formats with share.version=0 unless asked, and an
    explicit 0 is how a cluster without share groups is made on 4.2+. The
    level is 1 (share groups) or 0 unless ``share_version`` names it (2:
    dead-letter queues, Kafka 4.4+); pinning 1 keeps tests on the level they
    were written for, whatever a release's latest level is.
    """
    level = share_version if share_version is not None else (1 if share_enabled else 0)
    return ["--feature", f"share.version={level}"]


def render_properties(props: Mapping[str, str]) -> str:
    """Render a Java properties file (values escaped as Java expects)."""
    lines = []
    for key, value in props.items():
        escaped = value.replace("\\", "\\\\").replace("\n", "\\n")
        lines.append(f"{key}={escaped}")
    return "\n".join(lines) + "\n"
