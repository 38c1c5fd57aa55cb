"""Results of a peer comparison as JSON, a Markdown report and a PNG chart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from peers.layers import LAYER_NAMES
from peers.pngchart import Panel, bar_chart

__all__ = ["chart", "markdown", "ratios", "write_all"]

LABELS = {
    "kafka-share-implicit": "kafka-share implicit",
    "kafka-share-explicit": "kafka-share explicit",
    "confluent-share-implicit": "confluent ShareConsumer implicit",
    "confluent-share-explicit": "confluent ShareConsumer explicit",
    "java-share-perf": "Java ShareConsumerPerformance",
    "confluent-classic": "confluent classic Consumer",
    "kafka-share-async-implicit": "kafka-share AsyncShareConsumer implicit",
    "kafka-share-async-explicit": "kafka-share AsyncShareConsumer explicit",
    "kafka-share-arrow-implicit": "kafka-share poll_arrow implicit",
    "kafka-share-arrow-explicit": "kafka-share poll_arrow explicit",
    "kafka-share-implicit-crc": "kafka-share implicit, check.crcs=true",
    "confluent-share-implicit-crc": "confluent ShareConsumer implicit, check.crcs=true",
}

# (kafka-share client, peer, what the ratio compares)
RATIO_PAIRS = (
    ("kafka-share-implicit", "confluent-share-implicit"),
    ("kafka-share-explicit", "confluent-share-explicit"),
    ("kafka-share-implicit", "java-share-perf"),
    ("kafka-share-implicit", "confluent-classic"),
    ("kafka-share-explicit", "kafka-share-implicit"),
    ("kafka-share-async-implicit", "kafka-share-implicit"),
    ("kafka-share-async-explicit", "kafka-share-explicit"),
    ("kafka-share-arrow-implicit", "confluent-share-implicit"),
    ("kafka-share-arrow-explicit", "confluent-share-explicit"),
    ("kafka-share-implicit-crc", "confluent-share-implicit-crc"),
)


def _med(summary: dict[str, Any] | None, key: str) -> float | None:
    figure = (summary or {}).get(key)
    return None if figure is None else float(figure["median"])


def _fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "n/a"
    if digits == 0:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def _mmm(figure: dict[str, float] | None, digits: int = 0) -> str:
    if figure is None:
        return "n/a"
    return (f"{_fmt(figure['median'], digits)} "
            f"({_fmt(figure['min'], digits)} to {_fmt(figure['max'], digits)})")


def ratios(results: dict[str, Any]) -> list[dict[str, Any]]:
    """kafka-share's median records/s and CPU/record against each peer, per data set."""
    rows = []
    for data_set, clients in results["summary"].items():
        for ours, peer in RATIO_PAIRS:
            if ours not in clients or peer not in clients:
                continue
            our_rate = _med(clients[ours], "records_per_s")
            peer_rate = _med(clients[peer], "records_per_s")
            our_cpu = _med(clients[ours], "cpu_s_per_million")
            peer_cpu = _med(clients[peer], "cpu_s_per_million")
            rows.append({
                "data_set": data_set,
                "kafka_share": ours,
                "peer": peer,
                "throughput_ratio": our_rate / peer_rate if our_rate and peer_rate else None,
                "cpu_per_record_ratio": our_cpu / peer_cpu if our_cpu and peer_cpu else None,
            })
    return rows


