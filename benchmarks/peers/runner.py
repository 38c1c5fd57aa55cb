"""Side-by-side consumer benchmark: kafka-share against its peers on one broker.

For every repetition, data set and client (interleaved, the client order rotating
each repetition) one fresh process consumes the whole data set on a fresh share
group (``share.auto.offset.reset=earliest``; the classic consumer uses a fresh
consumer group with ``auto.offset.reset=earliest``). The parent reaps each
process with ``wait4`` for its CPU time and peak RSS. A latency phase then
produces timestamped records at a fixed low rate to a fresh topic while one
client consumes them. See ``benchmarks/README.md`` for the definitions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from peers import layers, report
from peers.javatool import JavaTool, JavaToolUnavailableError, parse_output
from peers.worker import CLIENTS as PY_CLIENTS
from peers.worker import peak_rss_bytes

__all__ = ["DataSet", "main", "run_benchmark"]

JAVA_CLIENT = "java-share-perf"
#: Every Python client runs with check.crcs=false (librdkafka's default; kafka-share's
#: is true, as Java's), so that both sides do the same work; these run the same
#: client with check.crcs=true on both sides.
CRC_SUFFIX = "-crc"
CRC_CLIENTS = ("kafka-share-implicit" + CRC_SUFFIX, "confluent-share-implicit" + CRC_SUFFIX)
ALL_CLIENTS = (*PY_CLIENTS[:4], JAVA_CLIENT, *PY_CLIENTS[4:], *CRC_CLIENTS)
WORKER = Path(__file__).with_name("worker.py")
STARTUP = Path(__file__).with_name("startup.py")
RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"


@dataclass(frozen=True)
class DataSet:
    """``records`` values of ``value_bytes`` random bytes over ``partitions`` partitions."""

    value_bytes: int
    partitions: int
    records: int

    @property
    def name(self) -> str:
        kib = self.value_bytes // 1024
        size = f"{kib}KiB" if self.value_bytes >= 1024 else f"{self.value_bytes}B"
        return f"{size}-{self.partitions}p"


# Full mode: each run lasts several seconds for the share clients on 2 cores.
#: 10 KiB: 100,000 records (1 GB), so that a run lasts about a second; 25,000
#: lasted 0.25 s, and one full run's 10 KiB ratios swung by ±0.15.
FULL_RECORDS = {100: 600_000, 1024: 200_000, 10240: 100_000}
QUICK_RECORDS = {100: 30_000, 1024: 10_000, 10240: 2_000}


def data_sets(quick: bool, scale: float, names: Sequence[str] | None) -> list[DataSet]:
    table = QUICK_RECORDS if quick else FULL_RECORDS
    sets = [
        DataSet(size, parts, max(10, int(table[size] * scale)))
        for size in (100, 1024, 10240)
        for parts in (1, 6)
    ]
    if names:
        unknown = set(names) - {d.name for d in sets}
        if unknown:
            have = [d.name for d in sets]
            raise SystemExit(f"unknown data set(s) {sorted(unknown)}; have {have}")
        sets = [d for d in sets if d.name in names]
    return sets


# ----------------------------------------------------------------- processes


@dataclass
class ProcessResult:
    returncode: int
    stdout: str
    stderr: str
    cpu_total_s: float
    peak_rss_bytes: int
    wall_s: float


class Child:
    """A subprocess whose stdout lines can be awaited, reaped with ``wait4``."""

    def __init__(self, argv: list[str]) -> None:
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1
        )
        self.lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        threading.Thread(target=self._pump, args=(self.proc.stdout, True), daemon=True).start()
        self._err = threading.Thread(
            target=self._pump, args=(self.proc.stderr, False), daemon=True
        )
        self._err.start()

    def _pump(self, stream: Any, is_stdout: bool) -> None:
        for line in stream:
            (self.stdout if is_stdout else self.stderr).append(line)
            if is_stdout:
                self.lines.put(line)
        if is_stdout:
            self.lines.put(None)

    def wait_for_line(self, prefix: str, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                return False
            if line is None:
                return False
            if line.startswith(prefix):
                return True

    def reap(self, timeout_s: float) -> ProcessResult:
        deadline = time.monotonic() + timeout_s
        peak = 0
        while True:
            # VmHWM only grows; the last sample before exit is the peak (to 20 ms).
            peak = max(peak, peak_rss_bytes(self.proc.pid) or 0)
            pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                self.proc.kill()
                pid, status, usage = os.wait4(self.proc.pid, 0)
                break
            time.sleep(0.02)
        wall = time.monotonic() - self.started
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        self._err.join(timeout=5)
        time.sleep(0.05)  # let the stdout pump drain its last line
        return ProcessResult(
            self.proc.returncode,
            "".join(self.stdout),
            "".join(self.stderr),
            usage.ru_utime + usage.ru_stime,
            peak,
            wall,
        )


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pids: Sequence[int]) -> float | None:
    """User + system CPU seconds used so far by ``pids`` (None if one is unreadable)."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                # Fields after the parenthesised command name; utime, stime are 14, 15.
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            return None
        total += (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    return total


def _worker_argv(client: str, bootstrap: str, topic: str, group: str, records: int,
                 *extra: str) -> list[str]:
    """The worker's command line for ``client``: check.crcs=true for a ``-crc``
    client (the worker runs the client without the suffix), else false."""
    check_crcs = client.endswith(CRC_SUFFIX)
    return [
        sys.executable, str(WORKER), "--client", client.removesuffix(CRC_SUFFIX),
        "--bootstrap-servers", bootstrap, "--topic", topic, "--group", group,
        "--records", str(records), "--config", f"check.crcs={str(check_crcs).lower()}", *extra,
    ]


def _parse_worker(result: ProcessResult) -> dict[str, Any]:
    for line in reversed(result.stdout.splitlines()):
        if line.startswith("RESULT "):
            parsed: dict[str, Any] = json.loads(line[len("RESULT "):])
            return parsed
    raise RuntimeError(
        f"worker exited {result.returncode} without a result:\n{result.stderr[-3000:]}"
    )


# ------------------------------------------------------------------- phases


class Bench:
    def __init__(self, args: argparse.Namespace, bootstrap: str) -> None:
        from kafka_share.testing import KafkaAdmin

        self.args = args
        self.bootstrap = bootstrap
        self.admin = KafkaAdmin(bootstrap)
        self.run_id = f"{int(time.time())}-{os.getpid()}"
        self.java: JavaTool | None = None
        self.unavailable: dict[str, str] = {}
        self.groups = 0
        self.broker_pids: list[int] = list(args.broker_pids)

    def broker_cpu(self) -> float | None:
        return process_cpu_s(self.broker_pids) if self.broker_pids else None

    @staticmethod
    def cpu_delta(before: float | None, after: float | None) -> float | None:
        return None if before is None or after is None else after - before

    def log(self, message: str) -> None:
        if not self.args.quiet:
            print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    def fresh_group(self, client: str) -> str:
        self.groups += 1
        group = f"bench-{self.run_id}-{self.groups}-{client}"
        if client != "confluent-classic":
            self.admin.set_group_config(group, {"share.auto.offset.reset": "earliest"})
        return group

    def produce(self, topic: str, data: DataSet) -> None:
        from confluent_kafka import Producer

        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "linger.ms": 20,
                "batch.size": 1_000_000,
                "queue.buffering.max.messages": 1_000_000,
                "queue.buffering.max.kbytes": 1_048_576,
                "log_level": 3,
            }
        )
        # Random bytes defeat any compression; one buffer, sliced, keeps it cheap.
        pool = os.urandom(data.value_bytes + 4096)
        for i in range(data.records):
            start = (i * 131) % 4096
            while True:
                try:
                    producer.produce(
                        topic, pool[start : start + data.value_bytes],
                        partition=i % data.partitions,
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            if i % 10_000 == 0:
                producer.poll(0)
        remaining = producer.flush(120)
        if remaining:
            raise RuntimeError(f"{remaining} records to {topic} were not acknowledged")

    def setup_data(self, sets: Sequence[DataSet], prefix: str = "") -> dict[str, str]:
        topics = {}
        for data in sets:
            topic = f"bench-{self.run_id}-{prefix}{data.name}"
            self.admin.create_topic(topic, partitions=data.partitions)
            t0 = time.monotonic()
            self.produce(topic, data)
            self.log(f"produced {data.records} x {data.value_bytes} B to {topic} "
                     f"in {time.monotonic() - t0:.1f} s")
            topics[data.name] = topic
        return topics

    def java_tool(self) -> JavaTool | None:
        if JAVA_CLIENT in self.unavailable:
            return None
        if self.java is None:
            try:
                self.java = JavaTool(self.args.java_tools_version)
            except JavaToolUnavailableError as exc:
                self.unavailable[JAVA_CLIENT] = str(exc)
                self.log(f"{JAVA_CLIENT} unavailable: {exc}")
                return None
        return self.java

    def run_python(self, client: str, topic: str, data: DataSet,
                   profile: str | None = None, stages: bool = False,
                   perf: str | None = None) -> dict[str, Any]:
        group = self.fresh_group(client)
        extra = ["--timeout-s", str(self.args.run_timeout_s)]
        if profile:
            extra += ["--profile", profile]
        if stages:
            extra.append("--stages")
        if perf:
            extra += ["--perf-record", perf]
        broker0 = self.broker_cpu()
        child = Child(_worker_argv(client, self.bootstrap, topic, group, data.records, *extra))
        proc = child.reap(self.args.run_timeout_s + 60)
        broker_cpu_s = self.cpu_delta(broker0, self.broker_cpu())
        run = _parse_worker(proc)
        first = run["first_record_s"] or 0.0
        steady_s = run["elapsed_s"] - first
        out = {
            "records": run["records"],
            "complete": run["complete"],
            "elapsed_s": run["elapsed_s"],
            "first_record_s": run["first_record_s"],
            "steady_s": steady_s,
            # The first batch arrives at first_record_s; count the rest over the rest.
            "steady_records": run["records"] - run["first_batch_records"],
            "cpu_consume_s": run["cpu_consume_s"],
            "cpu_total_s": proc.cpu_total_s,
            "broker_cpu_s": broker_cpu_s,
            # The worker's own VmHWM read after close is exact; the parent's
            # sampling is the fallback.
            "peak_rss_bytes": max(run.get("peak_rss_bytes") or 0, proc.peak_rss_bytes),
            "rss_samples": run["rss_samples"],
            "config": run["config"],
        }
        if "stages" in run:
            out["stages"] = run["stages"]
        if "perf" in run:
            out["perf"] = run["perf"]
        return out

    def java_overhead(self, topic: str) -> float | None:
        """CPU seconds of a Java tool run that consumes a single record."""
        tool = self.java_tool()
        if tool is None:
            return None
        result = self.run_java(topic, DataSet(100, 1, 1), overhead=None)
        return float(result["cpu_total_s"])

    def run_java(self, topic: str, data: DataSet, overhead: float | None) -> dict[str, Any]:
        tool = self.java_tool()
        assert tool is not None
        group = self.fresh_group(JAVA_CLIENT)
        timeout_ms = int(self.args.run_timeout_s * 1000)
        broker0 = self.broker_cpu()
        child = Child(tool.command(self.bootstrap, topic, group, data.records, timeout_ms))
        proc = child.reap(self.args.run_timeout_s + 60)
        broker_cpu_s = self.cpu_delta(broker0, self.broker_cpu())
        parsed = parse_output(proc.stdout)
        steady_s = parsed.steady_elapsed_s or parsed.elapsed_s
        out: dict[str, Any] = {
            "records": parsed.records,
            "complete": parsed.records >= data.records,
            "elapsed_s": parsed.elapsed_s,
            "first_record_s": parsed.first_record_s,
            "steady_s": steady_s,
            "steady_records": (
                parsed.steady_records if parsed.steady_elapsed_s else parsed.records
            ),
            # No in-process figure: the JVM's start-up and JIT are taken out by
            # subtracting the CPU of a one-record run of the same tool.
            "cpu_consume_s": (
                max(0.0, proc.cpu_total_s - overhead) if overhead is not None else None
            ),
            "cpu_total_s": proc.cpu_total_s,
            "broker_cpu_s": broker_cpu_s,
            "peak_rss_bytes": proc.peak_rss_bytes,
            "rss_samples": [],
        }
        return out

    def run_latency(self, client: str) -> dict[str, Any]:
        from confluent_kafka import Producer

        topic = f"bench-{self.run_id}-lat-{self.groups}"
        self.admin.create_topic(topic, partitions=1)
        group = self.fresh_group(client)
        rate, seconds = self.args.latency_rate, self.args.latency_seconds
        count = int(rate * seconds)
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0,
                             "log_level": 3})
        child = Child(_worker_argv(client, self.bootstrap, topic, group, count,
                                   "--mode", "latency", "--timeout-s", str(seconds + 60)))
        # Warm-up records until the consumer has joined and received one.
        ready = False
        deadline = time.monotonic() + 60
        while not ready and time.monotonic() < deadline:
            producer.produce(topic, b"warmup")
            producer.poll(0)
            ready = child.wait_for_line("READY", 0.2)
        if not ready:
            child.proc.kill()
            raise RuntimeError(f"{client} never received a warm-up record")
        padding = b"\x00" * 92  # 100-byte values
        start = time.monotonic()
        for i in range(count):
            due = start + i / rate
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            producer.produce(topic, time.time_ns().to_bytes(8, "big") + padding)
            producer.poll(0)
        producer.flush(30)
        proc = child.reap(90)
        run = _parse_worker(proc)
        lat = run["latency_ms"]
        return {"p50_ms": lat["p50"], "p99_ms": lat["p99"], "max_ms": lat["max"],
                "count": lat["count"], "expected": count}


