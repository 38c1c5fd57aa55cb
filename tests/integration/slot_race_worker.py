"""One attempt at a read slot, as a Spark task would run it (for the race test).

    python slot_race_worker.py OPTIONS_JSON START_AT BUDGET

Waits until the wall clock reaches START_AT, reads slot 0 of batch 1, and prints
``RESULT <json>``: the rows' (partition, offset, deliveryCount) and its END stats.
"""

from __future__ import annotations

import json
import sys
import time

from kafka_share.spark import _slots
from kafka_share.spark._options import parse_source_options
from kafka_share.spark._staging import StagingStore


def main() -> None:
    options = parse_source_options(json.loads(sys.argv[1]))
    budget = int(sys.argv[3])
    time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
    rows: list[list[int]] = []
    attempt = _slots._Slot(options, 1, 0, budget)  # what read_slot runs, and its counts
    for table in attempt.run():
        for p, o, d in zip(table.column("partition").to_pylist(),
                           table.column("offset").to_pylist(),
                           table.column("deliveryCount").to_pylist(), strict=True):
            rows.append([p, o, d])
    chunks = list(StagingStore(options.staging_location).slot_chunks(1, 0))
    print("RESULT " + json.dumps({"rows": rows, "chunks": len(chunks),
                                  "stats": attempt.result.as_stats()}), flush=True)
    _slots._close_all()


if __name__ == "__main__":
    main()
