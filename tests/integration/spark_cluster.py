"""A Spark standalone cluster for the tests: a master and workers, each a process of
its own (``spark-class`` from the pyspark package), on 127.0.0.1.

A test runs its query in a driver process of its own (``spark_driver.py``): one
Python process can hold only one SparkContext, and the session's ``local[2,4]``
one lives in the test process.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyspark
import pytest

import kafka_share

SOURCE_ROOT = str(Path(kafka_share.__file__).resolve().parents[1])
DRIVER = Path(__file__).with_name("spark_driver.py")
SPARK_HOME = Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(work: Path) -> dict[str, str]:
    env = dict(os.environ)
    path = os.environ.get("PYTHONPATH", "")
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(work / "logs"),
        SPARK_WORKER_DIR=str(work / "work"),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        PYTHONPATH=os.pathsep.join(p for p in (SOURCE_ROOT, path) if p),
    )
    return env


def cluster_session(master: str, app_name: str, **config: str) -> Any:
    """A SparkSession on the standalone cluster at ``master``: driver on the
    loopback, one-core executors that import the kafka_share under test, plus
    ``config`` (dots written as underscores: ``spark_cores_max="1"``)."""
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master).appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.executor.memory", "768m")
        .config("spark.executor.cores", "1")
        .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    )
    for key, value in config.items():
        builder = builder.config(key.replace("_", "."), value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class StandaloneCluster:
    """``spark://127.0.0.1:<port>`` with ``workers`` workers of one core each."""

    def __init__(self, work: Path, workers: int = 2) -> None:
        self.work = work
        self.workers = workers
        self.port = _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.env = _env(work)
        self._procs: list[subprocess.Popen[bytes]] = []

    def _spawn(self, name: str, *args: str) -> None:
        log = open(self.work / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        self._procs.append(subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            env=self.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        ))
        log.close()

    def start(self) -> StandaloneCluster:
        (self.work / "logs").mkdir(parents=True, exist_ok=True)
        self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(_free_port()))
        self._wait_for_log("master", "I have been elected leader")
        for i in range(self.workers):
            self._spawn(f"worker{i}", "org.apache.spark.deploy.worker.Worker", self.url,
                        "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                        "--webui-port", str(_free_port()),
                        "--work-dir", str(self.work / f"work{i}"))
        for i in range(self.workers):
            self._wait_for_log(f"worker{i}", "Successfully registered with master")
        return self

    def _wait_for_log(self, name: str, text: str, timeout_s: float = 90.0) -> None:
        deadline = time.monotonic() + timeout_s
        path = self.work / f"{name}.log"
        while time.monotonic() < deadline:
            if path.exists() and text in path.read_text(errors="replace"):
                return
            if any(p.poll() is not None for p in self._procs):
                break
            time.sleep(0.2)
        log = path.read_text(errors="replace")[-3000:] if path.exists() else "(no log)"
        raise RuntimeError(f"Spark {name} did not start: {log}")

    def run_driver(self, spec: dict[str, Any], timeout_s: float = 240.0) -> dict[str, Any]:
        """Run ``spark_driver.py`` with ``spec`` against this cluster; its JSON result."""
        spec = {**spec, "master": self.url}
        spec_path = self.work / f"spec-{time.monotonic_ns()}.json"
        spec_path.write_text(json.dumps(spec))
        done = subprocess.run(
            [sys.executable, str(DRIVER), str(spec_path)], env=self.env,
            capture_output=True, text=True, timeout=timeout_s, check=False,
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if done.returncode != 0 or not lines:
            raise AssertionError(
                f"the Spark driver failed (exit {done.returncode}):\n{done.stdout[-4000:]}\n"
                f"{done.stderr[-8000:]}"
            )
        return json.loads(lines[-1][len("RESULT "):])  # type: ignore[no-any-return]

    def stop(self) -> None:
        for p in reversed(self._procs):
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in self._procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A standalone Spark cluster (a master and two one-core workers) for the session."""
    from spark_fixtures import _java_available

    if not _java_available():
        pytest.skip("Spark needs a Java 17+ runtime: no JAVA_HOME and no java on PATH")
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster")).start()
    try:
        yield cluster
    finally:
        cluster.stop()