# ---------------------------------------------------------------- the runner


def _summary(values: list[float]) -> dict[str, float] | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def _steady_rate(run: dict[str, Any]) -> float:
    # A run whose records all came in the first batch has no steady span: use
    # the span from subscribe instead.
    if run["steady_s"] > 0 and run["steady_records"] > 0:
        return float(run["steady_records"] / run["steady_s"])
    return float(run["records"] / run["elapsed_s"]) if run["elapsed_s"] > 0 else 0.0


def summarise(runs: list[dict[str, Any]], value_bytes: int) -> dict[str, Any]:
    """min/median/max of each figure over the repetitions of one client on one data set.

    ``client_cores`` and ``broker_cores`` are the cores busy in the steady state:
    CPU per record times records per second. The CPU spans include the join,
    which costs little CPU, so they slightly overestimate.
    """
    rates = [_steady_rate(r) for r in runs]
    counted = [(r, rate) for r, rate in zip(runs, rates, strict=True) if r["records"]]
    client = [
        (r["cpu_consume_s"] / r["records"], rate)
        for r, rate in counted if r["cpu_consume_s"] is not None
    ]
    broker = [
        (r["broker_cpu_s"] / r["records"], rate)
        for r, rate in counted if r.get("broker_cpu_s") is not None
    ]
    return {
        "runs": len(runs),
        "complete": all(r["complete"] for r in runs),
        "records_per_s": _summary(rates),
        "mb_per_s": _summary([x * value_bytes / 1e6 for x in rates]),
        "records_per_s_incl_join": _summary(
            [r["records"] / r["elapsed_s"] for r in runs if r["elapsed_s"] > 0]
        ),
        "first_record_s": _summary([r["first_record_s"] for r in runs]),
        "cpu_s_per_million": _summary([per * 1e6 for per, _ in client]),
        "cpu_total_s": _summary([r["cpu_total_s"] for r in runs]),
        "client_cores": _summary([per * rate for per, rate in client]),
        "broker_cpu_s_per_million": _summary([per * 1e6 for per, _ in broker]),
        "broker_cores": _summary([per * rate for per, rate in broker]),
        "peak_rss_mb": _summary([r["peak_rss_bytes"] / 1e6 for r in runs]),
    }


