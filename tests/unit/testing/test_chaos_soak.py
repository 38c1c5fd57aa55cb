"""Bookkeeping of tools/chaos_soak.py (the soak itself needs a cluster and is not run in CI)."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest

_PATH = Path(__file__).resolve().parents[3] / "tools" / "chaos_soak.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("chaos_soak", _PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["chaos_soak"] = module  # dataclasses look the module up by name
    spec.loader.exec_module(module)
    return module


soak = _load()


def _ledger(produced: int) -> object:
    ledger = soak.Ledger()
    for seq in range(produced):
        ledger.add_produced(seq, seq % 2, seq // 2)
    return ledger


def test_every_record_accepted_once_is_clean() -> None:
    ledger = _ledger(4)
    for seq in range(4):
        ledger.add_line(f"D {seq % 2} {seq // 2} {seq}")
        ledger.add_line(f"A {seq % 2} {seq // 2}")
    summary = ledger.summary()
    assert summary["produced"] == 4
    assert summary["accepted"] == 4
    assert summary["lost"] == summary["duplicated"] == summary["unconfirmed"] == 0
    assert soak.exit_status(summary) == 0
    assert ledger.outstanding() == (0, 0)


def test_classifies_lost_unconfirmed_duplicated_and_redelivered() -> None:
    ledger = _ledger(6)
    # 0: accepted once. 1: never processed (lost). 2: processed, ack failed,
    # never seen again (unconfirmed). 3: accepted twice (duplicated).
    # 4: failed ack, redelivered, then accepted (redelivered, not duplicated).
    # 5: processed, the consumer was killed before the outcome (unconfirmed).
    for line in [
        "D 0 0 0", "A 0 0",
        "D 0 1 2", "F 0 1 NetworkError",
        "D 1 1 3", "A 1 1", "D 1 1 3", "A 1 1",
        "D 0 2 4", "F 0 2 NetworkError", "D 0 2 4", "A 0 2",
        "D 1 2 5",
    ]:
        ledger.add_line(line)
    summary = ledger.summary()
    assert summary["accepted"] == 3
    assert summary["lost"] == 1 and summary["examples"]["lost"] == [1]
    assert summary["unconfirmed"] == 2 and summary["examples"]["unconfirmed"] == [2, 5]
    assert summary["duplicated"] == 1 and summary["examples"]["duplicated"] == [3]
    assert summary["redelivered"] == 2
    assert summary["failed_acks"] == {"NetworkError": 2}
    assert summary["deliveries"] == 7 and summary["confirmed_acks"] == 4
    assert soak.exit_status(summary) == 1
    assert ledger.outstanding() == (3, 1)  # 1, 2, 5 not accepted; 1 never processed


def test_records_seen_but_not_reported_produced_are_unexpected() -> None:
    ledger = _ledger(1)
    ledger.add_produce_failure(1)  # the producer gave up on seq 1, but it landed
    ledger.add_line("D 0 0 0")
    ledger.add_line("A 0 0")
    ledger.add_line("D 1 0 1")
    ledger.add_line("A 1 0")
    summary = ledger.summary()
    assert summary["produce_failed"] == 1
    assert summary["unexpected"] == 1
    assert summary["lost"] == 0


def test_a_delivery_disagreeing_with_the_producer_is_a_mismatch() -> None:
    ledger = _ledger(2)
    ledger.add_line("D 0 0 1")  # the producer said seq 0 is at (0, 0)
    assert ledger.summary()["mismatches"] == 1


def test_bad_lines_are_counted_not_fatal() -> None:
    ledger = _ledger(1)
    for line in ["X 0 0", "D 0", "A zero 0", "D 0 0 seq"]:
        ledger.add_line(line)
    assert ledger.summary()["malformed_lines"] == 4


def test_line_tail_returns_only_complete_lines(tmp_path: Path) -> None:
    path = tmp_path / "c.records"
    tail = soak.LineTail(path)
    assert tail.read() == []  # not created yet
    path.write_bytes(b"D 0 0 0\nA 0")
    assert tail.read() == ["D 0 0 0"]
    assert tail.partial == b"A 0"
    with open(path, "ab") as handle:
        handle.write(b" 0\nD 0 1 1\n")
    assert tail.read() == ["A 0 0", "D 0 1 1"]
    assert tail.read() == []


def test_chaos_schedule_is_reproducible_from_the_seed() -> None:
    weights = {"broker": 1.0, "consumer": 1.0, "cut": 2.0}
    first = [soak.choose_action(random.Random(7), weights)]
    rng_a, rng_b = random.Random(7), random.Random(7)
    run_a = [soak.choose_action(rng_a, weights) for _ in range(50)]
    run_b = [soak.choose_action(rng_b, weights) for _ in range(50)]
    assert run_a == run_b and run_a[:1] == first
    assert set(run_a) == {"broker", "consumer", "cut"}
    only_cuts = {"broker": 0.0, "consumer": 0.0, "cut": 1.0}
    assert {soak.choose_action(rng_a, only_cuts) for _ in range(20)} == {"cut"}
    with pytest.raises(ValueError, match="weight 0"):
        soak.choose_action(rng_a, {"broker": 0.0})


def test_arguments_are_validated(capsys: pytest.CaptureFixture[str]) -> None:
    args = soak.parse_args(["--duration", "5", "--seed", "3", "--json"])
    assert (args.duration, args.seed, args.json, args.mode) == (5.0, 3, True, "explicit")
    assert isinstance(soak.parse_args([]).seed, int)  # a random seed, reported in the run
    for bad in (
        ["--duration", "0"],
        ["--consumers", "-1"],
        ["--interval-min", "5", "--interval-max", "1"],
        ["--broker-weight", "0", "--consumer-weight", "0", "--cut-weight", "0"],
        ["--mode", "auto"],
    ):
        with pytest.raises(SystemExit):
            soak.parse_args(bad)
    errors = capsys.readouterr().err
    assert "--interval-min must not exceed --interval-max" in errors
    assert "must be positive, got 0" in errors


def test_human_summary_names_every_figure() -> None:
    ledger = _ledger(2)
    ledger.add_line("D 0 0 0")
    ledger.add_line("A 0 0")
    report = {
        "duration_s": 60.0, "seed": 1, "mode": "explicit", "commit": "sync", "consumers": 3,
        "partitions": 6, "records": ledger.summary(), "chaos": soak.ChaosCounts().as_dict(),
        "drain": {"seconds": 1.0, "outcome": "timeout"}, "longest_stall_s": 2.0,
        "longest_stall_started_at_s": 10.0, "max_backlog": 5, "errors": [], "work_dir": "/w",
    }
    text = soak.render_summary(report)
    for word in ("produced", "accepted", "lost", "duplicated", "broker kills",
                 "consumer kills", "cuts", "result: FAIL"):
        assert word in text, word


def test_settle_checks_unconfirmed_records_against_the_broker_start_offsets() -> None:
    ledger = _ledger(6)  # seq -> (seq % 2, seq // 2): partition 0 has offsets 0..2
    for seq in range(6):
        ledger.add_line(f"D {seq % 2} {seq // 2} {seq}")
    for seq in (0, 1, 3):
        ledger.add_line(f"A {seq % 2} {seq // 2}")
    # Unconfirmed: seq 2 (0, 1), seq 4 (0, 2), seq 5 (1, 2).
    view = soak.settle(ledger, {0: (2, 1), 1: (3, 0)})
    assert view["checked"]
    assert view["unconfirmed_acknowledged_by_broker"] == 2  # (0, 1) and (1, 2)
    assert view["unconfirmed_still_open"] == 1  # (0, 2) is at the start offset
    assert not view["all_settled"]
    assert view["lag"] == {0: 1, 1: 0}
    assert soak.settle(ledger, {0: (3, 0), 1: (3, 0)})["all_settled"]
    assert soak.settle(ledger, None) == {"checked": False}


def test_timelines_collect_every_line_about_a_record(tmp_path: Path) -> None:
    first, second = tmp_path / "c0.records", tmp_path / "c1.records"
    first.write_text("D 5 1172 7831 1 100\nA 5 1172 110\nD 5 1173 7832 1 100\n")
    second.write_text("D 5 1172 7831 2 200\nA 5 1172 210\ngarbage\n")
    story = soak.timelines([first, second, tmp_path / "missing"], [(5, 1172)])
    assert story == {
        "5:1172": [
            "c0.records: D 5 1172 7831 1 100",
            "c0.records: A 5 1172 110",
            "c1.records: D 5 1172 7831 2 200",
            "c1.records: A 5 1172 210",
        ]
    }
