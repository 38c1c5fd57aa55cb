"""Poison records in explicit acknowledgement mode: retry a few times, then reject.

    python examples/explicit_poison.py --bootstrap-servers localhost:9092 \\
        --group workers --topic jobs [--max-records N] [--timeout SECONDS] \\
        [--max-attempts 3] [--dead-letter-topic dlq.jobs]

Records are JSON objects. Two kinds of bad record are handled:

* The handler fails (here: on objects with ``"poison": true``). The record is
  RELEASEd, so the broker delivers it again, possibly to another consumer,
  with ``delivery_count`` one higher. Once it has failed ``--max-attempts``
  times it is REJECTed: archived, never delivered again. (The broker also stops
  redelivering on its own at the group's ``share.delivery.count.limit``,
  5 by default; rejecting earlier avoids burning those attempts.)
* The value is not JSON. The deserializer raises, ``poll()`` raises
  :class:`RecordDeserializationError` (the records before it were returned by
  the previous poll), and the record, which ``poll()`` cannot return, is
  rejected by its coordinates with ``acknowledge_offset(..., REJECT)``:
  retrying cannot fix its bytes.

Every other record is ACCEPTed. In explicit mode every record returned by
``poll()`` must be acknowledged before the next ``poll()``.

With ``--dead-letter-topic`` (Kafka 4.4 with ``share.version=2``, KIP-1191) the
group gets a dead-letter queue first: ``errors.deadletterqueue.topic.name`` and
``errors.deadletterqueue.copy.record.enable=true``, set through
:class:`kafka_share.admin.Admin`, which refuses a topic the brokers would not
write to and says what to change (the topic needs
``errors.deadletterqueue.group.enable=true`` and a name starting with the
brokers' ``errors.deadletterqueue.topic.name.prefix``, ``dlq.`` by default).
The broker then writes every rejected record, and every record that reaches
the delivery limit, to that topic, with its provenance in headers. After the
run the example reads the dead letters back (with a share group of its own,
``<group>.dead-letters``) and prints each one's provenance, read with
:meth:`kafka_share.DeadLetter.from_record`.

Stops after ``--max-records`` records were settled (accepted or rejected),
after ``--timeout`` seconds, or on Ctrl+C / SIGTERM, then prints a summary.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from kafka_share import (
    AcknowledgeType,
    ConsumerRecord,
    DeadLetter,
    RecordDeserializationError,
    ShareConsumer,
    WakeupError,
)
from kafka_share.admin import Admin


class PoisonError(Exception):
    """The handler cannot process this record."""


def deserialize(value: bytes) -> dict[str, Any]:
    """JSON value deserializer; raises on anything else (ValueError, UnicodeDecodeError)."""
    obj = json.loads(value)
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    return obj


def handle(record: ConsumerRecord[bytes, dict[str, Any]]) -> None:
    """The application's work. Fails on poison records, as a buggy handler would."""
    if record.value.get("poison"):
        raise PoisonError(f"cannot process {record.value!r}")


@dataclass
class Summary:
    #: (partition, offset) of every accepted record
    processed: list[tuple[int, int]] = field(default_factory=list)
    #: (partition, offset) -> why it was rejected
    rejected: dict[tuple[int, int], str] = field(default_factory=dict)
    releases: int = 0

    @property
    def settled(self) -> int:
        return len(self.processed) + len(self.rejected)


def install_stop_handlers(consumer: ShareConsumer[Any, Any]) -> None:
    """SIGINT and SIGTERM make the blocked (or next) ``poll()`` raise WakeupError."""

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        print(f"received {signal.Signals(signum).name}, stopping", file=sys.stderr, flush=True)
        # From a helper thread: a signal handler runs on the main thread at an
        # arbitrary point, possibly while it holds one of the consumer's locks.
        threading.Thread(target=consumer.wakeup, name="wakeup").start()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)


def settle(
    consumer: ShareConsumer[bytes, dict[str, Any]],
    record: ConsumerRecord[bytes, dict[str, Any]],
    max_attempts: int,
    summary: Summary,
) -> None:
    """Process one record and acknowledge it: ACCEPT, RELEASE (retry) or REJECT."""
    where = f"partition={record.partition} offset={record.offset}"
    try:
        handle(record)
    except PoisonError as exc:
        if record.delivery_count >= max_attempts:
            consumer.acknowledge(record, AcknowledgeType.REJECT)
            summary.rejected[record.partition, record.offset] = "handler failed"
            print(f"rejected {where} delivery_count={record.delivery_count}: {exc}", flush=True)
        else:
            consumer.acknowledge(record, AcknowledgeType.RELEASE)
            summary.releases += 1
            print(f"released {where} delivery_count={record.delivery_count}: {exc}", flush=True)
        return
    consumer.acknowledge(record, AcknowledgeType.ACCEPT)
    summary.processed.append((record.partition, record.offset))
    print(f"processed {where} delivery_count={record.delivery_count}", flush=True)