def _compile_package() -> None:
    """Write kafka_share's byte-code, as installing the package does: without it
    (``PYTHONDONTWRITEBYTECODE`` set on a source checkout) every start compiles
    the generated messages module, about 40 ms and 38 MB that no installed
    package pays."""
    import compileall

    import kafka_share

    compileall.compile_dir(str(Path(kafka_share.__file__).parent), quiet=1)


def run_startup(bench: Bench, clients: Sequence[str], runs: int) -> dict[str, Any]:
    """Import + construct time and idle RSS of each client's start-up probe, in
    ``runs`` fresh processes each (probes interleaved, the order rotating)."""
    probes = [report.PROBE_OF[c] for c in clients if c in report.PROBE_RUNNERS]
    if not probes or runs < 1:
        return {}
    _compile_package()
    raw: dict[str, list[dict[str, Any]]] = {}
    for rep in range(runs):
        for probe in probes[rep % len(probes):] + probes[: rep % len(probes)]:
            proc = Child([sys.executable, str(STARTUP), probe, bench.bootstrap]).reap(60)
            line = next((x for x in proc.stdout.splitlines() if x.startswith("STARTUP ")), None)
            if line is None:
                bench.log(f"FAILED start-up probe {probe}: {proc.stderr[-500:]}")
                continue
            raw.setdefault(probe, []).append(json.loads(line[len("STARTUP "):]))
    out = {
        probe: {
            "runs": runs_,
            "import_construct_ms": _summary([r["import_construct_s"] * 1e3 for r in runs_]),
            "idle_rss_mb": _summary([r["idle_rss_bytes"] / 1e6 for r in runs_]),
        }
        for probe, runs_ in raw.items()
    }
    for probe, figures in out.items():
        bench.log(f"start-up {probe:18} {figures['import_construct_ms']} ms "
                  f"idle {figures['idle_rss_mb']} MB")
    return out


