"""``kafka-share demo``: queue semantics on one Kafka partition, shown live.

What it does:

1. starts an embedded single-node Kafka broker (unless ``--bootstrap-servers``
   points at one), and says how long that took;
2. creates a topic with ONE partition and configures the share group
   (``share.auto.offset.reset=earliest`` so records produced before the group
   existed are delivered, and a short acquisition lock);
3. produces numbered records (the record number is the first 10 bytes of
   every value);
4. runs several :class:`~kafka_share.ShareConsumer` instances at once, each in
   its own thread, all on that single partition. With a classic consumer group
   only one of them could read it; a share group hands each record to one
   consumer at a time. Consumer 1 uses explicit acknowledgement and RELEASEs
   one record in every 200 it sees on first delivery, so the broker delivers
   those again (``delivery_count == 2``), to whichever consumer fetches next;
   everything else is accepted;
5. prints a summary and checks it: every record number accepted exactly once
   (``missing == 0``, ``duplicates == 0``), then a fresh consumer in the same
   group must receive nothing, which proves the acknowledgements reached the
   broker.

The exit status is 0 when every check passed and 1 otherwise (records missing
or duplicated, a consumer failed, the broker could not start).
"""

# Imports inside functions are deliberate: the broker harness and confluent-kafka
# load only when the demo runs, not whenever the CLI is imported.
# ruff: noqa: PLC0415

from __future__ import annotations

import collections
import gc
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from kafka_share.consumer import ShareConsumer
from kafka_share.errors import KafkaError
from kafka_share.models import AcknowledgeType, ConsumerRecord, TopicIdPartition

if TYPE_CHECKING:
    from kafka_share.testing.admin import KafkaAdmin

__all__ = ["ConsumerStats", "DemoOptions", "DemoResult", "demo", "run_demo"]

#: Width of the record number at the start of every value.
_NUMBER_WIDTH = 10
_POLL_TIMEOUT_S = 0.2
_CLOSE_TIMEOUT_S = 10.0
_PLAIN_PROGRESS_INTERVAL_S = 1.0
_LIVE_REFRESH_S = 0.1

_librdkafka_log = logging.getLogger("kafka_share.demo.librdkafka")
_librdkafka_log.addHandler(logging.NullHandler())


class DemoError(Exception):
    """The demo could not run (broker start, topic creation, produce...)."""


@dataclass(frozen=True)
class DemoOptions:
    """What ``kafka-share demo`` runs; every field is a command-line option."""

    records: int = 20_000
    consumers: int = 3
    value_size: int = 100
    bootstrap_servers: str | None = None
    live: bool = True
    seconds: float = 40.0
    #: Consumer 1 releases every ``release_every``-th record it sees on first
    #: delivery (0 disables releasing; then no record is redelivered).
    release_every: int = 200
    #: ``share.record.lock.duration.ms`` of the group. 15 s is the broker's
    #: default minimum, so it is accepted by any broker (Kafka's default is 30 s).
    lock_ms: int = 15_000
    max_poll_records: int = 200
    #: Simulated processing time per record (0: none, so throughput is the client's).
    work_ms: float = 0.0
    #: How long the fresh consumer of the final check waits for (unexpected) records.
    verify_s: float = 3.0


@dataclass
class ConsumerStats:
    """Counters of one demo consumer. Only its own thread writes them."""

    name: str
    explicit: bool
    received: int = 0
    accepted: int = 0
    released: int = 0
    redelivered: int = 0
    ack_errors: int = 0
    error: str | None = None
    first_record_s: float | None = None

    @property
    def mode(self) -> str:
        return "explicit" if self.explicit else "implicit"