def markdown(results: dict[str, Any]) -> str:
    """The Markdown report: per-data-set tables, ratios, latency, memory."""
    meta = results["meta"]
    out = [
        f"# Consumer comparison: {meta['name']} ({meta['mode']} mode)",
        "",
        f"Broker Kafka {meta['kafka_broker']} ({meta['bootstrap']}), {meta['machine']}, "
        f"Python {meta['python']}, Java tool kafka-tools {meta['java_tools_version']}; "
        f"{meta['repetitions']} repetitions, clients interleaved; run took "
        f"{meta['duration_s']:.0f} s. Figures are median (min to max).",
        "",
        "records/s and MB/s: from the first record received to the last (steady state); "
        "'incl. join' counts from `subscribe`. CPU: consuming process, user+system, "
        "per million records (Java: total minus a one-record run of the tool). "
        "Cores: CPU per record x records/s, i.e. cores kept busy in the steady state "
        "(broker: the broker process; n/a when its pid is unknown). "
        "RSS: peak of the consuming process.",
        "",
    ]
    for data in results["data_sets"]:
        clients = results["summary"].get(data["name"], {})
        out += [
            f"## {data['name']}: {data['records']:,} records of {data['value_bytes']} B, "
            f"{data['partitions']} partition(s)",
            "",
            "| client | records/s | MB/s | records/s incl. join | CPU s / M records "
            "| client cores | broker cores | peak RSS MB |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for client in meta["clients"]:
            s = clients.get(client)
            if s is None:
                reason = results["unavailable"].get(client, "failed, see `failures`")
                out.append(f"| {LABELS.get(client, client)} | n/a: {reason} | | | | | | |")
                continue
            mark = "" if s["complete"] else " (incomplete)"
            out.append(
                f"| {LABELS.get(client, client)}{mark} | {_mmm(s['records_per_s'])} "
                f"| {_mmm(s['mb_per_s'], 1)} | {_mmm(s['records_per_s_incl_join'])} "
                f"| {_mmm(s['cpu_s_per_million'], 2)} | {_mmm(s.get('client_cores'), 2)} "
                f"| {_mmm(s.get('broker_cores'), 2)} | {_mmm(s['peak_rss_mb'])} |"
            )
        out.append("")
    out += [
        "## kafka-share's ratio to each peer (median records/s; CPU per record)",
        "",
        "Throughput ratio > 1: kafka-share is faster. CPU ratio > 1: kafka-share uses "
        "more CPU per record.",
        "",
        "| data set | kafka-share | peer | throughput ratio | CPU/record ratio |",
        "|---|---|---|---|---|",
    ]
    for row in ratios(results):
        out.append(
            f"| {row['data_set']} | {LABELS[row['kafka_share']]} | {LABELS[row['peer']]} "
            f"| {_fmt(row['throughput_ratio'], 2)} | {_fmt(row['cpu_per_record_ratio'], 2)} |"
        )
    out.append("")
    if results["latency"]:
        out += [
            f"## Produce-to-consume latency at {meta['latency_rate_per_s']:.0f} records/s "
            f"for {meta['latency_seconds']:.0f} s (100 B, 1 partition)",
            "",
            "| client | p50 ms | p99 ms |",
            "|---|---|---|",
        ]
        for client in meta["clients"]:
            lat = results["latency"].get(client)
            if lat is None:
                why = ("the Java tool does not read record values"
                       if client == "java-share-perf" else "n/a")
                out.append(f"| {LABELS.get(client, client)} | {why} | |")
                continue
            out.append(f"| {LABELS.get(client, client)} | {_mmm(lat['p50_ms'], 1)} "
                       f"| {_mmm(lat['p99_ms'], 1)} |")
        out.append("")
    memory = results.get("memory")
    if memory:
        out += [
            f"## Memory: kafka-share implicit, {memory['data_set']}",
            "",
            "| records consumed | RSS MB |",
            "|---|---|",
        ]
        for sample in memory["rss_samples"]:
            out.append(f"| {sample['records']:,} | {sample['rss_bytes'] / 1e6:.1f} |")
        growth = memory.get("rss_growth_20_to_100_mb")
        out += ["", f"RSS growth from 20 % to 100 % of the records: {_fmt(growth, 1)} MB.", ""]
    out += _startup_table(results)
    out += _stages_table(results.get("stages") or {})
    out += _layers_table(results.get("layers") or {})
    if results["unavailable"] or results["failures"]:
        out += ["## Not measured", ""]
        for client, reason in results["unavailable"].items():
            out.append(f"- {client}: {reason}")
        for failure in results["failures"]:
            out.append(f"- {failure['client']} on {failure['data_set']}: {failure['error']}")
        out.append("")
    return "\n".join(out)


#: the columns of the stage table, in the worker's stage names
_STAGE_COLUMNS = ("poll", "socket_read", "select", "batch_crc", "record_decode", "gc")


#: the start-up probe (startup.py) that stands for each client
PROBE_OF = {
    "kafka-share-implicit": "kafka-share", "kafka-share-explicit": "kafka-share",
    "kafka-share-arrow-implicit": "kafka-share", "kafka-share-arrow-explicit": "kafka-share",
    "kafka-share-async-implicit": "kafka-share-async",
    "kafka-share-async-explicit": "kafka-share-async",
    "confluent-share-implicit": "confluent-share", "confluent-share-explicit": "confluent-share",
    "confluent-classic": "confluent-classic",
}
#: the clients that run each probe (one per library and API) and carry its bars
PROBE_RUNNERS = ("kafka-share-implicit", "kafka-share-async-implicit",
                 "confluent-share-implicit", "confluent-classic")


def first_record_ms(results: dict[str, Any], client: str) -> dict[str, float] | None:
    """min/median/max of a client's time from ``subscribe`` to its first record,
    over its runs on every data set (each on a fresh group, records waiting)."""
    values = [
        run["first_record_s"] * 1e3
        for clients in results["raw"].values()
        for run in clients.get(client, [])
        if run.get("first_record_s") is not None
    ]
    if not values:
        return None
    values.sort()
    return {"min": values[0], "median": values[len(values) // 2], "max": values[-1]}


def _startup_table(results: dict[str, Any]) -> list[str]:
    """Import + construct, idle RSS (the start-up probe) and time to first record."""
    startup = results.get("startup") or {}
    if not startup:
        return []
    out = [
        "## Start-up and idle memory",
        "",
        "Import + construct: a fresh interpreter imports the client's package and "
        "constructs one consumer (`benchmarks/peers/startup.py`; kafka-share byte-compiled, "
        "as installed). Idle RSS: that process once quiet. First record: from `subscribe` "
        "to the first record on a fresh group with records waiting, over every throughput "
        "run. AsyncShareConsumer's figure includes creating its event loop.",
        "",
        "| client | import + construct ms | idle RSS MB | first record ms |",
        "|---|---|---|---|",
    ]
    for client in results["meta"]["clients"]:
        probe = startup.get(PROBE_OF.get(client, ""))
        first = first_record_ms(results, client)
        if probe is None and first is None:
            continue
        out.append(
            f"| {LABELS.get(client, client)} "
            f"| {_mmm(probe['import_construct_ms']) if probe else 'n/a'} "
            f"| {_mmm(probe['idle_rss_mb'], 1) if probe else 'n/a'} | {_mmm(first)} |"
        )
    out.append("")
    return out


def _stages_table(stages: dict[str, Any]) -> list[str]:
    """CPU µs per record by stage (``--stages``), one row per data set."""
    if not stages:
        return []
    out = [
        "## Where kafka-share's CPU goes (implicit, check.crcs=true, one run per data set)",
        "",
        "CPU µs per record: the whole process, then stages timed on the thread",
        "that ran them. `poll` holds the application thread's share of the rest",
        "(reads, decoding and GC happen inside it while it runs the loop).",
        "",
        "| data set | process | " + " | ".join(_STAGE_COLUMNS) + " |",
        "|---|" + "---:|" * (len(_STAGE_COLUMNS) + 1),
    ]
    for name, entry in stages.items():
        cells = [
            _fmt(entry["stages"].get(stage, {}).get("cpu_us_per_record"), 2)
            for stage in _STAGE_COLUMNS
        ]
        process = _fmt(entry["cpu_us_per_record"], 2)
        out.append(f"| {name} | {process} | " + " | ".join(cells) + " |")
    out.append("")
    return out


def _layers_table(found: dict[str, Any]) -> list[str]:
    """CPU µs per record by native layer (``--layers``), a row per data set and client."""
    if not found:
        return []
    out = [
        "## Where the CPU goes, by native layer (implicit, perf, one run per data set)",
        "",
    ]
    if "unavailable" in found:
        return [*out, f"Not measured: {found['unavailable']}.", ""]
    out += [
        "CPU µs per record from a tenth to nine tenths of a run (perf samples of",
        "every thread's CPU time), by the library the sampled instruction was in,",
        "then the costliest symbols.",
        "",
        "| data set | client | all | " + " | ".join(LAYER_NAMES) + " | costliest symbols |",
        "|---|---|" + "---:|" * (len(LAYER_NAMES) + 1) + "---|",
    ]
    for name, clients in found.items():
        for client, entry in clients.items():
            label = LABELS.get(client, client)
            if "error" in entry:
                out.append(f"| {name} | {label} | n/a: {entry['error']} |")
                continue
            cells = [_fmt(entry["layers"][layer], 2) for layer in LAYER_NAMES]
            top = ", ".join(
                f"`{s['symbol']}` {s['us_per_record']:.2f}" for s in entry["top_symbols"][:4]
            )
            out.append(
                f"| {name} | {label} | {_fmt(entry['us_per_record'], 2)} | "
                + " | ".join(cells) + f" | {top} |"
            )
    out.append("")
    return out


def chart(results: dict[str, Any]) -> bytes:
    """PNG: median records/s per data set (groups) and client (bars)."""
    clients = results["meta"]["clients"]
    groups = [d["name"] for d in results["data_sets"]]
    values = [
        [_med(results["summary"].get(g, {}).get(c), "records_per_s") for c in clients]
        for g in groups
    ]
    return bar_chart(
        f"Records/s, median of {results['meta']['repetitions']} ({results['meta']['mode']})",
        groups, [LABELS.get(c, c) for c in clients], values, below=_startup_panels(results),
    )


def _startup_panels(results: dict[str, Any]) -> list[Panel]:
    """Import + construct, idle RSS and first record, one bar per client (the
    start-up figures on the client that stands for its probe only)."""
    startup = results.get("startup") or {}
    if not startup:
        return []
    clients = results["meta"]["clients"]

    def probe_value(client: str, key: str) -> float | None:
        probe = startup.get(PROBE_OF.get(client, ""))
        runs_it = client in PROBE_RUNNERS
        return probe[key]["median"] if probe and runs_it and probe[key] else None

    def first(client: str) -> float | None:
        figure = first_record_ms(results, client)
        return figure["median"] if figure else None

    return [
        Panel("import + construct, ms", [""],
              [[probe_value(c, "import_construct_ms") for c in clients]]),
        Panel("idle RSS, MB", [""], [[probe_value(c, "idle_rss_mb") for c in clients]]),
        Panel("first record, ms", [""], [[first(c) for c in clients]]),
    ]


def write_all(results: dict[str, Any], out_dir: Path, name: str) -> list[Path]:
    """Write ``<name>.json``, ``<name>.md`` and ``<name>.png``; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.json", out_dir / f"{name}.md", out_dir / f"{name}.png"]
    results = {**results, "ratios": ratios(results)}
    paths[0].write_text(json.dumps(results, indent=1, sort_keys=False) + "\n")
    paths[1].write_text(markdown(results) + "\n")
    paths[2].write_bytes(chart(results))
    return paths
