"""The staging store of the ``kafka-share`` source: what each read slot acquired.

A micro-batch is read by ``slots`` tasks. Slot ``i`` of batch ``seq`` is a
sequence of *chunks* ``0, 1, 2, ...``: each is either the coordinates of one
poll's records (topic, partition, offset ranges with their delivery counts; a
few hundred bytes, never the data) or the END marker, which closes the slot.
A chunk is written once, with an atomic "create if absent": whoever writes
chunk ``j`` first decides what it is, and every other attempt of the slot (a
retry, a speculative copy, a re-run after a restart) reads it back instead. So
the slot's records are fixed the moment each chunk is written, however many
attempts race, and a re-run yields exactly the same rows.

Layout under the staging root::

    <root>/b<seq>/s<slot>/<chunk>.json

Storage: a file system path (or ``file:`` URI) that every executor and the
driver see, as Spark requires of checkpoints: a local disk for ``local[N]``, a
shared POSIX mount (NFS, a cluster file system) for a cluster. "Create if
absent" is a hard link of a fully written and fsynced temporary file onto the
chunk's name (``link`` fails if the name exists, atomically, on POSIX and NFS);
where the file system has no hard links, an exclusive create
(``O_CREAT|O_EXCL``) with a checksum line that readers verify, so a chunk still
being written is never taken for a finished one.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kafka_share.spark._options import SparkOptionError

__all__ = ["Chunk", "Span", "StagingError", "StagingStore"]

_FORMAT = 1
#: How long a reader waits for a chunk another attempt is still writing
#: (exclusive-create file systems only) before it calls the chunk corrupt.
_PARTIAL_WAIT_S = 10.0


class StagingError(RuntimeError):
    """The staging location cannot be used, or holds a chunk that is not valid."""


#: (topic, partition, first offset, last offset, delivery count): records with
#: consecutive offsets and one delivery count
Span = tuple[str, int, int, int, int]


class Chunk:
    """One staged chunk: the spans of one poll's records, or the END marker."""

    __slots__ = ("end", "spans", "stats")

    def __init__(
        self, spans: list[Span], *, end: bool = False, stats: dict[str, int] | None = None
    ) -> None:
        self.spans = spans
        self.end = end
        #: END only: what the attempt that closed the slot counted (see _slots)
        self.stats = stats or {}

    @property
    def records(self) -> int:
        return sum(last - first + 1 for _, _, first, last, _ in self.spans)

    def to_bytes(self) -> bytes:
        body: dict[str, Any] = {"v": _FORMAT}
        if self.end:
            body["end"] = True
            body["stats"] = self.stats
        else:
            body["spans"] = [list(s) for s in self.spans]
        text = json.dumps(body, separators=(",", ":")).encode()
        return text + b"\n" + hashlib.sha256(text).hexdigest().encode() + b"\n"

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> Chunk | None:
        """The chunk in ``data``; None if it is not complete yet (an exclusive
        create still being written). Raises StagingError for anything else."""
        text, sep, rest = data.partition(b"\n")
        if not sep or rest.strip() != hashlib.sha256(text).hexdigest().encode():
            return None
        try:
            body = json.loads(text)
            if body.get("v") != _FORMAT:
                raise StagingError(
                    f"staged chunk {where} has format {body.get('v')!r}; this kafka-share "
                    f"reads format {_FORMAT}"
                )
            if body.get("end"):
                return cls([], end=True, stats={str(k): int(v) for k, v in body["stats"].items()})
            spans = [(str(t), int(p), int(a), int(b), int(d)) for t, p, a, b, d in body["spans"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise StagingError(f"staged chunk {where} is not valid: {exc}") from None
        return cls(spans)


def spans_of(topics: Any, partitions: Any, offsets: Any, counts: Any) -> list[Span]:
    """Runs of consecutive offsets with one delivery count, per partition, from
    a poll's Arrow columns (rows in any order), sorted.

    Vectorised: a slot stages every poll, and a loop per record here cost as much
    CPU as decoding the records."""
    n = len(offsets)
    if n == 0:
        return []
    topic_codes = topics if pa.types.is_dictionary(topics.type) else pc.dictionary_encode(topics)
    if isinstance(topic_codes, pa.ChunkedArray):
        topic_codes = topic_codes.combine_chunks()
    names = topic_codes.dictionary.to_pylist()
    code = _ints(topic_codes.indices)
    part, off, count = _ints(partitions), _ints(offsets), _ints(counts)
    order = np.lexsort((off, part, code))
    code, part, off, count = code[order], part[order], off[order], count[order]
    breaks = np.flatnonzero(
        (code[1:] != code[:-1]) | (part[1:] != part[:-1]) | (count[1:] != count[:-1])
        | (off[1:] != off[:-1] + 1)
    ) + 1
    starts = [0, *breaks.tolist()]
    lasts = [b - 1 for b in starts[1:]] + [n - 1]
    spans = [
        (names[int(code[s])], int(part[s]), int(off[s]), int(off[e]), int(count[s]))
        for s, e in zip(starts, lasts, strict=True)
    ]
    spans.sort()
    return spans


def _ints(column: Any) -> Any:
    return np.asarray(pa.chunked_array([column]).to_numpy(), dtype=np.int64)


def _root_path(location: str) -> Path:
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme else location)
    if len(parsed.scheme) == 1:  # a Windows drive letter
        return Path(location)
    raise SparkOptionError(
        f"option stagingLocation {location!r}: only file system paths are supported (a local "
        "directory for local[N], or a shared POSIX mount every executor and the driver see, "
        f"such as NFS), not {parsed.scheme}:// storage"
    )


class StagingStore:
    """Chunks of read slots under one staging root (see the module docstring)."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.root = _root_path(location)
        self._links = True

    def _slot_dir(self, seq: int, slot: int) -> Path:
        return self.root / f"b{seq}" / f"s{slot}"

    def _chunk_path(self, seq: int, slot: int, chunk: int) -> Path:
        return self._slot_dir(seq, slot) / f"{chunk}.json"

    def put_if_absent(self, seq: int, slot: int, chunk: int, value: Chunk) -> bool:
        """Write chunk ``chunk`` of slot ``slot`` of batch ``seq`` unless it exists.
        True if this call wrote it; False if another writer did first."""
        folder = self._slot_dir(seq, slot)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StagingError(
                f"cannot create {folder} under stagingLocation {self.location!r}: {exc}"
            ) from exc
        final = self._chunk_path(seq, slot, chunk)
        data = value.to_bytes()
        if self._links:
            written = self._link_into_place(folder, final, data)
            if written is not None:
                return written
        return self._create_exclusive(final, data)

    def _link_into_place(self, folder: Path, final: Path, data: bytes) -> bool | None:
        tmp = folder / f".{final.name}.{uuid.uuid4().hex}.tmp"
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
            _fsync_dir(folder)
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

    def get(self, seq: int, slot: int, chunk: int) -> Chunk | None:
        """Chunk ``chunk`` of the slot, or None if nobody has written it."""
        path = self._chunk_path(seq, slot, chunk)
        deadline = time.monotonic() + _PARTIAL_WAIT_S
        while True:
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise StagingError(f"cannot read {path}: {exc}") from exc
            value = Chunk.from_bytes(data, str(path))
            if value is not None:
                return value
            if time.monotonic() >= deadline:
                raise StagingError(
                    f"staged chunk {path} is incomplete after {_PARTIAL_WAIT_S:.0f} s (a "
                    "writer died half way?); delete the batch's folder to read it anew"
                )
            time.sleep(0.05)  # another attempt is still writing it (exclusive create)

    def slot_chunks(self, seq: int, slot: int) -> Iterator[Chunk]:
        """The slot's chunks in order, up to its END marker or the first gap."""
        chunk = 0
        while True:
            value = self.get(seq, slot, chunk)
            if value is None:
                return
            yield value
            if value.end:
                return
            chunk += 1

    def batches(self) -> list[int]:
        """The batches with staged chunks, in order."""
        try:
            names = [p.name for p in self.root.iterdir() if p.is_dir()]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StagingError(f"cannot list stagingLocation {self.location!r}: {exc}") from exc
        return sorted(int(n[1:]) for n in names if n.startswith("b") and n[1:].isdigit())

    def slots(self, seq: int) -> list[int]:
        folder = self.root / f"b{seq}"
        try:
            names = [p.name for p in folder.iterdir()]
        except FileNotFoundError:
            return []
        return sorted(int(n[1:]) for n in names if n.startswith("s") and n[1:].isdigit())

    def delete_through(self, seq: int) -> None:
        """Forget every batch up to ``seq`` (Spark has committed them)."""
        for b in self.batches():
            if b <= seq:
                self.delete_batch(b)

    def delete_batch(self, seq: int) -> None:
        shutil.rmtree(self.root / f"b{seq}", ignore_errors=True)

    def check_writable(self) -> None:
        """Create the root now, so that a bad location fails the query at its start."""
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
