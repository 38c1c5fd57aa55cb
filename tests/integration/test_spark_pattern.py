"""The kafka-share Spark source with subscribePattern against the session's real broker."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafka_share.testing import unique_name

# The session's SparkSession fixture, `spark`.
pytest_plugins = ["spark_fixtures"]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    # Spark's py4j callback server closes its sockets lazily.
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
]

RUN_TIMEOUT_S = 120


def test_available_now_with_subscribe_pattern_reads_every_matching_topic_only(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group: str, kafka_produce: Callable[..., Any], tmp_path: Path,
) -> None:
    prefix = unique_name("spark-pattern")
    matching = [topic_factory(name=f"{prefix}-{i}") for i in (1, 2)]
    other = topic_factory(name=f"{prefix}-x")
    for topic in (*matching, other):
        kafka_produce(topic, [f"{topic}:{i}".encode() for i in range(300)], partition=0)
    rows: list[Any] = []
    query = (
        spark.readStream.format("kafka-share")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("kafka.group.id", share_group)
        .option("subscribePattern", f"{prefix}-[0-9]")
        .option("stagingLocation", str(tmp_path / "staging"))
        .option("availableNowIdleTimeoutMs", str(10 * RUN_TIMEOUT_S * 1000))
        .load()
        .writeStream.foreachBatch(
            lambda df, _: rows.extend(df.select("topic", "value").collect())
        )
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(RUN_TIMEOUT_S), "availableNow did not terminate"
    assert query.exception() is None
    assert {r.topic for r in rows} == set(matching)
    assert sorted(r.value for r in rows) == sorted(
        f"{t}:{i}".encode() for t in matching for i in range(300)
    )