@dataclass
class DemoResult:
    """What the demo measured; :attr:`ok` says whether every check passed."""

    records: int
    accepted_unique: int
    missing: int
    duplicates: int
    redelivered: int
    released: int
    delivery_counts: dict[int, int]
    #: From the first record received to the last one accepted (or the stop).
    consume_seconds: float
    #: From starting the consumers to the first record (joining the group,
    #: assignment, share-partition initialisation on the broker).
    first_record_s: float | None
    consumers: list[ConsumerStats]
    broker_start_s: float | None
    produce_seconds: float
    verify_received: int | None
    timed_out: bool
    problems: list[str] = field(default_factory=list)

    @property
    def records_per_second(self) -> float:
        return self.accepted_unique / self.consume_seconds if self.consume_seconds > 0 else 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


def make_value(number: int, size: int) -> bytes:
    """The value of record ``number``: its zero-padded number, padded to ``size`` bytes."""
    head = str(number).zfill(_NUMBER_WIDTH).encode()
    return head + b"." * max(0, size - len(head))


def record_number(value: bytes | None) -> int:
    """The record number a demo value carries (raises ValueError for foreign values)."""
    if value is None or len(value) < _NUMBER_WIDTH:
        raise ValueError(f"not a demo record value: {value!r}")
    return int(value[:_NUMBER_WIDTH])


class _Tally:
    """Which record numbers were accepted, how often, and at which delivery count.

    Shared by the consumer threads; every update takes the lock once per polled batch.
    """

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self._lock = threading.Lock()
        self._accepted: collections.Counter[int] = collections.Counter()
        self.delivery_counts: collections.Counter[int] = collections.Counter()
        self.foreign = 0
        self.done = threading.Event()
        #: ``time.monotonic()`` when the last missing record was accepted.
        self.done_at: float | None = None

    def add(self, numbers: list[int], delivery_counts: list[int], foreign: int) -> None:
        with self._lock:
            self._accepted.update(numbers)
            self.delivery_counts.update(delivery_counts)
            self.foreign += foreign
            if len(self._accepted) >= self.expected and not self.done.is_set():
                self.done_at = time.monotonic()
                self.done.set()

    @property
    def unique(self) -> int:
        with self._lock:
            return len(self._accepted)

    def summary(self) -> tuple[int, int, int]:
        """(unique accepted, missing, duplicates)."""
        with self._lock:
            unique = sum(1 for n in self._accepted if 0 <= n < self.expected)
            duplicates = sum(c - 1 for c in self._accepted.values() if c > 1)
            return unique, self.expected - unique, duplicates


