"""The kafka-share source on a Spark standalone cluster: a master and two workers,
each a process of its own, every executor reading with its own consumer."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from spark_cluster import StandaloneCluster

pytest_plugins = ["spark_cluster"]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
]


def _spec(tmp_path: Path, bootstrap: str, group: str, topic: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap": bootstrap, "group": group, "topic": topic,
        "staging": str(tmp_path / "staging"), "output": str(tmp_path / "out"),
        "checkpoint": str(tmp_path / "ckpt"), **extra,
    }


def test_slots_read_in_both_executors_each_accepting_its_own_records(
    spark_cluster: StandaloneCluster, kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group: str, kafka_produce: Callable[..., Any], tmp_path: Path,
) -> None:
    topic = topic_factory(partitions=4)
    for p in range(4):
        kafka_produce(topic, [f"c{p}-{i}".encode() for i in range(5000)], partition=p)
    result = spark_cluster.run_driver(_spec(
        tmp_path, kafka_bootstrap, share_group, topic,
        options={"maxRecordsPerTrigger": 4000, "numPartitions": 4},
    ))
    assert result["error"] is None
    keys = Counter((p, o) for p, o, _ in result["rows"])
    assert len(keys) == 20_000 and max(keys.values()) == 1
    assert {d for _, _, d in result["rows"]} == {1}
    # One member per executor's Python worker: both executors were in the group.
    assert len(result["members"]) >= 2, result["members"]
    # Every acknowledgement came from the member that acquired the record. (The
    # last progress report is made before the last batch is counted.)
    assert result["progress"].get("accept_failed", 0) == 0


def test_an_executor_killed_mid_batch_loses_and_duplicates_nothing(
    spark_cluster: StandaloneCluster, kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group: str, kafka_produce: Callable[..., Any], tmp_path: Path,
) -> None:
    topic = topic_factory(partitions=4)
    for p in range(4):
        kafka_produce(topic, [f"k{p}-{i}".encode() for i in range(15_000)], partition=p)
    result = spark_cluster.run_driver(_spec(
        tmp_path, kafka_bootstrap, share_group, topic, kill_after_batches=1,
        options={"maxRecordsPerTrigger": 8000, "numPartitions": 4,
                 "kafka.max.poll.records": 500},
    ))
    assert result["error"] is None
    assert result["killed"], "no executor was killed"
    keys = Counter((p, o) for p, o, _ in result["rows"])
    # Spark's file sink holds each record exactly once.
    assert len(keys) == 60_000, f"{60_000 - len(keys)} records missing"
    assert max(keys.values()) == 1, [k for k, n in keys.items() if n > 1][:10]
    assert len(result["values"]) == 60_000
