"""librdkafka's in-process mock Kafka cluster, driven through ctypes.

librdkafka (the C library inside the confluent-kafka wheel) contains a mock
cluster: a set of in-process "brokers" listening on localhost, speaking the
Kafka protocol, with a share-group coordinator (KIP-932) of its own. It is a
second, independent broker implementation: tests that pass against both it
and Apache Kafka exercise the protocol rather than one broker's habits. It
starts in milliseconds and needs no JVM.

Use it as a context manager::

    from kafka_share.testing.mock_cluster import MockCluster

    with MockCluster(brokers=3) as cluster:
        topic = cluster.create_topic(partitions=6)
        cluster.set_partition_leader(topic, 0, broker_id=2)
        cluster.sharegroup_set_auto_offset_reset("earliest")
        cluster.produce(topic, [b"a", b"b"], partition=0)
        ...  # point a share consumer at cluster.bootstrap_servers

The mock cluster needs an ``rd_kafka_t`` handle to run on; :class:`MockCluster`
creates a producer handle for that, keeps it alive for the cluster's lifetime
and destroys both on exit. Mock broker ids are ``1..brokers``.

The mock is librdkafka's test tool, not Apache Kafka: it implements the
versions librdkafka itself uses (for example ShareFetch v1 only and
ApiVersions up to v2) and keeps no data on disk.

Requirements: confluent-kafka (the ``testing`` extra) with a bundled
librdkafka that exports the mock API; the share-group knobs need
librdkafka >= 2.13. :class:`MockClusterUnavailableError` names what is
missing. ``KAFKA_SHARE_LIBRDKAFKA`` may point at a librdkafka shared library
to use instead of the bundled one.
"""

# Imports inside functions are deliberate: confluent-kafka loads only when used.
# ruff: noqa: PLC0415

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from kafka_share.testing.admin import unique_name
from kafka_share.testing.errors import HarnessError

__all__ = [
    "LIBRDKAFKA_ENV",
    "MockCluster",
    "MockClusterUnavailableError",
    "MockRequest",
    "find_librdkafka",
    "load_librdkafka",
]

LIBRDKAFKA_ENV: Final = "KAFKA_SHARE_LIBRDKAFKA"
"""Environment variable naming a librdkafka shared library to load instead of the bundled one."""

_RD_KAFKA_PRODUCER: Final = 0
_ERRSTR_BYTES: Final = 512
_OFFSET_RESET: Final = {"latest": 0, "earliest": 1}


@dataclass(frozen=True)
class MockRequest:
    """One request a mock broker received (see :meth:`MockCluster.start_request_tracking`)."""

    broker_id: int
    api_key: int
    timestamp_us: int
    """librdkafka's monotonic clock, in microseconds."""


class MockClusterUnavailableError(HarnessError):
    """librdkafka, or a mock-cluster function this harness needs, cannot be found.

    Typical causes: confluent-kafka is not installed, or it is too old to bundle
    the share-group mock (librdkafka < 2.13). The message says which.
    """


class _Sig:
    """A C function signature: result type and argument types."""

    def __init__(self, restype: Any, *argtypes: Any) -> None:
        self.restype = restype
        self.argtypes = list(argtypes)


_P = ctypes.c_void_p
_S = ctypes.c_char_p
_I = ctypes.c_int
_I16 = ctypes.c_int16
_I32 = ctypes.c_int32
_SIZE = ctypes.c_size_t

