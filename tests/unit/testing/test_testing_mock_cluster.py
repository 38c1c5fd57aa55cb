"""Finding and loading librdkafka for the mock-cluster harness.

Nothing here starts a mock cluster (those tests are in tests/integration).
"""

from __future__ import annotations

import ctypes.util
from pathlib import Path

import pytest

from kafka_share.testing.errors import HarnessError
from kafka_share.testing.mock_cluster import (
    LIBRDKAFKA_ENV,
    MockCluster,
    MockClusterUnavailableError,
    find_librdkafka,
    load_librdkafka,
)

pytest_plugins = ["pytester"]


def test_env_override_naming_a_missing_file_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = tmp_path / "librdkafka.so.1"
    monkeypatch.setenv(LIBRDKAFKA_ENV, str(missing))
    with pytest.raises(MockClusterUnavailableError, match=LIBRDKAFKA_ENV):
        find_librdkafka()


def test_a_library_without_the_mock_api_names_the_missing_functions() -> None:
    libc = ctypes.util.find_library("c")
    if libc is None:
        pytest.skip("no C library to load")
    with pytest.raises(MockClusterUnavailableError) as info:
        load_librdkafka(Path(libc))
    text = str(info.value)
    assert "rd_kafka_mock_cluster_new" in text
    assert "rd_kafka_mock_sharegroup_set_record_lock_duration" in text
    assert "upgrade confluent-kafka" in text


def test_the_bundled_librdkafka_has_every_function_the_harness_uses() -> None:
    pytest.importorskip("confluent_kafka")
    path = find_librdkafka()
    lib = load_librdkafka(path)
    assert lib.rd_kafka_mock_sharegroup_set_auto_offset_reset is not None


def test_control_calls_before_start_are_a_clear_error() -> None:
    cluster = MockCluster(brokers=1)
    with pytest.raises(HarnessError, match="not started"):
        _ = cluster.bootstrap_servers
    with pytest.raises(HarnessError, match="not started"):
        cluster.create_topic(partitions=1)
    with pytest.raises(ValueError, match="brokers"):
        MockCluster(brokers=0)


def test_fixture_skips_with_the_reason_when_librdkafka_is_missing(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(
        """
        def test_uses_the_mock(mock_cluster):
            raise AssertionError("must not run")
        """
    )
    missing = tmp_path / "nowhere" / "librdkafka.so.1"
    monkeypatch.setenv(LIBRDKAFKA_ENV, str(missing))
    result = pytester.runpytest_inprocess("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([f"*mock cluster is unavailable*{LIBRDKAFKA_ENV}*"])

