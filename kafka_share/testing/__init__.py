"""Real Kafka brokers for tests: a harness, admin helpers and a pytest plugin.

Start a throw-away Apache Kafka 4.x KRaft cluster with share groups enabled::

    from kafka_share.testing import LocalKafkaCluster

    with LocalKafkaCluster() as cluster:
        admin = cluster.admin()
        topic = admin.create_topic(partitions=3)
        admin.set_group_config("my-group", {"share.auto.offset.reset": "earliest"})
        admin.produce(topic, [b"a", b"b"])
        ...  # point a share consumer at cluster.bootstrap_servers

Backends share the :class:`KafkaCluster` interface: :class:`LocalKafkaCluster`
(JVMs from Maven Central jars, cached per user), :class:`ContainerKafkaCluster`
(``apache/kafka`` image) and :class:`ExternalKafkaCluster`
(``KAFKA_SHARE_BOOTSTRAP_SERVERS``); :func:`cluster_from_env` picks one from
``KAFKA_SHARE_TEST_BACKEND``. The pytest fixtures live in
:mod:`kafka_share.testing.plugin`, loaded automatically once kafka-share is
installed.

For unit tests without a broker, :class:`MockShareConsumer` and
:class:`MockAsyncShareConsumer` have the consumers' API and rules, with records
the test adds (:mod:`kafka_share.testing.mock_consumer`).

Importing this package starts nothing and does not import confluent-kafka;
the admin helpers and readiness checks need the ``testing`` extra.
"""

from __future__ import annotations

from kafka_share.testing.admin import KafkaAdmin, ProducedRecord, ProduceRecord, unique_name
from kafka_share.testing.backends import cluster_from_env, resolve_backend
from kafka_share.testing.cluster import KafkaCluster
from kafka_share.testing.config import SHARE_TEST_DEFAULTS
from kafka_share.testing.containers import ContainerKafkaCluster
from kafka_share.testing.errors import (
    BrokerStartError,
    HarnessError,
    JavaNotFoundError,
    MavenError,
    UnsupportedKafkaVersionError,
    UnsupportedOperationError,
)
from kafka_share.testing.external import ExternalKafkaCluster
from kafka_share.testing.local import LocalKafkaCluster, default_kafka_version
from kafka_share.testing.maven import BrokerDistribution, cache_root, ensure_kafka_libs
from kafka_share.testing.mock_consumer import MockAsyncShareConsumer, MockShareConsumer
from kafka_share.testing.proxy import TcpProxy
from kafka_share.testing.versions import DEFAULT_KAFKA_VERSION

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "SHARE_TEST_DEFAULTS",
    "BrokerDistribution",
    "BrokerStartError",
    "ContainerKafkaCluster",
    "ExternalKafkaCluster",
    "HarnessError",
    "JavaNotFoundError",
    "KafkaAdmin",
    "KafkaCluster",
    "LocalKafkaCluster",
    "MavenError",
    "MockAsyncShareConsumer",
    "MockShareConsumer",
    "ProduceRecord",
    "ProducedRecord",
    "TcpProxy",
    "UnsupportedKafkaVersionError",
    "UnsupportedOperationError",
    "cache_root",
    "cluster_from_env",
    "default_kafka_version",
    "ensure_kafka_libs",
    "resolve_backend",
    "unique_name",
]