class _DemoConsumer:
    """One consumer thread: poll, "process", acknowledge, until told to stop."""

    def __init__(
        self,
        index: int,
        config: dict[str, object],
        topic: str,
        tally: _Tally,
        stop: threading.Event,
        started_at: float,
        release_every: int,
        work_ms: float,
    ) -> None:
        self.explicit = index == 0 and release_every > 0
        self.stats = ConsumerStats(name=f"consumer-{index + 1}", explicit=self.explicit)
        self._config = dict(config)
        if self.explicit:
            self._config["share.acknowledgement.mode"] = "explicit"
        self._config["client.id"] = f"kafka-share-demo-{index + 1}"
        self._topic = topic
        self._tally = tally
        self._stop = stop
        self._started_at = started_at
        self._release_every = release_every
        self._work_s = work_ms / 1000.0
        self._first_deliveries = 0
        self.thread = threading.Thread(target=self._run, name=self.stats.name, daemon=True)

    def _on_ack(self, offsets: dict[TopicIdPartition, set[int]], error: KafkaError | None) -> None:
        # Runs on this consumer's thread (inside poll/commit/close).
        if error is not None:
            self.stats.ack_errors += sum(len(o) for o in offsets.values())

    def _run(self) -> None:
        try:
            consumer: ShareConsumer[bytes, bytes] = ShareConsumer(self._config)
        except Exception as exc:
            self.stats.error = f"{type(exc).__name__}: {exc}"
            return
        try:
            consumer.set_acknowledgement_commit_callback(self._on_ack)
            consumer.subscribe([self._topic])
            while not self._stop.is_set():
                records = consumer.poll(_POLL_TIMEOUT_S)
                if records:
                    self._process(consumer, list(records))
            # Implicit mode: this accepts the last batch; explicit: sends what is left.
            consumer.commit_sync(_CLOSE_TIMEOUT_S)
        except Exception as exc:
            self.stats.error = f"{type(exc).__name__}: {exc}"
        finally:
            try:
                consumer.close(_CLOSE_TIMEOUT_S)
            except Exception as exc:
                self.stats.error = self.stats.error or f"close: {type(exc).__name__}: {exc}"

    def _process(
        self, consumer: ShareConsumer[bytes, bytes], records: list[ConsumerRecord[bytes, bytes]]
    ) -> None:
        stats = self.stats
        if stats.first_record_s is None:
            stats.first_record_s = time.monotonic() - self._started_at
        if self._work_s:
            time.sleep(self._work_s * len(records))  # "processing" the batch
        numbers: list[int] = []
        counts: list[int] = []
        foreign = 0
        for record in records:
            stats.received += 1
            if record.delivery_count > 1:
                stats.redelivered += 1
            if self.explicit and record.delivery_count == 1:
                self._first_deliveries += 1
                if self._first_deliveries % self._release_every == 0:
                    # Not processed: the broker makes it available again, and
                    # some consumer gets it with delivery_count == 2.
                    consumer.acknowledge(record, AcknowledgeType.RELEASE)
                    stats.released += 1
                    continue
            try:
                numbers.append(record_number(record.value))
            except ValueError:
                foreign += 1  # not ours (a reused external topic): accepted, not counted
            counts.append(record.delivery_count)
            if self.explicit:
                consumer.acknowledge(record, AcknowledgeType.ACCEPT)
            stats.accepted += 1
        # Implicit mode accepts this batch on the next poll (or commit on shutdown).
        self._tally.add(numbers, counts, foreign)


# -- output -------------------------------------------------------------------------


def _consumer_table(consumers: list[ConsumerStats], elapsed: float) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False)
    table.add_column("consumer")
    table.add_column("mode")
    table.add_column("received", justify="right")
    table.add_column("accepted", justify="right")
    table.add_column("released", justify="right")
    table.add_column("redelivered", justify="right")
    table.add_column("records/s", justify="right")
    for s in consumers:
        rate = s.accepted / elapsed if elapsed > 0 else 0.0
        table.add_row(
            s.name, s.mode, f"{s.received:,}", f"{s.accepted:,}", f"{s.released:,}",
            f"{s.redelivered:,}", f"{rate:,.0f}",
        )
    return table


def _live_view(
    tally: _Tally, consumers: list[ConsumerStats], elapsed: float, window_rate: float
) -> RenderableType:
    unique = tally.unique
    head = Text.assemble(
        ("accepted ", "bold"),
        f"{unique:,}/{tally.expected:,} records   ",
        (f"{window_rate:,.0f} records/s", "cyan"),
        f"   {elapsed:.1f} s",
    )
    bar = ProgressBar(total=tally.expected, completed=unique, width=60)
    return Group(head, bar, Text(""), _consumer_table(consumers, elapsed))


class _Reporter:
    """Live (rich) or plain output of the demo's steps and progress."""

    def __init__(self, console: Console, live: bool) -> None:
        self.console = console
        self.live = live

    def step(self, message: str) -> None:
        if self.live:
            self.console.print(f"[bold green]>[/] {message}")
        else:
            self.console.print(f"> {message}", markup=False, highlight=False)

    def plain(self, message: str) -> None:
        self.console.print(message, markup=False, highlight=False)

    @contextmanager
    def progress(self) -> Iterator[Callable[[RenderableType, str], None]]:
        """Yields ``update(renderable, plain_line)``; the live view or a line a second."""
        if self.live:
            with Live(console=self.console, auto_refresh=False, transient=False) as live:
                yield lambda view, _line: live.update(view, refresh=True)
        else:
            last = [0.0]

            def update(_view: RenderableType, line: str) -> None:
                now = time.monotonic()
                if now - last[0] >= _PLAIN_PROGRESS_INTERVAL_S:
                    last[0] = now
                    self.plain(line)

            yield update


