"""``benchmarks/compare.py --quick`` against the session broker, at its smallest.

Checks only that the run is complete (every client x data set has figures,
latency and memory sections are filled, the chart is a PNG); no speed limits.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kafka_share.testing import KafkaCluster

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
COMPARE = ROOT / "benchmarks" / "compare.py"
CLIENTS = [
    "kafka-share-implicit",
    "kafka-share-explicit",
    "confluent-share-implicit",
    "confluent-share-explicit",
    "java-share-perf",
    "confluent-classic",
    "kafka-share-async-implicit",
    "kafka-share-async-explicit",
    "kafka-share-arrow-implicit",
    "kafka-share-arrow-explicit",
    "kafka-share-implicit-crc",
    "confluent-share-implicit-crc",
]
DATA_SETS = ["100B-1p", "100B-6p", "1KiB-1p", "1KiB-6p", "10KiB-1p", "10KiB-6p"]
FIGURES = ["records_per_s", "mb_per_s", "records_per_s_incl_join", "cpu_s_per_million",
           "cpu_total_s", "client_cores", "peak_rss_mb"]
BROKER_FIGURES = ["broker_cpu_s_per_million", "broker_cores"]
STAGES = ["poll", "select", "socket_read", "batch_crc", "record_decode", "gc"]


def _check_figure(figure: Any, where: str) -> None:
    assert figure is not None, f"no figure for {where}"
    assert figure["min"] <= figure["median"] <= figure["max"], where
    assert figure["min"] >= 0, where


@pytest.mark.timeout(300)
def test_quick_comparison_writes_a_complete_results_file(
    kafka_cluster: KafkaCluster, kafka_bootstrap: str, tmp_path: Path
) -> None:
    # Broker CPU is measured when the broker's pids are known (the jar backend).
    broker_pids = sorted(getattr(kafka_cluster, "pids", {}).values())
    proc = subprocess.run(
        [
            sys.executable, str(COMPARE), "--quick", "--bootstrap-servers", kafka_bootstrap,
            "--repetitions", "1", "--scale", "0.1", "--latency-seconds", "1",
            "--memory-records", "3000", "--output-dir", str(tmp_path), "--name", "it",
            "--broker-pids", ",".join(map(str, broker_pids)), "--quiet", "--stages",
        ],
        capture_output=True, text=True, timeout=280, check=False, cwd=ROOT,
    )
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    results = json.loads((tmp_path / "it.json").read_text())

    assert results["failures"] == []
    assert results["unavailable"] == {}, "Java tool or a client could not run"
    assert [d["name"] for d in results["data_sets"]] == DATA_SETS
    for data in results["data_sets"]:
        per_client = results["summary"][data["name"]]
        assert sorted(per_client) == sorted(CLIENTS), data["name"]
        for client, summary in per_client.items():
            where = f"{client} on {data['name']}"
            assert summary["runs"] == 1, where
            assert summary["complete"], f"{where} did not consume every record"
            for name in FIGURES + (BROKER_FIGURES if broker_pids else []):
                _check_figure(summary[name], f"{where}: {name}")
            # Every raw run consumed exactly the data set.
            (run,) = results["raw"][data["name"]][client]
            assert run["records"] == data["records"], where
            # The same check.crcs on both sides: true for the -crc clients only.
            if client != "java-share-perf":
                crcs = "true" if client.endswith("-crc") else "false"
                assert run["config"] == {"check.crcs": crcs}, where
            if client.startswith("kafka-share"):
                assert len(run["rss_samples"]) == 5, where

    for client in CLIENTS:
        if client == "java-share-perf" or client.endswith("-crc"):
            assert client not in results["latency"]
            continue
        latency = results["latency"][client]
        (run,) = latency["runs"]
        assert run["count"] == run["expected"] == 1000, client
        _check_figure(latency["p50_ms"], f"{client} latency p50")
        _check_figure(latency["p99_ms"], f"{client} latency p99")
        assert latency["p50_ms"]["median"] <= latency["p99_ms"]["median"], client

    memory = results["memory"]
    assert [s["records"] for s in memory["rss_samples"]][-1] == 3000
    assert isinstance(memory["rss_growth_20_to_100_mb"], float)

    # --stages: one timed kafka-share run per data set. Records are decoded and
    # their batches checked inside poll, on the application thread.
    assert sorted(results["stages"]) == sorted(DATA_SETS)
    for name, entry in results["stages"].items():
        stages = entry["stages"]
        assert sorted(stages) == sorted(STAGES), name
        for stage in ("poll", "socket_read", "select", "batch_crc", "record_decode"):
            assert stages[stage]["calls"] > 0, f"{name}: {stage} never ran"
        assert all(s["cpu_us_per_record"] >= 0 for s in stages.values()), name
        poll = stages["poll"]["cpu_us_per_record"]
        assert stages["record_decode"]["cpu_us_per_record"] <= poll, name
        assert stages["batch_crc"]["cpu_us_per_record"] <= poll, name
        assert entry["cpu_us_per_record"] > 0, name

    # Start-up: 3 fresh processes per probe (--quick); a consumer's footprint is
    # tens of MB, its start well under 10 s (no limits on the figures here).
    startup = results["startup"]
    assert sorted(startup) == ["confluent-classic", "confluent-share", "kafka-share",
                               "kafka-share-async"]
    for probe, figures in startup.items():
        assert len(figures["runs"]) == 3, probe
        _check_figure(figures["import_construct_ms"], f"{probe} import + construct")
        _check_figure(figures["idle_rss_mb"], f"{probe} idle RSS")
        assert 5 < figures["idle_rss_mb"]["median"] < 500, probe
        assert 0 < figures["import_construct_ms"]["median"] < 10_000, probe

    pairs = {(r["data_set"], r["kafka_share"], r["peer"]) for r in results["ratios"]}
    assert ("1KiB-1p", "kafka-share-implicit", "confluent-share-implicit") in pairs
    assert ("10KiB-1p", "kafka-share-implicit-crc", "confluent-share-implicit-crc") in pairs
    markdown = (tmp_path / "it.md").read_text()
    assert "kafka-share's ratio to each peer" in markdown
    assert "Where kafka-share's CPU goes" in markdown
    table = markdown.split("## Start-up and idle memory", 1)[1].split("##", 1)[0]
    assert "| kafka-share implicit | " in table and "| confluent classic Consumer | " in table
    assert (tmp_path / "it.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
