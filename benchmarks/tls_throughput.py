"""TLS cost: kafka-share over PLAINTEXT vs SSL (mutual TLS) vs confluent-kafka's
ShareConsumer on the same SSL listener, in one run on one secured test broker.

    python benchmarks/tls_throughput.py [--records 200000] [--size 100] [--repetitions 2]

Each run consumes every record of a fresh share group (implicit acknowledgement)
and reports records/s; the ratios are to kafka-share over PLAINTEXT.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from kafka_share import ShareConsumer
from kafka_share.testing import KafkaAdmin, unique_name
from kafka_share.testing.config import BENCHMARK_JVM_OPTIONS
from kafka_share.testing.secure import SecureKafkaCluster


def consume_kafka_share(config: dict[str, Any], topic: str, group: str, records: int) -> float:
    with ShareConsumer[bytes, bytes](config, group_id=group) as consumer:
        consumer.subscribe([topic])
        got = 0
        start = None
        deadline = time.monotonic() + 300
        while got < records and time.monotonic() < deadline:
            batch = consumer.poll(1.0)
            if batch and start is None:
                start = time.monotonic()
            got += len(batch)
        assert got >= records, f"only {got} of {records} records"
        assert start is not None
        return records / (time.monotonic() - start)


def consume_confluent(config: dict[str, Any], topic: str, group: str, records: int) -> float:
    from confluent_kafka import ShareConsumer as ConfluentShareConsumer

    consumer = ConfluentShareConsumer({**config, "group.id": group})
    try:
        consumer.subscribe([topic])
        got = 0
        start = None
        deadline = time.monotonic() + 300
        while got < records and time.monotonic() < deadline:
            messages = [m for m in consumer.poll(1.0) if not m.error()]  # a batch
            if messages and start is None:
                start = time.monotonic()
            got += len(messages)
        assert got >= records, f"only {got} of {records} records"
        assert start is not None
        return records / (time.monotonic() - start)
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--repetitions", type=int, default=2)
    args = parser.parse_args()
    with SecureKafkaCluster(jvm_options=BENCHMARK_JVM_OPTIONS) as secure:
        assert secure.pki is not None
        admin = KafkaAdmin(secure.bootstrap_servers)
        topic = unique_name("tls-bench")
        admin.create_topic(topic, partitions=1)
        payload = b"x" * args.size
        for start in range(0, args.records, 10_000):
            admin.produce(topic, [payload] * min(10_000, args.records - start))
        ssl_config = secure.client_config("SSL")
        confluent_ssl = {
            "bootstrap.servers": secure.listeners["SSL"], "security.protocol": "SSL",
            "ssl.ca.location": str(secure.pki.ca_file),
            "ssl.certificate.location": str(secure.pki.client_cert),
            "ssl.key.location": str(secure.pki.client_key),
        }
        runs: dict[str, list[float]] = {
            "kafka-share PLAINTEXT": [], "kafka-share SSL": [], "confluent-kafka SSL": [],
        }
        clients: list[tuple[str, Callable[[str], float]]] = [
            ("kafka-share PLAINTEXT", lambda g: consume_kafka_share(
                {"bootstrap.servers": secure.bootstrap_servers}, topic, g, args.records)),
            ("kafka-share SSL", lambda g: consume_kafka_share(
                ssl_config, topic, g, args.records)),
            ("confluent-kafka SSL", lambda g: consume_confluent(
                confluent_ssl, topic, g, args.records)),
        ]
        for _ in range(args.repetitions):
            for name, run in clients:
                group = unique_name("tls-bench-group")
                admin.set_group_config(group, {"share.auto.offset.reset": "earliest"})
                runs[name].append(run(group))
        admin.close()
    base = statistics.median(runs["kafka-share PLAINTEXT"])
    print(f"{args.records} records of {args.size} B, {args.repetitions} runs each (median):")
    for name, values in runs.items():
        median = statistics.median(values)
        print(f"  {name:<22} {median:>10.0f} records/s  ratio {median / base:.2f}")


if __name__ == "__main__":
    main()
