"""Questions only the network tests ask of a NetworkClient (the package never needs them)."""

from __future__ import annotations

from kafka_share._net.client import NetworkClient, Purpose, monotonic_ms
from kafka_share.errors import KafkaError, NetworkError


def is_ready(client: NetworkClient, node_id: int, purpose: Purpose) -> bool:
    conn = client.connection(node_id, purpose)
    return conn is not None and conn.is_ready


def close_node(client: NetworkClient, node_id: int, reason: KafkaError | None = None) -> None:
    for (nid, _purpose), conn in list(client._connections.items()):
        if nid == node_id:
            conn.close(reason or NetworkError(f"connection to node {node_id} closed"))
    client._reap_closed(monotonic_ms())


def has_in_flight(client: NetworkClient) -> bool:
    return any(c.in_flight_count for c in client._connections.values()) or any(
        client._parked.values()
    )