def run(
    bootstrap_servers: str,
    group: str,
    topic: str,
    max_records: int | None,
    timeout_s: float | None,
    max_attempts: int,
) -> Summary:
    consumer: ShareConsumer[bytes, dict[str, Any]] = ShareConsumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        },
        value_deserializer=deserialize,
    )
    install_stop_handlers(consumer)
    summary = Summary()
    deadline = time.monotonic() + timeout_s if timeout_s is not None else None
    try:
        consumer.subscribe([topic])
        while max_records is None or summary.settled < max_records:
            wait_s = 1.0
            if deadline is not None:
                wait_s = min(wait_s, deadline - time.monotonic())
                if wait_s <= 0:
                    break
            try:
                records = consumer.poll(timeout=wait_s)
            except WakeupError:
                break
            except RecordDeserializationError as exc:
                # The consumer released it already; REJECT overrides that.
                consumer.acknowledge_offset(
                    exc.topic, exc.partition, exc.offset, AcknowledgeType.REJECT
                )
                summary.rejected[exc.partition, exc.offset] = "undeserializable"
                print(
                    f"rejected partition={exc.partition} offset={exc.offset}: "
                    f"undeserializable value {exc.value!r}",
                    flush=True,
                )
                continue
            for record in records:
                settle(consumer, record, max_attempts, summary)
        # Send the acknowledgements of the last batch and wait for the broker.
        try:
            results = consumer.commit_sync(timeout=10.0)
        except WakeupError:
            results = consumer.commit_sync(timeout=10.0)  # a late signal hit this call
        for partition, error in results.items():
            if error is not None:
                print(f"acknowledging {partition} failed: {error}", file=sys.stderr)
    finally:
        consumer.close()
    return summary


def configure_dead_letters(bootstrap_servers: str, group: str, dead_letter_topic: str) -> None:
    """Give ``group`` a dead-letter queue that keeps a copy of each record.

    Raises InvalidConfigError, saying what to change, when the brokers would
    not write to the topic (a cluster below share.version=2, a topic not
    enabled as a dead-letter queue, a name without the brokers' prefix).
    """
    with Admin(bootstrap_servers=bootstrap_servers) as admin:
        admin.alter_group_configs(group, {
            "errors.deadletterqueue.topic.name": dead_letter_topic,
            "errors.deadletterqueue.copy.record.enable": True,
        })


def read_dead_letters(
    bootstrap_servers: str, group: str, dead_letter_topic: str, expected: int, timeout_s: float
) -> list[DeadLetter[bytes, bytes]]:
    """Read ``group``'s dead letters from the topic until ``expected`` came (or the timeout).

    The broker writes them a moment after the REJECT (or the last delivery)
    was acknowledged. The reading group accepts what it reads, so each run
    shows the dead letters written since the last one.
    """
    reader_group = f"{group}.dead-letters"
    with Admin(bootstrap_servers=bootstrap_servers) as admin:
        admin.alter_group_configs(reader_group, {"share.auto.offset.reset": "earliest"})
    letters: list[DeadLetter[bytes, bytes]] = []
    deadline = time.monotonic() + timeout_s
    reader: ShareConsumer[bytes, bytes] = ShareConsumer(
        {"bootstrap.servers": bootstrap_servers, "group.id": reader_group}
    )
    with reader:
        reader.subscribe([dead_letter_topic])
        while len(letters) < expected and time.monotonic() < deadline:
            for record in reader.poll(timeout=0.5):
                letter = DeadLetter.from_record(record)
                if letter is not None and letter.group == group:
                    letters.append(letter)
    return letters


def print_dead_letters(letters: list[DeadLetter[bytes, bytes]]) -> None:
    for letter in letters:
        print(
            f"dead letter partition={letter.partition} offset={letter.offset} "
            f"delivery_count={letter.delivery_count} reason={letter.message!r} "
            f"value={letter.value!r}",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True, help="host:port[,host:port]")
    parser.add_argument("--group", required=True, help="share group id")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--max-records", type=int, default=None,
                        help="stop after this many records were accepted or rejected")
    parser.add_argument("--timeout", type=float, default=None,
                        help="stop after this many seconds")
    parser.add_argument("--max-attempts", type=int, default=3,
                        help="reject a failing record on this delivery (default 3)")
    parser.add_argument("--dead-letter-topic", default=None,
                        help="write rejected records to this dead-letter topic and print "
                        "them afterwards (Kafka 4.4, share.version=2)")
    args = parser.parse_args(argv)
    if args.max_attempts < 1:
        parser.error("--max-attempts must be at least 1")
    if args.dead_letter_topic is not None:
        configure_dead_letters(args.bootstrap_servers, args.group, args.dead_letter_topic)
    summary = run(args.bootstrap_servers, args.group, args.topic, args.max_records,
                  args.timeout, args.max_attempts)
    if args.dead_letter_topic is not None:
        print_dead_letters(read_dead_letters(
            args.bootstrap_servers, args.group, args.dead_letter_topic,
            expected=len(summary.rejected), timeout_s=30.0))
    rejected = ",".join(f"{p}:{o}" for p, o in sorted(summary.rejected))
    print(
        f"summary: processed={len(summary.processed)} rejected={len(summary.rejected)} "
        f"releases={summary.releases} rejected_offsets=[{rejected}]",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
