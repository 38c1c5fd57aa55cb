"""A Kafka cluster of local JVM processes run from the cached Maven jars."""

from __future__ import annotations

import atexit
import base64
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from kafka_share.testing import _lifeline
from kafka_share.testing.cluster import KafkaCluster
from kafka_share.testing.config import (
    DEFAULT_JVM_OPTIONS,
    LOG4J2_PROPERTIES,
    NodeAddress,
    broker_properties,
    format_features,
    render_properties,
)
from kafka_share.testing.errors import BrokerStartError, HarnessError
from kafka_share.testing.java import find_java
from kafka_share.testing.maven import BrokerDistribution, ensure_kafka_libs
from kafka_share.testing.readiness import wait_until_ready
from kafka_share.testing.versions import DEFAULT_KAFKA_VERSION, parse_kafka_version

__all__ = ["LocalKafkaCluster", "default_kafka_version"]

_FEATURE_RE = re.compile(r"FeatureLevelRecord\(name='([\w.]+)', featureLevel=(\d+)\)")
_BIND_FAILURE_MARKERS = ("Address already in use", "BindException")
_PORT_ATTEMPTS = 3
_MAX_NODES = 3

# Clusters still running when the interpreter exits are stopped, so a test run
# that forgets stop() (or is interrupted) leaves no JVM behind.
_live: weakref.WeakSet[LocalKafkaCluster] = weakref.WeakSet()
_detached: list[subprocess.Popen[bytes]] = []


@atexit.register
def _stop_leftovers() -> None:
    for cluster in list(_live):
        cluster.stop()


