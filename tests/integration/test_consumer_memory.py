"""Memory under a long consume: not timed, only resident memory counted.

One consumer, in a process of its own so that its resident set is its own, reads
1,000,000 records with ``poll()`` and reports its RSS after the first 100,000 and
its lowest over the last 100,000 (after each poll: responses buffered at one
instant come and go, and with them up to a few MB; a leak only grows). A leak of a
few bytes per record (a record kept by an acknowledgement table, a per-offset entry
never pruned, a cache keyed by offset) shows up here as tens of MB; metrics that kept
every poll's sample for their whole minute showed as 2-3 MB.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RECORDS = 1_000_000
#: "within a few MB": allocator noise stays well under this, a leak of 8 bytes per
#: record already passes it
GROWTH_LIMIT_MB = 6.0

_CONSUMER = r"""
import json, os, sys, time
from kafka_share import ShareConsumer
from kafka_share._app import decoding

bootstrap, group, topic, total = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
page = os.sysconf("SC_PAGE_SIZE")

def rss():
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * page

consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
consumer.subscribe([topic])
count = payload = 0
at_first = at_end = None
deadline = time.monotonic() + 180
while count < total and time.monotonic() < deadline:
    for record in consumer.poll(1.0):
        count += 1
        payload += len(record.value)
    if at_first is None and count >= total // 10:
        # numpy, for the vectorised decoder, loads on a thread of its own from
        # the first large batch (~5 MB, once): on a busy machine it may still be
        # loading at this point, so the baseline waits for it.
        if decoding._loading is not None:
            decoding._loading.join(60)
        at_first = rss()
    if count >= total - total // 10:
        # The lowest over the last tenth: what is buffered at one instant (a
        # response or two, their frame buffers) comes and goes; a leak stays.
        at_end = rss() if at_end is None else min(at_end, rss())
consumer.close()
print("RESULT " + json.dumps({"count": count, "payload": payload, "at_first": at_first,
                              "at_end": at_end}))
"""


def _produce(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.num.messages": 10_000, "log_level": 3})
    value = b"m" * 100
    for i in range(RECORDS):
        while True:
            try:
                producer.produce(topic, value, partition=i % 2)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0


@pytest.mark.timeout(300)
def test_consuming_a_million_records_leaves_rss_where_it_was_after_the_first_tenth(
    kafka_bootstrap: str, topic_factory: Any, share_group: str
) -> None:
    topic = topic_factory(partitions=2)
    _produce(kafka_bootstrap, topic)
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-c", _CONSUMER, kafka_bootstrap, share_group, topic, str(RECORDS)],
        capture_output=True, text=True, timeout=240, check=False, cwd=root,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT "):])
    assert result["count"] == RECORDS
    assert result["payload"] == RECORDS * 100
    growth_mb = (result["at_end"] - result["at_first"]) / 1e6
    assert growth_mb <= GROWTH_LIMIT_MB, (
        f"RSS grew by {growth_mb:.1f} MB from 100,000 records to the last 100,000 "
        f"({result['at_first'] / 1e6:.1f} -> {result['at_end'] / 1e6:.1f} MB at least)"
    )
