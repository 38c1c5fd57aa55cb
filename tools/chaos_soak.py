"""Chaos soak: share consumers under broker kills, consumer kills and connection cuts.

Starts a 3-node KRaft cluster with ``kafka_share.testing``, a topic with
several partitions (replication factor 3, ``min.insync.replicas=2``), a
confluent-kafka producer writing uniquely numbered records at a steady rate,
and N kafka-share consumer *processes* in one share group. For ``--duration``
seconds it injects random chaos: SIGKILL and restart of a broker, SIGKILL of a
consumer process (a fresh one replaces it), and connection cuts through one
:class:`~kafka_share.testing.TcpProxy` per broker (the consumers reach the
brokers only through the proxies; the producer and the brokers talk directly).
Then it stops the chaos, lets the consumers drain, and reports::

    python tools/chaos_soak.py --duration 600 --seed 1 [--json]

Bookkeeping. Each consumer process appends to its own file, fsync'd:

* ``D partition offset seq delivery_count time_ms`` for every record ``poll``
  returned, written *before* the record is acknowledged (the application has
  processed it);
* ``A partition offset time_ms`` once the broker confirmed its acknowledgement
  (the acknowledgement commit callback with no error), ``F partition offset
  error time_ms`` when the acknowledgement failed.

The broker logs are kept in ``cluster/`` under the work directory.

Records are numbered by the producer, whose delivery reports give each
number's partition and offset. Classification, per produced record:

``accepted``     its acknowledgement was confirmed at least once;
``duplicated``   confirmed more than once (delivered again after a confirmed accept);
``unconfirmed``  processed by a consumer but no confirmation ever arrived and the
                 broker never delivered it again: the acknowledgement reached the
                 broker but its response was lost (a cut, a broker kill) or the
                 consumer was killed between the broker's answer and the write.
                 Share-group acknowledgements are not idempotent and cannot be
                 looked up, so the client cannot know more; Java's consumer is in
                 the same position. Not data loss: the application had the record;
``lost``         never processed by any consumer: the real failure (exit status 1).

``--seed`` makes the chaos schedule (which action, which target, the
intervals) reproducible; thread and network timing are not.

Exit status: 0 nothing lost; 1 records lost; 2 the harness failed (e.g. a broker
would not start). Broker starts need the shared machine lock where one is used.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Run from a checkout, the tool tests that checkout's kafka_share (and the consumer
# processes it starts use the same copy, through PYTHONPATH).
_REPO = Path(__file__).resolve().parent.parent
if (_REPO / "kafka_share" / "__init__.py").exists() and str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

log = logging.getLogger("chaos_soak")

ACTIONS = ("broker", "consumer", "cut")
WORKER_COMMAND = "consumer-worker"
_EXIT_OK, _EXIT_LOST, _EXIT_HARNESS = 0, 1, 2


# --------------------------------------------------------------------------- bookkeeping


Position = tuple[int, int]  # (partition, offset)


@dataclass
class Ledger:
    """Everything produced and everything the consumers reported, and the verdict.

    Pure bookkeeping (no I/O), fed by the producer's delivery reports and the
    consumers' record lines; unit-tested on its own.
    """

    #: seq -> where the producer's delivery report says it landed
    produced: dict[int, Position] = field(default_factory=dict)
    #: seqs whose delivery report was an error (they may still have landed)
    produce_failed: set[int] = field(default_factory=set)
    #: position -> seq, from delivery reports and from the consumers' D lines
    seq_at: dict[Position, int] = field(default_factory=dict)
    #: position -> how many times a consumer processed it (D lines)
    deliveries: collections.Counter[Position] = field(default_factory=collections.Counter)
    #: position -> how many confirmed acknowledgements (A lines)
    accepts: collections.Counter[Position] = field(default_factory=collections.Counter)
    #: failed acknowledgements (F lines), by error name
    ack_failures: collections.Counter[str] = field(default_factory=collections.Counter)
    #: D lines whose seq disagrees with the producer's report for that position
    mismatches: int = 0
    malformed_lines: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add_produced(self, seq: int, partition: int, offset: int) -> None:
        with self._lock:
            self.produced[seq] = (partition, offset)
            known = self.seq_at.setdefault((partition, offset), seq)
            if known != seq:
                self.mismatches += 1

    def add_produce_failure(self, seq: int) -> None:
        with self._lock:
            self.produce_failed.add(seq)

    def add_line(self, line: str) -> None:
        """One record line from a consumer (``D p o seq``, ``A p o`` or ``F p o error``)."""
        parts = line.split()
        with self._lock:
            try:
                kind, partition, offset = parts[0], int(parts[1]), int(parts[2])
                if kind == "D":
                    seq = int(parts[3])
                    known = self.seq_at.setdefault((partition, offset), seq)
                    if known != seq:
                        self.mismatches += 1
                    self.deliveries[partition, offset] += 1
                elif kind == "A":
                    self.accepts[partition, offset] += 1
                elif kind == "F":
                    self.ack_failures[parts[3] if len(parts) > 3 else "?"] += 1
                else:
                    raise ValueError(kind)
            except (IndexError, ValueError):
                self.malformed_lines += 1

    def outstanding(self) -> tuple[int, int]:
        """(produced records not accepted yet, of which never processed yet)."""
        with self._lock:
            not_accepted = [pos for pos in self.produced.values() if not self.accepts[pos]]
            return len(not_accepted), sum(1 for pos in not_accepted if not self.deliveries[pos])

    def summary(self) -> dict[str, Any]:
        """The verdict: counts, and a few example seqs for each bad class."""
        with self._lock:
            accepted = unconfirmed = duplicated = redelivered = 0
            lost: list[int] = []
            unconfirmed_examples: list[int] = []
            duplicated_examples: list[int] = []
            for seq, pos in sorted(self.produced.items()):
                accepts, deliveries = self.accepts[pos], self.deliveries[pos]
                if deliveries > 1:
                    redelivered += 1
                if accepts:
                    accepted += 1
                    if accepts > 1:
                        duplicated += 1
                        duplicated_examples.append(seq)
                elif deliveries:
                    unconfirmed += 1
                    unconfirmed_examples.append(seq)
                else:
                    lost.append(seq)
            produced_positions = set(self.produced.values())
            # Records a consumer saw that no successful delivery report covers
            # (the producer reported a failure, but the write had landed).
            unexpected = sum(
                1
                for pos in set(self.deliveries) | set(self.accepts)
                if pos not in produced_positions
            )
            return {
                "produced": len(self.produced),
                "produce_failed": len(self.produce_failed),
                "accepted": accepted,
                "lost": len(lost),
                "duplicated": duplicated,
                "unconfirmed": unconfirmed,
                "redelivered": redelivered,
                "unexpected": unexpected,
                "deliveries": sum(self.deliveries.values()),
                "confirmed_acks": sum(self.accepts.values()),
                "failed_acks": dict(sorted(self.ack_failures.items())),
                "mismatches": self.mismatches,
                "malformed_lines": self.malformed_lines,
                "examples": {
                    "lost": lost[:20],
                    "unconfirmed": unconfirmed_examples[:20],
                    "duplicated": duplicated_examples[:20],
                },
            }


def settle(
    ledger: Ledger,
    start_offsets: Mapping[int, tuple[int, int | None]] | None,
) -> dict[str, Any]:
    """Check the unconfirmed records against the broker's view of the share group.

    ``start_offsets`` maps partition -> (share-partition start offset, lag) as
    the broker reports them after the drain. A record below the start offset is
    in a terminal state on the broker: acknowledged, since the soak never
    rejects and no record comes near the delivery limit. So an unconfirmed
    record below it was accepted (only the answer was lost), and a partition
    with lag 0 holds nothing that could still be delivered.
    """
    if start_offsets is None:
        return {"checked": False}
    with ledger._lock:
        positions = [
            pos
            for pos in ledger.produced.values()
            if not ledger.accepts[pos] and ledger.deliveries[pos]
        ]
        max_deliveries = max(ledger.deliveries.values(), default=0)
    settled = sum(
        1 for p, o in positions if p in start_offsets and o < start_offsets[p][0]
    )
    lag = {p: lag for p, (_, lag) in start_offsets.items()}
    return {
        "checked": True,
        "start_offsets": {p: start for p, (start, _) in sorted(start_offsets.items())},
        "lag": dict(sorted(lag.items())),
        "unconfirmed_acknowledged_by_broker": settled,
        "unconfirmed_still_open": len(positions) - settled,
        "max_deliveries_of_a_record": max_deliveries,
        "all_settled": len(positions) == settled and all(v == 0 for v in lag.values()),
    }


def timelines(
    files: Iterable[Path], positions: Iterable[Position], limit: int = 8
) -> dict[str, list[str]]:
    """Every line about ``positions`` (at most ``limit`` of them), as ``file: line``,
    in file order: the story of a duplicated or unconfirmed record."""
    wanted = set(list(positions)[:limit])
    found: dict[str, list[str]] = {f"{p}:{o}": [] for p, o in sorted(wanted)}
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            parts = line.split()
            with contextlib.suppress(IndexError, ValueError):
                pos = (int(parts[1]), int(parts[2]))
                if pos in wanted:
                    found[f"{pos[0]}:{pos[1]}"].append(f"{path.name}: {line}")
    return found


class LineTail:
    """Reads the complete lines appended to a file since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""

    def read(self) -> list[str]:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except FileNotFoundError:
            return []
        self._offset += len(data)
        data = self._partial + data
        *lines, self._partial = data.split(b"\n")
        return [line.decode("utf-8", "replace") for line in lines if line]

    @property
    def partial(self) -> bytes:
        """An incomplete last line (a process killed mid-write leaves one)."""
        return self._partial