# Every function the harness calls. ``_SHAREGROUP`` ones are checked only when used,
# so a librdkafka without them still runs plain (non-share) mock tests.
_CORE: Final[dict[str, _Sig]] = {
    "rd_kafka_version_str": _Sig(_S),
    "rd_kafka_err2str": _Sig(_S, _I),
    "rd_kafka_conf_new": _Sig(_P),
    "rd_kafka_conf_set": _Sig(_I, _P, _S, _S, _S, _SIZE),
    "rd_kafka_conf_destroy": _Sig(None, _P),
    "rd_kafka_new": _Sig(_P, _I, _P, _S, _SIZE),
    "rd_kafka_destroy": _Sig(None, _P),
    "rd_kafka_mock_cluster_new": _Sig(_P, _P, _I),
    "rd_kafka_mock_cluster_destroy": _Sig(None, _P),
    "rd_kafka_mock_cluster_bootstraps": _Sig(_S, _P),
    "rd_kafka_mock_topic_create": _Sig(_I, _P, _S, _I, _I),
    "rd_kafka_mock_partition_set_leader": _Sig(_I, _P, _S, _I32, _I32),
    "rd_kafka_mock_coordinator_set": _Sig(_I, _P, _S, _S, _I32),
    "rd_kafka_mock_broker_set_down": _Sig(_I, _P, _I32),
    "rd_kafka_mock_broker_set_up": _Sig(_I, _P, _I32),
    "rd_kafka_mock_broker_set_rtt": _Sig(_I, _P, _I32, _I),
    "rd_kafka_mock_set_apiversion": _Sig(_I, _P, _I16, _I16, _I16),
    "rd_kafka_mock_start_request_tracking": _Sig(None, _P),
    "rd_kafka_mock_stop_request_tracking": _Sig(None, _P),
    "rd_kafka_mock_clear_requests": _Sig(None, _P),
    "rd_kafka_mock_get_requests": _Sig(_P, _P, ctypes.POINTER(_SIZE)),
    "rd_kafka_mock_request_id": _Sig(_I32, _P),
    "rd_kafka_mock_request_api_key": _Sig(_I16, _P),
    "rd_kafka_mock_request_timestamp": _Sig(ctypes.c_int64, _P),
    "rd_kafka_mock_request_destroy_array": _Sig(None, _P, _SIZE),
}
_SHAREGROUP: Final[dict[str, _Sig]] = {
    "rd_kafka_mock_sharegroup_set_record_lock_duration": _Sig(None, _P, _I),
    "rd_kafka_mock_sharegroup_set_auto_offset_reset": _Sig(None, _P, _I),
    "rd_kafka_mock_sharegroup_set_session_timeout": _Sig(None, _P, _I),
    "rd_kafka_mock_sharegroup_set_heartbeat_interval": _Sig(None, _P, _I),
    "rd_kafka_mock_sharegroup_set_max_delivery_attempts": _Sig(None, _P, _I),
    # Client telemetry (KIP-714): in librdkafka since 2.5, well before share groups.
    "rd_kafka_mock_telemetry_set_requested_metrics": _Sig(
        _I, _P, ctypes.POINTER(ctypes.c_char_p), _SIZE),
    "rd_kafka_mock_telemetry_set_push_interval": _Sig(_I, _P, ctypes.c_int64),
}

_lib_lock = threading.Lock()
_lib_cache: dict[str, ctypes.CDLL] = {}


def find_librdkafka() -> Path:
    """Path of the librdkafka shared library to load.

    Order: ``$KAFKA_SHARE_LIBRDKAFKA``; the copy bundled in the confluent-kafka
    wheel (``confluent_kafka.libs/`` on Linux, ``confluent_kafka/.dylibs/`` on
    macOS); a system ``librdkafka``.

    Raises:
        MockClusterUnavailableError: none of them exists.
    """
    override = os.environ.get(LIBRDKAFKA_ENV)
    if override:
        path = Path(override)
        if not path.is_file():
            raise MockClusterUnavailableError(
                f"{LIBRDKAFKA_ENV}={override} does not name an existing file"
            )
        return path
    tried: list[str] = []
    try:
        import confluent_kafka
    except ImportError:
        tried.append("confluent-kafka is not installed (pip install 'kafka-share[testing]')")
    else:
        package_dir = Path(confluent_kafka.__file__).resolve().parent
        patterns = [
            str(package_dir.parent / "confluent_kafka.libs" / "librdkafka*.so*"),
            str(package_dir / ".dylibs" / "librdkafka*.dylib"),
            str(package_dir.parent / "confluent_kafka.libs" / "librdkafka*.dll"),
        ]
        for pattern in patterns:
            found = sorted(glob.glob(pattern))
            if found:
                return Path(found[0])
        tried.append(f"no librdkafka bundled with confluent-kafka in {package_dir.parent}")
    system = ctypes.util.find_library("rdkafka")
    if system:
        return Path(system)
    tried.append("no system librdkafka")
    raise MockClusterUnavailableError(
        "cannot find librdkafka for the mock cluster: " + "; ".join(tried)
        + f" (or set {LIBRDKAFKA_ENV} to a librdkafka shared library)"
    )


