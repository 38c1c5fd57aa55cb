"""Response bodies captured once from a real Kafka 4.x broker (single KRaft node).

Fixtures are response *bodies* (no size prefix, no header) as hex. They were
captured with share.version=1 finalized, so the share RPCs are advertised.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_share.protocol import messages as m
from kafka_share.protocol.api_keys import ApiKey, ApiVersionsTable
from tests.unit.protocol.helpers import require_share_groups

FIXTURES = Path(__file__).parent / "fixtures"


def load(name: str) -> bytes:
    return bytes.fromhex((FIXTURES / name).read_text().strip())


@pytest.mark.parametrize("version", [0, 3, 4])
def test_real_api_versions_response(version: int) -> None:
    data = load(f"api_versions_v{version}_response.hex")
    resp = m.ApiVersionsResponse.decode(data, version)
    assert resp.error_code == 0
    keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert keys[ApiKey.SHARE_FETCH] == (1, 2)
    assert keys[ApiKey.SHARE_GROUP_HEARTBEAT] == (1, 1)
    assert keys[ApiKey.API_VERSIONS][0] == 0
    assert resp.encode(version) == data  # byte-exact re-encoding
    table = ApiVersionsTable.from_response(resp)
    assert table.version_for(ApiKey.SHARE_FETCH) == 2
    assert table.version_for(ApiKey.METADATA) == 13
    if version >= 3:
        assert resp.finalized_features_epoch >= 0
        assert table.finalized_features["share.version"] == 1
        require_share_groups(table)
        supported = {f.name for f in resp.supported_features}
        # v4 also lists features whose minimum is 0 (KAFKA-17011); v3 omits them.
        assert ("share.version" in supported) == (version == 4)
    else:
        assert resp.finalized_features == []


def test_real_metadata_v12_response() -> None:
    data = load("metadata_v12_response.hex")
    resp = m.MetadataResponse.decode(data, 12)
    assert resp.cluster_id
    assert [b.host for b in resp.brokers] == ["127.0.0.1"]
    (topic,) = resp.topics
    assert topic.error_code == 0
    assert topic.name is not None and topic.name.startswith("test-topic-")
    assert topic.topic_id.int != 0
    assert sorted(p.partition_index for p in topic.partitions) == [0, 1]
    assert all(p.leader_id == resp.brokers[0].node_id for p in topic.partitions)
    assert resp.encode(12) == data
