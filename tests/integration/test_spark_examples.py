"""examples/spark_streaming.py and examples/spark_workers.py, run on the session's
SparkSession and broker (their run() functions; main() only adds a session)."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pyspark import cloudpickle

# The session's SparkSession fixture, `spark`.
pytest_plugins = ["spark_fixtures"]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    # Spark's workers cannot import the example by this name: ship its code by value.
    cloudpickle.register_pickle_by_value(module)
    return module


def test_spark_streaming_example(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group: str, kafka_produce: Callable[..., Any], tmp_path: Path,
) -> None:
    example = load("spark_streaming")
    topic = topic_factory(partitions=2)
    for p in (0, 1):
        kafka_produce(topic, [f"e{p}-{i}".encode() for i in range(1500)], partition=p)
    out = example.run(spark, kafka_bootstrap, share_group, topic, str(tmp_path))
    rows = out.collect()
    assert len(rows) == 3000  # each record once, without de-duplication
    assert {r.value for r in rows} == {f"e{p}-{i}" for p in (0, 1) for i in range(1500)}
    assert {r.deliveryCount for r in rows} == {1}


def test_spark_workers_example(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
    share_group: str, kafka_produce: Callable[..., Any],
) -> None:
    example = load("spark_workers")
    topic = topic_factory(partitions=1)
    values = [f"ok{i}" for i in range(200)] + ["bad1", "bad2", "busy1"]
    kafka_produce(topic, [v.encode() for v in values])
    rows = example.run(spark, kafka_bootstrap, share_group, topic, parallelism=2)
    outcomes = Counter(r.outcome for r in rows)
    assert outcomes == {"ACCEPT": 201, "REJECT": 2, "RELEASE": 1}
    assert {r.result for r in rows if r.outcome == "ACCEPT"} == {
        v.upper() for v in values if not v.startswith("bad")
    }
    busy = sorted((r.delivery_count, r.outcome) for r in rows if r.offset == values.index("busy1"))
    assert busy == [(1, "RELEASE"), (2, "ACCEPT")]
