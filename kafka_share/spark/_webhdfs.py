"""Staged chunks on HDFS through WebHDFS, its REST interface, in plain Python.

The executors' Python workers have no JVM, so HDFS's own RPC is out of reach;
every NameNode serves the same namespace over HTTP (``dfs.webhdfs.enabled``,
on by default, at ``dfs.namenode.http-address``, port 9870 by default).

Create-if-absent: the chunk goes to a temporary file of the writer's own, then
RENAME onto the chunk's name. HDFS renames in the NameNode, atomically, and
refuses to rename a file onto an existing one ("boolean": false), so of racing
writers exactly one wins and a reader never sees a chunk half written. A chunk
that fits (almost all: a poll's offset ranges, compressed) is an extended
attribute of an empty file rather than its bytes, which is 6-10x faster (see
``WebHdfsStorage._write``); where the NameNode has extended attributes turned
off, chunks are the files' bytes.

Authentication: HDFS's simple authentication (``user.name``): the user is the
location's user part (``webhdfs://alice@namenode:9870/...``), else
``HADOOP_USER_NAME``, else the operating system's user, as Hadoop's own
clients choose it. A NameNode that demands Kerberos (SPNEGO) is refused with
an error that says so.
"""

from __future__ import annotations

import base64
import getpass
import json
import os
import uuid
import zlib
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.parse import quote, urlencode, urlparse
from urllib.request import Request, urlopen

from kafka_share.spark._storage import StagingError

__all__ = ["DEFAULT_HTTP_PORT", "WebHdfsStorage"]

#: dfs.namenode.http-address's default port (Hadoop 3)
DEFAULT_HTTP_PORT = 9870
#: Per request; a slot's task fails with a clear error rather than hang.
_TIMEOUT_S = 30.0
#: The extended attribute that holds a small chunk (see ``_write``).
_XATTR = "user.kafka-share.chunk"
#: HDFS takes attributes up to 16,384 bytes, name and value
#: (dfs.namenode.fs-limits.max-xattr-size); this leaves room to spare.
_XATTR_MAX_BYTES = 12_000


