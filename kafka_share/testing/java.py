"""Finding a Java 17+ runtime for the broker."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from kafka_share.testing.errors import JavaNotFoundError

__all__ = ["MIN_JAVA_VERSION", "find_java", "java_major_version"]

#: Every Kafka 4.x broker module is compiled for Java 17.
MIN_JAVA_VERSION = 17

_VERSION_RE = re.compile(r'version "([^"]+)"')


def java_major_version(version_output: str) -> int:
    """Extract the major version from ``java -version`` output.

    Handles both the modern ``"17.0.15"`` and the legacy ``"1.8.0_392"`` styles.
    """
    match = _VERSION_RE.search(version_output)
    if match is None:
        raise JavaNotFoundError(
            "could not read the Java version from `java -version`, which printed:\n"
            + version_output.strip()
        )
    parts = re.split(r"[._+-]", match.group(1))
    try:
        first = int(parts[0])
        return int(parts[1]) if first == 1 and len(parts) > 1 else first
    except ValueError:
        raise JavaNotFoundError(
            f"could not read the Java version from {match.group(1)!r}"
        ) from None


def find_java() -> str:
    """Return the path of a ``java`` executable of version 17 or newer.

    ``$JAVA_HOME/bin/java`` wins when it exists, otherwise ``java`` on PATH.
    Raises :class:`JavaNotFoundError` naming what was found when there is none
    or it is too old.
    """
    java: str | None = None
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        java = str(Path(java_home) / "bin" / "java")
    if java is None:
        java = shutil.which("java")
    if java is None:
        raise JavaNotFoundError(
            f"the Kafka test broker needs Java {MIN_JAVA_VERSION}+, but no `java` was found "
            "on PATH (and JAVA_HOME is not set): install a JDK/JRE 17 or newer"
        )
    try:
        done = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as exc:
        raise JavaNotFoundError(f"could not run {java} -version: {exc}") from exc
    # `java -version` prints to stderr.
    major = java_major_version(done.stderr + done.stdout)
    if major < MIN_JAVA_VERSION:
        raise JavaNotFoundError(
            f"the Kafka test broker needs Java {MIN_JAVA_VERSION}+, but {java} is Java {major}: "
            "install Java 17 or newer, or point JAVA_HOME at one"
        )
    return java
