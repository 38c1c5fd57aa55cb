"""Tie test brokers to the life of the Python process that started them.

A broker JVM runs in its own session (so Ctrl+C reaches the test runner, which
then stops it cleanly). The flip side: when the test runner dies without running
its cleanup (SIGTERM from a CI timeout kills a Python process without ``atexit``
or ``finally`` blocks; SIGKILL or a crash skip everything), the JVM and its
temporary directory would outlive it. Two independent mechanisms prevent that:

1. **PR_SET_PDEATHSIG (Linux).** Each JVM is started through a tiny exec
   wrapper (``python -c`` with :data:`_PDEATHSIG_EXEC`) that asks the kernel to
   SIGKILL it when its parent dies, then ``exec``\\s Java (the setting survives
   ``exec``). The wrapper checks that the parent is still the expected one, to
   close the race where the parent dies before ``prctl`` ran. A wrapper rather
   than ``preexec_fn``, because ``preexec_fn`` may deadlock in a process with
   threads, and test processes have many.

   The kernel sends the signal when the *thread* that forked the child exits,
   not the process. A cluster may be started or a node restarted from a
   short-lived worker thread, so every broker launch is handed to one
   long-lived daemon thread (:class:`_Launcher`), which lives until the process
   exits. The main thread would work as well but may be busy (or blocked in the
   very call that wants to launch).

2. **A reaper process (every platform).** One small stdlib-only Python process
   per test process (:data:`_REAPER_SOURCE`) holds the read end of a pipe whose
   only write end belongs to the test process. It is told the pids of running
   brokers and the temporary directories to remove. When the test process ends
   in any way, SIGKILL included, the kernel closes the write end; the reaper
   reads EOF, SIGKILLs the brokers still registered, waits for them to exit and
   removes the directories. It ignores SIGINT/SIGTERM/SIGHUP and runs in its own
   session, so a signal sent to the whole process group (what CI runners do)
   does not take it down before it has done its job. On macOS, which has no
   ``prctl``, it is the only mechanism; on Linux it is what removes the
   temporary directory after SIGTERM or SIGKILL.

This module installs no signal handler: a library taking over the
application's SIGTERM disposition would change how the application exits,
and the reaper performs the cleanup whatever signal ended the process.

Caveat: a child created with ``os.fork()`` without ``exec`` (e.g.
``multiprocessing`` with the ``fork`` start method) inherits the pipe's write
end, so the reaper acts only once that child has exited too.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import logging
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

__all__ = ["forget_dir", "forget_pid", "launch", "pdeathsig_argv", "track_dir", "track_pid"]

log = logging.getLogger(__name__)

_HAS_PDEATHSIG = sys.platform.startswith("linux")

#: Run as ``python -I -c _PDEATHSIG_EXEC <parent pid> <program> <args...>``.
_PDEATHSIG_EXEC = """\
import ctypes, os, signal, sys
PR_SET_PDEATHSIG = 1
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
    sys.exit("prctl(PR_SET_PDEATHSIG) failed: " + os.strerror(ctypes.get_errno()))
if os.getppid() != int(sys.argv[1]):
    sys.exit(1)  # the parent died before prctl: nobody would stop this broker
os.execvp(sys.argv[2], sys.argv[2:])
"""

#: The reaper: reads ``pid N`` / ``unpid N`` / ``dir PATH`` / ``undir PATH`` lines
#: from stdin until EOF, then kills what is registered and removes the directories.
_REAPER_SOURCE = """\
import os, shutil, signal, sys, time
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)

def start_time(pid):
    # Field 22 of /proc/PID/stat (after the parenthesised name): tells a recycled pid apart.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return None

def alive(pid, started):
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rpartition(")")[2].split()
        return fields[0] not in ("Z", "X") and (started is None or fields[19] == started)
    except FileNotFoundError:
        return False
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            pass
        return True

pids, dirs = {}, set()
for raw in sys.stdin.buffer:
    command, _, arg = raw.decode("utf-8", "replace").rstrip("\\n").partition(" ")
    if command == "pid":
        pids[int(arg)] = start_time(int(arg))
    elif command == "unpid":
        pids.pop(int(arg), None)
    elif command == "dir":
        dirs.add(arg)
    elif command == "undir":
        dirs.discard(arg)
# EOF: the process that started the brokers is gone.
for pid, started in list(pids.items()):
    if alive(pid, started):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
deadline = time.monotonic() + 30
while time.monotonic() < deadline and any(alive(p, s) for p, s in pids.items()):
    time.sleep(0.05)
for path in dirs:
    shutil.rmtree(path, ignore_errors=True)