#: the clients whose CPU ``--layers`` breaks down: the same work on both sides
LAYER_CLIENTS = ("kafka-share-implicit", "confluent-share-implicit")


def run_layers(
    bench: Bench, sets: Sequence[DataSet], topics: dict[str, str], clients: Sequence[str]
) -> dict[str, Any]:
    """CPU per record by native layer (:mod:`peers.layers`) of each of
    :data:`LAYER_CLIENTS` that runs, one run per data set; or why not."""
    missing = layers.perf_missing()
    if missing is not None:
        return {"unavailable": missing}
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-perf-") as tmp:
        for data in sets:
            for client in [c for c in LAYER_CLIENTS if c in clients]:
                path = str(Path(tmp) / f"{data.name}-{client}.data")
                try:
                    run = bench.run_python(client, topics[data.name], data, perf=path)
                    found = layers.layers(run["perf"])
                except Exception as exc:
                    found = {"error": str(exc)}
                out.setdefault(data.name, {})[client] = found
                bench.log(f"layers {data.name} {client}: {found.get('layers', found)}")
    return out


def run_benchmark(args: argparse.Namespace, bootstrap: str) -> dict[str, Any]:
    bench = Bench(args, bootstrap)
    clients = [c for c in ALL_CLIENTS if c in args.clients]
    sets = data_sets(args.quick, args.scale, args.data_sets)
    started = time.monotonic()
    topics = bench.setup_data(sets)
    if JAVA_CLIENT in clients:
        bench.java_tool()
    overhead_topic = ""
    if JAVA_CLIENT in clients and bench.java is not None:
        overhead_topic = bench.setup_data([DataSet(100, 1, 1)], "overhead-")["100B-1p"]

    startup = run_startup(bench, clients, args.startup_runs)
    raw: dict[str, dict[str, list[dict[str, Any]]]] = {d.name: {} for d in sets}
    failures: list[dict[str, str]] = []
    overheads: list[float] = []
    for rep in range(args.repetitions):
        order = clients[rep % len(clients):] + clients[: rep % len(clients)]
        overhead = None
        if JAVA_CLIENT in order and bench.java is not None:
            overhead = bench.java_overhead(overhead_topic)
            if overhead is not None:
                overheads.append(overhead)
        for data in sets:
            for client in order:
                if client in bench.unavailable:
                    continue
                try:
                    if client == JAVA_CLIENT:
                        run = bench.run_java(topics[data.name], data, overhead)
                    else:
                        run = bench.run_python(client, topics[data.name], data)
                except Exception as exc:
                    failures.append({"client": client, "data_set": data.name, "error": str(exc)})
                    bench.log(f"FAILED {client} on {data.name}: {exc}")
                    continue
                raw[data.name].setdefault(client, []).append(run)
                rate = run["steady_records"] / run["steady_s"] if run["steady_s"] > 0 else 0
                bench.log(f"rep {rep + 1} {data.name:9} {client:26} {run['records']:>8} rec "
                          f"{rate:>10.0f} rec/s cpu {run['cpu_total_s']:.2f} s "
                          f"rss {run['peak_rss_bytes'] / 1e6:.0f} MB")

    latency: dict[str, list[dict[str, Any]]] = {}
    if args.latency_seconds > 0:
        for rep in range(args.repetitions):
            # The -crc clients differ only in CPU per batch: not run for latency.
            for client in [c for c in clients if c != JAVA_CLIENT and c not in CRC_CLIENTS]:
                try:
                    lat = bench.run_latency(client)
                except Exception as exc:
                    failures.append({"client": client, "data_set": "latency", "error": str(exc)})
                    bench.log(f"FAILED latency {client}: {exc}")
                    continue
                latency.setdefault(client, []).append(lat)
                bench.log(f"latency rep {rep + 1} {client:26} p50 {lat['p50_ms']:.1f} ms "
                          f"p99 {lat['p99_ms']:.1f} ms")

    memory: dict[str, Any] | None = None
    if args.memory_records > 0 and "kafka-share-implicit" in clients:
        mem_set = DataSet(1024, 1, args.memory_records)
        mem_topic = f"bench-{bench.run_id}-memory"
        bench.admin.create_topic(mem_topic, partitions=1)
        bench.produce(mem_topic, mem_set)
        run = bench.run_python("kafka-share-implicit", mem_topic, mem_set)
        samples = run["rss_samples"]
        memory = {
            "client": "kafka-share-implicit",
            "data_set": f"{mem_set.records} x 1 KiB, 1 partition",
            "rss_samples": samples,
            "peak_rss_mb": run["peak_rss_bytes"] / 1e6,
        }
        if samples:
            memory["rss_growth_20_to_100_mb"] = (
                samples[-1]["rss_bytes"] - samples[0]["rss_bytes"]
            ) / 1e6
        bench.log(f"memory: {memory}")

    profile_text: str | None = None
    if args.profile and "kafka-share-implicit" in clients:
        data = next((d for d in sets if d.name == "1KiB-1p"), sets[0])
        path = Path(args.output_dir) / f"profile-{args.name}.txt"
        bench.run_python("kafka-share-implicit", topics[data.name], data, profile=str(path))
        profile_text = str(path)

    stages: dict[str, Any] = {}
    if args.stages and "kafka-share-implicit" in clients:
        for data in sets:
            # With kafka-share's default check.crcs=true, so that the table has the CRC stage.
            run = bench.run_python(
                "kafka-share-implicit" + CRC_SUFFIX, topics[data.name], data, stages=True
            )
            stages[data.name] = {
                "cpu_us_per_record": run["cpu_consume_s"] / max(1, run["records"]) * 1e6,
                "stages": run["stages"],
            }
            bench.log(f"stages {data.name}: {stages[data.name]}")

    cpu_layers = run_layers(bench, sets, topics, clients) if args.layers else {}

    summary = {
        data.name: {
            client: summarise(runs, data.value_bytes)
            for client, runs in raw[data.name].items()
        }
        for data in sets
    }
    return {
        "meta": {
            "name": args.name,
            "mode": "quick" if args.quick else "full",
            "scale": args.scale,
            "repetitions": args.repetitions,
            "bootstrap": "external" if args.bootstrap_servers else "embedded",
            "kafka_broker": os.environ.get("KAFKA_SHARE_KAFKA_VERSION", "4.4.0"),
            "java_tools_version": args.java_tools_version,
            "python": platform.python_version(),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
            "started_unix": int(time.time() - (time.monotonic() - started)),
            "duration_s": time.monotonic() - started,
            "clients": clients,
            "java_overhead_cpu_s": overheads,
            "latency_rate_per_s": args.latency_rate,
            "latency_seconds": args.latency_seconds,
        },
        "data_sets": [
            {"name": d.name, "value_bytes": d.value_bytes, "partitions": d.partitions,
             "records": d.records}
            for d in sets
        ],
        "unavailable": bench.unavailable,
        "failures": failures,
        "summary": summary,
        "latency": {
            client: {
                "runs": runs,
                "p50_ms": _summary([r["p50_ms"] for r in runs]),
                "p99_ms": _summary([r["p99_ms"] for r in runs]),
            }
            for client, runs in latency.items()
        },
        "memory": memory,
        "startup": startup,
        "profile": profile_text,
        "stages": stages,
        "layers": cpu_layers,
        "raw": raw,
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="benchmarks/compare.py",
        description="Consume the same data sets with kafka-share and its peers, side by side.",
    )
    parser.add_argument("--quick", action="store_true", help="small data sets (a few minutes)")
    parser.add_argument("--bootstrap-servers", help="use this cluster instead of starting one")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply record counts")
    parser.add_argument("--clients", default=",".join(ALL_CLIENTS),
                        help=f"comma-separated subset of {','.join(ALL_CLIENTS)}")
    parser.add_argument("--data-sets", help="comma-separated subset, e.g. 100B-1p,1KiB-6p")
    parser.add_argument("--latency-rate", type=float, default=1000.0, help="records/s")
    parser.add_argument("--latency-seconds", type=float, default=None,
                        help="seconds of timed produce per latency run (0 skips; 5, quick 3)")
    parser.add_argument("--memory-records", type=int, default=None,
                        help="1 KiB records of the RSS-growth run (0 skips)")
    parser.add_argument("--startup-runs", type=int, default=None,
                        help="fresh processes per client measuring import + construct "
                        "and idle RSS (0 skips; 7, quick 3)")
    parser.add_argument("--profile", action="store_true",
                        help="also profile kafka-share (implicit) on 1KiB-1p with cProfile")
    parser.add_argument("--stages", action="store_true",
                        help="also time kafka-share's stages (implicit, one run per data set)")
    parser.add_argument("--layers", action="store_true",
                        help="also break the CPU of kafka-share and confluent-kafka "
                        "(implicit, one run per data set) down by native layer with perf")
    parser.add_argument("--run-timeout-s", type=float, default=180.0)
    parser.add_argument("--java-tools-version", default="4.3.1")
    parser.add_argument("--output-dir", default=str(RESULTS_DIR))
    parser.add_argument("--name", default=None,
                        help="results file stem (default: latest-quick / latest-full)")
    parser.add_argument("--broker-pids", default="",
                        help="comma-separated broker process ids, to measure broker CPU "
                        "(automatic for the embedded broker)")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--report-only", metavar="RESULTS_JSON",
                        help="run nothing: recompute the summary of an earlier results "
                        "file from its raw runs and rewrite its Markdown and PNG")
    args = parser.parse_args(argv)
    args.clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    unknown = set(args.clients) - set(ALL_CLIENTS)
    if unknown:
        parser.error(f"unknown client(s) {sorted(unknown)}")
    args.data_sets = args.data_sets.split(",") if args.data_sets else None
    args.broker_pids = [int(p) for p in args.broker_pids.split(",") if p.strip()]
    if args.latency_seconds is None:
        args.latency_seconds = 3.0 if args.quick else 5.0
    if args.startup_runs is None:
        args.startup_runs = 3 if args.quick else 7
    if args.memory_records is None:
        args.memory_records = int((50_000 if args.quick else 400_000) * args.scale)
    if args.name is None:
        args.name = "latest-quick" if args.quick else "latest-full"
    if args.repetitions < 1:
        parser.error("--repetitions must be at least 1")
    return args