def _print_summary(reporter: _Reporter, result: DemoResult) -> None:
    out = reporter.plain
    out("")
    out("Summary")
    out(f"  records produced       {result.records}")
    out(f"  records accepted       {result.accepted_unique} (distinct record numbers)")
    out(f"  missing                {result.missing}")
    out(f"  duplicates             {result.duplicates}")
    out(f"  released on purpose    {result.released}")
    dist = ", ".join(
        f"delivery_count {k}: {v}" for k, v in sorted(result.delivery_counts.items())
    )
    out(f"  redelivered            {result.redelivered} ({dist or 'none'})")
    out(
        f"  throughput             {result.records_per_second:,.0f} records/s "
        f"({result.accepted_unique} records in {result.consume_seconds:.2f} s "
        "from the first record)"
    )
    if result.first_record_s is not None:
        out(
            f"  first record after     {result.first_record_s:.2f} s "
            "(joining the group, share-partition initialisation)"
        )
    if result.broker_start_s is not None:
        out(f"  broker start           {result.broker_start_s:.1f} s")
    out(f"  produce                {result.produce_seconds:.2f} s")
    for s in result.consumers:
        line = (
            f"  {s.name} ({s.mode})".ljust(25)
            + f"{s.accepted} records accepted, {s.released} released, "
            f"{s.redelivered} redelivered to it"
        )
        if s.first_record_s is not None:
            line += f", first record at {s.first_record_s:.2f} s"
        if s.ack_errors:
            line += f", {s.ack_errors} acknowledgement errors"
        out(line)
    if result.verify_received is not None:
        out(f"  fresh consumer got     {result.verify_received} records (expected 0)")
    out("")
    if result.ok:
        out(
            f"OK: all {result.records} records were accepted exactly once "
            f"across {len(result.consumers)} consumers on one partition"
        )
    else:
        for problem in result.problems:
            out(f"FAILED: {problem}")



# -- the demo -------------------------------------------------------------------------


def _prepare(
    admin: KafkaAdmin, options: DemoOptions, reporter: _Reporter
) -> tuple[str, str, float]:
    from kafka_share.testing.admin import unique_name

    topic = admin.create_topic(unique_name("kafka-share-demo"), partitions=1)
    group = unique_name("kafka-share-demo")
    admin.set_group_config(
        group,
        {
            "share.auto.offset.reset": "earliest",
            "share.record.lock.duration.ms": str(options.lock_ms),
        },
    )
    reporter.step(
        f"Topic {topic} (1 partition); share group {group} "
        f"(auto.offset.reset=earliest, record lock {options.lock_ms / 1000:g} s)"
    )
    started = time.monotonic()
    _produce(admin.bootstrap_servers, topic, options)
    produce_s = time.monotonic() - started
    reporter.step(
        f"Produced {options.records:,} records of {options.value_size} bytes "
        f"in {produce_s:.2f} s"
    )
    return topic, group, produce_s


def _produce(bootstrap: str, topic: str, options: DemoOptions) -> None:
    """Produce the numbered records to partition 0 and wait for every acknowledgement."""
    from confluent_kafka import Producer

    # librdkafka's own log lines (e.g. "coordinator load in progress: retrying"
    # while a fresh broker warms up) go to a Python logger, not stderr;
    # delivery failures are reported below.
    producer: Any = Producer(
        {
            "bootstrap.servers": bootstrap,
            # Idempotence keeps retries from writing a record twice, which the
            # duplicate check would (rightly) count.
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "logger": _librdkafka_log,
        }
    )
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    for number in range(options.records):
        value = make_value(number, options.value_size)
        while True:
            try:
                producer.produce(topic, value=value, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)  # local queue full: let deliveries drain
    remaining = producer.flush(max(30.0, options.seconds))
    if remaining:
        raise DemoError(f"{remaining} record(s) to {topic} were not acknowledged in time")
    if errors:
        raise DemoError(f"producing to {topic} failed: {'; '.join(errors[:3])}")


