"""What the broker logged during a test: ``log_mark``/``log_since`` and the
report section a failing test gets from the pytest plugin."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_share.testing.config import NodeAddress
from kafka_share.testing.local import LocalKafkaCluster, _Node

pytest_plugins = ["pytester"]


def _cluster_with_logs(tmp_path: Path, count: int) -> LocalKafkaCluster:
    cluster = LocalKafkaCluster(num_nodes=count)
    for node_id in range(1, count + 1):
        home = tmp_path / f"node-{node_id}"
        home.mkdir()
        address = NodeAddress(node_id=node_id, host="127.0.0.1", broker_port=0, controller_port=0)
        cluster._nodes[node_id] = _Node(address, home)
    return cluster


def test_log_since_returns_only_what_came_after_the_mark(tmp_path: Path) -> None:
    cluster = _cluster_with_logs(tmp_path, 1)
    log = cluster._nodes[1].log_path
    log.write_text("before 1\nbefore 2\n")
    mark = cluster.log_mark()
    assert cluster.log_since(mark) == ""
    with log.open("a") as handle:
        handle.write("during 1\nduring 2\nduring 3\n")
    assert cluster.log_since(mark) == "during 1\nduring 2\nduring 3"
    assert cluster.log_since(mark, lines=2) == "during 2\nduring 3"


def test_log_since_labels_nodes_and_skips_quiet_ones(tmp_path: Path) -> None:
    cluster = _cluster_with_logs(tmp_path, 3)
    for node in cluster._nodes.values():
        node.log_path.write_text("old\n")
    mark = cluster.log_mark()
    with cluster._nodes[2].log_path.open("a") as handle:
        handle.write("node two says\n")
    assert cluster.log_since(mark) == "[node 2]\nnode two says"


def test_a_log_that_does_not_exist_yet_is_read_from_its_start(tmp_path: Path) -> None:
    cluster = _cluster_with_logs(tmp_path, 1)
    mark = cluster.log_mark()
    assert mark == {1: 0}
    cluster._nodes[1].log_path.write_text("first line\n")
    assert cluster.log_since(mark) == "first line"


_STUB_CONFTEST = """
import pytest

class StubCluster:
    def __init__(self):
        self.lines = ["started"]

    def log_mark(self):
        return {1: len(self.lines)}

    def log_since(self, mark, lines=200):
        return "\\n".join(self.lines[mark[1]:])

@pytest.fixture(scope="session")
def kafka_cluster():
    return StubCluster()

@pytest.fixture
def uses_cluster(kafka_cluster):
    return kafka_cluster
"""


def test_a_failing_test_reports_what_the_broker_logged_while_it_ran(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(_STUB_CONFTEST)
    pytester.makepyfile(
        """
        def test_fails(uses_cluster):
            uses_cluster.lines.append("Member x joins the share group")
            assert False, "no records"

        def test_passes(uses_cluster):
            uses_cluster.lines.append("quiet success")

        def test_fails_without_a_cluster():
            assert False
        """
    )
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(passed=1, failed=2)
    text = result.stdout.str()
    assert text.count("broker log during the test") == 1
    result.stdout.fnmatch_lines(["*broker log during the test*", "Member x joins the share group"])
    assert "started" not in text.split("broker log during the test", 1)[1].split("\n", 2)[1]
    assert "quiet success" not in text
