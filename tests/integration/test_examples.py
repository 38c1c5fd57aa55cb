"""The examples/ scripts, run as a user would (subprocesses) against the session broker."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RUN_TIMEOUT_S = 90

_PROCESSED = re.compile(r"^processed partition=(\d+) offset=(\d+) delivery_count=(\d+)(?: |$)")
_RELEASED = re.compile(r"^released partition=(\d+) offset=(\d+) delivery_count=(\d+)")
_REJECTED = re.compile(r"^rejected partition=(\d+) offset=(\d+)(?: delivery_count=(\d+))?")


def run_example(script: str, bootstrap: str, group: str, topic: str, *args: str) -> str:
    """Run an example to completion; return its stdout (asserting exit status 0)."""
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "--bootstrap-servers", bootstrap,
         "--group", group, "--topic", topic, *args],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert proc.returncode == 0, f"{script} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def summary_of(output: str) -> dict[str, str]:
    lines = [line for line in output.splitlines() if line.startswith("summary: ")]
    assert len(lines) == 1, output
    return dict(item.split("=", 1) for item in lines[0].removeprefix("summary: ").split())


def processed_coordinates(output: str) -> list[tuple[int, int, int]]:
    """(partition, offset, delivery_count) of every 'processed' line."""
    out = []
    for line in output.splitlines():
        m = _PROCESSED.match(line)
        if m:
            out.append((int(m[1]), int(m[2]), int(m[3])))
    return out


# -- implicit_worker.py -----------------------------------------------------------------


def test_implicit_worker_processes_every_record_exactly_once(
    topic_factory: Callable[..., str], share_group: str, kafka_bootstrap: str,
    kafka_produce: Callable[..., Any],
) -> None:
    topic = topic_factory(partitions=3)
    produced = kafka_produce(topic, [f"job-{i}".encode() for i in range(600)])
    expected = {(r.partition, r.offset): r.value for r in produced}

    out = run_example("implicit_worker.py", kafka_bootstrap, share_group, topic,
                      "--max-records", "600", "--timeout", "60")

    coords = processed_coordinates(out)
    counts = Counter((p, o) for p, o, _ in coords)
    assert set(counts) == set(expected), "records missing or foreign"
    assert max(counts.values()) == 1, "a record was processed twice"
    assert all(d == 1 for _, _, d in coords)
    values = dict(re.findall(r"partition=(\d+ offset=\d+) delivery_count=\d+ value=(\S+)", out))
    assert values == {f"{p} offset={o}": v.decode() for (p, o), v in expected.items()}
    assert summary_of(out) == {"processed": "600"}

    # Everything was accepted (on the worker's last poll or its commit on
    # shutdown): a second worker in the group gets nothing.
    again = run_example("implicit_worker.py", kafka_bootstrap, share_group, topic,
                        "--timeout", "5")
    assert processed_coordinates(again) == []
    assert summary_of(again) == {"processed": "0"}


def test_implicit_worker_stops_cleanly_on_sigterm_and_commits(
    topic_factory: Callable[..., str], share_group: str, kafka_bootstrap: str,
    kafka_produce: Callable[..., Any],
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [f"job-{i}".encode() for i in range(150)], partition=0)
    lines: list[str] = []
    with subprocess.Popen(
        [sys.executable, str(EXAMPLES / "implicit_worker.py"), "--bootstrap-servers",
         kafka_bootstrap, "--group", share_group, "--topic", topic],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        stdout = proc.stdout
        reader = threading.Thread(target=lambda: lines.extend(stdout), daemon=True)
        reader.start()
        try:
            deadline = time.monotonic() + 60
            while len(processed_coordinates("".join(lines))) < 150:
                assert proc.poll() is None, "the worker exited before being signalled"
                assert time.monotonic() < deadline, f"only got {len(lines)} lines"
                time.sleep(0.1)
            # No --max-records: the worker is now blocked in poll() waiting for more.
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        reader.join(10)
        stderr = proc.stderr.read()
    out = "".join(lines)
    assert rc == 0, f"exit status {rc}\n{out}\n{stderr}"
    assert "received SIGTERM, stopping" in stderr
    assert summary_of(out) == {"processed": "150"}
    assert len({(p, o) for p, o, _ in processed_coordinates(out)}) == 150

    again = run_example("implicit_worker.py", kafka_bootstrap, share_group, topic,
                        "--timeout", "5")
    assert summary_of(again) == {"processed": "0"}


# -- explicit_poison.py ----------------------------------------------------------------


def _job(n: int, poison: bool = False) -> bytes:
    return json.dumps({"n": n, "poison": poison}).encode()


def test_explicit_poison_retries_then_rejects_exactly_the_poison_records(
    topic_factory: Callable[..., str], share_group: str, kafka_bootstrap: str,
    kafka_produce: Callable[..., Any],
) -> None:
    topic = topic_factory(partitions=1)
    poison = {4, 19, 33}
    landed = kafka_produce(topic, [_job(i, i in poison) for i in range(40)], partition=0)
    assert [r.offset for r in landed] == list(range(40))

    out = run_example("explicit_poison.py", kafka_bootstrap, share_group, topic,
                      "--max-records", "40", "--timeout", "60", "--max-attempts", "3")

    processed = processed_coordinates(out)
    assert sorted(o for _, o, _ in processed) == sorted(set(range(40)) - poison)
    assert all(d == 1 for _, _, d in processed)
    released = [(int(m[2]), int(m[3])) for m in map(_RELEASED.match, out.splitlines()) if m]
    assert sorted(released) == sorted((o, d) for o in poison for d in (1, 2))
    rejected = [(int(m[2]), m[3]) for m in map(_REJECTED.match, out.splitlines()) if m]
    assert sorted(rejected) == sorted((o, "3") for o in poison)
    assert summary_of(out) == {
        "processed": "37",
        "rejected": "3",
        "releases": "6",
        "rejected_offsets": "[0:4,0:19,0:33]",
    }

    # Rejected records are archived, accepted ones done: nothing is left.
    again = run_example("explicit_poison.py", kafka_bootstrap, share_group, topic,
                        "--timeout", "5")
    assert summary_of(again)["processed"] == "0"
    assert summary_of(again)["rejected"] == "0"


def test_explicit_poison_with_max_attempts_1_rejects_on_first_failure(
    topic_factory: Callable[..., str], share_group: str, kafka_bootstrap: str,
    kafka_produce: Callable[..., Any],
) -> None:
    topic = topic_factory(partitions=1)
    kafka_produce(topic, [_job(0), _job(1, True), _job(2)], partition=0)
    out = run_example("explicit_poison.py", kafka_bootstrap, share_group, topic,
                      "--max-records", "3", "--timeout", "60", "--max-attempts", "1")
    assert summary_of(out) == {
        "processed": "2", "rejected": "1", "releases": "0", "rejected_offsets": "[0:1]",
    }


def test_explicit_poison_rejects_undeserializable_records_by_coordinates(
    topic_factory: Callable[..., str], share_group: str, kafka_bootstrap: str,
    kafka_produce: Callable[..., Any],
) -> None:
    topic = topic_factory(partitions=1)
    values = [_job(0), _job(1), b"not json", _job(3), b"\xff\xfe", _job(5, True), _job(6)]
    kafka_produce(topic, values, partition=0)

    out = run_example("explicit_poison.py", kafka_bootstrap, share_group, topic,
                      "--max-records", "7", "--timeout", "60")

    assert sorted(o for _, o, _ in processed_coordinates(out)) == [0, 1, 3, 6]
    undeserializable = re.findall(r"^rejected partition=0 offset=(\d+): undeserializable", out,
                                  flags=re.MULTILINE)
    # Rejected on the first failure: never redelivered, so reported once each.
    assert undeserializable == ["2", "4"]
    assert summary_of(out) == {
        "processed": "4", "rejected": "3", "releases": "2", "rejected_offsets": "[0:2,0:4,0:5]",
    }
    again = run_example("explicit_poison.py", kafka_bootstrap, share_group, topic,
                        "--timeout", "5")
    assert summary_of(again)["rejected"] == "0"


# -- asyncio_worker.py -------------------------------------------------------------------


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_asyncio_worker_acknowledges_each_record_after_its_awaited_call(
    loop: str, topic_factory: Callable[..., str], share_group: str, kafka_bootstrap: str,
    kafka_produce: Callable[..., Any],
) -> None:
    topic = topic_factory(partitions=2)
    values = [(b"fail-once-%d" if i % 50 == 7 else b"job-%d") % i for i in range(300)]
    produced = kafka_produce(topic, values)
    expected = {(r.partition, r.offset) for r in produced}
    flaky = {(r.partition, r.offset) for r in produced if r.value.startswith(b"fail-once")}
    extra = ["--uvloop"] if loop == "uvloop" else []

    out = run_example("asyncio_worker.py", kafka_bootstrap, share_group, topic,
                      "--max-records", "300", "--timeout", "60", *extra)

    coords = processed_coordinates(out)
    counts = Counter((p, o) for p, o, _ in coords)
    assert set(counts) == expected, "records missing or foreign"
    assert max(counts.values()) == 1, "a record was processed twice"
    released = {(int(m[1]), int(m[2])) for m in map(_RELEASED.match, out.splitlines()) if m}
    assert released == flaky, "each flaky record is RELEASEd once, then processed"
    assert {(p, o) for p, o, d in coords if d == 2} == flaky
    assert summary_of(out) == {"processed": "300"}
    again = run_example("asyncio_worker.py", kafka_bootstrap, share_group, topic,
                        "--timeout", "4", *extra)
    assert summary_of(again) == {"processed": "0"}


# -- share_worker.py ---------------------------------------------------------------------


def test_share_worker_accepts_releases_and_rejects_by_outcome(
    topic_factory: Callable[..., str], share_group: str, kafka_bootstrap: str,
    kafka_produce: Callable[..., Any],
) -> None:
    topic = topic_factory(partitions=2)
    values = [f"job-{i}" for i in range(200)] + ["fail-once-1", "fail-once-2", "poison-1"]
    produced = kafka_produce(topic, [v.encode() for v in values])
    by_coords = {(r.partition, r.offset): r.value.decode() for r in produced}

    out = run_example("share_worker.py", kafka_bootstrap, share_group, topic,
                      "--concurrency", "8", "--idle-timeout", "3")

    processed = processed_coordinates(out)
    assert Counter(by_coords[p, o] for p, o, _ in processed) == Counter(
        v for v in values if not v.startswith("poison")
    )
    assert {by_coords[p, o]: d for p, o, d in processed if by_coords[p, o].startswith(
        "fail-once")} == {"fail-once-1": 2, "fail-once-2": 2}
    released = [m for line in out.splitlines() if (m := _RELEASED.match(line))]
    assert sorted(by_coords[int(m[1]), int(m[2])] for m in released) == [
        "fail-once-1", "fail-once-2"]
    rejected = [m for line in out.splitlines() if (m := _REJECTED.match(line))]
    assert [by_coords[int(m[1]), int(m[2])] for m in rejected] == ["poison-1"]
    summary = summary_of(out)
    assert (summary["accepted"], summary["released"], summary["rejected"]) == ("202", "2", "1")
    assert summary["stopped_by"] == "idle_timeout_s"
