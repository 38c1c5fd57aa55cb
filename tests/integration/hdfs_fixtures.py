"""The session's HDFS (a NameNode and a DataNode, real ones) for the staging tests.

Use with ``pytest_plugins = ["hdfs_fixtures"]``; one cluster serves every test
that asks for ``hdfs``, each under a folder of its own (``hdfs_location``).
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafka_share.testing.hdfs import HdfsCluster


@pytest.fixture(scope="session")
def hdfs() -> Iterator[HdfsCluster]:
    with (tempfile.TemporaryDirectory(prefix="kafka-share-hdfs-") as work,
          HdfsCluster(Path(work)) as cluster):
        yield cluster


@pytest.fixture
def hdfs_location(hdfs: HdfsCluster) -> str:
    """A fresh ``webhdfs://`` folder of this test's own (not created yet)."""
    return hdfs.webhdfs_url(f"/tests/{uuid.uuid4().hex[:12]}")
