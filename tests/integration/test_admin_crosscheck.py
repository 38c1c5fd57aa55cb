"""Admin and Kafka's own kafka-share-groups tool agree about the same group.

Runs ``org.apache.kafka.tools.consumer.group.ShareGroupCommand`` from the
``kafka-tools`` jar on Maven Central (fetched with Maven into the kafka-share
cache on first use) and compares members, assignments, start offsets and lag.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from share_helpers import poll_until

from kafka_share import TopicPartition
from kafka_share.admin import Admin
from kafka_share.testing import cache_root

pytestmark = pytest.mark.integration

#: The newest kafka-tools release on Maven Central (its ShareGroupCommand talks to
#: any 4.1+ broker through the public Admin API).
KAFKA_TOOLS_VERSION = os.environ.get("KAFKA_SHARE_TOOLS_VERSION", "4.3.1")

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.testing</groupId>
  <artifactId>kafka-tools-closure</artifactId>
  <version>1</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-tools</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""


def kafka_tools_libs(version: str) -> Path:
    """The jars of kafka-tools ``version`` and its runtime dependencies (cached)."""
    home = cache_root() / f"kafka-tools-{version}"
    if (home / "COMPLETE").exists():
        return home / "libs"
    if shutil.which("mvn") is None or shutil.which("java") is None:
        pytest.skip("the cross-check needs Maven and Java to run Kafka's kafka-share-groups tool")
    home.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="kafka-tools-", dir=home.parent))
    (scratch / "pom.xml").write_text(_POM.format(version=version), encoding="utf-8")
    done = subprocess.run(
        ["mvn", "-q", "-B",
         "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies",
         f"-DoutputDirectory={scratch / 'libs'}", "-DincludeScope=runtime"],
        cwd=scratch, capture_output=True, text=True, timeout=900, check=False,
    )
    if done.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        raise AssertionError(f"fetching kafka-tools {version} failed:\n{done.stdout[-3000:]}")
    (scratch / "COMPLETE").write_text(version, encoding="utf-8")
    try:
        scratch.rename(home)
    except OSError:  # another run finished first
        shutil.rmtree(scratch, ignore_errors=True)
    return home / "libs"


def share_group_command(bootstrap: str, *args: str) -> list[dict[str, str]]:
    """Run kafka-share-groups; its table rows keyed by the column headers."""
    libs = kafka_tools_libs(KAFKA_TOOLS_VERSION)
    done = subprocess.run(
        ["java", "-Xmx256m", "-cp", f"{libs}/*",
         "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
         "--bootstrap-server", bootstrap, *args],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line.split() for line in done.stdout.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line and line[0] == "GROUP")
    header = lines[start]
    return [dict(zip(header, row, strict=False)) for row in lines[start + 1:]]


@pytest.fixture
def admin(kafka_bootstrap: str) -> Iterator[Admin]:
    with Admin(bootstrap_servers=kafka_bootstrap) as a:
        yield a


def test_admin_and_kafka_share_groups_agree(
    admin: Admin, kafka_bootstrap: str, topic_factory: Any, share_group: str,
    kafka_produce: Any, consumer_factory: Any,
) -> None:
    topic = topic_factory(partitions=3)
    for p in range(3):
        kafka_produce(topic, [b"v"] * (p + 2), partition=p)
    consumers = [consumer_factory(share_group, client_id=f"xcheck-{i}") for i in range(2)]
    for c in consumers:
        c.subscribe([topic])
    # Consume only part of the records so that lag is not zero everywhere.
    poll_until(consumers[0], lambda s: len(s) >= 2, timeout_s=30)
    consumers[0].commit_sync(timeout=10.0)
    for c in consumers:
        c.poll(0.5)  # let both members settle on an assignment

    def members() -> dict[str, tuple[str, int, set[TopicPartition]]]:
        ours = admin.describe_share_groups([share_group])[share_group]
        return {m.member_id: (m.client_id, len(m.assignment), set(m.assignment))
                for m in ours.members}

    # The assignment may still be moving while the second member joins: compare
    # Java's view with ours taken just before and just after it, once they match.
    for _ in range(10):
        before = members()
        theirs = share_group_command(kafka_bootstrap, "--describe", "--members",
                                     "--group", share_group)
        if members() == before and len(before) == 2:
            break
    # GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS ASSIGNMENT ("t:0,1;u:2" or "-")
    java_members = {}
    for row in theirs:
        assignment = set()
        for item in row.get("ASSIGNMENT", "-").split(";"):
            t, _, ps = item.rpartition(":")
            if t:
                assignment.update(TopicPartition(t, int(p)) for p in ps.split(",") if p)
        java_members[row["CONSUMER-ID"]] = (row["CLIENT-ID"], int(row["#PARTITIONS"]),
                                            assignment)
    assert before == java_members
    assert sum(n for _, n, _ in before.values()) == 3

    offsets = admin.list_share_group_offsets(share_group)
    rows = share_group_command(kafka_bootstrap, "--describe", "--offsets",
                               "--group", share_group)
    # GROUP TOPIC PARTITION START-OFFSET LAG ('-' when unknown)
    java_offsets = {
        TopicPartition(r["TOPIC"], int(r["PARTITION"])): (
            None if r["START-OFFSET"] == "-" else int(r["START-OFFSET"]),
            None if r.get("LAG", "-") == "-" else int(r["LAG"]),
        )
        for r in rows if r["TOPIC"] == topic
    }
    assert java_offsets
    assert {tp: (o.start_offset, o.lag) for tp, o in offsets.items()} == java_offsets