def _consume(
    bootstrap: str, topic: str, group: str, options: DemoOptions, reporter: _Reporter
) -> tuple[_Tally, list[_DemoConsumer], float, bool]:
    tally = _Tally(options.records)
    stop = threading.Event()
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        # The broker acquires at most max.poll.records records per fetch (instead of
        # whole producer batches, which can hold thousands of records), so the one
        # partition's records are spread over every consumer of the group.
        "share.acquire.mode": "record_limit",
        "max.poll.records": options.max_poll_records,
    }
    started = time.monotonic()
    workers = [
        _DemoConsumer(
            i, config, topic, tally, stop, started, options.release_every, options.work_ms
        )
        for i in range(options.consumers)
    ]
    explicit = [w.stats.name for w in workers if w.explicit]
    note = (
        f"; {explicit[0]} is explicit and releases 1 in {options.release_every} records "
        "on first delivery"
        if explicit
        else ""
    )
    reporter.step(f"Starting {options.consumers} share consumers on the one partition{note}")
    for w in workers:
        w.thread.start()
    deadline = started + options.seconds
    try:
        timed_out = _watch(reporter, tally, workers, started, deadline)
    finally:
        stopped = tally.done_at or time.monotonic()
        stop.set()
        for w in workers:
            w.thread.join(_CLOSE_TIMEOUT_S * 2 + 5)
    firsts = [w.stats.first_record_s for w in workers if w.stats.first_record_s is not None]
    consume_s = stopped - started - (min(firsts) if firsts else 0.0)
    return tally, workers, consume_s, timed_out


def _watch(
    reporter: _Reporter,
    tally: _Tally,
    workers: list[_DemoConsumer],
    started: float,
    deadline: float,
) -> bool:
    """Show progress until every record is accepted; True if ``deadline`` passed first."""
    stats = [w.stats for w in workers]
    samples: collections.deque[tuple[float, int]] = collections.deque()
    with reporter.progress() as update:
        while True:
            finished = tally.done.wait(_LIVE_REFRESH_S)
            now = time.monotonic()
            unique = tally.unique
            samples.append((now, unique))
            while now - samples[0][0] > 1.0:
                samples.popleft()
            t0, u0 = samples[0]
            window_rate = (unique - u0) / (now - t0) if now > t0 else 0.0
            elapsed = now - started
            line = f"  {elapsed:5.1f} s  accepted {unique}/{tally.expected}  " + "  ".join(
                f"{s.name}={s.accepted}" for s in stats
            )
            update(_live_view(tally, stats, elapsed, window_rate), line)
            if finished:
                return False
            if all(not w.thread.is_alive() for w in workers):
                return False  # every consumer failed; the summary says why
            if now >= deadline:
                return True


def _verify_nothing_left(bootstrap: str, topic: str, group: str, wait_s: float) -> int:
    """Records a fresh consumer of ``group`` receives within ``wait_s`` (expected: 0)."""
    consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            # Explicit and never acknowledging: anything received is released on close.
            "share.acknowledgement.mode": "explicit",
            "client.id": "kafka-share-demo-verify",
        }
    )
    received = 0
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + wait_s
        while received == 0 and time.monotonic() < deadline:
            records = consumer.poll(min(0.5, max(0.0, deadline - time.monotonic())))
            received += len(records)
            for record in records:
                consumer.acknowledge(record, AcknowledgeType.RELEASE)
    finally:
        consumer.close(_CLOSE_TIMEOUT_S)
    return received


