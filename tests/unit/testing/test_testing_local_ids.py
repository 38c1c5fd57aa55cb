"""Cluster ids the harness generates are safe to pass on a command line."""

from __future__ import annotations

from unittest import mock

from kafka_share.testing.local import new_cluster_id


def test_cluster_id_never_starts_with_a_dash() -> None:
    # The first uuid encodes to a leading "-": it must be skipped, not used.
    dash_first = bytes.fromhex("fb" + "00" * 15)
    normal = bytes.fromhex("00" * 16)
    uuids = iter([mock.Mock(bytes=dash_first), mock.Mock(bytes=normal)])
    with mock.patch("kafka_share.testing.local.uuid.uuid4", side_effect=lambda: next(uuids)):
        cluster_id = new_cluster_id()
    assert cluster_id == "AAAAAAAAAAAAAAAAAAAAAA"
    assert len(new_cluster_id()) == 22
    assert all(not new_cluster_id().startswith("-") for _ in range(500))
