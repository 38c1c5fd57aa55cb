"""One benchmark client in its own process: consume, measure, print one JSON line.

Run by ``benchmarks/compare.py``; each run is a fresh process so that its CPU
time and peak RSS (measured by the parent with ``wait4``) belong to that client
alone. The worker also measures itself:

* ``cpu_consume_s``: process CPU time (all threads, so librdkafka's and
  kafka-share's network threads count) from just before ``subscribe`` to the
  last record, which leaves out interpreter start-up and imports (the window
  opens once start-up work on other threads has settled, see :func:`settle`);
* ``elapsed_s``: wall time from just before ``subscribe`` to the last record
  (the same span Java's ShareConsumerPerformance reports as ``fetch.time.ms``);
  ``first_record_s`` is the part of it spent before the first record (joining
  the group, first fetch);
* ``rss_samples``: resident set size after 20/40/60/80/100 % of the records;
* with ``--stages`` (kafka-share clients), CPU per record in a few of its
  stages over the same span (see :class:`StageTimers`);
* with ``--perf-record PATH``, a ``perf record`` of the process over the
  middle of the run and the records it covers (see :class:`PerfWindow`);
* in ``latency`` mode, produce-to-consume latency of records whose value starts
  with the producer's ``time.time_ns()`` (8 bytes, big-endian).

Clients: ``kafka-share-implicit``, ``kafka-share-explicit`` (one ``acknowledge``
per record), ``kafka-share-async-implicit``, ``kafka-share-async-explicit`` (the
same through ``AsyncShareConsumer`` on an asyncio event loop),
``kafka-share-arrow-implicit``, ``kafka-share-arrow-explicit`` (``poll_arrow``:
one Arrow record batch per poll, keys and values as ``binary`` columns, no
Python object per record; explicit mode acknowledges each batch with one
``acknowledge_arrow``), ``confluent-share-implicit``, ``confluent-share-explicit`` (the
same with librdkafka's preview share consumer), ``confluent-classic``
(a classic consumer group, the non-share ceiling).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

CLIENTS = (
    "kafka-share-implicit",
    "kafka-share-explicit",
    "confluent-share-implicit",
    "confluent-share-explicit",
    "confluent-classic",
    "kafka-share-async-implicit",
    "kafka-share-async-explicit",
    "kafka-share-arrow-implicit",
    "kafka-share-arrow-explicit",
)

_PAGE = os.sysconf("SC_PAGE_SIZE")
_TS = struct.Struct(">q")


def rss_bytes() -> int:
    """Current resident set size of this process (``/proc/self/statm``)."""
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * _PAGE


def peak_rss_bytes(pid: int | str = "self") -> int | None:
    """Peak resident set size (``VmHWM``) of a process, or None once it is gone.

    ``VmHWM`` belongs to the process image, so unlike ``ru_maxrss`` it does not
    include the parent's pages that a forked child carried until ``exec``.
    """
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def cpu_seconds() -> float:
    """User + system CPU time of this process, every thread included."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


#: start-up has settled once the process uses less than this share of one CPU
#: over a _SETTLE_STEP_S window
_SETTLE_CPU_SHARE = 0.1
_SETTLE_STEP_S = 0.05
_SETTLE_MAX_S = 2.0


def settle() -> float:
    """Wait until start-up work running on other threads has stopped (at most
    _SETTLE_MAX_S); returns how long that took.

    Creating a client can leave work running after the constructor returns:
    importing numpy (the vectorised decoder) starts OpenBLAS's thread pool, whose
    threads spin for about 0.1 s of CPU. That belongs to start-up, not to
    consuming, and on a run of a second or two it would count as 0.2-0.5 µs per
    record and take a core from the first fetches.
    """
    started = time.monotonic()
    while time.monotonic() - started < _SETTLE_MAX_S:
        before = cpu_seconds()
        time.sleep(_SETTLE_STEP_S)
        if cpu_seconds() - before < _SETTLE_CPU_SHARE * _SETTLE_STEP_S:
            break
    return time.monotonic() - started