@dataclass
class ChaosCounts:
    """How much chaos was injected (and what went wrong doing it)."""

    broker_kills: int = 0
    broker_restarts: int = 0
    broker_restart_failures: int = 0
    consumer_kills: int = 0
    consumer_starts: int = 0
    consumer_crashes: int = 0
    cut_actions: int = 0
    connections_cut: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def choose_action(rng: random.Random, weights: Mapping[str, float]) -> str:
    """One chaos action, drawn with ``weights`` (action -> weight, zero disables)."""
    names = [name for name in ACTIONS if weights.get(name, 0) > 0]
    if not names:
        raise ValueError("every chaos action has weight 0")
    return rng.choices(names, weights=[weights[name] for name in names])[0]


def exit_status(summary: Mapping[str, Any]) -> int:
    """0 when nothing was lost, 1 otherwise."""
    return _EXIT_LOST if summary["lost"] else _EXIT_OK


def render_summary(report: Mapping[str, Any]) -> str:
    """The human summary of a finished soak."""
    s, c = report["records"], report["chaos"]
    lines = [
        f"chaos soak: {report['duration_s']:.0f} s of chaos, {report['consumers']} consumer "
        f"processes ({report['mode']} mode, commit {report['commit']}), "
        f"{report['partitions']} partitions, seed {report['seed']}",
        f"  records produced     {s['produced']:>9}  (delivery failures {s['produce_failed']})",
        f"  accepted             {s['accepted']:>9}",
        f"  lost                 {s['lost']:>9}  (never processed by any consumer; must be 0)",
        f"  duplicated           {s['duplicated']:>9}  (acknowledged more than once)",
        f"  unconfirmed          {s['unconfirmed']:>9}  (processed, ack outcome never reported)",
        f"  redelivered          {s['redelivered']:>9}  (processed more than once)",
        f"  unexpected           {s['unexpected']:>9}  (consumed but not reported produced)",
        f"  deliveries / acks    {s['deliveries']:>9} / {s['confirmed_acks']} confirmed, "
        f"failed acks {s['failed_acks'] or 0}",
        f"  chaos: broker kills {c['broker_kills']} (restarts {c['broker_restarts']}, "
        f"failed {c['broker_restart_failures']}), consumer kills {c['consumer_kills']}, "
        f"consumer crashes {c['consumer_crashes']}, cuts {c['cut_actions']} "
        f"({c['connections_cut']} connections)",
        f"  drain: {report['drain']['seconds']:.1f} s, {report['drain']['outcome']}",
        f"  longest stall (records waiting, none processed): {report['longest_stall_s']:.1f} s "
        f"from t={report['longest_stall_started_at_s']:.0f} s; "
        f"largest backlog {report['max_backlog']} records",
    ]
    b = report.get("broker", {})
    if b.get("checked"):
        lines.append(
            f"  broker view: unconfirmed below the share-partition start offset (acknowledged) "
            f"{b['unconfirmed_acknowledged_by_broker']}, still open "
            f"{b['unconfirmed_still_open']}; lag {b['lag']}; "
            f"{'all settled' if b['all_settled'] else 'NOT settled'}"
        )
    if s["mismatches"] or s["malformed_lines"]:
        lines.append(
            f"  bookkeeping: {s['mismatches']} mismatches, {s['malformed_lines']} bad lines"
        )
    for kind in ("lost", "duplicated", "unconfirmed"):
        if s["examples"][kind]:
            lines.append(f"  e.g. {kind}: {s['examples'][kind][:10]}")
    for position, story in list(report.get("timelines", {}).get("duplicated", {}).items())[:3]:
        lines.append(f"  duplicated {position}: " + " | ".join(story))
    if report.get("errors"):
        lines.append("  harness errors: " + "; ".join(report["errors"][:5]))
    lines.append(f"  result: {'FAIL' if s['lost'] else 'OK'}; files in {report['work_dir']}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- consumer process


def run_worker(argv: Sequence[str]) -> int:
    """A consumer process: poll, write D lines (fsync), acknowledge, write the outcomes."""
    parser = argparse.ArgumentParser(prog=f"chaos_soak.py {WORKER_COMMAND}")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--mode", choices=("explicit", "implicit"), default="explicit")
    parser.add_argument("--commit", choices=("sync", "async", "poll"), default="sync")
    parser.add_argument("--name", default="soak-consumer")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )

    from kafka_share import AcknowledgeType, ShareConsumer, TopicIdPartition  # noqa: PLC0415
    from kafka_share.errors import KafkaError  # noqa: PLC0415

    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    pending: list[str] = []

    def on_commit(offsets: dict[TopicIdPartition, set[int]], error: KafkaError | None) -> None:
        now_ms = int(time.time() * 1000)
        tail = f" {now_ms}" if error is None else f" {type(error).__name__} {now_ms}"
        tag = "A" if error is None else "F"
        for tip, positions in offsets.items():
            pending.extend(f"{tag} {tip.partition} {o}{tail}\n" for o in sorted(positions))
        if error is not None:
            log.warning("acknowledgement failed for %s: %r", offsets, error)

    out = open(args.out, "ab")  # noqa: SIM115 - closed in finally

    def write(lines: Iterable[str]) -> None:
        data = "".join(lines).encode()
        if data:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())

    def write_outcomes() -> None:
        write(pending)
        pending.clear()

    consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id=args.name,
        share_acknowledgement_mode=args.mode,
    )
    try:
        consumer.set_acknowledgement_commit_callback(on_commit)
        consumer.subscribe([args.topic])
        while not stopping.is_set():
            try:
                records = list(consumer.poll(0.5))
                write_outcomes()  # acknowledgements that rode on this poll
                if not records:
                    continue
                # Processed (durably) before it is acknowledged.
                now_ms = int(time.time() * 1000)
                write(
                    f"D {r.partition} {r.offset} {r.value.decode()} {r.delivery_count} {now_ms}\n"
                    for r in records
                )
                if args.mode == "explicit":
                    for record in records:
                        consumer.acknowledge(record, AcknowledgeType.ACCEPT)
                if args.commit == "sync":
                    consumer.commit_sync(10.0)
                elif args.commit == "async":
                    consumer.commit_async()
                write_outcomes()
            except KafkaError as exc:
                log.warning("%s: %r", type(exc).__name__, exc)
                write_outcomes()
                stopping.wait(0.2)  # never a busy loop on a persistent error
        consumer.close(10.0)
        write_outcomes()
        return 0
    finally:
        with contextlib.suppress(Exception):
            consumer.close(1.0)
        out.close()


