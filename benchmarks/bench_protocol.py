#!/usr/bin/env python3
"""Micro-benchmarks for the generated protocol decoders.

* ShareFetch v2 response: 3 partitions x 1 MiB records payload (records are
  zero-copy slices, so this measures structure decoding, not copying).
* Metadata v12 response: 100 topics x 10 partitions (3 replicas each).

Usage: python benchmarks/bench_protocol.py [--repeat N]
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Callable

from kafka_share.protocol.messages import MetadataResponse, ShareFetchResponse


def share_fetch_response() -> bytes:
    payload = b"\x01" * (1 << 20)
    parts = [
        ShareFetchResponse.PartitionData(
            partition_index=i,
            records=payload,
            acquired_records=[
                ShareFetchResponse.AcquiredRecords(
                    first_offset=0, last_offset=999, delivery_count=1
                )
            ],
        )
        for i in range(3)
    ]
    resp = ShareFetchResponse(
        acquisition_lock_timeout_ms=30000,
        responses=[
            ShareFetchResponse.ShareFetchableTopicResponse(topic_id=uuid.uuid4(), partitions=parts)
        ],
    )
    return resp.encode(2)


def metadata_response() -> bytes:
    topics = [
        MetadataResponse.MetadataResponseTopic(
            name=f"topic-{t}",
            topic_id=uuid.uuid4(),
            partitions=[
                MetadataResponse.MetadataResponsePartition(
                    partition_index=p,
                    leader_id=p % 3,
                    leader_epoch=5,
                    replica_nodes=[0, 1, 2],
                    isr_nodes=[0, 1, 2],
                )
                for p in range(10)
            ],
        )
        for t in range(100)
    ]
    brokers = [
        MetadataResponse.MetadataResponseBroker(node_id=i, host=f"broker-{i}", port=9092)
        for i in range(3)
    ]
    return MetadataResponse(brokers=brokers, cluster_id="c", topics=topics).encode(12)


def bench(name: str, fn: Callable[[], object], repeat: int, size: int) -> None:
    fn()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - start) / repeat)
    print(f"{name:<48} {best * 1e6:10.1f} us/decode  ({size / best / 1e9:8.2f} GB/s of frame)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    sf = share_fetch_response()
    md = metadata_response()
    bench(
        f"ShareFetchResponse v2 3x1MiB ({len(sf)} B)",
        lambda: ShareFetchResponse.decode(sf, 2),
        args.repeat,
        len(sf),
    )
    bench(
        f"MetadataResponse v12 100x10 ({len(md)} B)",
        lambda: MetadataResponse.decode(md, 12),
        args.repeat,
        len(md),
    )
    bench(
        "MetadataResponse v12 100x10 decode+encode",
        lambda: MetadataResponse.decode(md, 12).encode(12),
        args.repeat // 2 or 1,
        len(md),
    )


if __name__ == "__main__":
    main()