# A batch is a list of record values; every client adapter below hands its
# batches to the harness and hides its library's acknowledgement style.
class ColumnValues:
    """A poll's values as one Arrow column (the ``poll_arrow`` clients): counted
    and measured in Arrow, without a Python object per record."""

    def __init__(self, column: Any) -> None:
        self.column = column

    def __len__(self) -> int:
        return len(self.column)

    def payload_bytes(self) -> int:
        import pyarrow.compute as pc

        total = pc.sum(pc.binary_length(self.column)).as_py()
        return int(total or 0)

    def to_list(self) -> list[bytes | None]:
        return self.column.to_pylist()  # type: ignore[no-any-return]


Batches = Iterator["list[bytes | None] | ColumnValues"]
#: ``consume(take)``: hands each polled batch to ``take`` until it returns True
Consume = Callable[[Callable[[Any], bool]], None]


def _consume_each(batches: Batches) -> Consume:
    """A blocking client's ``consume``: its batches, one by one."""

    def consume(take: Callable[[Any], bool]) -> None:
        for batch in batches:
            if take(batch):
                return

    return consume


def _kafka_share_config(args: argparse.Namespace, explicit: bool) -> dict[str, Any]:
    """The configuration of every kafka-share client (threaded, asyncio, arrow)."""
    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap_servers,
        "group.id": args.group,
        "share.acknowledgement.mode": "explicit" if explicit else "implicit",
    }
    config.update(args.config)
    return config


def _kafka_share(args: argparse.Namespace, explicit: bool) -> tuple[Callable[[], None], Consume]:
    from kafka_share import ShareConsumer

    config = _kafka_share_config(args, explicit)
    consumer: ShareConsumer[bytes, bytes] = ShareConsumer(config)

    def batches() -> Batches:
        consumer.subscribe([args.topic])
        while True:
            records = consumer.poll(timeout=0.5)
            values: list[bytes | None] = []
            for record in records:
                values.append(record.value)
                if explicit:
                    consumer.acknowledge(record)
            yield values

    def close() -> None:
        if explicit:
            consumer.commit_sync()
        consumer.close()

    return close, _consume_each(batches())


def _kafka_share_arrow(
    args: argparse.Namespace, explicit: bool
) -> tuple[Callable[[], None], Consume]:
    # Imported before the clock starts, as an application does at start-up
    # (pyarrow.compute alone costs about 0.2 s of CPU to import).
    import pyarrow.compute  # noqa: F401

    import kafka_share._app.columnar  # noqa: F401
    from kafka_share import ShareConsumer

    config = _kafka_share_config(args, explicit)
    consumer: ShareConsumer[bytes, bytes] = ShareConsumer(config)

    def batches() -> Batches:
        consumer.subscribe([args.topic])
        while True:
            batch = consumer.poll_arrow(timeout=0.5)
            if explicit and batch.num_rows:
                consumer.acknowledge_arrow(batch)
            yield ColumnValues(batch.column("value"))

    def close() -> None:
        if explicit:
            consumer.commit_sync()
        consumer.close()

    return close, _consume_each(batches())


def _kafka_share_async(
    args: argparse.Namespace, explicit: bool
) -> tuple[Callable[[], None], Consume]:
    """``AsyncShareConsumer`` on an asyncio loop; each batch is one awaited poll.

    The whole consumption is one coroutine, as in an asyncio application (a
    consume loop inside ``asyncio.run``): the harness's work per batch runs on
    the loop between polls, and the consumer's I/O in the loop's callbacks
    during them. Running the loop once per poll instead (``run_until_complete``
    each time) would add the loop's own start and stop, a task and a few
    selector calls to every poll, which no application pays: measured at
    0.05-0.1 µs a record on 100 B records (about 40 µs a poll)."""
    import asyncio

    from kafka_share.aio import AsyncShareConsumer

    config = _kafka_share_config(args, explicit)
    loop = asyncio.new_event_loop()

    async def create() -> AsyncShareConsumer[bytes, bytes]:
        return AsyncShareConsumer(config)

    consumer = loop.run_until_complete(create())

    async def run(take: Callable[[Any], bool]) -> None:
        await consumer.subscribe([args.topic])
        while True:
            records = await consumer.poll(timeout=0.5)
            values: list[bytes | None] = []
            for record in records:
                values.append(record.value)
                if explicit:
                    consumer.acknowledge(record)
            if take(values):
                return

    def consume(take: Callable[[Any], bool]) -> None:
        loop.run_until_complete(run(take))

    def close() -> None:
        if explicit:
            loop.run_until_complete(consumer.commit_sync())
        loop.run_until_complete(consumer.close())
        loop.close()

    return close, consume


