"""A broker without share groups: the consumer says so and how to fix it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafka_share import ShareConsumer, UnsupportedVersionError
from kafka_share.testing import LocalKafkaCluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def share_disabled_cluster() -> Iterator[LocalKafkaCluster]:
    cluster = LocalKafkaCluster(share_enabled=False)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def test_share_groups_disabled_raises_unsupported_version(
    share_disabled_cluster: LocalKafkaCluster,
) -> None:
    admin = share_disabled_cluster.admin()
    try:
        topic = admin.create_topic(partitions=1)
    finally:
        admin.close()
    with ShareConsumer(
        bootstrap_servers=share_disabled_cluster.bootstrap_servers, group_id="disabled-group"
    ) as consumer:
        consumer.subscribe([topic])
        with pytest.raises(UnsupportedVersionError) as info:
            for _ in range(30):
                consumer.poll(0.5)
        with pytest.raises(UnsupportedVersionError):
            consumer.poll(0.1)  # fatal: raised again, not swallowed
    message = str(info.value)
    assert "share.version" in message, message
    assert "4.1" in message, message