class WebHdfsStorage:
    """A folder on HDFS, written and read over WebHDFS (see the module docstring)."""

    def __init__(self, location: str) -> None:
        parsed = urlparse(location)
        if not parsed.hostname:
            raise StagingError(
                f"stagingLocation {location!r} names no NameNode: write "
                "webhdfs://<namenode>:<http port>/<absolute path>"
            )
        self.location = location
        port = parsed.port or DEFAULT_HTTP_PORT
        self.namenode = f"http://{parsed.hostname}:{port}"
        self._netloc = f"{parsed.hostname}:{port}"
        self.root = "/" + parsed.path.strip("/")
        self.user = (parsed.username or os.environ.get("HADOOP_USER_NAME")
                     or getpass.getuser())
        self._folders: set[str] = set()  # made already by this process
        self._xattrs = True  # the NameNode takes extended attributes

    def _path(self, name: str) -> str:
        return f"{self.root.rstrip('/')}/{name}".rstrip("/") or "/"

    def describe(self, name: str) -> str:
        return self._where(self._path(name))

    def _where(self, path: str) -> str:
        return f"webhdfs://{self._netloc}{path}"

    # -- the operations --------------------------------------------------------------

    def put_if_absent(self, name: str, data: bytes) -> bool:
        final = self._path(name)
        folder, _, base = final.rpartition("/")
        self._mkdirs(folder or "/")
        # A temporary file left by a writer that died is harmless: it is not a
        # chunk's name, and goes with its batch's folder.
        tmp = f"{folder}/.{base}.{uuid.uuid4().hex}.tmp"
        self._write(tmp, data)
        if self._json("PUT", tmp, "RENAME", destination=final)["boolean"] is True:
            return True
        self._call("DELETE", tmp, "DELETE", missing_ok=True)
        if not self._exists(final):
            raise StagingError(f"HDFS refused to rename {self._where(tmp)} to {final}, "
                               "which does not exist")
        return False

    def read(self, name: str) -> bytes | None:
        path = self._path(name)
        if self._xattrs:
            try:
                body = self._call("GET", path, "GETXATTRS", {"encoding": "base64"},
                                  missing_ok=True)
            except StagingError as exc:
                if not _xattrs_off(exc):
                    raise
                self._xattrs = False
            else:
                return self._from_xattrs(path, body)
        return self._call("GET", path, "OPEN", missing_ok=True)

    def _from_xattrs(self, path: str, body: bytes | None) -> bytes | None:
        if body is None:
            return None
        for xattr in _decode(body, self.namenode).get("XAttrs", []):
            if xattr.get("name") == _XATTR and isinstance(xattr.get("value"), str):
                try:
                    return zlib.decompress(base64.b64decode(xattr["value"][2:]))
                except (ValueError, zlib.error) as exc:
                    raise StagingError(f"staged chunk {self._where(path)} is not valid: "
                                       f"{exc}") from None
        return self._call("GET", path, "OPEN", missing_ok=True)

    def list_names(self, folder: str) -> list[str]:
        body = self._call("GET", self._path(folder), "LISTSTATUS", missing_ok=True)
        if body is None:
            return []
        try:
            statuses = _decode(body, self.namenode)["FileStatuses"]["FileStatus"]
            return [str(s["pathSuffix"]) for s in statuses]
        except (KeyError, TypeError):
            raise StagingError(f"{self.namenode} answered LISTSTATUS of "
                               f"{self.describe(folder)} with {body[:200]!r}") from None

    def delete_tree(self, folder: str) -> None:
        self._call("DELETE", self._path(folder), "DELETE", {"recursive": "true"},
                   missing_ok=True)
        gone = self._path(folder)
        self._folders = {f for f in self._folders if f != gone and not f.startswith(gone + "/")}

    def check_writable(self) -> None:
        self._mkdirs(self.root)
        probe = f"{self.root.rstrip('/')}/.probe-{uuid.uuid4().hex}"
        self._create(probe, b"")
        self._call("DELETE", probe, "DELETE", missing_ok=True)

    # -- WebHDFS -----------------------------------------------------------------------

    def _mkdirs(self, folder: str) -> None:
        if folder not in self._folders:
            self._json("PUT", folder, "MKDIRS")
            self._folders.add(folder)

    def _exists(self, path: str) -> bool:
        return self._call("GET", path, "GETFILESTATUS", missing_ok=True) is not None

    def _write(self, path: str, data: bytes) -> None:
        """An empty file with ``data`` in an extended attribute where it fits;
        else a file holding ``data``.

        A file with bytes is closed only once its block is reported complete,
        which the DataNode waits for in steps of 400 ms (HDFS's
        ``dfs.client.block.write.locateFollowingBlock.initial.delay.ms``):
        measured 440-470 ms per chunk against 60-80 ms for an empty file and
        an extended attribute, which has no block."""
        packed = zlib.compress(data, 1)
        if self._xattrs and len(packed) <= _XATTR_MAX_BYTES:
            self._create(path, b"")
            value = "0s" + base64.b64encode(packed).decode()
            try:
                self._call("PUT", path, "SETXATTR",
                           {"xattr.name": _XATTR, "xattr.value": value, "flag": "CREATE"})
                return
            except StagingError as exc:
                if not _xattrs_off(exc):
                    raise
                # dfs.namenode.xattrs.enabled=false: the bytes go into files.
                self._xattrs = False
                self._call("DELETE", path, "DELETE", missing_ok=True)
        self._create(path, data)

    def _create(self, path: str, data: bytes) -> None:
        # noredirect: the NameNode names the DataNode in its answer rather than
        # redirecting, so the bytes are sent once, to the DataNode only.
        where = self._json("PUT", path, "CREATE", overwrite="false", noredirect="true")
        self._send(Request(str(where["Location"]), data=data, method="PUT",
                           headers={"Content-Type": "application/octet-stream"}), path)

    def _json(self, method: str, path: str, op: str, **params: str) -> dict[str, Any]:
        body = self._call(method, path, op, params)
        return _decode(body or b"", self.namenode)

    def _call(self, method: str, path: str, op: str, params: dict[str, str] | None = None,
              *, missing_ok: bool = False) -> bytes | None:
        query = urlencode({"op": op, "user.name": self.user, **(params or {})})
        url = f"{self.namenode}/webhdfs/v1{quote(path)}?{query}"
        try:
            return self._send(Request(url, method=method), path)
        except _NotFoundError:
            if missing_ok:
                return None
            raise StagingError(f"{self._where(path)} does not exist") from None

    def _send(self, request: Request, path: str) -> bytes:
        try:
            with urlopen(request, timeout=_TIMEOUT_S) as response:
                return bytes(response.read())
        except HTTPError as exc:
            raise self._failure(exc, path) from None
        except (URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise StagingError(
                f"cannot reach WebHDFS for {self._where(path)} "
                f"({request.get_method()} {urlparse(request.full_url).netloc}): {reason}"
            ) from None

    def _failure(self, exc: HTTPError, path: str) -> Exception:
        try:
            remote = json.loads(exc.read())["RemoteException"]
            kind, message = str(remote.get("exception")), str(remote.get("message"))
        except (ValueError, KeyError, TypeError):
            kind, message = "", f"HTTP {exc.code} {exc.reason}"
        if exc.code == 404 or kind == "FileNotFoundException":
            return _NotFoundError()
        where = self._where(path)
        if exc.code == 401:
            return StagingError(
                f"WebHDFS asks for authentication at {where} (Kerberos/SPNEGO?): staging on "
                "HDFS speaks simple authentication only (user.name); use a shared POSIX "
                "mount for a secured cluster"
            )
        if kind == "AccessControlException":
            return StagingError(f"HDFS denies user {self.user!r} at {where}: {message}")
        if kind == "StandbyException":
            return StagingError(
                f"the NameNode at {self.namenode} is a standby: name the active NameNode "
                f"in stagingLocation ({message})"
            )
        return StagingError(f"WebHDFS failed at {where}: {kind or 'error'}: {message}")


def _xattrs_off(exc: StagingError) -> bool:
    # The NameNode's words when dfs.namenode.xattrs.enabled is false.
    return "dfs.namenode.xattrs.enabled" in str(exc)


class _NotFoundError(Exception):
    pass


def _decode(body: bytes, namenode: str) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except ValueError:
        raise StagingError(
            f"{namenode} answered WebHDFS with something not JSON: {body[:200]!r}"
        ) from None
    if not isinstance(value, dict):
        raise StagingError(f"{namenode} answered WebHDFS with {body[:200]!r}")
    return value