def _confluent_share(
    args: argparse.Namespace, explicit: bool
) -> tuple[Callable[[], None], Consume]:
    from confluent_kafka import ShareConsumer

    consumer = ShareConsumer(
        {
            "bootstrap.servers": args.bootstrap_servers,
            "group.id": args.group,
            "share.acknowledgement.mode": "explicit" if explicit else "implicit",
            "log_level": 3,
            **args.config,
        }
    )

    def batches() -> Batches:
        consumer.subscribe([args.topic])
        while True:
            messages = consumer.poll(0.5)
            values: list[bytes | None] = []
            for message in messages:
                if message.error() is not None:
                    continue
                values.append(message.value())
                if explicit:
                    consumer.acknowledge(message)
            yield values

    def close() -> None:
        if explicit:
            consumer.commit_sync()
        consumer.close()

    return close, _consume_each(batches())


def _confluent_classic(args: argparse.Namespace) -> tuple[Callable[[], None], Consume]:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap_servers,
            "group.id": args.group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "log_level": 3,
            **args.config,
        }
    )

    def batches() -> Batches:
        consumer.subscribe([args.topic])
        received = 0
        while True:
            if args.mode == "latency":
                # consume(n) waits for n records or the timeout: one at a time here.
                message = consumer.poll(0.5)
                messages = [] if message is None else [message]
            else:
                # consume() is the batch API, the closest match to a share poll; never
                # ask for more than remain, or the last call sits out its timeout.
                messages = consumer.consume(max(1, min(500, args.records - received)), 0.5)
            values = [m.value() for m in messages if m.error() is None]
            received += len(values)
            yield values

    return consumer.close, _consume_each(batches())


def make_client(args: argparse.Namespace) -> tuple[Callable[[], None], Consume]:
    """``(close, consume)`` for ``args.client``."""
    if args.client == "kafka-share-implicit":
        return _kafka_share(args, explicit=False)
    if args.client == "kafka-share-explicit":
        return _kafka_share(args, explicit=True)
    if args.client == "kafka-share-arrow-implicit":
        return _kafka_share_arrow(args, explicit=False)
    if args.client == "kafka-share-arrow-explicit":
        return _kafka_share_arrow(args, explicit=True)
    if args.client == "kafka-share-async-implicit":
        return _kafka_share_async(args, explicit=False)
    if args.client == "kafka-share-async-explicit":
        return _kafka_share_async(args, explicit=True)
    if args.client == "confluent-share-implicit":
        return _confluent_share(args, explicit=False)
    if args.client == "confluent-share-explicit":
        return _confluent_share(args, explicit=True)
    if args.client == "confluent-classic":
        return _confluent_classic(args)
    raise SystemExit(f"unknown client {args.client!r}; choose from {', '.join(CLIENTS)}")


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


def _start_thread_profiles() -> list[cProfile.Profile]:
    """Profile every thread started from now on (the network thread too)."""
    profiles: list[cProfile.Profile] = []

    def first_event(*_: object) -> None:
        # Runs once in each new thread: swap the plain hook for a real profiler.
        sys.setprofile(None)
        profile = cProfile.Profile()
        profiles.append(profile)
        profile.enable()

    threading.setprofile(first_event)
    return profiles