# --------------------------------------------------------------------------- orchestrator


#: Java's Admin client is the one tool that reads a share group's start offsets
#: and lag (confluent-kafka has no such call); run as a single-file source program.
_SHARE_OFFSETS_JAVA = """\
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.TopicPartition;

public class ShareGroupOffsets {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        try (Admin admin = Admin.create(props)) {
            Map<TopicPartition, SharePartitionOffsetInfo> offsets = admin
                .listShareGroupOffsets(Map.of(args[1], new ListShareGroupOffsetsSpec()))
                .partitionsToOffsetInfo(args[1]).get();
            for (Map.Entry<TopicPartition, SharePartitionOffsetInfo> e : offsets.entrySet()) {
                System.out.println("OFFSET " + e.getKey().topic() + " " + e.getKey().partition()
                    + " " + e.getValue().startOffset() + " "
                    + e.getValue().lag().map(String::valueOf).orElse("-"));
            }
        }
    }
}
"""


def share_group_offsets(
    bootstrap: str, group: str, topic: str, kafka_version: str, work_dir: Path
) -> dict[int, tuple[int, int | None]]:
    """partition -> (start offset, lag) of ``group`` on ``topic``, from the broker."""
    from kafka_share.testing.java import find_java  # noqa: PLC0415
    from kafka_share.testing.maven import ensure_kafka_libs  # noqa: PLC0415

    source = work_dir / "ShareGroupOffsets.java"
    source.write_text(_SHARE_OFFSETS_JAVA, encoding="utf-8")
    dist = ensure_kafka_libs(kafka_version)
    done = subprocess.run(
        [find_java(), "-cp", dist.classpath, str(source), bootstrap, group],
        capture_output=True, text=True, timeout=120, check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"listing the share group offsets failed: {done.stderr[-2000:]}")
    offsets: dict[int, tuple[int, int | None]] = {}
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) == 5 and parts[0] == "OFFSET" and parts[1] == topic:
            offsets[int(parts[2])] = (int(parts[3]), None if parts[4] == "-" else int(parts[4]))
    return offsets


