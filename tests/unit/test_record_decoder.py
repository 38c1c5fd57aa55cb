"""``record.decoder``: "python" keeps numpy and pyarrow out of a consumer that
only polls; the default ("auto") decodes large batches of small records with
numpy (never pyarrow), loaded at the first such batch."""

from __future__ import annotations

import pytest

from kafka_share import ConfigError, ShareConsumer
from tests.fresh import run_fresh

# Nothing listens here: the records are put in the fetch buffer directly.
NOWHERE = "127.0.0.1:9"

# Polls 200 records of one batch (vectorised by default: >= 160 records of a few
# bytes) from the fetch buffer, as if a ShareFetch response had brought them.
_POLL_200 = f"""
import sys, uuid
from kafka_share import ShareConsumer
from kafka_share._handoff.events import CompletedShareFetch
from kafka_share.models import TopicIdPartition
from kafka_share.records.builder import build_batch

def poll_200(**config):
    consumer = ShareConsumer(bootstrap_servers={NOWHERE!r}, group_id="g", **config)
    consumer.subscribe(["t"])
    data = build_batch([(None, b"v%d" % i) for i in range(200)])
    tip = TopicIdPartition(uuid.UUID(int=1), "t", 0)
    consumer._core._fetch_buffer.add_all(
        [CompletedShareFetch(1, tip, memoryview(data), [(0, 199, 1)], None)])
    records = consumer.poll(10)
    consumer.close(timeout=1)
    return [r.value for r in records]
"""


def _run(script: str) -> list[str]:
    return run_fresh(_POLL_200 + script).split()


def test_python_decoder_never_imports_numpy_or_pyarrow_for_poll() -> None:
    out = _run(
        "values = poll_200(record_decoder='python')\n"
        "assert values == [b'v%d' % i for i in range(200)], values[:3]\n"
        "print('numpy' in sys.modules, 'pyarrow' in sys.modules)\n"
        # poll_arrow still works on such a consumer: it imports what it needs.
        "c = ShareConsumer({'bootstrap.servers': " + repr(NOWHERE) + ", 'group.id': 'g', "
        "'record.decoder': 'python'})\n"
        "try:\n"
        "    c.poll_arrow(0)\n"
        "except Exception as exc:\n"
        "    assert 'not subscribed' in str(exc), exc\n"
        "c.close(timeout=1)\n"
        "print('numpy' in sys.modules, 'pyarrow' in sys.modules)\n"
    )
    assert out == ["False", "False", "True", "True"]


def test_default_decoder_loads_numpy_off_the_poll_then_decodes_large_batches_with_it() -> None:
    """The first large batch starts loading numpy on a daemon thread and decodes
    in pure Python (no poll waits for the import); batches after the load go
    through numpy. A consumer that gets no such batch never loads it."""
    out = _run(
        "from kafka_share._app import decoding\n"
        "c = ShareConsumer(bootstrap_servers=" + repr(NOWHERE) + ", group_id='g')\n"
        "c.close(timeout=1)\n"
        "print('numpy' in sys.modules)\n"
        "values = poll_200()\n"
        "assert values == [b'v%d' % i for i in range(200)], values[:3]\n"
        "decoding._loading.join(30)\n"
        "import kafka_share.records.vectorised as vectorised\n"
        "calls = []\n"
        "original = vectorised.record_pieces\n"
        "def counting(batch, *args):\n"
        "    calls.append(batch.record_count)\n"
        "    return original(batch, *args)\n"
        "vectorised.record_pieces = counting\n"
        "values = poll_200()\n"
        "assert values == [b'v%d' % i for i in range(200)], values[:3]\n"
        "print(calls, 'numpy' in sys.modules, 'pyarrow' in sys.modules)\n"
    )
    # numpy only: pyarrow is poll_arrow's.
    assert out == ["False", "[200]", "True", "False"]


def test_the_numpy_load_starts_when_the_poll_that_asked_for_it_ends() -> None:
    """Started while the poll still decoded, the import (holding the GIL for most
    of ~50 ms) delayed the records that poll returns: a consumer's first ones."""
    out = _run(
        "from kafka_share._app import decoding\n"
        "loading_while_decoding = []\n"
        "original = decoding.FetchDecoder._chunks\n"
        "def spy(self, batch, shape):\n"
        "    pieces = original(self, batch, shape)\n"
        "    loading_while_decoding.append(decoding._loading is not None)\n"
        "    return pieces\n"
        "decoding.FetchDecoder._chunks = spy\n"
        "values = poll_200()\n"
        "assert values == [b'v%d' % i for i in range(200)], values[:3]\n"
        "print(loading_while_decoding, decoding._loading is not None)\n"
        "decoding._loading.join(30)\n"
        "print(decoding._VECTORISED is not None and decoding._VECTORISED is not False)\n"
    )
    assert out == ["[False]", "True", "True"]


def test_subscribing_builds_the_row_decoders_table_on_a_thread_constructing_does_not() -> None:
    """The varint table (6-12 ms, ~1.7 MB) is built while the consumer joins its
    group, not by the poll that brings the first records; a consumer only
    constructed does not pay for it."""
    out = _run(
        "from kafka_share._app import decoding\n"
        "from kafka_share.records import row_decoder\n"
        "c = ShareConsumer(bootstrap_servers=" + repr(NOWHERE) + ", group_id='g')\n"
        "print(row_decoder.prepared(), decoding._preparing is None)\n"
        "c.subscribe(['t'])\n"
        "decoding._preparing.join(30)\n"
        "print(row_decoder.prepared(), decoding._preparing.name)\n"
        "c.close(timeout=1)\n"
    )
    assert out == ["False", "True", "True", "kafka-share-decoder-tables"]


@pytest.mark.parametrize("value", ["numpy", "Python", "", 1, True])
def test_a_bad_record_decoder_names_the_key_and_the_choices(value: object) -> None:
    with pytest.raises(ConfigError, match=r"record\.decoder.*'auto', 'python'"):
        ShareConsumer({"bootstrap.servers": NOWHERE, "group.id": "g", "record.decoder": value})