#: kafka-share's stages timed by ``--stages``: (module, owner attribute or None,
#: function name, stage). Each call is timed as a whole, so a stage called inside
#: another is counted in both (record decoding and batch CRCs inside ``poll``).
#: A function is replaced where its caller looks it up: the row decoder is defined
#: in records/row_decoder.py, but RecordBatch calls batch.py's name for it.
_STAGES = (
    ("kafka_share.consumer", "ShareConsumer", "poll", "poll"),
    ("kafka_share._net.client", "SelectorPoller", "select", "select"),
    ("kafka_share._net.connection", "BrokerConnection", "on_readable", "socket_read"),
    ("kafka_share.records.batch", "RecordBatch", "compute_crc", "batch_crc"),
    ("kafka_share.records.batch", None, "_decode_v2_records", "record_decode"),
    # The vectorised decoder (numpy; batches of many small records): its
    # fields, then the records built from them.
    ("kafka_share.records.vectorised", None, "_decode_fields", "record_decode"),
    ("kafka_share.records.vectorised", None, "_rows", "record_decode"),
)


class StageTimers:
    """CPU time (of the calling thread) and minor page faults per stage.

    Wraps a few kafka-share functions called once per poll, read, batch or
    batch chunk (never once per record), so the timing costs little; GC pauses
    come from ``gc.callbacks``. ``socket_read`` is the kernel's copy into the
    response buffer plus parsing complete responses and running their handlers.
    """

    def __init__(self) -> None:
        import gc
        import importlib

        self.cpu_s: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.faults: dict[str, int] = {}
        for module_name, owner_name, name, stage in _STAGES:
            try:
                module = importlib.import_module(module_name)
            except ImportError:  # the columnar decoder without numpy and pyarrow
                continue
            owner = getattr(module, owner_name) if owner_name else module
            setattr(owner, name, self._timed(getattr(owner, name), stage))
        self.cpu_s["gc"] = 0.0
        self.calls["gc"] = 0
        self._gc_started = 0.0
        gc.callbacks.append(self._on_gc)

    def _timed(self, func: Callable[..., Any], stage: str) -> Callable[..., Any]:
        cpu_s, calls, faults = self.cpu_s, self.calls, self.faults
        cpu_s.setdefault(stage, 0.0)
        calls.setdefault(stage, 0)
        faults.setdefault(stage, 0)
        thread_time = time.thread_time
        usage = resource.getrusage
        who = resource.RUSAGE_THREAD

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = thread_time()
            f0 = usage(who).ru_minflt
            try:
                return func(*args, **kwargs)
            finally:
                cpu_s[stage] += thread_time() - t0
                calls[stage] += 1
                faults[stage] += usage(who).ru_minflt - f0

        return timed

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.thread_time()
        else:
            self.cpu_s["gc"] += time.thread_time() - self._gc_started
            self.calls["gc"] += 1

    def reset(self) -> None:
        for table in (self.cpu_s, self.calls, self.faults):
            for stage in table:
                table[stage] = 0

    def per_record(self, records: int) -> dict[str, dict[str, float]]:
        return {
            stage: {
                "cpu_us_per_record": self.cpu_s[stage] / records * 1e6 if records else 0.0,
                "calls": self.calls[stage],
                "minor_faults": self.faults.get(stage, 0),
            }
            for stage in self.cpu_s
        }


