"""Choosing a cluster backend from the environment."""

# Imports inside functions are deliberate: confluent-kafka, testcontainers and the
# heavier harness modules load only when used, never when the package is imported.
# ruff: noqa: PLC0415

from __future__ import annotations

import os
from collections.abc import Mapping

from kafka_share.testing.cluster import KafkaCluster
from kafka_share.testing.errors import HarnessError

__all__ = ["BACKENDS", "BACKEND_ENV", "cluster_from_env", "resolve_backend"]

BACKEND_ENV = "KAFKA_SHARE_TEST_BACKEND"
BACKENDS = ("jar", "docker", "external", "auto")


def resolve_backend(name: str | None = None) -> str:
    """Turn ``jar|docker|external|auto`` (default: ``$KAFKA_SHARE_TEST_BACKEND``, else
    ``jar``) into a concrete backend. ``auto`` picks external when
    ``KAFKA_SHARE_BOOTSTRAP_SERVERS`` is set, else docker when an engine answers,
    else jar."""
    from kafka_share.testing.external import BOOTSTRAP_ENV

    chosen = (name or os.environ.get(BACKEND_ENV) or "jar").strip().lower()
    if chosen not in BACKENDS:
        raise HarnessError(
            f"unknown test backend {chosen!r} (from {BACKEND_ENV} or --kafka-backend); "
            f"choose one of {', '.join(BACKENDS)}"
        )
    if chosen != "auto":
        return chosen
    if os.environ.get(BOOTSTRAP_ENV, "").strip():
        return "external"
    from kafka_share.testing.containers import docker_available

    return "docker" if docker_available() else "jar"


def cluster_from_env(
    backend: str | None = None,
    *,
    kafka_version: str | None = None,
    extra_config: Mapping[str, str] | None = None,
    share_enabled: bool = True,
) -> KafkaCluster:
    """An unstarted cluster of the backend the environment asks for.

    The external backend ignores ``kafka_version`` and ``extra_config`` (the
    cluster is whatever it is).
    """
    chosen = resolve_backend(backend)
    if chosen == "external":
        from kafka_share.testing.external import ExternalKafkaCluster

        return ExternalKafkaCluster()
    if chosen == "docker":
        from kafka_share.testing.containers import ContainerKafkaCluster

        return ContainerKafkaCluster(
            kafka_version=kafka_version, extra_config=extra_config, share_enabled=share_enabled
        )
    from kafka_share.testing.local import LocalKafkaCluster

    return LocalKafkaCluster(
        kafka_version=kafka_version, extra_config=extra_config, share_enabled=share_enabled
    )
