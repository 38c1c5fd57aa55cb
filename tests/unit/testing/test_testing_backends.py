from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafka_share.testing import (
    ContainerKafkaCluster,
    ExternalKafkaCluster,
    HarnessError,
    LocalKafkaCluster,
    UnsupportedOperationError,
    cluster_from_env,
    resolve_backend,
)
from kafka_share.testing.containers import container_env, property_env_name
from kafka_share.testing.versions import parse_kafka_version
from tests.fresh import run_fresh


@pytest.mark.parametrize(
    ("key", "env"),
    [
        ("node.id", "KAFKA_NODE_ID"),
        ("group.share.record.lock.duration.ms", "KAFKA_GROUP_SHARE_RECORD_LOCK_DURATION_MS"),
        ("share.coordinator.state.topic.min.isr", "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR"),
        ("some_key.with-dash", "KAFKA_SOME__KEY_WITH___DASH"),
    ],
)
def test_property_env_name_follows_the_apache_image_rules(key: str, env: str) -> None:
    assert property_env_name(key) == env


def test_container_env_advertises_the_host_port_and_share_settings() -> None:
    env = container_env(parse_kafka_version("4.4.0"), 40123, extra_config={"a.b_c": "x"})
    assert env["KAFKA_ADVERTISED_LISTENERS"] == (
        "PLAINTEXT://127.0.0.1:40123,INTERNAL://localhost:9094"
    )
    assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] == "INTERNAL"
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR"] == "1"
    assert env["KAFKA_GROUP_SHARE_MIN_RECORD_LOCK_DURATION_MS"] == "1000"
    assert env["KAFKA_A_B__C"] == "x"
    assert len(env["CLUSTER_ID"]) == 22
    assert all(name.startswith("KAFKA_") or name == "CLUSTER_ID" for name in env)


def test_container_backend_refuses_what_the_image_cannot_format() -> None:
    with pytest.raises(UnsupportedOperationError, match=r"4\.2\+"):
        container_env(parse_kafka_version("4.1.1"), 1)
    with pytest.raises(UnsupportedOperationError, match="share groups disabled"):
        container_env(parse_kafka_version("4.4.0"), 1, share_enabled=False)


def test_container_cluster_uses_apache_image() -> None:
    assert ContainerKafkaCluster(kafka_version="4.3.1").image == "apache/kafka:4.3.1"


def test_backend_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_SHARE_TEST_BACKEND", raising=False)
    monkeypatch.delenv("KAFKA_SHARE_BOOTSTRAP_SERVERS", raising=False)
    assert resolve_backend() == "jar"
    monkeypatch.setenv("KAFKA_SHARE_TEST_BACKEND", "EXTERNAL")
    assert resolve_backend() == "external"
    assert resolve_backend("docker") == "docker"
    with pytest.raises(HarnessError, match="unknown test backend 'k8s'"):
        resolve_backend("k8s")


