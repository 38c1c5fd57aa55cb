"""The benchmark's CPU breakdown by native layer (``benchmarks/peers/layers.py``
and the worker's ``PerfWindow``): the records a perf recording covers, the
layer of a sample's library, and a real recording of a process read back."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from peers import layers  # noqa: E402


def test_records_between_interpolates_along_the_trajectory() -> None:
    trajectory = [[10.0, 1000], [11.0, 3000], [13.0, 4000]]
    assert layers._records_between(trajectory, 10.5, 12.0) == pytest.approx(1500.0)
    # Outside the trajectory the count stays at its ends.
    assert layers._records_between(trajectory, 9.0, 14.0) == 3000


def test_a_sample_s_library_names_its_layer() -> None:
    assert layers.layer_of("[kernel.kallsyms]") == "kernel"
    assert layers.layer_of("/usr/lib/libpython3.11.so.1.0") == "interpreter"
    assert layers.layer_of("/usr/lib/x86_64-linux-gnu/libc.so.6") == "C library"
    assert layers.layer_of("/venv/confluent_kafka.libs/librdkafka-0cb.so.1") == "librdkafka"
    assert layers.layer_of("/venv/confluent_kafka/cimpl.cpython-311.so") == "librdkafka"
    assert layers.layer_of("/venv/numpy/_core/_multiarray_umath.so") == "other"


_WORKER = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, sys.argv[2])
    from peers.worker import PerfWindow
    window = PerfWindow(sys.argv[1], 4000)
    payload = bytes(4096)
    count = 0
    cpu = []
    while count < 4000:
        # Python work, and copies in the C library: ~0.1 ms of CPU a record, so
        # that a slow start of perf's sampling on a loaded machine (tens of ms)
        # costs the window few records.
        for _ in range(400):
            payload[1:] + b"x"
        count += 1
        window.tick(count)
        if count in (window.start_at, window.stop_at):
            cpu.append(time.thread_time())
    window.stop()
    print(json.dumps({"path": window.path, "hz": 3999, "trajectory": window.trajectory,
                      "error": window.error,
                      "us_per_record": (cpu[1] - cpu[0]) / (4000 * 8 // 10) * 1e6}))
""")


@pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed")
def test_a_recording_of_a_process_reads_back_as_cpu_per_record(tmp_path: Path) -> None:
    # One busy thread, recorded from a tenth to nine tenths of its 4,000
    # "records": the recording must read back as the CPU per record the thread
    # itself measured over that span (perf's attach pauses it, not its CPU).
    proc = subprocess.run(
        [sys.executable, "-c", _WORKER, str(tmp_path / "perf.data"), str(ROOT / "benchmarks")],
        capture_output=True, text=True, timeout=120, check=True,
    )
    perf = json.loads(proc.stdout)
    assert perf["error"] is None
    found = layers.layers(perf)
    assert 2500 < found["records"] <= 3200
    assert found["us_per_record"] == pytest.approx(perf["us_per_record"], rel=0.15)
    assert sum(found["layers"].values()) == pytest.approx(found["us_per_record"])
    assert found["layers"]["interpreter"] > found["layers"]["kernel"]
    assert found["layers"]["librdkafka"] == 0
    assert found["top_symbols"][0]["us_per_record"] > 0


def test_the_report_has_a_row_per_data_set_and_client() -> None:
    from peers import report

    entry = {
        "records": 1000.0, "samples": 500, "us_per_record": 2.5,
        "layers": {"kernel": 0.5, "C library": 0.25, "interpreter": 1.5,
                   "librdkafka": 0.0, "other": 0.25},
        "top_symbols": [{"symbol": "_PyEval_EvalFrameDefault", "layer": "interpreter",
                         "us_per_record": 0.75}],
    }
    table = "\n".join(report._layers_table({"1KiB-1p": {
        "kafka-share-implicit": entry,
        "confluent-share-implicit": {"error": "too few samples (54) to tell the layers apart"},
    }}))
    assert ("| 1KiB-1p | kafka-share implicit | 2.50 | 0.50 | 0.25 | 1.50 | 0.00 | 0.25 | "
            "`_PyEval_EvalFrameDefault` 0.75 |") in table
    assert "| 1KiB-1p | confluent ShareConsumer implicit | n/a: too few samples (54)" in table
    assert report._layers_table({"unavailable": "perf is not installed"})[-2] == (
        "Not measured: perf is not installed."
    )
