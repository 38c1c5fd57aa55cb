"""DeadLetter.from_record: the broker's provenance headers (Kafka 4.4, KIP-1191) read back.

The headers are built as Kafka 4.4's ``ShareGroupDLQStateManager.ProduceRequestHandler.headers``
writes them: every value UTF-8 text, numbers through ``Integer/Long/Short.toString``,
the delivery count and the message only when known.
"""

from __future__ import annotations

import pytest

import kafka_share
from kafka_share.dead_letter import (
    DELIVERY_COUNT_EXCEEDED_MESSAGE,
    REJECTED_MESSAGE,
    DeadLetter,
)
from kafka_share.errors import CorruptMessageError
from kafka_share.models import ConsumerRecord, TimestampType
from kafka_share.records.batch import iter_batches
from kafka_share.records.builder import NewRecord, build_batch
from tests.fresh import run_fresh


def _headers(
    topic: str = "orders",
    partition: int = 2,
    offset: int = 41,
    group: str = "billing",
    delivery_count: int | None = 3,
    message: str | None = DELIVERY_COUNT_EXCEEDED_MESSAGE,
) -> list[tuple[str, bytes | None]]:
    """The headers in the broker's order and encoding."""
    headers: list[tuple[str, bytes | None]] = [
        ("__dlq.errors.topic", topic.encode()),
        ("__dlq.errors.partition", str(partition).encode()),
        ("__dlq.errors.offset", str(offset).encode()),
        ("__dlq.errors.group", group.encode()),
    ]
    if delivery_count is not None:
        headers.append(("__dlq.errors.delivery.count", str(delivery_count).encode()))
    if message is not None:
        headers.append(("__dlq.errors.message", message.encode()))
    return headers


def _record(
    headers: list[tuple[str, bytes | None]],
    key: bytes | None = None,
    value: bytes | None = None,
) -> ConsumerRecord[bytes | None, bytes | None]:
    return ConsumerRecord("dlq.orders", 0, 7, 0, TimestampType.CREATE_TIME, key, value,
                          tuple(headers), None, 1)


def test_every_field_is_read_from_the_headers() -> None:
    letter = DeadLetter.from_record(_record(_headers()))
    assert letter == DeadLetter("orders", 2, 41, "billing", 3,
                                DELIVERY_COUNT_EXCEEDED_MESSAGE, None, None)
    assert letter.delivery_limit_exceeded and not letter.rejected


def test_it_is_the_public_name() -> None:
    assert kafka_share.DeadLetter is DeadLetter


def test_a_copied_record_keeps_its_key_and_value() -> None:
    letter = DeadLetter.from_record(_record(_headers(message=REJECTED_MESSAGE), b"k", b"v"))
    assert letter is not None
    assert (letter.key, letter.value) == (b"k", b"v")
    assert letter.rejected and not letter.delivery_limit_exceeded


def test_deserialized_keys_and_values_pass_through() -> None:
    record = ConsumerRecord("dlq.orders", 0, 7, 0, TimestampType.CREATE_TIME, "k", {"id": 1},
                            tuple(_headers()), None, 1)
    letter = DeadLetter.from_record(record)
    assert letter is not None and (letter.key, letter.value) == ("k", {"id": 1})


@pytest.mark.parametrize("headers", [[], [("trace", b"x")], [("__dlq.other", b"x")]])
def test_a_record_without_provenance_headers_is_not_a_dead_letter(
    headers: list[tuple[str, bytes | None]],
) -> None:
    assert DeadLetter.from_record(_record(headers, b"k", b"v")) is None


def test_the_optional_headers_may_be_absent() -> None:
    letter = DeadLetter.from_record(_record(_headers(delivery_count=None, message=None)))
    assert letter is not None
    assert (letter.delivery_count, letter.message) == (None, None)
    assert not letter.rejected and not letter.delivery_limit_exceeded


def test_extremes_of_each_number_are_read() -> None:
    letter = DeadLetter.from_record(
        _record(_headers(partition=2**31 - 1, offset=2**63 - 1, delivery_count=2**15 - 1)))
    assert letter is not None
    assert (letter.partition, letter.offset, letter.delivery_count) == (
        2**31 - 1, 2**63 - 1, 2**15 - 1)


