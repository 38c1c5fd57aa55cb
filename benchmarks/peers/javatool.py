"""Java's share-consumer performance tool (``ShareConsumerPerformance``) as a peer.

The class behind ``kafka-share-consumer-perf-test.sh`` ships in the
``org.apache.kafka:kafka-tools`` artifact. Maven Central has no 4.4.0 build of
``kafka-tools`` (nor of ``kafka-tools-api``), so the newest release that
resolves, 4.3.1, is used against the 4.4.0 broker (share groups are GA since
4.2, and the 4.3 client speaks the same protocol versions).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

__all__ = ["JavaRun", "JavaTool", "JavaToolUnavailableError", "parse_output", "resolve_classpath"]

POM = Path(__file__).with_name("pom.xml")
DEFAULT_TOOLS_VERSION = "4.3.1"
MAIN_CLASS = "org.apache.kafka.tools.ShareConsumerPerformance"
_DATE_FORMAT = "%Y-%m-%d %H:%M:%S:%f"


class JavaToolUnavailableError(RuntimeError):
    """Java or Maven is missing, or the tool's jars do not resolve."""


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kafka-share-bench"


def resolve_classpath(version: str = DEFAULT_TOOLS_VERSION) -> str:
    """The tool's runtime classpath, resolved with Maven once and cached."""
    if shutil.which("java") is None:
        raise JavaToolUnavailableError("no `java` on PATH")
    cached = _cache_dir() / f"kafka-tools-{version}.classpath"
    if cached.exists():
        classpath = cached.read_text().strip()
        if classpath and all(Path(p).exists() for p in classpath.split(os.pathsep)):
            return classpath
    if shutil.which("mvn") is None:
        raise JavaToolUnavailableError("no `mvn` on PATH to fetch org.apache.kafka:kafka-tools")
    cached.parent.mkdir(parents=True, exist_ok=True)
    scratch = cached.with_suffix(".tmp")
    proc = subprocess.run(
        [
            "mvn", "-q", "-B", "-f", str(POM), f"-Dkafka.version={version}",
            "dependency:build-classpath", f"-Dmdep.outputFile={scratch}",
        ],
        capture_output=True, text=True, timeout=600, check=False,
    )
    if proc.returncode != 0 or not scratch.exists():
        raise JavaToolUnavailableError(
            f"resolving org.apache.kafka:kafka-tools:{version} failed:\n"
            + (proc.stdout + proc.stderr)[-2000:]
        )
    scratch.replace(cached)
    return cached.read_text().strip()


@dataclass(frozen=True)
class JavaRun:
    """What ShareConsumerPerformance printed for one run."""

    records: int
    #: ``fetch.time.ms`` / 1000: from before ``subscribe`` to the last record.
    elapsed_s: float
    #: From the first progress line (the first poll with records) to the end.
    steady_elapsed_s: float | None
    steady_records: int | None
    first_record_s: float | None


def _parse_time(text: str) -> datetime:
    # "2026-11-22 02:42:36:622": milliseconds after the last colon.
    head, _, millis = text.strip().rpartition(":")
    return datetime.strptime(f"{head}:{int(millis) * 1000:06d}", _DATE_FORMAT)


def parse_output(stdout: str) -> JavaRun:
    """Parse ``--show-detailed-stats`` output: progress lines, then the totals line.

    Raises:
        ValueError: the output has no totals line (the tool failed or timed out).
    """
    rows = []
    for line in stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 7 or parts[0] == "start.time":
            continue
        try:
            rows.append(
                (
                    _parse_time(parts[0]),
                    _parse_time(parts[1]),
                    int(parts[5]),
                    int(parts[6].split()[0]),
                    "for share consumer" in parts[6],
                )
            )
        except ValueError:
            continue
    totals = [r for r in rows if not r[4]]
    if not totals:
        raise ValueError("ShareConsumerPerformance printed no totals line:\n" + stdout[-2000:])
    start, end, records, fetch_ms, _ = totals[-1]
    progress = [r for r in rows if r[4]]
    steady_elapsed = steady_records = first = None
    if progress:
        first_end = progress[0][1]
        span = (end - first_end).total_seconds()
        if span > 0:
            steady_elapsed = span
            steady_records = records - progress[0][2]
        first = (first_end - start).total_seconds()
    return JavaRun(records, fetch_ms / 1000.0, steady_elapsed, steady_records, first)


class JavaTool:
    """Builds the command line for one ShareConsumerPerformance run."""

    def __init__(self, version: str = DEFAULT_TOOLS_VERSION) -> None:
        self.version = version
        self.classpath = resolve_classpath(version)

    def command(
        self, bootstrap_servers: str, topic: str, group: str, records: int, timeout_ms: int
    ) -> list[str]:
        return [
            "java", "-Xms64m", "-Xmx1g", "-cp", self.classpath, MAIN_CLASS,
            "--bootstrap-server", bootstrap_servers, "--topic", topic, "--group", group,
            "--num-records", str(records), "--timeout", str(timeout_ms),
            "--show-detailed-stats", "--reporting-interval", "100",
        ]