def new_cluster_id() -> str:
    """A random cluster id in Kafka's form (22 base64url characters).

    Like Java's ``Uuid.randomUuid()``, never one starting with ``-``: StorageTool's
    argument parser would read it as an option ("--cluster-id: expected one
    argument"), which failed about one start in 64.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def default_kafka_version() -> str:
    """``KAFKA_SHARE_KAFKA_VERSION`` if set, else :data:`DEFAULT_KAFKA_VERSION`."""
    return os.environ.get("KAFKA_SHARE_KAFKA_VERSION") or DEFAULT_KAFKA_VERSION


class _Node:
    def __init__(self, address: NodeAddress, home: Path) -> None:
        self.address = address
        self.home = home
        self.data_dir = home / "data"
        self.config_path = home / "server.properties"
        self.log_path = home / "broker.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.log_handle: IO[bytes] | None = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def close_log(self) -> None:
        if self.log_handle is not None:
            self.log_handle.close()
            self.log_handle = None


class LocalKafkaCluster(KafkaCluster):
    """Apache Kafka KRaft nodes run as local JVM processes from Maven Central jars.

    Each node is a combined broker + controller listening on free ``127.0.0.1``
    ports, with a fresh data directory, share groups enabled
    (``share.version=1``) unless ``share_enabled=False``, or at the
    ``share.version`` level ``share_version`` names (2, on Kafka 4.4+: share-group
    dead-letter queues), single-partition
    internal topics and fast share-group timings (see
    :data:`kafka_share.testing.config.SHARE_TEST_DEFAULTS`).

    ``num_nodes`` may be 1 to 3; with more than one node every node is a
    controller (a static voter set), so the cluster survives losing one node
    when it has three.

    With ``die_with_parent=True`` (the default) the broker JVMs and the
    temporary work directory do not outlive this Python process, whatever ends
    it (SIGTERM from a CI timeout, SIGKILL, a crash): on Linux the kernel kills
    each JVM when this process dies (``PR_SET_PDEATHSIG``), and on every
    platform a small reaper process kills the JVMs and removes the directory.
    Pass ``False`` only to leave the brokers running on purpose (:meth:`detach`).

    ``node_config(address)`` returns per-node properties applied over
    ``extra_config`` (e.g. an extra listener advertised through a
    :class:`~kafka_share.testing.TcpProxy` per node); it is called with each
    node's :class:`~kafka_share.testing.config.NodeAddress` on every start attempt.
    ``format_args`` are extra ``StorageTool format`` arguments (e.g.
    ``--add-scram`` entries, see :class:`~kafka_share.testing.secure.SecureKafkaCluster`).
    ``extra_classpath`` entries (directories or jars) go after the broker's jars,
    for plugins the brokers load by class name (a metrics reporter in
    ``extra_config["metric.reporters"]``, an authorizer).

    The jars are downloaded once into the per-user cache
    (:func:`kafka_share.testing.maven.cache_root`). Needs Java 17+ and, for the
    first run of a version, Maven.

    Example::

        with LocalKafkaCluster() as cluster:
            admin = cluster.admin()
            topic = admin.create_topic(partitions=3)
    """

    def __init__(
        self,
        num_nodes: int = 1,
        *,
        kafka_version: str | None = None,
        extra_config: Mapping[str, str] | None = None,
        share_enabled: bool = True,
        share_version: int | None = None,
        work_dir: Path | str | None = None,
        broker_ports: Sequence[int] | None = None,
        start_timeout_s: float = 60.0,
        stop_timeout_s: float = 20.0,
        jvm_options: Sequence[str] | None = None,
        cache_dir: Path | None = None,
        die_with_parent: bool = True,
        node_config: Callable[[NodeAddress], Mapping[str, str]] | None = None,
        format_args: Sequence[str] = (),
        extra_classpath: Sequence[Path | str] = (),
    ) -> None:
        if not 1 <= num_nodes <= _MAX_NODES:
            raise ValueError(f"num_nodes must be between 1 and {_MAX_NODES}, got {num_nodes}")
        if broker_ports is not None and len(broker_ports) != num_nodes:
            raise ValueError(
                f"broker_ports must list one port per node ({num_nodes}), got {list(broker_ports)}"
            )
        self.num_nodes = num_nodes
        self._version = parse_kafka_version(kafka_version or default_kafka_version())
        self.extra_config = dict(extra_config or {})
        if share_version is not None:
            self._version.check_share_version(share_version)
            if not share_enabled and share_version > 0:
                raise ValueError(
                    f"share_enabled=False contradicts share_version={share_version}"
                )
            share_enabled = share_version > 0
        self.share_enabled = share_enabled
        #: The ``share.version`` level the cluster is formatted with (None: 1 or 0,
        #: from ``share_enabled``).
        self.share_version = share_version
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.jvm_options = tuple(jvm_options) if jvm_options is not None else DEFAULT_JVM_OPTIONS
        self._broker_ports = list(broker_ports) if broker_ports is not None else None
        self._cache_dir = cache_dir
        self.die_with_parent = die_with_parent
        self._node_config = node_config
        self._format_args = tuple(format_args)
        self._extra_classpath = tuple(str(p) for p in extra_classpath)
        self._owns_work_dir = work_dir is None
        self._work_dir_arg = Path(work_dir) if work_dir is not None else None
        self.work_dir: Path | None = None
        self._nodes: dict[int, _Node] = {}
        self._java: str | None = None
        self._dist: BrokerDistribution | None = None
        self._lock = threading.Lock()
        #: Feature levels written at format time, from StorageTool's output
        #: (e.g. ``{"metadata.version": 33, "share.version": 1, ...}``).
        self.bootstrap_features: dict[str, int] = {}
        #: Seconds from launching the JVMs to the first successful metadata round trip.
        self.startup_seconds: float | None = None

    # ----------------------------------------------------------------- properties

    @property
    def kafka_version(self) -> str:
        return str(self._version)

    @property
    def bootstrap_servers(self) -> str:
        self._require_started()
        return ",".join(node.address.bootstrap for node in self._nodes.values())

    @property
    def nodes(self) -> dict[int, str]:
        self._require_started()
        return {node_id: node.address.bootstrap for node_id, node in self._nodes.items()}

    @property
    def pids(self) -> dict[int, int]:
        """Node id -> OS process id of the running nodes."""
        return {
            node_id: node.process.pid
            for node_id, node in self._nodes.items()
            if node.process is not None and node.running
        }

    def log_path(self, node_id: int) -> Path:
        """The file the node's JVM writes its output to."""
        return self._node(node_id).log_path

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Format and start every node, and wait until the cluster answers.

        Raises :class:`JavaNotFoundError`, :class:`MavenError` or
        :class:`BrokerStartError` (whose message ends with the broker log tail).
        """
        with self._lock:
            if self._nodes:
                raise HarnessError("this LocalKafkaCluster is already started; stop() it first")
            self._java = find_java()
            self._dist = ensure_kafka_libs(self._version, cache_dir=self._cache_dir)
            self.work_dir = self._work_dir_arg or Path(tempfile.mkdtemp(prefix="kafka-share-"))
            if self._owns_work_dir and self.die_with_parent:
                _lifeline.track_dir(self.work_dir)
            self.work_dir.mkdir(parents=True, exist_ok=True)
            (self.work_dir / "log4j2.properties").write_text(LOG4J2_PROPERTIES, encoding="utf-8")
            attempts = 1 if self._broker_ports is not None else _PORT_ATTEMPTS
            for attempt in range(1, attempts + 1):
                try:
                    self._start_once()
                except BrokerStartError as exc:
                    bind_failure = any(m in str(exc) for m in _BIND_FAILURE_MARKERS)
                    self._shutdown_all(kill=True)
                    self._nodes = {}
                    if bind_failure and attempt < attempts:
                        continue  # another process grabbed a port: try fresh ones
                    self._cleanup_work_dir()
                    if bind_failure:
                        raise BrokerStartError(
                            f"the broker could not bind its ports in {attempts} attempt(s) "
                            f"(another process is using them)\n{exc}"
                        ) from exc
                    raise
                except BaseException:
                    self._shutdown_all(kill=True)
                    self._nodes = {}
                    self._cleanup_work_dir()
                    raise
                else:
                    _live.add(self)
                    return

    def stop(self) -> None:
        """Stop every node (SIGTERM, SIGKILL after ``stop_timeout_s``) and remove temp data."""
        self._close_admins()
        with self._lock:
            _live.discard(self)
            if not self._nodes:
                return
            self._shutdown_all(kill=False)
            self._nodes = {}
            self._cleanup_work_dir()

    def kill_node(self, node_id: int) -> None:
        """SIGKILL one node. Its data directory is kept for :meth:`start_node`."""
        node = self._node(node_id)
        self._terminate(node, kill=True)

    def stop_node(self, node_id: int) -> None:
        """Stop one node cleanly (SIGTERM, then SIGKILL after the grace period)."""
        node = self._node(node_id)
        self._terminate(node, kill=False)

    def start_node(self, node_id: int) -> None:
        """Start a stopped or killed node on its old data and ports; wait until it is back."""
        node = self._node(node_id)
        if node.running:
            raise HarnessError(f"node {node_id} is already running")
        self._launch(node)
        # Ask the restarted node itself: the other nodes may still list it in
        # their metadata before it is back. It accepts requests only once unfenced.
        wait_until_ready(
            node.address.bootstrap,
            expected_brokers=sum(1 for n in self._nodes.values() if n.running),
            timeout_s=self.start_timeout_s,
            check_alive=self._check_alive,
            describe_log=lambda: self.log_tail(40),
        )

    def detach(self) -> None:
        """Leave the nodes running after this Python process exits (used by the CLI).

        Only for a cluster created with ``die_with_parent=False``: the others are
        tied to this process by the kernel and cannot be detached.
        """
        if self.die_with_parent:
            raise HarnessError(
                "this LocalKafkaCluster was created with die_with_parent=True: its brokers "
                "die with this process and cannot be detached; create it with "
                "die_with_parent=False to leave them running"
            )
        _live.discard(self)
        self._owns_work_dir = False
        for node in self._nodes.values():
            node.close_log()
            if node.process is not None:
                # Kept referenced so Popen never warns that a child it did not
                # wait for is still running: that is the point of detaching.
                _detached.append(node.process)

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of each node's log (labelled when there are several)."""
        parts = []
        for node_id, node in self._nodes.items():
            tail = _tail(node.log_path, lines)
            parts.append(tail if len(self._nodes) == 1 else f"[node {node_id}]\n{tail}")
        return "\n".join(parts)

    def log_mark(self) -> dict[int, int]:
        """Each node's log size in bytes now (see :meth:`log_since`)."""
        mark = {}
        for node_id, node in self._nodes.items():
            try:
                mark[node_id] = node.log_path.stat().st_size
            except OSError:
                mark[node_id] = 0
        return mark

    def log_since(self, mark: Mapping[int, int], lines: int = 200) -> str:
        """The lines each node logged after ``mark`` (the last ``lines`` of them)."""
        parts = []
        for node_id, node in self._nodes.items():
            try:
                text = _read_from(node.log_path, mark.get(node_id, 0))
            except OSError:  # no log (a node that never started)
                text = ""
            if not text:
                continue
            kept = text.splitlines()[-lines:]
            parts.append("\n".join(kept if len(self._nodes) == 1 else [f"[node {node_id}]", *kept]))
        return "\n".join(parts)

    # ----------------------------------------------------------------- internals

    def _require_started(self) -> None:
        if not self._nodes:
            raise HarnessError("the cluster is not started: call start() or use it as a context")

    def _node(self, node_id: int) -> _Node:
        self._require_started()
        try:
            return self._nodes[node_id]
        except KeyError:
            raise HarnessError(
                f"no node {node_id}; this cluster has nodes {sorted(self._nodes)}"
            ) from None

    def _start_once(self) -> None:
        assert self.work_dir is not None
        ports = iter(_free_ports(2 * self.num_nodes))
        addresses = []
        for index in range(self.num_nodes):
            broker_port = (
                self._broker_ports[index] if self._broker_ports is not None else next(ports)
            )
            addresses.append(NodeAddress(index + 1, "127.0.0.1", broker_port, next(ports)))
        cluster_id = new_cluster_id()
        self._nodes = {}
        for address in addresses:
            home = self.work_dir / f"node-{address.node_id}"
            if home.exists():
                shutil.rmtree(home)  # a fresh data dir every start
            home.mkdir(parents=True)
            node = _Node(address, home)
            overrides = dict(self.extra_config)
            if self._node_config is not None:
                overrides.update(self._node_config(address))
            props = broker_properties(address, addresses, node.data_dir, overrides)
            node.config_path.write_text(render_properties(props), encoding="utf-8")
            self._nodes[address.node_id] = node
        for node in self._nodes.values():
            self._format(node, cluster_id)
        for node in self._nodes.values():
            self._launch(node)
        self.startup_seconds = self._wait_ready(expected_brokers=self.num_nodes)

    def _java_base(self) -> list[str]:
        assert self._java is not None and self._dist is not None and self.work_dir is not None
        return [
            self._java,
            f"-Dlog4j2.configurationFile={self.work_dir / 'log4j2.properties'}",
            "-cp",
            os.pathsep.join((self._dist.classpath, *self._extra_classpath)),
        ]

    def _format(self, node: _Node, cluster_id: str) -> None:
        argv = [
            *self._java_base(),
            "kafka.tools.StorageTool",
            "format",
            "--cluster-id",
            cluster_id,
            "--config",
            str(node.config_path),
            *format_features(self.share_enabled, self.share_version),
            *self._format_args,
        ]
        # StorageTool is a short-lived JVM: a small heap starts faster.
        argv.insert(1, "-Xmx512m")
        if self.die_with_parent:
            # Synchronous in this thread, so this thread outlives it (PDEATHSIG caveat).
            argv = _lifeline.pdeathsig_argv(argv)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        output = done.stdout + done.stderr
        (node.home / "format.log").write_text(output, encoding="utf-8")
        if done.returncode != 0:
            tail = "\n".join(output.strip().splitlines()[-40:])
            raise BrokerStartError(
                f"formatting the data directory of node {node.address.node_id} failed "
                f"(kafka.tools.StorageTool exited with {done.returncode}):\n{tail}"
            )
        self.bootstrap_features = {name: int(level) for name, level in _FEATURE_RE.findall(output)}

    def _launch(self, node: _Node) -> None:
        argv = [*self._java_base(), "kafka.Kafka", str(node.config_path)]
        argv[1:1] = self.jvm_options
        node.close_log()
        node.log_handle = open(node.log_path, "ab")  # noqa: SIM115 - owned by the node
        popen = _lifeline.launch if self.die_with_parent else subprocess.Popen
        node.process = popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=node.log_handle,
            stderr=subprocess.STDOUT,
            cwd=node.home,
            # Own session: Ctrl+C in the terminal reaches the test runner, which
            # then stops the broker cleanly instead of it dying mid-write. (The
            # lifeline still kills it if the runner dies without stopping it.)
            start_new_session=True,
        )

    def _check_alive(self) -> None:
        for node_id, node in self._nodes.items():
            if node.process is not None and node.process.poll() is not None:
                raise BrokerStartError(
                    f"Kafka node {node_id} (Kafka {self._version}) exited with code "
                    f"{node.process.returncode} during start-up. Its log "
                    f"({node.log_path}) ends with:\n{_tail(node.log_path, 40)}"
                )

    def _wait_ready(self, expected_brokers: int) -> float:
        return wait_until_ready(
            ",".join(n.address.bootstrap for n in self._nodes.values() if n.running),
            expected_brokers=expected_brokers,
            timeout_s=self.start_timeout_s,
            check_alive=self._check_alive,
            describe_log=lambda: self.log_tail(40),
        )

    def _terminate(self, node: _Node, *, kill: bool) -> None:
        process = node.process
        if process is not None and process.poll() is None:
            if kill:
                process.kill()
            else:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=self.stop_timeout_s)
                except subprocess.TimeoutExpired:
                    process.kill()
            process.wait()
        if process is not None and self.die_with_parent:
            _lifeline.forget_pid(process.pid)
        node.close_log()

    def _shutdown_all(self, *, kill: bool) -> None:
        # Signal every node first, so combined nodes shut down together instead
        # of the last one waiting for a quorum that is already gone.
        for node in self._nodes.values():
            if node.process is not None and node.process.poll() is None:
                if kill:
                    node.process.kill()
                else:
                    node.process.send_signal(signal.SIGTERM)
        for node in self._nodes.values():
            self._terminate(node, kill=kill)

    def _cleanup_work_dir(self) -> None:
        if self._owns_work_dir and self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            if self.die_with_parent:
                _lifeline.forget_dir(self.work_dir)
            self.work_dir = None


def _free_ports(count: int) -> list[int]:
    """Ask the OS for ``count`` distinct free ports on 127.0.0.1."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _read_from(path: Path, offset: int) -> str:
    """The file's text from byte ``offset`` on (from its start if it is shorter
    now), the last 256 KiB at most. Raises OSError."""
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        handle.seek(max(offset, size - 256 * 1024) if size >= offset else 0)
        return handle.read().decode("utf-8", errors="replace")


def _tail(path: Path, lines: int) -> str:
    try:
        text = _read_from(path, 0)
    except OSError as exc:
        return f"(no log: {exc})"
    return "\n".join(text.splitlines()[-lines:])