class Producer(threading.Thread):
    """Produces ``seq`` 0, 1, 2, ... at ``rate`` records/s until stopped, then flushes."""

    def __init__(self, bootstrap: str, topic: str, rate: float, ledger: Ledger) -> None:
        super().__init__(name="soak-producer", daemon=True)
        self.bootstrap, self.topic, self.rate, self.ledger = bootstrap, topic, rate, ledger
        self.stopping = threading.Event()
        self.sent = 0
        self.unflushed = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:
            self.error = exc
            log.exception("the producer failed")

    def _run(self) -> None:
        from confluent_kafka import Producer as KafkaProducer  # noqa: PLC0415

        producer = KafkaProducer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                # Long enough to ride out a broker restart: a failed delivery
                # report would make the record's fate unknown.
                "message.timeout.ms": 300_000,
            }
        )

        def report(seq: int) -> Callable[[Any, Any], None]:
            def on_delivery(err: Any, msg: Any) -> None:
                if err is None:
                    self.ledger.add_produced(seq, msg.partition(), msg.offset())
                else:
                    log.warning("delivery of record %d failed: %s", seq, err)
                    self.ledger.add_produce_failure(seq)

            return on_delivery

        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self.stopping.is_set():
            now = time.monotonic()
            while next_at <= now:
                seq = self.sent
                try:
                    producer.produce(self.topic, value=str(seq).encode(), on_delivery=report(seq))
                except BufferError:
                    break  # the local queue is full: retry on the next tick
                self.sent += 1
                next_at += interval
            producer.poll(max(0.0, min(0.05, next_at - time.monotonic())))
        self.unflushed = producer.flush(120)