"""


def pdeathsig_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` wrapped so the program gets SIGKILL when its parent thread exits (Linux).

    Elsewhere ``argv`` is returned unchanged. The calling thread must outlive the
    child (see :func:`launch`).
    """
    if not _HAS_PDEATHSIG:
        return list(argv)
    return [sys.executable, "-I", "-c", _PDEATHSIG_EXEC, str(os.getpid()), *argv]


class _Launcher:
    """One long-lived daemon thread that forks every broker (see the module docstring)."""

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[
            tuple[list[str], dict[str, Any], concurrent.futures.Future[subprocess.Popen[bytes]]]
        ] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def popen(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        if threading.current_thread() is self._thread:
            return subprocess.Popen(argv, **kwargs)
        with self._lock:
            if self._thread is None or not self._thread.is_alive() or self._pid != os.getpid():
                # (A forked copy of this process has no launcher thread: start its own.)
                self._pid = os.getpid()
                self._requests = queue.SimpleQueue()
                self._thread = threading.Thread(
                    target=self._run, name="kafka-share-broker-launcher", daemon=True
                )
                self._thread.start()
            requests = self._requests
        done: concurrent.futures.Future[subprocess.Popen[bytes]] = concurrent.futures.Future()
        requests.put((argv, kwargs, done))
        return done.result()

    def _run(self) -> None:
        requests = self._requests
        while True:
            argv, kwargs, done = requests.get()
            try:
                done.set_result(subprocess.Popen(argv, **kwargs))
            except BaseException as exc:  # handed to the caller, who raises it
                done.set_exception(exc)


class _Reaper:
    """The parent's side of the reaper process: started on first use, one per process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._pid = os.getpid()
        self._broken = False

    def send(self, command: str, arg: str) -> None:
        if "\n" in arg:
            raise ValueError(f"cannot register {arg!r} with the reaper (newline in it)")
        with self._lock:
            stdin = self._stdin()
            if stdin is None:
                return
            try:
                stdin.write(f"{command} {arg}\n".encode())
                stdin.flush()
            except OSError as exc:
                self._broken = True
                log.warning(
                    "the broker reaper process is gone (%s): brokers will not be stopped "
                    "if this process is killed",
                    exc,
                )

    def close(self) -> None:
        """At a normal exit: close the pipe and wait for the reaper, so no child is
        left behind (it acts on whatever is still registered, usually nothing)."""
        with self._lock:
            process, self._process = self._process, None
            if process is None or self._pid != os.getpid():
                return
            assert process.stdin is not None
            with contextlib.suppress(OSError):
                process.stdin.close()
            try:
                process.wait(timeout=35)
            except subprocess.TimeoutExpired:
                log.warning("the broker reaper process did not exit in 35 s")

    def _stdin(self) -> IO[bytes] | None:
        if self._pid != os.getpid():
            # A forked copy of this process: the reaper belongs to the original.
            self._pid, self._process, self._broken = os.getpid(), None, False
        if self._broken:
            return None
        if self._process is None:
            try:
                self._process = subprocess.Popen(
                    [sys.executable, "-I", "-c", _REAPER_SOURCE],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    # Out of the process group: a signal sent to the whole group
                    # must not stop the reaper before it has done its job.
                    start_new_session=True,
                )
            except OSError as exc:
                self._broken = True
                log.warning("could not start the broker reaper process: %s", exc)
                return None
        return self._process.stdin


_launcher = _Launcher()
_reaper = _Reaper()
# Registered when this module is imported, before local.py registers the hook that
# stops leftover clusters: atexit runs hooks last-in first-out, so the clusters
# are stopped first and the reaper then finds nothing left to do.
atexit.register(_reaper.close)


def launch(argv: Sequence[str], **popen_kwargs: Any) -> subprocess.Popen[bytes]:
    """Start a broker process that dies with this process, whatever ends it.

    Linux: PR_SET_PDEATHSIG through :func:`pdeathsig_argv`, forked from the
    long-lived launcher thread. Every platform: the pid is registered with the
    reaper. Call :func:`forget_pid` once the process has been waited for.
    """
    process = _launcher.popen(pdeathsig_argv(argv), **popen_kwargs)
    track_pid(process.pid)
    return process


def track_pid(pid: int) -> None:
    """SIGKILL ``pid`` if this process dies before :func:`forget_pid` is called."""
    _reaper.send("pid", str(pid))


def forget_pid(pid: int) -> None:
    """``pid`` was stopped and waited for (or is detached on purpose)."""
    _reaper.send("unpid", str(pid))


def track_dir(path: Path | str) -> None:
    """Remove ``path`` (after the registered pids are gone) if this process dies."""
    _reaper.send("dir", str(Path(path).resolve()))


def forget_dir(path: Path | str) -> None:
    """``path`` was removed (or is kept on purpose)."""
    _reaper.send("undir", str(Path(path).resolve()))
