from __future__ import annotations

from pathlib import Path

import pytest

from kafka_share.testing.config import (
    DEFAULT_JVM_OPTIONS,
    SHARE_TEST_DEFAULTS,
    NodeAddress,
    broker_properties,
    format_features,
    render_properties,
)

NODE = NodeAddress(1, "127.0.0.1", 19092, 19093)


def test_single_node_combined_mode_on_loopback(tmp_path: Path) -> None:
    props = broker_properties(NODE, [NODE], tmp_path / "data")
    assert props["process.roles"] == "broker,controller"
    assert props["node.id"] == "1"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:19093"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    assert props["advertised.listeners"] == props["listeners"]
    assert props["log.dirs"] == str(tmp_path / "data")
    assert props["auto.create.topics.enable"] == "true"


def test_internal_topics_have_one_partition_and_rf_1_on_one_node(tmp_path: Path) -> None:
    props = broker_properties(NODE, [NODE], tmp_path)
    for prefix in ("offsets.topic", "transaction.state.log", "share.coordinator.state.topic"):
        assert props[f"{prefix}.num.partitions"] == "1"
        assert props[f"{prefix}.replication.factor"] == "1"
    assert props["share.coordinator.state.topic.min.isr"] == "1"
    assert props["transaction.state.log.min.isr"] == "1"
    assert props["group.initial.rebalance.delay.ms"] == "0"


def test_three_nodes_share_a_static_voter_set(tmp_path: Path) -> None:
    nodes = [NodeAddress(i, "127.0.0.1", 20000 + i, 21000 + i) for i in (1, 2, 3)]
    props = broker_properties(nodes[1], nodes, tmp_path)
    assert props["node.id"] == "2"
    assert props["controller.quorum.voters"] == (
        "1@127.0.0.1:21001,2@127.0.0.1:21002,3@127.0.0.1:21003"
    )
    assert props["offsets.topic.replication.factor"] == "3"


def _ms(props: dict[str, str], key: str) -> int:
    return int(props[key])


def test_share_timings_respect_broker_cross_checks(tmp_path: Path) -> None:
    props = broker_properties(NODE, [NODE], tmp_path)
    # lock: 1000 floor so tests can ask for 1 s locks; default moderate.
    assert _ms(props, "group.share.min.record.lock.duration.ms") == 1000
    assert 1000 <= _ms(props, "group.share.record.lock.duration.ms") <= 60000
    for kind in ("share", "consumer"):
        hb_min = _ms(props, f"group.{kind}.min.heartbeat.interval.ms")
        hb = _ms(props, f"group.{kind}.heartbeat.interval.ms")
        session_min = _ms(props, f"group.{kind}.min.session.timeout.ms")
        session = _ms(props, f"group.{kind}.session.timeout.ms")
        assert hb_min <= hb <= 15000  # broker default max
        assert session_min <= session <= 60000
        assert hb < session
    assert 1 <= _ms(props, "group.share.max.size") <= 1000


def test_extra_config_overrides_defaults(tmp_path: Path) -> None:
    props = broker_properties(
        NODE,
        [NODE],
        tmp_path,
        {"auto.create.topics.enable": "false", "group.share.delivery.count.limit": "2"},
    )
    assert props["auto.create.topics.enable"] == "false"
    assert props["group.share.delivery.count.limit"] == "2"


def test_extra_config_values_must_be_strings(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"write numbers and booleans as strings"):
        broker_properties(NODE, [NODE], tmp_path, {"num.partitions": 3})  # type: ignore[dict-item]


def test_format_features_pin_share_version() -> None:
    assert format_features(True) == ["--feature", "share.version=1"]
    assert format_features(False) == ["--feature", "share.version=0"]
    assert format_features(True, 2) == ["--feature", "share.version=2"]
    assert format_features(False, 0) == ["--feature", "share.version=0"]


def test_render_properties_escapes_backslashes() -> None:
    text = render_properties({"a.b": "x", "log.dirs": "C:\\data"})
    assert text == "a.b=x\nlog.dirs=C:\\\\data\n"


def test_jvm_is_small() -> None:
    assert "-Xmx1g" in DEFAULT_JVM_OPTIONS
    assert "-Xms256m" in DEFAULT_JVM_OPTIONS
    assert set(SHARE_TEST_DEFAULTS) <= set(broker_properties(NODE, [NODE], "/d"))