def test_non_ascii_text_is_utf8() -> None:
    letter = DeadLetter.from_record(_record(_headers(topic="zählung", group="grüppe")))
    assert letter is not None and (letter.topic, letter.group) == ("zählung", "grüppe")


def test_the_last_of_repeated_headers_counts() -> None:
    letter = DeadLetter.from_record(_record([*_headers(), ("__dlq.errors.offset", b"99")]))
    assert letter is not None and letter.offset == 99


def test_other_headers_are_ignored() -> None:
    letter = DeadLetter.from_record(_record([("trace", None), *_headers()]))
    assert letter is not None and letter.offset == 41


@pytest.mark.parametrize(
    ("missing", "name"),
    [(0, "__dlq.errors.topic"), (1, "__dlq.errors.partition"), (2, "__dlq.errors.offset"),
     (3, "__dlq.errors.group")],
)
def test_a_missing_required_header_is_named(missing: int, name: str) -> None:
    headers = _headers()
    del headers[missing]
    with pytest.raises(CorruptMessageError, match=rf"dlq.orders-0@7: header '{name}' is missing"):
        DeadLetter.from_record(_record(headers))


@pytest.mark.parametrize(
    ("name", "raw", "problem"),
    [
        ("__dlq.errors.partition", b"+1", "is not a decimal number: '\\+1'"),
        ("__dlq.errors.partition", b" 1", "is not a decimal number"),
        ("__dlq.errors.partition", b"1_0", "is not a decimal number"),
        ("__dlq.errors.partition", b"\xd9\xa1", "is not a decimal number"),  # Arabic-Indic 1
        ("__dlq.errors.partition", b"", "is not a decimal number"),
        ("__dlq.errors.partition", b"-1", "is out of range"),
        ("__dlq.errors.partition", str(2**31).encode(), "is out of range"),
        ("__dlq.errors.offset", str(2**63).encode(), "is out of range"),
        ("__dlq.errors.delivery.count", b"32768", "is out of range"),
        ("__dlq.errors.delivery.count", b"three", "is not a decimal number"),
        ("__dlq.errors.topic", b"\xff", "is not UTF-8 text"),
        ("__dlq.errors.message", b"\xc3", "is not UTF-8 text"),
        ("__dlq.errors.group", None, "has a null value"),
    ],
)
def test_a_malformed_header_is_named(name: str, raw: bytes | None, problem: str) -> None:
    headers = [(n, raw if n == name else v) for n, v in _headers()]
    with pytest.raises(CorruptMessageError, match=rf"header '{name}' {problem}"):
        DeadLetter.from_record(_record(headers))


def test_headers_through_a_real_record_batch() -> None:
    """The headers survive the v2 record format the broker writes them in."""
    batch = build_batch([NewRecord(None, None, _headers(message=REJECTED_MESSAGE))])
    (decoded,) = list(iter_batches(batch, check_crcs=True))
    (_, _, key, value, headers) = decoded.records()[0]
    record = ConsumerRecord("dlq.orders", 0, 0, 0, TimestampType.CREATE_TIME, key, value,
                            headers, None, 1)
    assert DeadLetter.from_record(record) == DeadLetter(
        "orders", 2, 41, "billing", 3, REJECTED_MESSAGE)


def test_dead_letter_loads_on_first_use_not_with_the_package() -> None:
    # Start-up time: a consumer without a dead-letter topic never needs the class.
    script = (
        "import sys\n"
        "from kafka_share import ShareConsumer\n"
        "c = ShareConsumer({'bootstrap.servers': 'localhost:1', 'group.id': 'g'})\n"
        "c.close(timeout=1)\n"
        "print('kafka_share.dead_letter' in sys.modules)\n"
        "from kafka_share import DeadLetter\n"
        "print(DeadLetter.__module__)\n"
    )
    assert run_fresh(script).split() == ["False", "kafka_share.dead_letter"]
