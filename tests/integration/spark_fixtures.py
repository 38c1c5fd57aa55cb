"""The session's SparkSession for the Spark integration tests (one JVM for all).

Import the fixture into a test module with ``from spark_fixtures import spark``.
The session is ``local[2,4]``: two cores, and up to four attempts per task (plain
``local[2]`` never retries a failed task, unlike a cluster, which the worker-pool
test of a dying task needs).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import kafka_share

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The checkout whose kafka_share is under test: Spark's Python workers and source
#: runner are separate processes, so they must import this copy too.
_SOURCE_ROOT = str(Path(kafka_share.__file__).resolve().parents[1])


def _java_available() -> bool:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return True
    return shutil.which("java") is not None


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A ``local[2,4]`` SparkSession with the kafka-share source registered."""
    if not _java_available():
        pytest.skip("Spark needs a Java 17+ runtime: no JAVA_HOME and no java on PATH")
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        pytest.fail("pyspark is not installed: install the spark extra (kafka-share[spark])")
    from kafka_share.spark import register

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_SOURCE_ROOT, path) if p)
    session = (
        SparkSession.builder.master("local[2,4]")
        .appName("kafka-share-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.streaming.stopTimeout", "60s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()