def test_auto_prefers_external_then_docker_then_jar(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_share.testing import containers

    monkeypatch.setenv("KAFKA_SHARE_BOOTSTRAP_SERVERS", "h:9092")
    assert resolve_backend("auto") == "external"
    monkeypatch.delenv("KAFKA_SHARE_BOOTSTRAP_SERVERS")
    monkeypatch.setattr(containers, "docker_available", lambda: True)
    assert resolve_backend("auto") == "docker"
    monkeypatch.setattr(containers, "docker_available", lambda: False)
    assert resolve_backend("auto") == "jar"


def test_cluster_from_env_builds_each_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_SHARE_BOOTSTRAP_SERVERS", "h1:9092,h2:9092")
    external = cluster_from_env("external")
    assert isinstance(external, ExternalKafkaCluster)
    assert external.bootstrap_servers == "h1:9092,h2:9092"
    local = cluster_from_env("jar", kafka_version="4.1.1", share_enabled=False)
    assert isinstance(local, LocalKafkaCluster)
    assert (local.kafka_version, local.share_enabled) == ("4.1.1", False)
    assert isinstance(cluster_from_env("docker"), ContainerKafkaCluster)


def test_external_cluster_cannot_kill_or_restart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_SHARE_BOOTSTRAP_SERVERS", raising=False)
    with pytest.raises(HarnessError, match="KAFKA_SHARE_BOOTSTRAP_SERVERS"):
        ExternalKafkaCluster()
    cluster = ExternalKafkaCluster("h:9092")
    cluster.stop()  # a no-op, never an error
    with pytest.raises(UnsupportedOperationError, match="jar backend"):
        cluster.kill_node(1)
    with pytest.raises(UnsupportedOperationError, match="external cluster"):
        cluster.restart_node(1)


def test_local_cluster_validates_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_SHARE_KAFKA_VERSION", "4.0.0")
    with pytest.raises(ValueError, match=r"4\.1\.0 or newer"):
        LocalKafkaCluster()
    monkeypatch.delenv("KAFKA_SHARE_KAFKA_VERSION")
    assert LocalKafkaCluster().kafka_version == "4.4.0"
    with pytest.raises(ValueError, match="between 1 and 3"):
        LocalKafkaCluster(num_nodes=4)
    with pytest.raises(ValueError, match="one port per node"):
        LocalKafkaCluster(num_nodes=2, broker_ports=[1])
    with pytest.raises(HarnessError, match="not started"):
        _ = LocalKafkaCluster().bootstrap_servers


def test_missing_java_fails_start_before_anything_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from kafka_share.testing import JavaNotFoundError

    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(JavaNotFoundError, match=r"Java 17\+"):
        LocalKafkaCluster(work_dir=tmp_path / "w").start()
    assert not (tmp_path / "w").exists()


def test_importing_the_plugin_and_cli_loads_no_client_library() -> None:
    code = (
        "import sys\n"
        "import kafka_share.testing.plugin, kafka_share.testing.cli, kafka_share.testing\n"
        "import kafka_share.cli\n"
        "bad = [m for m in ('confluent_kafka', 'testcontainers', 'docker') if m in sys.modules]\n"
        "print(bad)\n"
    )
    assert run_fresh(code).strip() == "[]"


def test_cli_status_and_stop_without_a_broker(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from kafka_share.testing.cli import broker

    monkeypatch.setenv("KAFKA_SHARE_CACHE_DIR", str(tmp_path))
    runner = CliRunner()
    result = runner.invoke(broker, ["status"])
    assert result.exit_code == 1
    assert "No dev broker is running" in result.output
    result = runner.invoke(broker, ["stop"])
    assert result.exit_code == 0
    assert "No dev broker is running" in result.output


def test_cli_discards_a_stale_state_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from kafka_share.testing.cli import broker

    monkeypatch.setenv("KAFKA_SHARE_CACHE_DIR", str(tmp_path))
    state = tmp_path / "dev-broker" / "state.json"
    state.parent.mkdir()
    # Our own pid is alive but is not a Kafka broker.
    import os

    state.write_text(json.dumps({"pid": os.getpid(), "bootstrap_servers": "x:1"}))
    result = CliRunner().invoke(broker, ["status"])
    assert result.exit_code == 1
    assert not state.exists()


def test_cli_start_rejects_bad_config_syntax(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from kafka_share.testing.cli import broker

    monkeypatch.setenv("KAFKA_SHARE_CACHE_DIR", str(tmp_path))
    result = CliRunner().invoke(broker, ["start", "--config", "novalue"])
    assert result.exit_code == 2
    assert "expected KEY=VALUE" in result.output


def test_cli_fetch_reports_missing_maven(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from kafka_share.testing import maven
    from kafka_share.testing.cli import broker

    monkeypatch.setenv("KAFKA_SHARE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(maven.shutil, "which", lambda name: None)
    result = CliRunner().invoke(broker, ["fetch", "--kafka-version", "4.3.1"])
    assert result.exit_code == 1
    assert "no `mvn` was found" in result.output


def test_the_container_broker_is_published_on_the_loopback_only() -> None:
    # testcontainers hands its `ports` mapping to docker-py as it is, and
    # docker-py takes (host ip, port) for a binding (a bare port: every interface).
    from kafka_share.testing.containers import loopback_published

    class StandInContainer:
        def __init__(self) -> None:
            self.ports: dict[str, object] = {}

    container = loopback_published(StandInContainer(), 9092, 41234)
    assert container.ports == {"9092": ("127.0.0.1", 41234)}
