"""``record.decoder=python`` against a real broker: a consumer in a fresh
process polls every record without ever importing numpy or pyarrow; with
``auto`` it loads numpy (never pyarrow: only ``poll_arrow`` needs it)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

pytestmark = pytest.mark.integration

_CONSUME = """
import sys
from kafka_share import ShareConsumer
bootstrap, group, topic, total, decoder = sys.argv[1:]
consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                          "record.decoder": decoder})
consumer.subscribe([topic])
values = []
for _ in range(120):
    values.extend(r.value for r in consumer.poll(0.5))
    if len(values) >= int(total):
        break
consumer.close()
# "auto" loads numpy on a background thread at the first large batch.
from kafka_share._app import decoding
if decoding._loading is not None:
    decoding._loading.join(60)
print(len(values), len(set(values)), "numpy" in sys.modules, "pyarrow" in sys.modules)
"""


@pytest.mark.parametrize(("decoder", "numpy"), [("python", "False"), ("auto", "True")])
def test_python_decoder_consumes_without_numpy(
    decoder: str, numpy: str, topic_factory: Any, share_group: str, kafka_produce: Any,
    kafka_bootstrap: str,
) -> None:
    topic = topic_factory()
    # One produce call: batches of many small records (what auto decodes with numpy).
    kafka_produce(topic, [b"value-%d" % i for i in range(500)])
    proc = subprocess.run(
        [sys.executable, "-c", _CONSUME, kafka_bootstrap, share_group, topic, "500", decoder],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["500", "500", numpy, "False"], proc.stderr
