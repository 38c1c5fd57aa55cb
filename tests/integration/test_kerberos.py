"""GSSAPI (Kerberos) against a real MIT KDC and a broker's SASL_PLAINTEXT/GSSAPI
listener: a consumer that logs in from a keytab, one that uses a ticket cache
made by kinit, and the clear errors of a wrong principal and a wrong service.

The KDC comes from Debian's krb5 packages and the client side from the
``gssapi`` extra, both installed by ``./run.sh test`` where it can; without
them the tests skip and say what is missing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_share import ShareConsumer
from kafka_share.errors import SaslAuthenticationFailedError
from kafka_share.testing import KafkaAdmin, LocalKafkaCluster, unique_name
from kafka_share.testing.config import DEFAULT_JVM_OPTIONS, NodeAddress
from kafka_share.testing.kerberos import REALM, MitKdc, kerberos_missing
from kafka_share.testing.local import _free_ports

pytestmark = pytest.mark.integration

BROKER = "kafka/127.0.0.1"
CLIENT = "client"


class Realm:
    def __init__(self, kdc: MitKdc, cluster: LocalKafkaCluster, gssapi_bootstrap: str,
                 client_keytab: Path) -> None:
        self.kdc = kdc
        self.cluster = cluster
        self.gssapi_bootstrap = gssapi_bootstrap
        self.client_keytab = client_keytab
        self.admin = KafkaAdmin(cluster.bootstrap_servers)  # the PLAINTEXT listener

    def config(self, **extra: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.gssapi_bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "GSSAPI",
            "sasl.kerberos.service.name": "kafka",
            "request.timeout.ms": 10_000,
            **extra,
        }

    def topic_with_records(self, count: int) -> tuple[str, str]:
        topic = self.admin.create_topic(partitions=1)
        group = unique_name("krb")
        self.admin.set_group_config(group, {"share.auto.offset.reset": "earliest"})
        self.admin.produce(topic, [f"k{i}".encode() for i in range(count)])
        return topic, group


@pytest.fixture(scope="module")
def realm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Realm]:
    missing = kerberos_missing()
    if missing:
        pytest.skip(missing)
    try:
        import gssapi  # type: ignore[import-not-found, unused-ignore]  # noqa: F401
    except ImportError:
        pytest.skip("the gssapi package is missing: pip install 'kafka-share[gssapi]' "
                    "(it builds against libkrb5-dev; ./run.sh test installs both)")
    work = tmp_path_factory.mktemp("kerberos")
    kdc = MitKdc(work / "kdc").start()
    saved = os.environ.get("KRB5_CONFIG")
    # The client's Kerberos library finds the realm through KRB5_CONFIG.
    os.environ["KRB5_CONFIG"] = str(kdc.krb5_conf)
    cluster: LocalKafkaCluster | None = None
    try:
        broker_keytab = kdc.add_principal(BROKER)
        client_keytab = kdc.add_principal(CLIENT)
        (gssapi_port,) = _free_ports(1)
        jaas = (
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
            f'storeKey=true keyTab="{broker_keytab}" principal="{BROKER}@{REALM}";'
        )

        def node_config(address: NodeAddress) -> dict[str, str]:
            host = address.host
            listeners = ",".join([
                f"PLAINTEXT://{host}:{address.broker_port}",
                f"SASL_PLAINTEXT://{host}:{gssapi_port}",
                f"CONTROLLER://{host}:{address.controller_port}",
            ])
            return {
                "listeners": listeners,
                "advertised.listeners": listeners,
                "listener.security.protocol.map": (
                    "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"
                ),
                "sasl.enabled.mechanisms": "GSSAPI",
                "sasl.kerberos.service.name": "kafka",
                "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": jaas,
            }

        cluster = LocalKafkaCluster(
            node_config=node_config,
            jvm_options=[*DEFAULT_JVM_OPTIONS, f"-Djava.security.krb5.conf={kdc.krb5_conf}"],
        )
        cluster.start()
        realm = Realm(kdc, cluster, f"127.0.0.1:{gssapi_port}", client_keytab)
        yield realm
        realm.admin.close()
    finally:
        if cluster is not None:
            cluster.stop()
        kdc.stop()
        if saved is None:
            os.environ.pop("KRB5_CONFIG", None)
        else:
            os.environ["KRB5_CONFIG"] = saved


def _consume(config: dict[str, Any], topic: str, group: str, count: int) -> list[bytes]:
    consumer: ShareConsumer[Any, Any] = ShareConsumer({**config, "group.id": group})
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            got += [r.value for r in consumer.poll(1.0)]
    finally:
        consumer.close(timeout=10)
    return got


def test_a_consumer_logs_in_from_a_keytab(realm: Realm) -> None:
    topic, group = realm.topic_with_records(20)
    config = realm.config(**{"sasl.kerberos.keytab": str(realm.client_keytab),
                             "sasl.kerberos.principal": f"{CLIENT}@{REALM}"})
    assert sorted(_consume(config, topic, group, 20)) == sorted(
        f"k{i}".encode() for i in range(20)
    )
    # The broker saw a Kerberos login: the KDC issued a ticket for its service.
    log = realm.kdc.log_file.read_text()
    assert f"{CLIENT}@{REALM} for {BROKER}@{REALM}" in log


def test_a_consumer_uses_the_ticket_cache_kinit_made(
    realm: Realm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ccache = tmp_path / "ccache"
    realm.kdc.kinit(CLIENT, realm.client_keytab, ccache)
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{ccache}")
    topic, group = realm.topic_with_records(10)
    assert len(_consume(realm.config(), topic, group, 10)) == 10


def _first_error(config: dict[str, Any], realm: Realm) -> BaseException:
    topic, group = realm.topic_with_records(1)
    consumer: ShareConsumer[Any, Any] = ShareConsumer({**config, "group.id": group})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                consumer.poll(1.0)
            except Exception as exc:
                return exc
    finally:
        consumer.close(timeout=5)
    raise AssertionError("no error in 30 s")


def test_a_principal_missing_from_the_keytab_is_a_clear_authentication_error(
    realm: Realm,
) -> None:
    config = realm.config(**{"sasl.kerberos.keytab": str(realm.client_keytab),
                             "sasl.kerberos.principal": f"nobody@{REALM}"})
    error = _first_error(config, realm)
    assert isinstance(error, SaslAuthenticationFailedError), repr(error)
    assert f"GSSAPI authentication as nobody@{REALM}" in str(error)
    assert "kafka@127.0.0.1" in str(error)
    assert f"is nobody@{REALM} in the keytab {realm.client_keytab}?" in str(error)


def test_a_wrong_service_name_is_a_clear_authentication_error(realm: Realm) -> None:
    config = realm.config(**{"sasl.kerberos.keytab": str(realm.client_keytab),
                             "sasl.kerberos.principal": f"{CLIENT}@{REALM}",
                             "sasl.kerberos.service.name": "kafka-wrong"})
    error = _first_error(config, realm)
    assert isinstance(error, SaslAuthenticationFailedError), repr(error)
    assert "kafka-wrong@127.0.0.1" in str(error)
    assert "not found in Kerberos database" in str(error), str(error)
