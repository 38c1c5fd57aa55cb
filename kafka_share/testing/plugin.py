"""pytest fixtures for tests against a real Kafka cluster.

Loaded automatically (``pytest11`` entry point) when kafka-share is installed.
Importing this module starts nothing and does not import confluent-kafka, so
projects without the ``testing`` extra are unaffected until they use a fixture.

Fixtures:

``kafka_cluster`` (session)
    A started :class:`~kafka_share.testing.KafkaCluster`, stopped at the end of
    the session. The backend comes from ``--kafka-backend``, the
    ``kafka_backend`` ini option, or ``KAFKA_SHARE_TEST_BACKEND`` (``jar`` by default).
``kafka_bootstrap`` (session)
    Its ``bootstrap.servers`` string.
``kafka_admin`` (session)
    A :class:`~kafka_share.testing.KafkaAdmin` for it.
``topic_factory``
    ``topic_factory(partitions=1, name=None, config=None) -> str``: creates a
    topic (unique name by default), deleted after the test.
``share_group_factory``
    ``share_group_factory(configs=None, prefix="share-group") -> str``: a fresh
    group id whose configs are set before first use;
    ``share.auto.offset.reset=earliest`` unless ``configs`` says otherwise.
``share_group``
    One such group id.
``kafka_produce``
    :meth:`KafkaAdmin.produce <kafka_share.testing.KafkaAdmin.produce>`.
``mock_cluster`` (session)
    A second, independent broker implementation: librdkafka's mock cluster
    (:class:`~kafka_share.testing.mock_cluster.MockCluster`, 3 brokers,
    share groups starting at the earliest offset). It needs no JVM. Tests
    using it are skipped when librdkafka or its mock API cannot be found, and
    only then; the skip reason says what is missing.
"""

# Imports inside functions are deliberate: confluent-kafka, testcontainers and the
# heavier harness modules load only when used, never when the package is imported.
# ruff: noqa: PLC0415

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from kafka_share.testing.admin import KafkaAdmin
    from kafka_share.testing.cluster import KafkaCluster
    from kafka_share.testing.mock_cluster import MockCluster

__all__ = [
    "kafka_admin",
    "kafka_bootstrap",
    "kafka_cluster",
    "kafka_produce",
    "mock_cluster",
    "share_group",
    "share_group_factory",
    "topic_factory",
]

_DEFAULT_GROUP_CONFIG = {"share.auto.offset.reset": "earliest"}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kafka-share", "Kafka cluster for tests (kafka_share.testing)")
    group.addoption(
        "--kafka-backend",
        dest="kafka_backend",
        default=None,
        choices=["jar", "docker", "external", "auto"],
        help="where the kafka_cluster fixture's cluster comes from "
        "(default: KAFKA_SHARE_TEST_BACKEND, else jar)",
    )
    parser.addini(
        "kafka_backend",
        "default backend of the kafka_cluster fixture: jar, docker, external or auto",
        default="",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "integration: needs a real Kafka broker (started by kafka_share.testing)"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A failing test that used ``kafka_cluster`` reports what the broker logged
    while it ran (section "broker log during the test"): a broker-side cause
    (an assignment withheld, a state write that timed out) is otherwise lost
    with the cluster's working directory."""
    cluster = getattr(item, "funcargs", {}).get("kafka_cluster")
    mark = cluster.log_mark() if cluster is not None else None
    try:
        return (yield)
    except BaseException:
        if cluster is not None and mark is not None:
            logged = cluster.log_since(mark)
            if logged:
                item.add_report_section("call", "broker log during the test", logged)
        raise


@pytest.fixture(scope="session")
def kafka_cluster(pytestconfig: pytest.Config) -> Iterator[KafkaCluster]:
    """A running Kafka cluster with share groups enabled, shared by the session."""
    from kafka_share.testing.backends import cluster_from_env

    backend = pytestconfig.getoption("kafka_backend") or str(
        pytestconfig.getini("kafka_backend") or ""
    )
    cluster = cluster_from_env(backend or None)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_cluster: KafkaCluster) -> str:
    """``bootstrap.servers`` of the session's cluster."""
    return kafka_cluster.bootstrap_servers


@pytest.fixture(scope="session")
def kafka_admin(kafka_cluster: KafkaCluster) -> Iterator[KafkaAdmin]:
    """Admin/produce helpers bound to the session's cluster."""
    from kafka_share.testing.admin import KafkaAdmin

    admin = KafkaAdmin(kafka_cluster.bootstrap_servers)
    try:
        yield admin
    finally:
        admin.close()


@pytest.fixture
def topic_factory(kafka_admin: KafkaAdmin) -> Iterator[Callable[..., str]]:
    """Create topics for one test; they are deleted afterwards."""
    created: list[str] = []

    def make(
        partitions: int = 1,
        name: str | None = None,
        config: Mapping[str, str] | None = None,
    ) -> str:
        topic = kafka_admin.create_topic(name, partitions, config=config)
        created.append(topic)
        return topic

    yield make
    for topic in created:
        try:
            kafka_admin.delete_topic(topic)
        except Exception:
            # Cleanup must not hide the test's own result (e.g. after a broker was killed).
            pass


@pytest.fixture
def share_group_factory(kafka_admin: KafkaAdmin) -> Callable[..., str]:
    """Make fresh share-group ids with their group configs already set."""
    from kafka_share.testing.admin import unique_name

    def make(configs: Mapping[str, str] | None = None, prefix: str = "share-group") -> str:
        group_id = unique_name(prefix)
        kafka_admin.set_group_config(group_id, {**_DEFAULT_GROUP_CONFIG, **(configs or {})})
        return group_id

    return make


@pytest.fixture
def share_group(share_group_factory: Callable[..., str]) -> str:
    """A fresh share-group id reading from the earliest offset."""
    return share_group_factory()


@pytest.fixture
def kafka_produce(kafka_admin: KafkaAdmin) -> Callable[..., Any]:
    """``kafka_produce(topic, values, *, partition=, key=, headers=, compression=)``."""
    return kafka_admin.produce


@pytest.fixture(scope="session")
def mock_cluster() -> Iterator[MockCluster]:
    """librdkafka's mock cluster (3 brokers) for the session; see the module docstring."""
    from kafka_share.testing.mock_cluster import MockCluster, MockClusterUnavailableError

    cluster = MockCluster(brokers=3)
    try:
        cluster.start()
    except MockClusterUnavailableError as exc:
        pytest.skip(f"librdkafka's mock cluster is unavailable: {exc}")
    try:
        cluster.sharegroup_set_auto_offset_reset("earliest")
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def secure_kafka() -> Iterator[Any]:
    """A one-node broker with SSL (mutual TLS), SASL_PLAINTEXT, SASL_SSL, a
    re-authentication listener (5 s sessions), an OIDC listener and ACLs; see
    :class:`kafka_share.testing.secure.SecureKafkaCluster` for the listeners,
    users and certificate files. One per test session."""
    from kafka_share.testing.secure import SecureKafkaCluster

    with SecureKafkaCluster() as cluster:
        yield cluster