def resummarise(results: dict[str, Any]) -> dict[str, Any]:
    """``results`` with its summary recomputed from its raw runs."""
    sizes = {d["name"]: d["value_bytes"] for d in results["data_sets"]}
    summary = {
        name: {client: summarise(runs, sizes[name]) for client, runs in clients.items()}
        for name, clients in results["raw"].items()
    }
    return {**results, "summary": summary}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report_only:
        path = Path(args.report_only)
        results = resummarise(json.loads(path.read_text()))
        for written in report.write_all(results, path.parent, path.stem):
            print(f"wrote {written}", file=sys.stderr)
        return 0
    out_dir = Path(args.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.bootstrap_servers:
        results = run_benchmark(args, args.bootstrap_servers)
    else:
        from kafka_share.testing import LocalKafkaCluster
        from kafka_share.testing.config import BENCHMARK_JVM_OPTIONS

        cluster = LocalKafkaCluster(jvm_options=BENCHMARK_JVM_OPTIONS)
        with cluster:
            args.broker_pids = list(cluster.pids.values())
            results = run_benchmark(args, cluster.bootstrap_servers)
    paths = report.write_all(results, out_dir, args.name)
    print(report.markdown(results))
    for path in paths:
        print(f"wrote {path}", file=sys.stderr)
    return 1 if results["failures"] else 0
