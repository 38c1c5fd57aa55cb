"""A share consumer run as a subprocess by the failure tests.

``python failure_worker.py BOOTSTRAP GROUP TOPIC COUNT [MAX_SLEEP_S]``: joins
GROUP in explicit mode, polls until it holds COUNT records (or 60 s pass),
prints one JSON line ``{"offsets": [...], "delivery_counts": [...]}`` and then
sleeps without acknowledging anything, so the test can SIGKILL it while it
holds the acquisition locks. It exits by itself after MAX_SLEEP_S (default 120)
so a test that fails before killing it leaves nothing behind.
"""

from __future__ import annotations

import json
import sys
import time

from kafka_share import ConsumerRecord, ShareConsumer


def main(argv: list[str]) -> int:
    bootstrap, group, topic, count_text = argv[:4]
    max_sleep_s = float(argv[4]) if len(argv) > 4 else 120.0
    count = int(count_text)
    consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        share_acknowledgement_mode="explicit",
        max_poll_records=count,
    )
    consumer.subscribe([topic])
    held: list[ConsumerRecord[bytes, bytes]] = []
    deadline = time.monotonic() + 60
    while len(held) < count and time.monotonic() < deadline:
        batch = list(consumer.poll(0.5))
        held.extend(batch)
        if batch and len(held) < count:
            # Explicit mode: the next poll needs every record acknowledged; release
            # nothing, so stop here with what we hold (count is max.poll.records).
            break
    print(
        json.dumps(
            {
                "offsets": [r.offset for r in held],
                "delivery_counts": [r.delivery_count for r in held],
            }
        ),
        flush=True,
    )
    time.sleep(max_sleep_s)  # holding the locks, never acknowledging
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
