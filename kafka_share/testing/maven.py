"""Assembling a runnable Kafka broker from Maven Central into a per-user cache.

Layout of the cache (``KAFKA_SHARE_CACHE_DIR``, else ``$XDG_CACHE_HOME/kafka-share``,
else ``~/.cache/kafka-share``)::

    kafka_2.13-4.4.0/libs/*.jar     every jar the broker and StorageTool need
    kafka_2.13-4.4.0/COMPLETE       JSON marker, written last
    .kafka_2.13-4.4.0.lock          serialises concurrent first runs

A version is assembled in a private scratch directory and renamed into place
under an exclusive lock, and the marker is written only after the rename, so an
interrupted or concurrent first run never leaves a half-filled ``libs/`` that a
later run would trust.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from kafka_share.testing.errors import MavenError
from kafka_share.testing.versions import KafkaVersion, parse_kafka_version

__all__ = [
    "BrokerDistribution",
    "cache_root",
    "ensure_kafka_libs",
    "ensure_maven_libs",
    "render_pom",
]

_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"
_MARKER = "COMPLETE"
_MAVEN_TIMEOUT_S = 900.0
_LOG4J_CORE_RE = re.compile(r"^log4j-core-(\d[\w.\-]*)\.jar$")
_MISSING_RE = re.compile(
    r"(?:Could not find artifact|Failure to find|Could not transfer artifact) (\S+)"
)


class BrokerDistribution:
    """A complete set of broker jars for one Kafka version, ready to run."""

    def __init__(self, version: KafkaVersion, home: Path) -> None:
        self.version = version
        #: Directory holding ``libs/`` and the completion marker.
        self.home = home

    @property
    def libs_dir(self) -> Path:
        """Directory of the jars; the JVM classpath is ``<libs_dir>/*``."""
        return self.home / "libs"

    @property
    def classpath(self) -> str:
        """Classpath string for ``java -cp`` (the JVM expands the ``*``)."""
        return str(self.libs_dir / "*")

    def size_bytes(self) -> int:
        """Total size of the jars."""
        return sum(p.stat().st_size for p in self.libs_dir.iterdir() if p.is_file())

    def __repr__(self) -> str:
        return f"BrokerDistribution(version={self.version}, home={str(self.home)!r})"


def cache_root() -> Path:
    """The per-user cache directory of the harness (not created here)."""
    explicit = os.environ.get("KAFKA_SHARE_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "kafka-share"


def render_pom(version: KafkaVersion) -> str:
    """The throw-away pom whose runtime dependencies are the broker's classpath.

    ``kafka-tools-api`` is excluded: it only holds plugin interfaces of the
    console tools, which neither the broker nor StorageTool load, and Maven
    Central does not carry it for every release (4.4.0 is missing it).
    """
    return _pom("kafka-broker-runtime", "org.apache.kafka", "kafka_2.13", str(version),
                exclusions=[("org.apache.kafka", "kafka-tools-api")])


def _pom(project: str, group: str, artifact_id: str, version: str, *,
         exclusions: list[tuple[str, str]] | None = None) -> str:
    """A throw-away pom whose one dependency's runtime classpath Maven copies."""
    excluded = "".join(
        f"""        <exclusion>
          <groupId>{g}</groupId>
          <artifactId>{a}</artifactId>
        </exclusion>
""" for g, a in exclusions or [])
    if excluded:
        excluded = f"      <exclusions>\n{excluded}      </exclusions>\n"
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafka-share.testing</groupId>
  <artifactId>{project}</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>{group}</groupId>
      <artifactId>{artifact_id}</artifactId>
      <version>{version}</version>
{excluded}    </dependency>
  </dependencies>
</project>
"""


def ensure_kafka_libs(
    kafka_version: str | KafkaVersion,
    *,
    cache_dir: Path | None = None,
    maven_repo: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> BrokerDistribution:
    """Return the cached broker jars for ``kafka_version``, downloading them on first use.

    ``maven_repo`` (default: ``KAFKA_SHARE_MAVEN_REPO``, else Maven's own
    ``~/.m2/repository``) is passed to Maven as ``-Dmaven.repo.local``.
    Raises :class:`MavenError` when ``mvn`` is missing or resolution fails; the
    message names the artifact and shows the end of Maven's output.
    """
    version = (
        kafka_version
        if isinstance(kafka_version, KafkaVersion)
        else parse_kafka_version(kafka_version)
    )
    root = cache_dir if cache_dir is not None else cache_root()
    home = root / f"kafka_2.13-{version}"

    def build(scratch: Path, repo: Path | None) -> dict[str, str]:
        if progress is not None:
            progress(f"Resolving Apache Kafka {version} broker jars from Maven Central...")
        log4j_version = _assemble(version, scratch, repo, progress)
        return {"kafka_version": str(version), "log4j2_version": log4j_version}

    _cached(home, build, maven_repo)
    return BrokerDistribution(version, home)


def ensure_maven_libs(
    name: str,
    artifact: str,
    *,
    cache_dir: Path | None = None,
    maven_repo: Path | None = None,
) -> Path:
    """The cached runtime classpath of ``artifact`` (``group:artifact:version``)
    under ``<cache>/<name>/libs``, resolved from Maven Central on first use.
    Raises :class:`MavenError` as :func:`ensure_kafka_libs` does."""
    home = (cache_dir if cache_dir is not None else cache_root()) / name
    group, artifact_id, version = artifact.split(":")

    def build(scratch: Path, repo: Path | None) -> dict[str, str]:
        libs = scratch / "dist" / "libs"
        libs.mkdir(parents=True)
        pom = scratch / "pom.xml"
        pom.write_text(_pom(f"{artifact_id}-runtime", group, artifact_id, version),
                       encoding="utf-8")
        base = _maven_argv(artifact, pom, repo, quiet=True)
        _copy_runtime(base, libs, what=f"{artifact} and its runtime dependencies", cwd=scratch)
        return {"artifact": artifact}

    _cached(home, build, maven_repo)
    return home / "libs"


def _cached(
    home: Path,
    build: Callable[[Path, Path | None], dict[str, str]],
    maven_repo: Path | None,
) -> None:
    """Fill ``home`` (``libs/`` and the marker) with ``build`` unless it is complete.

    Built in a scratch directory and renamed into place under an exclusive
    lock; the marker is written last (see the module docstring)."""
    if (home / _MARKER).is_file():
        return
    root = home.parent
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / f".{home.name}.lock"):
        # Another process may have finished while this one waited for the lock.
        if (home / _MARKER).is_file():
            return
        if maven_repo is None and os.environ.get("KAFKA_SHARE_MAVEN_REPO"):
            maven_repo = Path(os.environ["KAFKA_SHARE_MAVEN_REPO"]).expanduser()
        scratch = Path(tempfile.mkdtemp(prefix=f".build-{home.name}-", dir=root))
        try:
            marker: dict[str, object] = dict(build(scratch, maven_repo))
            if home.exists():
                # A leftover from an interrupted run before the marker was written.
                shutil.rmtree(home)
            (scratch / "dist").rename(home)
            marker["jars"] = sorted(p.name for p in (home / "libs").iterdir())
            tmp_marker = home / f".{_MARKER}.tmp"
            tmp_marker.write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")
            tmp_marker.rename(home / _MARKER)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _assemble(
    version: KafkaVersion,
    scratch: Path,
    maven_repo: Path | None,
    progress: Callable[[str], None] | None = None,
) -> str:
    """Fill ``scratch/dist/libs``; return the log4j2 version used. With
    ``progress``, Maven's downloads are reported as they happen."""
    libs = scratch / "dist" / "libs"
    libs.mkdir(parents=True)
    pom = scratch / "pom.xml"
    pom.write_text(render_pom(version), encoding="utf-8")
    # Quiet unless someone watches: then Maven's "Downloaded from" lines feed
    # the progress report (batch mode still prints them, without bars).
    base = _maven_argv("the Kafka test broker", pom, maven_repo, quiet=progress is None)
    watch = DownloadProgress(progress) if progress is not None else None
    _copy_runtime(
        base, libs, what=f"org.apache.kafka:kafka_2.13:{version} and its runtime dependencies",
        cwd=scratch, on_line=watch,
    )
    # Kafka 4.1+ brings log4j-core at the version it was built with; the SLF4J 1.7
    # binding must match it but is in no Kafka pom, so it is fetched on its own.
    log4j_version = _log4j_version(libs)
    if log4j_version is None:
        raise MavenError(
            f"Kafka {version}'s dependencies contain no log4j-core jar, so the matching "
            "log4j-slf4j-impl version is unknown; this Kafka release is not supported"
        )
    artifact = f"org.apache.logging.log4j:log4j-slf4j-impl:{log4j_version}"
    _run_maven(
        [
            *base,
            f"{_DEPENDENCY_PLUGIN}:copy",
            f"-Dartifact={artifact}",
            f"-DoutputDirectory={libs}",
        ],
        what=artifact,
        cwd=scratch,
        on_line=watch,
    )
    if watch is not None:
        watch.finish()
    if not (libs / f"kafka_2.13-{version}.jar").is_file():
        raise MavenError(f"Maven finished but kafka_2.13-{version}.jar is not in {libs}")
    return log4j_version


def _maven_argv(what: str, pom: Path, maven_repo: Path | None, *, quiet: bool) -> list[str]:
    """``mvn`` in batch mode on ``pom`` (and ``maven_repo`` as its local repository)."""
    argv = [_mvn(what), "-B", *(("-q",) if quiet else ()), "-f", str(pom)]
    if maven_repo is not None:
        argv.append(f"-Dmaven.repo.local={maven_repo}")
    return argv


def _copy_runtime(
    base: list[str], libs: Path, *, what: str, cwd: Path,
    on_line: Callable[[str], None] | None = None,
) -> None:
    """Copy the runtime classpath of ``base``'s pom into ``libs``."""
    _run_maven(
        [*base, f"{_DEPENDENCY_PLUGIN}:copy-dependencies", "-DincludeScope=runtime",
         f"-DoutputDirectory={libs}"],
        what=what, cwd=cwd, on_line=on_line,
    )


def _mvn(what: str) -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenError(
            f"{what} is assembled from Maven Central jars, but no `mvn` was found on PATH: "
            "install Apache Maven 3.6+ (or pre-fill the cache with `kafka-share broker "
            "fetch` on a machine that has it)"
        )
    return mvn


def _log4j_version(libs: Path) -> str | None:
    for jar in libs.iterdir():
        match = _LOG4J_CORE_RE.match(jar.name)
        if match:
            return match.group(1)
    return None


def _run_maven(
    argv: list[str], *, what: str, cwd: Path, on_line: Callable[[str], None] | None = None
) -> None:
    """Run Maven; ``on_line`` sees each line of its output as it comes."""
    try:
        if on_line is None:
            done = subprocess.run(
                argv, cwd=cwd, capture_output=True, text=True, timeout=_MAVEN_TIMEOUT_S,
                check=False,
            )
            returncode, output = done.returncode, done.stdout + done.stderr
        else:
            returncode, output = _stream(argv, cwd, on_line)
    except subprocess.TimeoutExpired as exc:
        raise MavenError(
            f"Maven did not finish resolving {what} within {_MAVEN_TIMEOUT_S:.0f} s"
        ) from exc
    except OSError as exc:
        raise MavenError(f"could not run Maven ({argv[0]}): {exc}") from exc
    if returncode != 0:
        raise MavenError(maven_failure_message(what, output))


def _stream(argv: list[str], cwd: Path, on_line: Callable[[str], None]) -> tuple[int, str]:
    """Run ``argv`` passing each output line to ``on_line``; (exit status, output).
    Raises ``subprocess.TimeoutExpired`` after :data:`_MAVEN_TIMEOUT_S`."""
    killed = threading.Event()
    lines: list[str] = []
    with subprocess.Popen(
        argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    ) as proc:

        def kill() -> None:
            killed.set()
            proc.kill()

        timer = threading.Timer(_MAVEN_TIMEOUT_S, kill)
        timer.daemon = True
        timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                on_line(line)
            returncode = proc.wait()
        finally:
            timer.cancel()
    if killed.is_set():
        raise subprocess.TimeoutExpired(argv, _MAVEN_TIMEOUT_S)
    return returncode, "".join(lines)


#: Maven's line for a finished download, e.g. "Downloaded from central:
#: https://repo.maven.apache.org/.../kafka_2.13-4.4.0.jar (6.9 MB at 12 MB/s)".
_DOWNLOADED_RE = re.compile(r"Downloaded from [^:]+: (\S+) \(([\d.]+) (B|kB|MB|GB)")
_UNITS = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}


class DownloadProgress:
    """Turns Maven's output into progress lines: each file as it arrives, the
    count and the megabytes so far (on one line rewritten in place when
    ``progress`` is a terminal's, see ``kafka-share broker``)."""

    def __init__(self, progress: Callable[[str], None]) -> None:
        self._progress = progress
        self.files = 0
        self.bytes = 0.0

    def __call__(self, line: str) -> None:
        match = _DOWNLOADED_RE.search(line)
        if match is None:
            return
        url, size, unit = match.groups()
        self.files += 1
        self.bytes += float(size) * _UNITS[unit]
        name = url.rsplit("/", 1)[-1]
        self._progress(f"  downloaded {self.files} files, {self.bytes / 1e6:.1f} MB: {name}")

    def finish(self) -> None:
        if self.files:
            self._progress(f"  done: {self.files} files, {self.bytes / 1e6:.1f} MB from Maven "
                           "Central")
        else:
            self._progress("  every jar was already in the local Maven repository")


def maven_failure_message(what: str, output: str, tail_lines: int = 25) -> str:
    """Build the error text for a failed resolution: the artifact and Maven's tail."""
    # Maven colours its output even in batch mode on some terminals.
    clean = re.sub(r"\x1b\[[0-9;]*m", "", output)
    missing = _MISSING_RE.search(clean)
    culprit = f" (missing artifact: {missing.group(1)})" if missing else ""
    tail = "\n".join(clean.strip().splitlines()[-tail_lines:])
    return f"Maven failed to resolve {what}{culprit}. Maven's output ends with:\n{tail}"
