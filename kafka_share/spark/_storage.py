"""Where staged chunks live: an atomic "create if absent" per storage kind.

The staging store (``_staging``) names chunks by relative paths
(``b<seq>/s<slot>/<chunk>.json``); a backend here stores their bytes under a
root, and guarantees one thing above all: of several writers of one name, one
wins, and every reader sees the winner's complete bytes or nothing.

- :class:`PosixStorage` (a path or ``file:`` URI; a local disk, or a shared
  mount such as NFS): a fully written, fsynced temporary file hard-linked onto
  the name (``link`` fails if the name exists, atomically, on POSIX and NFS);
  where the file system has no hard links, an exclusive create
  (``O_CREAT|O_EXCL``), whose readers rely on the chunk's checksum line to tell
  a chunk still being written from a finished one.
- :class:`~kafka_share.spark._webhdfs.WebHdfsStorage` (``webhdfs://``): HDFS
  through its REST interface, which the executors' Python reaches without a
  JVM: a temporary file renamed onto the name (HDFS renames atomically in the
  NameNode, and refuses to rename onto an existing file). ``_staging`` picks
  the backend by the location's scheme.

Object stores (``s3://``, ``gs://``, ``abfs://``) are refused: what Python
reaches of them through ``pyarrow.fs`` has no create-if-absent, and a
last-writer-wins put would let two attempts of a slot both believe they won.
"""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from pathlib import Path
from typing import Protocol
from urllib.parse import urlparse

__all__ = ["PosixStorage", "StagingError", "Storage", "UnsupportedLocationError"]


class StagingError(RuntimeError):
    """The staging location cannot be used, or holds a chunk that is not valid."""


class UnsupportedLocationError(ValueError):
    """A stagingLocation of a kind no backend here can write atomically."""


class Storage(Protocol):
    """Bytes under relative ``/``-separated names below one root."""

    location: str

    def put_if_absent(self, name: str, data: bytes) -> bool:
        """Store ``data`` as ``name`` unless it exists: True if this call did."""
        ...

    def read(self, name: str) -> bytes | None:
        """The bytes of ``name``; None if it does not exist."""
        ...

    def list_names(self, folder: str) -> list[str]:
        """The names directly in ``folder`` ("" for the root); [] if it does not exist."""
        ...

    def delete_tree(self, folder: str) -> None:
        """Remove ``folder`` and everything in it (nothing if it does not exist)."""
        ...

    def check_writable(self) -> None:
        """Create the root and prove it writable, or raise StagingError saying why."""
        ...

    def describe(self, name: str) -> str:
        """``name`` as a user would look for it (for messages)."""
        ...


class PosixStorage:
    """A directory on a local disk or a shared POSIX mount (see the module docstring)."""

    def __init__(self, location: str) -> None:
        self.location = location
        parsed = urlparse(location)
        self.root = Path(parsed.path if parsed.scheme == "file" else location)
        self._links = True

    def describe(self, name: str) -> str:
        return str(self.root / name)

    def put_if_absent(self, name: str, data: bytes) -> bool:
        final = self.root / name
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StagingError(
                f"cannot create {final.parent} under stagingLocation {self.location!r}: {exc}"
            ) from exc
        if self._links:
            written = self._link_into_place(final, data)
            if written is not None:
                return written
        return self._create_exclusive(final, data)

    def _link_into_place(self, final: Path, data: bytes) -> bool | None:
        tmp = final.parent / f".{final.name}.{uuid.uuid4().hex}.tmp"
        try:
            with open(tmp, "xb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, final)
            except FileExistsError:
                return False
            except OSError as exc:
                if exc.errno in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK,
                                 errno.EXDEV, errno.ENOSYS):
                    self._links = False  # no hard links here: exclusive create instead
                    return None
                raise
            _fsync_dir(final.parent)
            return True
        except OSError as exc:
            raise StagingError(f"cannot write {final}: {exc}") from exc
        finally:
            try:
                tmp.unlink()
            except FileNotFoundError:
                pass

    @staticmethod
    def _create_exclusive(final: Path, data: bytes) -> bool:
        try:
            fd = os.open(final, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        except OSError as exc:
            raise StagingError(f"cannot write {final}: {exc}") from exc
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        _fsync_dir(final.parent)
        return True

    def read(self, name: str) -> bytes | None:
        path = self.root / name
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StagingError(f"cannot read {path}: {exc}") from exc

    def list_names(self, folder: str) -> list[str]:
        path = self.root / folder
        try:
            return [p.name for p in path.iterdir()]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StagingError(f"cannot list {path} under stagingLocation "
                               f"{self.location!r}: {exc}") from exc

    def delete_tree(self, folder: str) -> None:
        shutil.rmtree(self.root / folder, ignore_errors=True)

    def check_writable(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self.root / f".probe-{uuid.uuid4().hex}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise StagingError(
                f"option stagingLocation {self.location!r} is not a writable directory: {exc}"
            ) from exc


def _fsync_dir(folder: Path) -> None:
    # The new name must survive a crash too, not only the file's bytes.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot fsync a directory; the link is as durable as they get
    finally:
        os.close(fd)
