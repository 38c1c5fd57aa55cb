"""A real HDFS for the staging tests: a NameNode and a DataNode as processes of
their own, from Apache Hadoop's jars on Maven Central.

``hadoop-client-minicluster`` carries the NameNode's and DataNode's classes
(shaded, with everything they need) next to ``hadoop-client-api`` and
``hadoop-client-runtime``; Maven resolves the three into the harness's cache
once (about 100 MB). :class:`HdfsCluster` formats a name directory, starts the
two daemons on free loopback ports with a configuration of its own, and waits
until a file can be written through WebHDFS, the interface the Spark source's
executors use.

    with HdfsCluster(tmp_path / "hdfs") as hdfs:
        location = hdfs.webhdfs_url("/staging/q1")   # webhdfs://127.0.0.1:<port>/staging/q1
"""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path
from urllib.error import URLError

from kafka_share.testing import _lifeline
from kafka_share.testing.errors import HarnessError
from kafka_share.testing.java import find_java
from kafka_share.testing.local import _free_ports
from kafka_share.testing.maven import ensure_maven_libs

__all__ = ["HADOOP_VERSION", "HdfsCluster"]

#: The Hadoop release PySpark 4.x ships its client jars of.
HADOOP_VERSION = "3.5.0"
_NAMENODE = "org.apache.hadoop.hdfs.server.namenode.NameNode"
_DATANODE = "org.apache.hadoop.hdfs.server.datanode.DataNode"


class HdfsCluster:
    """One NameNode and one DataNode under ``directory`` (see the module docstring).

    The user who starts it is HDFS's superuser; ``superuser`` names it in
    WebHDFS requests (any name works for a fresh cluster's root, which is
    world-writable only for the superuser: tests that need a denial use
    another name)."""

    def __init__(self, directory: Path, *, heap_mb: int = 256,
                 hdfs_site: dict[str, str] | None = None) -> None:
        self.directory = Path(directory)
        # Distinct ports, all held open while chosen.
        self.rpc_port, self.http_port, *self._datanode_ports = _free_ports(5)
        self._heap_mb = heap_mb
        #: extra hdfs-site.xml properties (over the harness's own)
        self._hdfs_site = dict(hdfs_site or {})
        self._processes: list[subprocess.Popen[bytes]] = []
        self.superuser = os.environ.get("HADOOP_USER_NAME") or getpass.getuser()

    @property
    def conf_dir(self) -> Path:
        return self.directory / "conf"

    def webhdfs_url(self, path: str = "/", user: str | None = None) -> str:
        """``path`` on this cluster as a ``webhdfs://`` location."""
        who = f"{user}@" if user else ""
        return f"webhdfs://{who}127.0.0.1:{self.http_port}/{path.lstrip('/')}"

    def start(self) -> HdfsCluster:
        libs = ensure_maven_libs(
            f"hadoop-{HADOOP_VERSION}",
            f"org.apache.hadoop:hadoop-client-minicluster:{HADOOP_VERSION}",
        )
        self.directory.mkdir(parents=True, exist_ok=True)
        self._write_configs()
        classpath = f"{self.conf_dir}{os.pathsep}{libs}/*"
        java = [find_java(), f"-Xmx{self._heap_mb}m", "-cp", classpath]
        done = subprocess.run(
            [*java, _NAMENODE, "-format", "-force", "-nonInteractive"],
            capture_output=True, text=True, timeout=120, check=False,
        )
        if done.returncode != 0:
            raise HarnessError(f"formatting the NameNode failed ({done.returncode}): "
                               f"{done.stderr[-3000:]}")
        try:
            for main, log in ((_NAMENODE, "namenode.log"), (_DATANODE, "datanode.log")):
                with open(self.directory / log, "wb") as out:
                    self._processes.append(
                        _lifeline.launch([*java, main], stdout=out, stderr=subprocess.STDOUT))
            self._wait_writable()
        except BaseException:
            self.stop()
            raise
        return self

    def _write_configs(self) -> None:
        d = self.directory
        dn_data, dn_http, dn_ipc = self._datanode_ports
        self.conf_dir.mkdir(exist_ok=True)
        _write_site(self.conf_dir / "core-site.xml", {
            "fs.defaultFS": f"hdfs://127.0.0.1:{self.rpc_port}",
            "hadoop.tmp.dir": str(d / "tmp"),
        })
        _write_site(self.conf_dir / "hdfs-site.xml", {
            "dfs.namenode.name.dir": str(d / "name"),
            "dfs.datanode.data.dir": str(d / "data"),
            "dfs.replication": "1",
            "dfs.namenode.rpc-address": f"127.0.0.1:{self.rpc_port}",
            "dfs.namenode.http-address": f"127.0.0.1:{self.http_port}",
            "dfs.datanode.address": f"127.0.0.1:{dn_data}",
            "dfs.datanode.http.address": f"127.0.0.1:{dn_http}",
            "dfs.datanode.ipc.address": f"127.0.0.1:{dn_ipc}",
            # WebHDFS redirects writes to the DataNode by this name.
            "dfs.datanode.hostname": "127.0.0.1",
            # No secondary NameNode, no waiting for block reports of a new cluster.
            "dfs.namenode.safemode.extension": "0",
            "dfs.namenode.secondary.http-address": "127.0.0.1:0",
            **self._hdfs_site,
        })

    def _wait_writable(self, timeout_s: float = 90.0) -> None:
        # Writable means the DataNode has registered too: a file's bytes go there.
        base = f"http://127.0.0.1:{self.http_port}/webhdfs/v1/.ready-probe"
        query = f"user.name={self.superuser}"
        deadline = time.monotonic() + timeout_s
        last = "nothing yet"
        while time.monotonic() < deadline:
            for process in self._processes:
                if process.poll() is not None:
                    raise HarnessError(f"an HDFS daemon exited with {process.returncode}; "
                                       f"see the logs in {self.directory}")
            try:
                answer = _http("PUT", f"{base}?op=CREATE&overwrite=true&noredirect=true&{query}")
                _http("PUT", json.loads(answer)["Location"], b"ready")
                _http("DELETE", f"{base}?op=DELETE&{query}")
                return
            except (URLError, OSError, ValueError, KeyError) as exc:
                last = str(exc)
                time.sleep(0.5)
        raise HarnessError(f"HDFS was not writable within {timeout_s:.0f} s ({last}); see "
                           f"the logs in {self.directory}")

    def stop(self) -> None:
        for process in reversed(self._processes):
            process.terminate()
        for process in self._processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            _lifeline.forget_pid(process.pid)
        self._processes = []

    def __enter__(self) -> HdfsCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _write_site(path: Path, properties: dict[str, str]) -> None:
    body = "".join(f"  <property><name>{k}</name><value>{v}</value></property>\n"
                   for k, v in properties.items())
    path.write_text(f"<configuration>\n{body}</configuration>\n", encoding="utf-8")


def _http(method: str, url: str, data: bytes | None = None) -> bytes:
    with urllib.request.urlopen(urllib.request.Request(url, data=data, method=method),
                                timeout=10) as response:
        return bytes(response.read())