def load_librdkafka(path: Path | None = None, *, share_groups: bool = True) -> ctypes.CDLL:
    """Load librdkafka and declare the mock-cluster functions' signatures.

    Args:
        path: the library; :func:`find_librdkafka` by default.
        share_groups: also require the share-group knobs.

    Raises:
        MockClusterUnavailableError: the library cannot be loaded or lacks a
            function the harness needs (the message lists them and the
            library's version).
    """
    lib_path = path or find_librdkafka()
    with _lib_lock:
        lib = _lib_cache.get(str(lib_path))
        if lib is None:
            try:
                lib = ctypes.CDLL(str(lib_path))
            except OSError as exc:
                raise MockClusterUnavailableError(
                    f"cannot load librdkafka from {lib_path}: {exc}"
                ) from exc
            _lib_cache[str(lib_path)] = lib
    wanted = dict(_CORE)
    if share_groups:
        wanted.update(_SHAREGROUP)
    missing = [name for name in wanted if not hasattr(lib, name)]
    if missing:
        version = "unknown"
        if hasattr(lib, "rd_kafka_version_str"):
            lib.rd_kafka_version_str.restype = ctypes.c_char_p
            version = lib.rd_kafka_version_str().decode()
        raise MockClusterUnavailableError(
            f"librdkafka {version} at {lib_path} lacks {', '.join(missing)}; "
            "the share-group mock cluster needs librdkafka >= 2.13 "
            "(upgrade confluent-kafka)"
        )
    for name, sig in wanted.items():
        fn = getattr(lib, name)
        fn.restype = sig.restype
        fn.argtypes = sig.argtypes
    return lib


