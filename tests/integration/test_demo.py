"""``kafka-share demo`` against the session broker: the command and ``run_demo``."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from kafka_share.commands.demo import DemoOptions, make_value, record_number, run_demo

pytestmark = pytest.mark.integration


def kafka_share_command(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("kafka-share")
    cmd = [str(script)] if script.exists() else [
        sys.executable, "-c", "from kafka_share.cli import main; main()"
    ]
    return subprocess.run(
        [*cmd, *args], capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, **(env or {})},
    )


def summary_number(output: str, label: str) -> int:
    m = re.search(rf"^  {re.escape(label)}\s+(\d+)", output, flags=re.MULTILINE)
    assert m is not None, f"no {label!r} line in:\n{output}"
    return int(m[1])


def test_demo_command_consumes_every_record_once_across_three_consumers(
    kafka_bootstrap: str,
) -> None:
    # --work-ms: 2000 records take a single consumer ~4 s to "process". Without it
    # the consumer whose assignment arrives first can drain all 2000 records before
    # the others have joined (on a fresh broker they join up to ~1 s apart), and
    # the every-consumer-got-some check below would be flaky.
    proc = kafka_share_command(
        "demo", "--no-live", "--records", "2000", "--consumers", "3", "--work-ms", "2",
        "--bootstrap-servers", kafka_bootstrap,
    )
    out = proc.stdout
    assert proc.returncode == 0, f"{out}\n{proc.stderr}"
    assert summary_number(out, "records produced") == 2000
    assert summary_number(out, "records accepted") == 2000
    assert summary_number(out, "missing") == 0
    assert summary_number(out, "duplicates") == 0
    per_consumer = {
        m[1]: int(m[3])
        for m in re.finditer(
            r"^  (consumer-\d) \((explicit|implicit)\)\s+(\d+) records accepted", out, re.MULTILINE
        )
    }
    assert set(per_consumer) == {"consumer-1", "consumer-2", "consumer-3"}
    assert sum(per_consumer.values()) == 2000
    # One partition, three consumers: the share group spread the records over all of them.
    assert all(n > 0 for n in per_consumer.values()), per_consumer
    released = summary_number(out, "released on purpose")
    assert released > 0  # consumer-1 releases 1 in 200 first deliveries
    assert summary_number(out, "redelivered") == released
    assert f"delivery_count 2: {released}" in out
    assert summary_number(out, "fresh consumer got") == 0
    assert "OK: all 2000 records were accepted exactly once" in out


def test_run_demo_result_accounts_for_every_record(kafka_bootstrap: str) -> None:
    buffer = io.StringIO()
    result = run_demo(
        DemoOptions(records=1500, consumers=2, value_size=32, bootstrap_servers=kafka_bootstrap,
                    live=False, release_every=50, verify_s=2.0, work_ms=1.0),
        Console(file=buffer, width=200),
    )
    assert result.ok, result.problems
    assert (result.records, result.accepted_unique, result.missing, result.duplicates) == (
        1500, 1500, 0, 0,
    )
    assert sum(s.accepted for s in result.consumers) == 1500
    # Every released record came back exactly once more and was then accepted.
    assert result.released > 0
    assert result.delivery_counts == {1: 1500 - result.released, 2: result.released}
    assert sum(s.redelivered for s in result.consumers) == result.released
    assert result.consumers[0].explicit and not result.consumers[1].explicit
    assert all(s.error is None and s.ack_errors == 0 for s in result.consumers)
    assert result.verify_received == 0
    assert result.broker_start_s is None  # an existing cluster was used
    assert "Summary" in buffer.getvalue()


def test_demo_without_releases_delivers_everything_once(kafka_bootstrap: str) -> None:
    result = run_demo(
        DemoOptions(records=500, consumers=1, bootstrap_servers=kafka_bootstrap, live=False,
                    release_every=0, verify_s=0),
        Console(file=io.StringIO()),
    )
    assert result.ok, result.problems
    assert result.delivery_counts == {1: 500}
    assert result.released == result.redelivered == 0
    assert result.verify_received is None


def test_demo_reports_missing_records_and_exits_1_when_time_runs_out(
    kafka_bootstrap: str,
) -> None:
    # One second is less than joining the group takes, so nothing can be accepted in time.
    proc = kafka_share_command(
        "demo", "--no-live", "--records", "3000", "--seconds", "1",
        "--bootstrap-servers", kafka_bootstrap,
    )
    assert proc.returncode == 1, proc.stdout
    missing = summary_number(proc.stdout, "missing")
    assert missing > 0
    assert f"FAILED: {missing} record(s) missing: never accepted within 1 s" in proc.stdout


def test_demo_broker_start_failure_is_a_clear_error() -> None:
    proc = kafka_share_command(
        "demo", "--no-live", env={"KAFKA_SHARE_KAFKA_VERSION": "4.0.0"}
    )
    assert proc.returncode == 1
    assert "the local Kafka broker could not start" in proc.stderr
    assert "Kafka 4.0.0" in proc.stderr


def test_demo_values_carry_their_record_number() -> None:
    value = make_value(42, 100)
    assert len(value) == 100 and record_number(value) == 42
    assert record_number(make_value(7, 10)) == 7
    with pytest.raises(ValueError, match="not a demo record value"):
        record_number(b"short")
