"""Admin and producer helpers for tests.

Topics and group configs go through :class:`kafka_share.admin.Admin` (pure
Python); only producing records needs confluent-kafka (the ``testing`` extra),
imported when the first record is produced, never when this package is
imported.
"""

# Imports inside functions are deliberate: confluent-kafka, testcontainers and the
# heavier harness modules load only when used, never when the package is imported.
# ruff: noqa: PLC0415

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka_share.admin import Admin, NewTopic
from kafka_share.errors import KafkaError, UnknownTopicOrPartitionError
from kafka_share.testing.errors import HarnessError

__all__ = ["KafkaAdmin", "ProduceRecord", "ProducedRecord", "unique_name"]

Headers = Sequence[tuple[str, bytes | str | None]] | Mapping[str, bytes | str | None]
Value = bytes | str | None


def unique_name(prefix: str) -> str:
    """``prefix`` plus a random suffix, valid as a topic or group id."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class ProduceRecord:
    """One record for :meth:`KafkaAdmin.produce` when values alone are not enough."""

    value: Value
    key: Value = None
    partition: int | None = None
    headers: Headers | None = None
    timestamp_ms: int | None = None


@dataclass(frozen=True)
class ProducedRecord:
    """Where a produced record landed."""

    topic: str
    partition: int
    offset: int
    value: Value = field(repr=False, default=None)


class KafkaAdmin:
    """Topic, group-config and produce helpers against one cluster.

    Every method waits for the broker's answer and raises
    :class:`~kafka_share.testing.errors.HarnessError` with the broker's reason
    when an operation fails.
    """

    def __init__(self, bootstrap_servers: str, *, timeout_s: float = 30.0) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.timeout_s = timeout_s
        self._client = Admin(bootstrap_servers=bootstrap_servers, client_id="kafka-share-testing")
        self._producers: dict[str | None, Any] = {}

    @property
    def client(self) -> Admin:
        """The underlying :class:`kafka_share.admin.Admin`."""
        return self._client

    # ------------------------------------------------------------------ topics

    def create_topic(
        self,
        name: str | None = None,
        partitions: int = 1,
        *,
        replication_factor: int = 1,
        config: Mapping[str, str] | None = None,
    ) -> str:
        """Create a topic (a unique name when ``name`` is None); return its name.

        Returns only once metadata shows every partition with a leader, so a
        producer or consumer can use it at once.
        """
        topic = name or unique_name("test-topic")
        new = NewTopic(topic, partitions, replication_factor, dict(config or {}))
        try:
            self._client.create_topics([new], timeout=self.timeout_s)
        except KafkaError as exc:
            raise HarnessError(f"creating topic {topic!r} failed: {exc}") from exc
        self._wait_for_topic(topic, partitions)
        return topic

    def _wait_for_topic(self, topic: str, partitions: int) -> None:
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                info = self._client.describe_topics([topic], timeout=5)[topic]
            except KafkaError:
                info = None  # not in metadata yet
            if (
                info is not None
                and len(info.partitions) == partitions
                and all(p.leader is not None for p in info.partitions)
            ):
                return
            if time.monotonic() >= deadline:
                raise HarnessError(
                    f"topic {topic!r} did not show {partitions} partition(s) with leaders in "
                    f"metadata within {self.timeout_s:.0f} s"
                )
            time.sleep(0.1)

    def delete_topic(self, name: str, *, missing_ok: bool = True) -> None:
        """Delete a topic; a topic that does not exist is fine unless ``missing_ok=False``."""
        try:
            self._client.delete_topics([name], timeout=self.timeout_s)
        except UnknownTopicOrPartitionError as exc:
            if missing_ok:
                return
            raise HarnessError(f"deleting topic {name!r} failed: {exc}") from exc
        except KafkaError as exc:
            raise HarnessError(f"deleting topic {name!r} failed: {exc}") from exc

    def list_topics(self) -> set[str]:
        """Names of all topics, internal ones included."""
        try:
            return set(self._client.list_topics(include_internal=True, timeout=self.timeout_s))
        except KafkaError as exc:
            raise HarnessError(f"listing topics failed: {exc}") from exc

    # ------------------------------------------------------------------ groups

    def set_group_config(
        self, group_id: str, configs: Mapping[str, str], *, wait: bool = True
    ) -> None:
        """Set group-level configs (IncrementalAlterConfigs on the GROUP resource).

        E.g. ``set_group_config(g, {"share.auto.offset.reset": "earliest",
        "share.record.lock.duration.ms": "1000"})``. Set
        ``share.auto.offset.reset`` before the group's first fetch: the broker
        reads it when a share-partition is initialised. With ``wait`` (the
        default) this returns only once DescribeConfigs reports the new values.
        """
        try:
            self._client.alter_group_configs(group_id, dict(configs), timeout=self.timeout_s)
        except KafkaError as exc:
            raise HarnessError(
                f"setting configs {dict(configs)} on group {group_id!r} failed: {exc}"
            ) from exc
        if wait:
            self._wait_for_group_config(group_id, {k: str(v) for k, v in configs.items()})

    def _wait_for_group_config(self, group_id: str, expected: Mapping[str, str]) -> None:
        # The controller acknowledges the change before brokers have applied it
        # from the metadata log; a share-partition initialised in that window
        # would still see the old share.auto.offset.reset.
        deadline = time.monotonic() + self.timeout_s
        while True:
            current = self.describe_group_config(group_id)
            if all(current.get(key) == value for key, value in expected.items()):
                return
            if time.monotonic() >= deadline:
                raise HarnessError(
                    f"group {group_id!r} configs did not become {dict(expected)} within "
                    f"{self.timeout_s:.0f} s (broker reports {current})"
                )
            time.sleep(0.05)

    def describe_group_config(self, group_id: str) -> dict[str, str]:
        """The group's effective configs (DescribeConfigs on the GROUP resource)."""
        try:
            entries = self._client.describe_group_configs(group_id, timeout=self.timeout_s)
        except KafkaError as exc:
            raise HarnessError(f"describing configs of group {group_id!r} failed: {exc}") from exc
        return {name: entry.value for name, entry in entries.items() if entry.value is not None}

    # ------------------------------------------------------------------ produce

    def produce(
        self,
        topic: str,
        values: Iterable[Value | ProduceRecord],
        *,
        partition: int | None = None,
        key: Value = None,
        headers: Headers | None = None,
        compression: str | None = None,
        timeout_s: float | None = None,
    ) -> list[ProducedRecord]:
        """Produce ``values`` (plain values or :class:`ProduceRecord`) and wait for every ack.

        ``partition``, ``key`` and ``headers`` apply to plain values (a
        ``ProduceRecord`` carries its own). ``compression`` is a producer
        ``compression.type`` (``gzip``, ``snappy``, ``lz4``, ``zstd``). Records
        go out in order with ``acks=all``; returns where each one landed, in
        input order. Raises :class:`HarnessError` if any delivery failed.
        """
        producer = self._producer(compression)
        results: list[ProducedRecord | None] = []
        errors: list[str] = []

        def on_delivery(index: int, err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(f"record #{index}: {err}")
            else:
                results[index] = ProducedRecord(
                    msg.topic(), msg.partition(), msg.offset(), msg.value()
                )

        for index, item in enumerate(values):
            record = (
                item
                if isinstance(item, ProduceRecord)
                else ProduceRecord(item, key=key, partition=partition, headers=headers)
            )
            results.append(None)
            kwargs: dict[str, Any] = {
                "value": record.value,
                "key": record.key,
                "on_delivery": lambda err, msg, index=index: on_delivery(index, err, msg),
            }
            if record.partition is not None:
                kwargs["partition"] = record.partition
            if record.headers is not None:
                kwargs["headers"] = (
                    list(record.headers.items())
                    if isinstance(record.headers, Mapping)
                    else list(record.headers)
                )
            if record.timestamp_ms is not None:
                kwargs["timestamp"] = record.timestamp_ms
            while True:
                try:
                    producer.produce(topic, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.1)  # local queue full: let deliveries drain
        remaining = producer.flush(timeout_s if timeout_s is not None else self.timeout_s)
        if remaining:
            raise HarnessError(f"{remaining} record(s) to {topic!r} were not acknowledged in time")
        if errors:
            raise HarnessError(f"producing to {topic!r} failed: " + "; ".join(errors[:5]))
        return [r for r in results if r is not None]

    def _producer(self, compression: str | None) -> Any:
        if compression not in self._producers:
            from confluent_kafka import Producer

            conf: dict[str, Any] = {
                "bootstrap.servers": self.bootstrap_servers,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
            }
            if compression is not None:
                conf["compression.type"] = compression
            self._producers[compression] = Producer(conf)
        return self._producers[compression]

    def close(self) -> None:
        """Flush and drop the cached producers; close the admin client."""
        for producer in self._producers.values():
            producer.flush(self.timeout_s)
        self._producers.clear()
        self._client.close()

    def __enter__(self) -> KafkaAdmin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