def run_demo(options: DemoOptions, console: Console | None = None) -> DemoResult:
    """Run the demo and return what it measured (see the module docstring).

    Raises:
        DemoError: the broker could not be started, or topic creation, group
            configuration or producing failed.
    """
    if options.records < 1 or options.consumers < 1:
        raise ValueError("records and consumers must be at least 1")
    console = console or Console()
    reporter = _Reporter(console, options.live)
    cluster: Any = None
    broker_start_s: float | None = None
    bootstrap = options.bootstrap_servers
    try:
        if bootstrap is None:
            cluster, broker_start_s = _start_broker(reporter)
            bootstrap = cluster.bootstrap_servers
        else:
            reporter.step(f"Using the Kafka cluster at {bootstrap}")
        result = _run_on(bootstrap, options, reporter, own_cluster=cluster is not None)
        result.broker_start_s = broker_start_s
    finally:
        if cluster is not None:
            cluster.stop()
    _print_summary(reporter, result)
    return result


def _start_broker(reporter: _Reporter) -> tuple[Any, float]:
    """An embedded broker, started; and how long that took."""
    from kafka_share.testing.errors import HarnessError
    from kafka_share.testing.local import LocalKafkaCluster

    started = time.monotonic()
    try:
        cluster = LocalKafkaCluster()
        reporter.step(f"Starting an embedded Kafka {cluster.kafka_version} broker...")
        cluster.start()
    except (HarnessError, OSError) as exc:
        # start() cleans up after itself
        raise DemoError(f"the local Kafka broker could not start: {exc}") from exc
    broker_start_s = time.monotonic() - started
    reporter.step(f"Broker up at {cluster.bootstrap_servers} in {broker_start_s:.1f} s")
    return cluster, broker_start_s


def _run_on(
    bootstrap: str, options: DemoOptions, reporter: _Reporter, *, own_cluster: bool,
) -> DemoResult:
    """Produce, consume with the workers, check: the demo on a running cluster.
    An external cluster (``own_cluster`` false) is left without the demo's topic."""
    from kafka_share.testing.admin import KafkaAdmin
    from kafka_share.testing.errors import HarnessError

    admin = KafkaAdmin(bootstrap)
    topic: str | None = None
    try:
        try:
            topic, group, produce_s = _prepare(admin, options, reporter)
        except HarnessError as exc:
            raise DemoError(str(exc)) from exc
        try:
            tally, workers, consume_s, timed_out = _consume(
                bootstrap, topic, group, options, reporter
            )
            result = _result(options, tally, workers, consume_s, timed_out)
            result.produce_seconds = produce_s
            if options.verify_s > 0 and result.ok:
                _verify(bootstrap, topic, group, options, reporter, result)
        finally:
            if not own_cluster and topic is not None:
                try:
                    admin.delete_topic(topic)  # leave an external cluster clean
                except HarnessError:
                    pass
    finally:
        admin.close()
        # Destroy the admin client now: once the broker stops, a live
        # librdkafka client would log connection errors to stderr.
        del admin
        gc.collect()
    return result


def _verify(bootstrap: str, topic: str, group: str, options: DemoOptions,
            reporter: _Reporter, result: DemoResult) -> None:
    reporter.step(
        f"Checking that a fresh consumer of the group gets nothing ({options.verify_s:g} s)"
    )
    result.verify_received = _verify_nothing_left(bootstrap, topic, group, options.verify_s)
    if result.verify_received:
        result.problems.append(
            f"a fresh consumer still received {result.verify_received} "
            "record(s): acknowledgements did not all reach the broker"
        )