@dataclass
class ConsumerSlot:
    index: int
    process: subprocess.Popen[bytes] | None = None
    generation: int = 0
    killed: bool = False


class Soak:
    """One soak run: cluster, proxies, producer, consumer processes, chaos, drain."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.ledger = Ledger()
        self.counts = ChaosCounts()
        self.errors: list[str] = []
        self.work_dir = Path(args.work_dir or tempfile.mkdtemp(prefix="chaos-soak-"))
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.tails: list[LineTail] = []
        self.slots: list[ConsumerSlot] = []
        self.proxies: list[Any] = []
        self.cluster: Any = None
        self.topic = ""
        self.group = ""
        self.crash_logs: list[str] = []
        #: longest time (s) no consumer processed a record while some were waiting
        self.longest_stall_s = 0.0
        self.longest_stall_at_s = 0.0
        self._last_progress = time.monotonic()
        self._started = time.monotonic()  # reset when the chaos starts (see run)
        self._next_sample = 0.0
        self.max_backlog = 0

    # -- setup ---------------------------------------------------------------------

    def start_cluster(self) -> None:
        from kafka_share.testing import KafkaAdmin, LocalKafkaCluster, TcpProxy  # noqa: PLC0415
        from kafka_share.testing.admin import unique_name  # noqa: PLC0415
        from kafka_share.testing.config import NodeAddress  # noqa: PLC0415

        lifetime = self.args.duration + self.args.drain_timeout + 1800
        client_ports = _free_ports(3)
        self.proxies = [
            TcpProxy(
                ("127.0.0.1", port),
                max_lifetime_s=lifetime,
                max_connections=256,
                seed=self.rng.randrange(2**32),
            ).start()
            for port in client_ports
        ]

        def node_config(address: NodeAddress) -> dict[str, str]:
            # A third listener per node, advertised as that node's proxy: clients
            # that bootstrap through a proxy learn only proxy addresses. The
            # brokers (and the producer) keep using PLAINTEXT directly.
            port = client_ports[address.node_id - 1]
            proxy = self.proxies[address.node_id - 1]
            controller = f"CONTROLLER://{address.host}:{address.controller_port}"
            return {
                "listeners": f"PLAINTEXT://{address.bootstrap},{controller},"
                f"CHAOS://{address.host}:{port}",
                "advertised.listeners": f"PLAINTEXT://{address.bootstrap},{controller},"
                f"CHAOS://{proxy.bootstrap}",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                "CHAOS:PLAINTEXT",
            }

        self.cluster = LocalKafkaCluster(
            num_nodes=3,
            kafka_version=self.args.kafka_version,
            node_config=node_config,
            # Inside the soak's directory: the broker logs stay for a post-mortem.
            work_dir=self.work_dir / "cluster",
        )
        log.info("starting a 3-node cluster")
        self.cluster.start()
        log.info("cluster up in %.1f s: %s", self.cluster.startup_seconds or 0,
                 self.cluster.bootstrap_servers)
        with KafkaAdmin(self.cluster.bootstrap_servers, timeout_s=60) as admin:
            self.topic = admin.create_topic(
                unique_name("chaos-soak"),
                self.args.partitions,
                replication_factor=3,
                config={"min.insync.replicas": "2"},
            )
            self.group = unique_name("chaos-soak")
            admin.set_group_config(
                self.group,
                {
                    "share.auto.offset.reset": "earliest",
                    "share.record.lock.duration.ms": str(self.args.lock_ms),
                    # Leave room for redeliveries caused by the chaos itself.
                    "share.delivery.count.limit": "10",
                },
            )

    @property
    def consumer_bootstrap(self) -> str:
        return ",".join(p.bootstrap for p in self.proxies)

    def start_consumer(self, slot: ConsumerSlot) -> None:
        slot.generation += 1
        name = f"soak-c{slot.index}-g{slot.generation}"
        out = self.work_dir / f"{name}.records"
        self.tails.append(LineTail(out))
        import kafka_share  # noqa: PLC0415

        env = dict(os.environ)
        package_root = str(Path(kafka_share.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        with open(self.work_dir / f"{name}.log", "ab") as log_file:
            slot.process = subprocess.Popen(
                [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    WORKER_COMMAND,
                    "--bootstrap", self.consumer_bootstrap,
                    "--group", self.group,
                    "--topic", self.topic,
                    "--out", str(out),
                    "--mode", self.args.mode,
                    "--commit", self.args.commit,
                    "--name", name,
                ],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=env,
            )
        slot.killed = False
        self.counts.consumer_starts += 1

    # -- the run ---------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        args = self.args
        started = time.monotonic()
        self.start_cluster()
        producer = Producer(self.cluster.bootstrap_servers, self.topic, args.rate, self.ledger)
        producer.start()
        self.slots = [ConsumerSlot(i) for i in range(args.consumers)]
        for slot in self.slots:
            self.start_consumer(slot)
        weights = {"broker": args.broker_weight, "consumer": args.consumer_weight,
                   "cut": args.cut_weight}
        chaos_end = time.monotonic() + args.duration
        self._started = self._last_progress = time.monotonic()
        log.info("chaos for %.0f s (topic %s, group %s)", args.duration, self.topic, self.group)
        next_report = time.monotonic() + 30
        while time.monotonic() < chaos_end:
            wait = self.rng.uniform(args.interval_min, args.interval_max)
            until = min(chaos_end, time.monotonic() + wait)
            while time.monotonic() < until:
                self.supervise()
                if time.monotonic() >= next_report:
                    next_report = time.monotonic() + 30
                    self.progress(producer)
                time.sleep(min(0.5, max(0.0, until - time.monotonic())))
            if time.monotonic() >= chaos_end:
                break
            self.act(choose_action(self.rng, weights))
        log.info("chaos over; stopping the producer")
        producer.stopping.set()
        producer.join(180)
        if producer.error is not None:
            self.errors.append(f"producer: {producer.error!r}")
        if producer.unflushed:
            self.errors.append(f"{producer.unflushed} records never got a delivery report")
        drain = self.drain()
        self.stop_consumers()
        self.supervise(final=True)
        try:
            broker_view = share_group_offsets(
                self.cluster.bootstrap_servers, self.group, self.topic,
                self.cluster.kafka_version, self.work_dir,
            )
        except Exception as exc:
            self.errors.append(f"broker view: {exc}")
            broker_view = None
        return {
            "duration_s": args.duration,
            "seed": args.seed,
            "mode": args.mode,
            "commit": args.commit,
            "consumers": args.consumers,
            "partitions": args.partitions,
            "rate": args.rate,
            "records": (summary := self.ledger.summary()),
            "timelines": {
                kind: timelines(
                    (t.path for t in self.tails),
                    (self.ledger.produced[seq] for seq in summary["examples"][kind]),
                )
                for kind in ("duplicated", "unconfirmed")
            },
            "broker": settle(self.ledger, broker_view),
            "chaos": self.counts.as_dict(),
            "drain": drain,
            "longest_stall_s": round(self.longest_stall_s, 1),
            "longest_stall_started_at_s": round(self.longest_stall_at_s, 1),
            "max_backlog": self.max_backlog,
            "errors": self.errors,
            "crash_logs": self.crash_logs,
            "elapsed_s": round(time.monotonic() - started, 1),
            "work_dir": str(self.work_dir),
        }

    def progress(self, producer: Producer) -> None:
        not_accepted, unseen = self.ledger.outstanding()
        log.info(
            "sent %d, produced %d, not yet accepted %d (never seen %d); chaos so far %s",
            producer.sent, len(self.ledger.produced), not_accepted, unseen,
            self.counts.as_dict(),
        )

    def supervise(self, *, final: bool = False) -> None:
        """Read new record lines; replace a consumer that died on its own."""
        now = time.monotonic()
        for line_tail in self.tails:
            for line in line_tail.read():
                self.ledger.add_line(line)
                if line.startswith("D"):
                    self._last_progress = now
        if final:
            return
        if now >= self._next_sample:
            self._next_sample = now + 1.0
            _, unseen = self.ledger.outstanding()
            self.max_backlog = max(self.max_backlog, unseen)
            if unseen == 0:
                self._last_progress = now
            elif now - self._last_progress > self.longest_stall_s:
                self.longest_stall_s = now - self._last_progress
                self.longest_stall_at_s = self._last_progress - self._started
        for slot in self.slots:
            process = slot.process
            if process is not None and process.poll() is not None and not slot.killed:
                self.counts.consumer_crashes += 1
                name = f"soak-c{slot.index}-g{slot.generation}"
                tail = _tail(self.work_dir / f"{name}.log", 30)
                self.crash_logs.append(f"{name} exited with {process.returncode}:\n{tail}")
                log.warning("consumer %s exited with %s on its own", name, process.returncode)
                self.start_consumer(slot)

    def act(self, action: str) -> None:
        if action == "broker":
            node = self.rng.choice(sorted(self.cluster.nodes))
            down_s = self.rng.uniform(0.0, self.args.broker_down_max)
            log.info("SIGKILL broker %d, restart in %.1f s", node, down_s)
            self.cluster.kill_node(node)
            self.counts.broker_kills += 1
            self._sleep_supervising(down_s)
            for attempt in range(3):
                try:
                    self.cluster.start_node(node)
                except Exception as exc:
                    self.counts.broker_restart_failures += 1
                    self.errors.append(f"restarting broker {node} (attempt {attempt + 1}): {exc}")
                    log.warning("restarting broker %d failed: %s", node, exc)
                    with contextlib.suppress(Exception):
                        self.cluster.kill_node(node)
                else:
                    self.counts.broker_restarts += 1
                    return
            raise RuntimeError(f"broker {node} could not be restarted: {self.errors[-1]}")
        if action == "consumer":
            slot = self.rng.choice(self.slots)
            if slot.process is not None and slot.process.poll() is None:
                log.info("SIGKILL consumer c%d-g%d", slot.index, slot.generation)
                slot.killed = True
                slot.process.kill()
                slot.process.wait()
                self.counts.consumer_kills += 1
            self.start_consumer(slot)
            return
        if action == "cut":
            proxy = self.rng.choice(self.proxies)
            cut = proxy.cut_all()
            log.info("cut %d connection(s) through %s", cut, proxy.bootstrap)
            self.counts.cut_actions += 1
            self.counts.connections_cut += cut
            return
        raise ValueError(f"unknown chaos action {action!r}")

    def _sleep_supervising(self, seconds: float) -> None:
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            self.supervise()
            time.sleep(min(0.2, max(0.0, until - time.monotonic())))

    def drain(self) -> dict[str, Any]:
        """Wait until every produced record is accepted; or, when the rest were all
        processed already, until nothing new arrived for longer than a lock can
        hold a record (then no redelivery is coming); or the drain timeout."""
        started = time.monotonic()
        deadline = started + self.args.drain_timeout
        # A killed member's records come back after the lock duration at worst,
        # and after the session timeout (10 s in the harness) it is fenced.
        quiet_needed = self.args.lock_ms / 1000 + 15
        last_change = time.monotonic()
        last = self.ledger.outstanding()
        outcome = "timeout"
        while time.monotonic() < deadline:
            self.supervise()
            now = self.ledger.outstanding()
            if now != last:
                last, last_change = now, time.monotonic()
            not_accepted, unseen = now
            if not_accepted == 0:
                outcome = "every record accepted"
                break
            if unseen == 0 and time.monotonic() - last_change > quiet_needed:
                outcome = f"every record processed; {not_accepted} without a confirmed ack"
                break
            time.sleep(0.5)
        else:
            outcome = f"timeout with {last[0]} not accepted, {last[1]} never processed"
        return {"seconds": round(time.monotonic() - started, 1), "outcome": outcome}

    def stop_consumers(self) -> None:
        for slot in self.slots:
            if slot.process is not None and slot.process.poll() is None:
                slot.killed = True
                slot.process.send_signal(signal.SIGTERM)
        for slot in self.slots:
            if slot.process is None:
                continue
            try:
                slot.process.wait(30)
            except subprocess.TimeoutExpired:
                self.errors.append(f"consumer c{slot.index}-g{slot.generation} ignored SIGTERM "
                                   "for 30 s (close() hung?)")
                slot.process.kill()
                slot.process.wait()

    def close(self) -> None:
        for slot in self.slots:
            if slot.process is not None and slot.process.poll() is None:
                slot.process.kill()
                slot.process.wait()
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.stop()
        for proxy in self.proxies:
            proxy.stop()


def _free_ports(count: int) -> list[int]:
    import socket  # noqa: PLC0415

    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(no log: {exc})"
    return "\n".join(text.splitlines()[-lines:])


def positive(kind: type[float] | type[int]) -> Callable[[str], Any]:
    def parse(text: str) -> float | int:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    return parse


def non_negative(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Soak kafka-share consumers under broker kills, consumer kills and "
        "connection cuts on a local 3-node cluster; report lost and duplicated records.",
    )
    parser.add_argument("--duration", type=positive(float), default=600.0,
                        help="seconds of chaos (default 600)")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed of the chaos schedule (default: random, printed)")
    parser.add_argument("--consumers", type=positive(int), default=3,
                        help="consumer processes in the share group (default 3)")
    parser.add_argument("--partitions", type=positive(int), default=6)
    parser.add_argument("--rate", type=positive(float), default=200.0,
                        help="records produced per second (default 200)")
    parser.add_argument("--mode", choices=("explicit", "implicit"), default="explicit",
                        help="share.acknowledgement.mode of the consumers")
    parser.add_argument("--commit", choices=("sync", "async", "poll"), default="sync",
                        help="how acknowledgements are sent: commit_sync, commit_async, "
                        "or by the next poll (default sync)")
    parser.add_argument("--interval-min", type=positive(float), default=3.0,
                        help="shortest pause between chaos actions, s (default 3)")
    parser.add_argument("--interval-max", type=positive(float), default=10.0,
                        help="longest pause between chaos actions, s (default 10)")
    parser.add_argument("--broker-weight", type=non_negative, default=1.0)
    parser.add_argument("--consumer-weight", type=non_negative, default=1.0)
    parser.add_argument("--cut-weight", type=non_negative, default=2.0)
    parser.add_argument("--broker-down-max", type=non_negative, default=5.0,
                        help="longest time a killed broker stays down, s (default 5)")
    parser.add_argument("--lock-ms", type=positive(int), default=5000,
                        help="share.record.lock.duration.ms of the group (default 5000)")
    parser.add_argument("--drain-timeout", type=positive(float), default=180.0,
                        help="longest wait for the consumers to catch up, s (default 180)")
    parser.add_argument("--kafka-version", default=None)
    parser.add_argument("--work-dir", default=None,
                        help="where record files and consumer logs go (default: a temp dir, "
                        "removed after a clean run)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.interval_min > args.interval_max:
        parser.error("--interval-min must not exceed --interval-max")
    if args.broker_weight + args.consumer_weight + args.cut_weight <= 0:
        parser.error("at least one chaos weight must be positive")
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(2**31)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == [WORKER_COMMAND]:
        return run_worker(argv[1:])
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("kafka_share").setLevel(logging.WARNING)
    log.info("seed %d", args.seed)
    soak = Soak(args)
    try:
        report = soak.run()
    except Exception as exc:
        log.exception("the soak failed")
        print(f"chaos soak: harness failure: {exc} (files in {soak.work_dir})", file=sys.stderr)
        return _EXIT_HARNESS
    finally:
        soak.close()
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(render_summary(report))
    status = exit_status(report["records"])
    if report["errors"] and status == _EXIT_OK:
        status = _EXIT_HARNESS
    clean = status == _EXIT_OK and not report["chaos"]["consumer_crashes"]
    if clean and args.work_dir is None:
        shutil.rmtree(soak.work_dir, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