class PerfWindow:
    """``perf record`` of this process over the steady part of a run: started
    once a tenth of the records are in, stopped at nine tenths, sampling CPU
    time (``cpu-clock``, so a sample is 1/``PERF_HZ`` s of one thread's CPU)
    with ``CLOCK_MONOTONIC`` timestamps. ``trajectory`` pairs
    ``time.monotonic()`` with the records counted so far at each batch while
    perf runs, so that the parent can tell how many records the samples cover.

    perf takes 0.1-0.15 s to attach, as long as a fast client takes for a
    tenth of a short run: consuming waits until perf's events are open
    (:meth:`_wait_attached`), so that the samples cover most of the window."""

    def __init__(self, path: str, target: int) -> None:
        self.path = path
        self.start_at = max(1, target // 10)
        self.stop_at = max(self.start_at + 1, target * 9 // 10)
        self.trajectory: list[tuple[float, int]] = []
        self.error: str | None = None
        self._perf: subprocess.Popen[bytes] | None = None

    def tick(self, count: int) -> None:
        """Called after each batch with the records counted so far."""
        if self._perf is None:
            if count >= self.start_at and not self.trajectory and self.error is None:
                self._start(count)
            return
        self.trajectory.append((time.monotonic(), count))
        if count >= self.stop_at:
            self.stop()

    def _start(self, count: int) -> None:
        try:
            self._perf = subprocess.Popen(
                ["perf", "record", "-q", "-e", "cpu-clock", "-F", str(PERF_HZ),
                 "-k", "CLOCK_MONOTONIC", "-p", str(os.getpid()), "-o", self.path],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            )
        except OSError as exc:
            self.error = f"cannot run perf: {exc}"
            return
        self._wait_attached(self._perf.pid)
        self.trajectory.append((time.monotonic(), count))

    @staticmethod
    def _wait_attached(perf_pid: int, timeout_s: float = 2.0) -> None:
        """Until perf holds its events open (plus the moment it takes to enable
        them), at most ``timeout_s``; the trajectory is right either way."""
        deadline = time.monotonic() + timeout_s
        fds = f"/proc/{perf_pid}/fd"
        while time.monotonic() < deadline:
            try:
                links = [os.readlink(f"{fds}/{fd}") for fd in os.listdir(fds)]
            except OSError:  # perf exited, or an fd closed while listing
                links = []
            if "anon_inode:[perf_event]" in links:
                time.sleep(0.05)
                return
            time.sleep(0.002)

    def stop(self) -> None:
        """Stop perf (it writes its file on SIGINT); idempotent."""
        perf, self._perf = self._perf, None
        if perf is None:
            return
        perf.send_signal(signal.SIGINT)
        try:
            _, stderr = perf.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            perf.kill()
            self.error = "perf did not stop within 60 s"
            return
        if perf.returncode not in (0, -signal.SIGINT):
            self.error = f"perf exited {perf.returncode}: {stderr.decode(errors='replace')[-500:]}"


#: perf's sampling rate (CPU-time samples per second of each thread)
PERF_HZ = 3999


class _Tally:
    """What the harness counts of each polled batch (``take``, True once the
    run is over: all records in, or past ``deadline``)."""

    def __init__(self, args: argparse.Namespace, window: PerfWindow | None) -> None:
        self.latency = args.mode == "latency"
        self.target: int = args.records
        self.window = window
        self.deadline = time.monotonic() + args.timeout_s
        self.checkpoints = [max(1, self.target * k // 5) for k in range(1, 6)]
        self.rss_samples: list[dict[str, int]] = []
        self.latencies_ms: list[float] = []
        self.count = 0
        self.total_bytes = 0
        self.warmed = not self.latency
        self.first_record_at: float | None = None
        self.first_batch = 0

    def take(self, polled: Any) -> bool:
        values: Any = polled
        if isinstance(polled, ColumnValues) and self.latency:
            values = polled.to_list()
        if len(values):
            if self.first_record_at is None:
                self.first_record_at = time.monotonic()
                self.first_batch = len(values)
            if self.latency:
                self._latencies(values)
            else:
                self._throughput(values)
        return self.count >= self.target or time.monotonic() > self.deadline

    def _latencies(self, values: list[bytes | None]) -> None:
        now_ns = time.time_ns()
        for value in values:
            if value is None or len(value) < 8 or value.startswith(b"warmup"):
                if not self.warmed:
                    self.warmed = True
                    print("READY", flush=True)
                continue
            self.latencies_ms.append((now_ns - _TS.unpack_from(value)[0]) / 1e6)
        self.count = len(self.latencies_ms)

    def _throughput(self, values: Any) -> None:
        self.count += len(values)
        if isinstance(values, ColumnValues):
            self.total_bytes += values.payload_bytes()
        else:
            self.total_bytes += sum(len(v) for v in values if v is not None)
        while self.checkpoints and self.count >= self.checkpoints[0]:
            self.rss_samples.append({"records": self.count, "rss_bytes": rss_bytes()})
            self.checkpoints.pop(0)
        if self.window is not None:
            self.window.tick(self.count)


def run(args: argparse.Namespace) -> dict[str, Any]:
    stages = StageTimers() if args.stages else None
    thread_profiles = _start_thread_profiles() if args.profile else []
    main_profile = cProfile.Profile() if args.profile else None
    close, consume = make_client(args)
    window = PerfWindow(args.perf_record, args.records) if args.perf_record else None
    settle_s = settle()  # the client's start-up work is not consuming
    tally = _Tally(args, window)

    cpu0 = cpu_seconds()
    t0 = time.monotonic()
    if stages is not None:
        stages.reset()  # the span of cpu_consume_s: from subscribe on
    if main_profile is not None:
        main_profile.enable()
    consume(tally.take)
    t1 = time.monotonic()
    if main_profile is not None:
        main_profile.disable()
    cpu1 = cpu_seconds()
    first_record_at = tally.first_record_at
    result: dict[str, Any] = {
        "client": args.client,
        "config": args.config,
        "records": tally.count,
        "expected_records": tally.target,
        "bytes": tally.total_bytes,
        "elapsed_s": t1 - t0,
        "first_record_s": (first_record_at - t0) if first_record_at is not None else None,
        "first_batch_records": tally.first_batch,
        "cpu_consume_s": cpu1 - cpu0,
        "settle_s": settle_s,
        "rss_samples": tally.rss_samples,
        "complete": tally.count >= tally.target,
    }
    if stages is not None:
        result["stages"] = stages.per_record(tally.count)
    if window is not None:
        window.stop()
        result["perf"] = {"path": window.path, "hz": PERF_HZ,
                          "trajectory": window.trajectory, "error": window.error}
    if tally.latency:
        latencies_ms = sorted(tally.latencies_ms)
        result["latency_ms"] = {
            "count": len(latencies_ms),
            "p50": _percentile(latencies_ms, 0.50),
            "p99": _percentile(latencies_ms, 0.99),
            "max": latencies_ms[-1] if latencies_ms else float("nan"),
        }
    try:
        close()
    except Exception as exc:  # a slow close must not lose the measurement
        result["close_error"] = repr(exc)
    result["peak_rss_bytes"] = peak_rss_bytes()
    if main_profile is not None:
        with open(args.profile, "w") as out:
            stats = pstats.Stats(main_profile, stream=out)
            for profile in thread_profiles:
                profile.disable()
                stats.add(profile)
            stats.sort_stats("tottime").print_stats(args.profile_top)
            stats.sort_stats("cumulative").print_stats(args.profile_top)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", required=True, choices=CLIENTS)
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--records", type=int, required=True)
    parser.add_argument("--mode", choices=("throughput", "latency"), default="throughput")
    parser.add_argument("--timeout-s", type=float, default=120.0)
    parser.add_argument("--profile", help="write a cProfile report (all threads) here")
    parser.add_argument("--profile-top", type=int, default=30)
    parser.add_argument("--stages", action="store_true",
                        help="time kafka-share's stages (CPU per record: reads, "
                        "select, batch CRCs, record decoding, GC, poll)")
    parser.add_argument("--perf-record", metavar="PATH",
                        help="perf record this process from a tenth to nine tenths "
                        "of the records into PATH (see PerfWindow)")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="extra client configuration (for experiments)")
    args = parser.parse_args(argv)
    args.config = dict(item.split("=", 1) for item in args.config)
    result = run(args)
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