def _result(
    options: DemoOptions,
    tally: _Tally,
    workers: list[_DemoConsumer],
    consume_s: float,
    timed_out: bool,
) -> DemoResult:
    unique, missing, duplicates = tally.summary()
    stats = [w.stats for w in workers]
    firsts = [s.first_record_s for s in stats if s.first_record_s is not None]
    counts = dict(tally.delivery_counts)
    result = DemoResult(
        records=options.records,
        accepted_unique=unique,
        missing=missing,
        duplicates=duplicates,
        redelivered=sum(v for k, v in counts.items() if k > 1),
        released=sum(s.released for s in stats),
        delivery_counts=counts,
        consume_seconds=consume_s,
        first_record_s=min(firsts) if firsts else None,
        consumers=stats,
        broker_start_s=None,
        produce_seconds=0.0,
        verify_received=None,
        timed_out=timed_out,
    )
    if missing:
        why = f" within {options.seconds:g} s" if timed_out else ""
        result.problems.append(f"{missing} record(s) missing: never accepted{why}")
    if duplicates:
        result.problems.append(f"{duplicates} duplicate acceptance(s)")
    if tally.foreign:
        result.problems.append(f"{tally.foreign} record(s) that the demo did not produce")
    for s in stats:
        if s.error is not None:
            result.problems.append(f"{s.name} failed: {s.error}")
        if s.ack_errors:
            result.problems.append(f"{s.name}: {s.ack_errors} acknowledgement(s) failed")
    return result


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@click.command()
@click.option("--records", type=click.IntRange(min=1), default=20_000, show_default=True,
              help="How many records to produce.")
@click.option("--consumers", type=click.IntRange(min=1, max=64), default=3, show_default=True,
              help="How many share consumers (threads) read the one partition.")
@click.option("--value-size", type=click.IntRange(min=_NUMBER_WIDTH, max=1_000_000),
              default=100, show_default=True, help="Bytes per record value.")
@click.option("--bootstrap-servers", default=None, metavar="HOST:PORT[,...]",
              help="Use this Kafka 4.x cluster instead of starting a local broker.")
@click.option("--no-live", is_flag=True, help="Plain line output (logs, CI) instead of the "
              "live display.")
@click.option("--seconds", type=click.FloatRange(min=1.0), default=40.0, show_default=True,
              help="Maximum time for consuming; records not accepted by then count as missing.")
@click.option("--work-ms", type=click.FloatRange(min=0.0, max=1000.0), default=0.0,
              show_default=True, help="Simulated processing time per record, in ms.")
@click.option("--release-every", type=click.IntRange(min=0), default=200, show_default=True,
              help="Consumer 1 releases every N-th record on first delivery (0: never).")
def demo(
    records: int,
    consumers: int,
    value_size: int,
    bootstrap_servers: str | None,
    no_live: bool,
    seconds: float,
    work_ms: float,
    release_every: int,
) -> None:
    """Share-group demo: several consumers share ONE partition, like a queue.

    Starts a local Kafka broker (unless --bootstrap-servers), produces numbered
    records to a one-partition topic, consumes them with several share
    consumers at once (one of them releasing a few records so they are
    redelivered), and checks that every record was accepted exactly once.
    Exits 1 if any record is missing or duplicated.
    """
    options = DemoOptions(
        records=records,
        consumers=consumers,
        value_size=value_size,
        bootstrap_servers=bootstrap_servers,
        live=not no_live,
        seconds=seconds,
        release_every=release_every,
        work_ms=work_ms,
    )
    # Plain output is for logs: no wrapping at the terminal width.
    console = Console(highlight=False, soft_wrap=no_live)
    if threading.current_thread() is threading.main_thread():
        # SIGTERM would otherwise end Python without running the cleanup that
        # stops the broker JVM; make it an interrupt like Ctrl+C.
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        result = run_demo(options, console)
    except DemoError as exc:
        raise click.ClickException(str(exc)) from exc
    except KeyboardInterrupt:
        console.print("interrupted", markup=False)
        raise SystemExit(130) from None
    if not result.ok:
        raise SystemExit(1)