class MockCluster:
    """A librdkafka mock cluster of ``brokers`` brokers (ids ``1..brokers``).

    Args:
        brokers: number of mock brokers.
        debug: librdkafka ``debug`` contexts for the handle the cluster runs on
            (``"mock"``, ``"all"``, ...); the log goes to stderr.
        library: path of the librdkafka shared library (see :func:`find_librdkafka`).

    Raises:
        MockClusterUnavailableError: on :meth:`start`, when librdkafka or a
            needed mock function is missing.
        HarnessError: the mock cluster could not be created, or a control
            call failed (the message carries librdkafka's error).
    """

    def __init__(
        self, brokers: int = 3, *, debug: str | None = None, library: Path | None = None
    ) -> None:
        if brokers < 1:
            raise ValueError(f"brokers must be >= 1, got {brokers}")
        self.brokers = brokers
        self._debug = debug
        self._library = library
        self._lib: ctypes.CDLL | None = None
        self._rk: int | None = None
        self._mcluster: int | None = None
        self._bootstrap: str | None = None
        self._producer: Any = None
        self._lock = threading.Lock()

    # -- lifecycle ------------------------------------------------------------

    def start(self) -> MockCluster:
        """Create the handle and the mock cluster (idempotent)."""
        with self._lock:
            if self._mcluster is not None:
                return self
            lib = load_librdkafka(self._library)
            errstr = ctypes.create_string_buffer(_ERRSTR_BYTES)
            conf = lib.rd_kafka_conf_new()
            # The handle connects nowhere: hide the notice that it has no
            # bootstrap.servers, unless debugging asks for everything.
            settings = {"client.id": "kafka-share-mock-cluster", "log_level": "4"}
            if self._debug:
                settings.update(debug=self._debug, log_level="7")
            for key, value in settings.items():
                if lib.rd_kafka_conf_set(conf, key.encode(), value.encode(), errstr,
                                         _ERRSTR_BYTES) != 0:
                    lib.rd_kafka_conf_destroy(conf)
                    raise HarnessError(
                        f"librdkafka refused {key}={value!r}: {errstr.value.decode()}"
                    )
            # rd_kafka_new takes ownership of conf on success only.
            rk = lib.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, errstr, _ERRSTR_BYTES)
            if not rk:
                lib.rd_kafka_conf_destroy(conf)
                raise HarnessError(
                    f"cannot create the librdkafka handle for the mock cluster: "
                    f"{errstr.value.decode()}"
                )
            mcluster = lib.rd_kafka_mock_cluster_new(rk, self.brokers)
            if not mcluster:
                lib.rd_kafka_destroy(rk)
                raise HarnessError(
                    f"rd_kafka_mock_cluster_new({self.brokers}) failed (see librdkafka's log)"
                )
            self._lib = lib
            self._rk = rk
            self._mcluster = mcluster
            self._bootstrap = lib.rd_kafka_mock_cluster_bootstraps(mcluster).decode()
            return self

    def stop(self) -> None:
        """Destroy the mock cluster, then its handle (idempotent).

        Clients still connected see their connections closed.
        """
        with self._lock:
            lib, rk, mcluster = self._lib, self._rk, self._mcluster
            # Drop the producer first: its handle must not outlive the brokers.
            self._producer = None
            self._rk = self._mcluster = None
            self._bootstrap = None
            if lib is None:
                return
            if mcluster is not None:
                lib.rd_kafka_mock_cluster_destroy(mcluster)
            if rk is not None:
                lib.rd_kafka_destroy(rk)

    def __enter__(self) -> MockCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- facts ------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """``host:port,...`` of every mock broker."""
        if self._bootstrap is None:
            raise HarnessError("the mock cluster is not started (use start() or `with`)")
        return self._bootstrap

    @property
    def broker_ids(self) -> list[int]:
        """The mock brokers' node ids."""
        return list(range(1, self.brokers + 1))

    @property
    def librdkafka_version(self) -> str:
        """Version of the librdkafka the cluster runs on."""
        lib = self._lib or load_librdkafka(self._library)
        return str(lib.rd_kafka_version_str().decode())

    # -- control ----------------------------------------------------------------

    def create_topic(
        self, name: str | None = None, partitions: int = 1, replication_factor: int = 1
    ) -> str:
        """Create a topic (unique name by default) and return its name."""
        topic = name or unique_name("mock-topic")
        lib, mc = self._handles()
        self._check(
            lib.rd_kafka_mock_topic_create(mc, topic.encode(), partitions, replication_factor),
            f"creating topic {topic!r} with {partitions} partitions",
        )
        return topic

    def set_partition_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Make ``broker_id`` the leader of ``topic``-``partition`` (-1: no leader)."""
        lib, mc = self._handles()
        self._check(
            lib.rd_kafka_mock_partition_set_leader(mc, topic.encode(), partition, broker_id),
            f"setting the leader of {topic}-{partition} to broker {broker_id}",
        )

    def set_coordinator(self, group_id: str, broker_id: int, key_type: str = "group") -> None:
        """Make ``broker_id`` the coordinator of ``group_id`` (``key_type`` group/transaction)."""
        lib, mc = self._handles()
        self._check(
            lib.rd_kafka_mock_coordinator_set(
                mc, key_type.encode(), group_id.encode(), broker_id
            ),
            f"setting the {key_type} coordinator of {group_id!r} to broker {broker_id}",
        )

    def set_broker_down(self, broker_id: int) -> None:
        """Close the broker's connections and refuse new ones until :meth:`set_broker_up`."""
        lib, mc = self._handles()
        self._check(lib.rd_kafka_mock_broker_set_down(mc, broker_id),
                    f"taking broker {broker_id} down")

    def set_broker_up(self, broker_id: int) -> None:
        """Let a broker taken down by :meth:`set_broker_down` accept connections again."""
        lib, mc = self._handles()
        self._check(lib.rd_kafka_mock_broker_set_up(mc, broker_id),
                    f"bringing broker {broker_id} up")

    def set_broker_rtt(self, broker_id: int, rtt_ms: int) -> None:
        """Delay every response of ``broker_id`` by ``rtt_ms`` (0 removes the delay)."""
        lib, mc = self._handles()
        self._check(lib.rd_kafka_mock_broker_set_rtt(mc, broker_id, rtt_ms),
                    f"setting the round-trip time of broker {broker_id} to {rtt_ms} ms")

    def set_api_version(self, api_key: int, min_version: int, max_version: int) -> None:
        """Change the version range the mock brokers advertise and accept for ``api_key``.

        ``-1, -1`` disables the API.
        """
        lib, mc = self._handles()
        self._check(lib.rd_kafka_mock_set_apiversion(mc, api_key, min_version, max_version),
                    f"setting API key {api_key} to versions {min_version}..{max_version}")

    # -- request tracking ---------------------------------------------------------

    def start_request_tracking(self) -> None:
        """Record every request the mock brokers receive from now on (all clients)."""
        lib, mc = self._handles()
        lib.rd_kafka_mock_start_request_tracking(mc)

    def stop_request_tracking(self) -> None:
        """Stop recording; what was recorded stays until :meth:`clear_requests`."""
        lib, mc = self._handles()
        lib.rd_kafka_mock_stop_request_tracking(mc)

    def clear_requests(self) -> None:
        """Forget the recorded requests."""
        lib, mc = self._handles()
        lib.rd_kafka_mock_clear_requests(mc)

    def requests(self) -> list[MockRequest]:
        """The requests recorded since tracking started, oldest first."""
        lib, mc = self._handles()
        count = _SIZE(0)
        array = lib.rd_kafka_mock_get_requests(mc, ctypes.byref(count))
        if not array:
            return []
        try:
            items = ctypes.cast(array, ctypes.POINTER(_P))
            return [
                MockRequest(
                    broker_id=int(lib.rd_kafka_mock_request_id(items[i])),
                    api_key=int(lib.rd_kafka_mock_request_api_key(items[i])),
                    timestamp_us=int(lib.rd_kafka_mock_request_timestamp(items[i])),
                )
                for i in range(count.value)
            ]
        finally:
            lib.rd_kafka_mock_request_destroy_array(array, count.value)

    # -- client telemetry (KIP-714) -------------------------------------------------

    def set_telemetry_subscription(self, metrics: Sequence[str], push_interval_ms: int) -> None:
        """What the mock answers every client's GetTelemetrySubscriptions: the metric
        name prefixes to push (``"*"``: all; none: push nothing, the mock's default)
        and the push interval (the mock's default is 5 minutes)."""
        lib, mc = self._handles()
        names = (ctypes.c_char_p * len(metrics))(*(m.encode() for m in metrics))
        self._check(lib.rd_kafka_mock_telemetry_set_requested_metrics(mc, names, len(metrics)),
                    f"setting the telemetry metrics to {list(metrics)}")
        self._check(lib.rd_kafka_mock_telemetry_set_push_interval(mc, push_interval_ms),
                    f"setting the telemetry push interval to {push_interval_ms} ms")

    # -- share-group knobs (cluster-wide; apply to every share group) -------------

    def sharegroup_set_record_lock_duration(self, lock_duration_ms: int) -> None:
        """Acquisition lock duration; 0 (the mock's default) uses the session timeout."""
        lib, mc = self._handles()
        lib.rd_kafka_mock_sharegroup_set_record_lock_duration(mc, lock_duration_ms)

    def sharegroup_set_auto_offset_reset(self, reset: str) -> None:
        """Where a share-partition starts: ``"latest"`` (the mock's default) or ``"earliest"``."""
        if reset not in _OFFSET_RESET:
            raise ValueError(f"reset must be 'earliest' or 'latest', got {reset!r}")
        lib, mc = self._handles()
        lib.rd_kafka_mock_sharegroup_set_auto_offset_reset(mc, _OFFSET_RESET[reset])

    def sharegroup_set_session_timeout(self, session_timeout_ms: int) -> None:
        """Share-group member session timeout."""
        lib, mc = self._handles()
        lib.rd_kafka_mock_sharegroup_set_session_timeout(mc, session_timeout_ms)

    def sharegroup_set_heartbeat_interval(self, heartbeat_interval_ms: int) -> None:
        """Heartbeat interval the coordinator tells members to use."""
        lib, mc = self._handles()
        lib.rd_kafka_mock_sharegroup_set_heartbeat_interval(mc, heartbeat_interval_ms)

    def sharegroup_set_max_delivery_attempts(self, max_attempts: int) -> None:
        """Deliveries before a record is archived (mock default 5; 0 = unlimited)."""
        lib, mc = self._handles()
        lib.rd_kafka_mock_sharegroup_set_max_delivery_attempts(mc, max_attempts)

    # -- data ---------------------------------------------------------------------

    def produce(
        self,
        topic: str,
        values: Iterable[bytes | str | None],
        *,
        partition: int | None = None,
        key: bytes | str | None = None,
        timeout_s: float = 30.0,
        config: Mapping[str, Any] | None = None,
    ) -> list[tuple[int, int]]:
        """Produce ``values`` with confluent-kafka and wait until every one is acknowledged.

        Returns:
            ``(partition, offset)`` of each record, in order.

        Raises:
            HarnessError: a delivery failed or did not finish within ``timeout_s``.
        """
        producer = self._producer_for(config)
        items = list(values)
        results: list[tuple[int, int] | None] = [None] * len(items)
        errors: list[str] = []

        def delivered(index: int) -> Any:
            def callback(err: Any, msg: Any) -> None:
                if err is not None:
                    errors.append(f"record {index}: {err}")
                else:
                    results[index] = (msg.partition(), msg.offset())
            return callback

        for index, value in enumerate(items):
            kwargs: dict[str, Any] = {"value": value, "key": key, "on_delivery": delivered(index)}
            if partition is not None:
                kwargs["partition"] = partition
            producer.produce(topic, **kwargs)
            producer.poll(0)
        deadline = time.monotonic() + timeout_s
        while producer.flush(0.2) > 0:
            if time.monotonic() >= deadline:
                raise HarnessError(
                    f"producing {len(items)} records to the mock cluster did not finish "
                    f"within {timeout_s} s"
                )
        if errors:
            raise HarnessError("producing to the mock cluster failed: " + "; ".join(errors[:5]))
        done = [r for r in results if r is not None]
        if len(done) != len(items):
            raise HarnessError(
                f"only {len(done)} of {len(items)} records were acknowledged by the mock cluster"
            )
        return done

    # -- internals ------------------------------------------------------------------

    def _producer_for(self, config: Mapping[str, Any] | None) -> Any:
        """One cached producer for the default config; a fresh one for any other."""
        from confluent_kafka import Producer

        settings = {"bootstrap.servers": self.bootstrap_servers, "linger.ms": 0}
        if config:
            return Producer({**settings, **config})
        if self._producer is None:
            self._producer = Producer(settings)
        return self._producer

    def _handles(self) -> tuple[Any, int]:
        lib, mc = self._lib, self._mcluster
        if lib is None or mc is None:
            raise HarnessError("the mock cluster is not started (use start() or `with`)")
        return lib, mc

    def _check(self, err: int, doing: str) -> None:
        if err != 0:
            lib, _ = self._handles()
            reason = lib.rd_kafka_err2str(err).decode()
            raise HarnessError(f"mock cluster: {doing} failed: {reason}")
