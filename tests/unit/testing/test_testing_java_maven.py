from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from kafka_share.testing import java as java_mod
from kafka_share.testing import maven
from kafka_share.testing.errors import JavaNotFoundError, MavenError
from kafka_share.testing.versions import parse_kafka_version


@pytest.mark.parametrize(
    ("output", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('openjdk version "21" 2023-09-19', 21),
        ('java version "1.8.0_392"', 8),
        ('openjdk version "11.0.2" 2019-01-15 LTS', 11),
    ],
)
def test_java_major_version(output: str, major: int) -> None:
    assert java_mod.java_major_version(output) == major


def _fake_java(tmp_path: Path, version: str) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    java = bindir / "java"
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2020-01-01' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return bindir


def test_no_java_says_java_17_is_needed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(JavaNotFoundError, match=r"needs Java 17\+.*no `java` was found"):
        java_mod.find_java()


def test_old_java_names_what_was_found(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bindir = _fake_java(tmp_path, "11.0.2")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(bindir))
    with pytest.raises(JavaNotFoundError, match=r"needs Java 17\+, but .*java is Java 11"):
        java_mod.find_java()


def test_java_home_wins_over_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bindir = _fake_java(tmp_path, "21.0.1")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", "/nonexistent")
    assert java_mod.find_java() == str(bindir / "java")


def test_cache_root_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KAFKA_SHARE_CACHE_DIR", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert maven.cache_root() == tmp_path / "explicit"
    monkeypatch.delenv("KAFKA_SHARE_CACHE_DIR")
    assert maven.cache_root() == tmp_path / "xdg" / "kafka-share"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert maven.cache_root() == tmp_path / "home" / ".cache" / "kafka-share"


def test_pom_pins_version_and_drops_tools_api() -> None:
    pom = maven.render_pom(parse_kafka_version("4.2.1"))
    assert "<artifactId>kafka_2.13</artifactId>" in pom
    assert "<version>4.2.1</version>" in pom
    assert "<artifactId>kafka-tools-api</artifactId>" in pom.split("<exclusions>")[1]


def test_no_mvn_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(maven.shutil, "which", lambda name: None)
    with pytest.raises(MavenError, match=r"no `mvn` was found on PATH"):
        maven.ensure_kafka_libs("4.4.0", cache_dir=tmp_path)
    # Nothing half-built is left to be trusted later.
    assert not (tmp_path / "kafka_2.13-4.4.0").exists()
    assert [p.name for p in tmp_path.iterdir()] == [".kafka_2.13-4.4.0.lock"]


def test_failed_resolution_names_the_artifact(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    output = (
        "[ERROR] Failed to execute goal on project kafka-broker-runtime: Could not resolve "
        "dependencies for project x:y:pom:1: Could not find artifact "
        "org.apache.kafka:kafka_2.13:jar:4.9.9 in central (https://repo.maven.apache.org/maven2)"
    )

    def fake_run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 1, stdout=output, stderr="")

    monkeypatch.setattr(maven.shutil, "which", lambda name: "/usr/bin/mvn")
    monkeypatch.setattr(maven.subprocess, "run", fake_run)
    with pytest.raises(MavenError) as info:
        maven.ensure_kafka_libs("4.9.9", cache_dir=tmp_path)
    message = str(info.value)
    assert "org.apache.kafka:kafka_2.13:4.9.9" in message
    assert "missing artifact: org.apache.kafka:kafka_2.13:jar:4.9.9" in message
    assert "Could not resolve dependencies" in message


def test_assembly_uses_matching_log4j_binding_and_marks_complete(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[list[str]] = []

    def fake_run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        out = Path(next(a for a in argv if a.startswith("-DoutputDirectory=")).split("=", 1)[1])
        if any(a.endswith(":copy-dependencies") for a in argv):
            for jar in ("kafka_2.13-4.3.1.jar", "log4j-core-2.25.4.jar", "kafka-clients-4.3.1.jar"):
                (out / jar).write_bytes(b"x" * 10)
        else:
            (out / "log4j-slf4j-impl-2.25.4.jar").write_bytes(b"y")
        return subprocess.CompletedProcess(argv, 0, stdout="", stderr="")

    monkeypatch.setattr(maven.shutil, "which", lambda name: "/usr/bin/mvn")
    monkeypatch.setattr(maven.subprocess, "run", fake_run)
    dist = maven.ensure_kafka_libs("4.3.1", cache_dir=tmp_path, maven_repo=tmp_path / "m2")
    assert (dist.home / "COMPLETE").is_file()
    assert "-Dartifact=org.apache.logging.log4j:log4j-slf4j-impl:2.25.4" in calls[1]
    assert f"-Dmaven.repo.local={tmp_path / 'm2'}" in calls[0]
    assert dist.size_bytes() == 31
    # Second call: served from the cache without running Maven.
    monkeypatch.setattr(maven.subprocess, "run", lambda *a, **k: pytest.fail("Maven rerun"))
    assert maven.ensure_kafka_libs("4.3.1", cache_dir=tmp_path).home == dist.home
    # No scratch directories left behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".kafka_2.13-4.3.1.lock",
        "kafka_2.13-4.3.1",
    ]


def test_incomplete_leftover_is_rebuilt(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    stale = tmp_path / "kafka_2.13-4.3.1" / "libs"
    stale.mkdir(parents=True)
    (stale / "half.jar").write_bytes(b"")

    def fake_run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        out = Path(next(a for a in argv if a.startswith("-DoutputDirectory=")).split("=", 1)[1])
        for jar in ("kafka_2.13-4.3.1.jar", "log4j-core-2.25.4.jar"):
            (out / jar).write_bytes(b"")
        return subprocess.CompletedProcess(argv, 0, stdout="", stderr="")

    monkeypatch.setattr(maven.shutil, "which", lambda name: "/usr/bin/mvn")
    monkeypatch.setattr(maven.subprocess, "run", fake_run)
    dist = maven.ensure_kafka_libs("4.3.1", cache_dir=tmp_path)
    assert not (dist.libs_dir / "half.jar").exists()
    assert (dist.libs_dir / "kafka_2.13-4.3.1.jar").exists()


def test_no_log4j_core_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def fake_run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 0, stdout="", stderr="")

    monkeypatch.setattr(maven.shutil, "which", lambda name: "/usr/bin/mvn")
    monkeypatch.setattr(maven.subprocess, "run", fake_run)
    with pytest.raises(MavenError, match="no log4j-core jar"):
        maven.ensure_kafka_libs("4.3.1", cache_dir=tmp_path)
    assert os.listdir(tmp_path) == [".kafka_2.13-4.3.1.lock"]


def test_a_first_fetch_reports_each_download(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    # `kafka-share broker start` printed nothing for the 36 s it spent fetching
    # about 115 MB on first use. A stand-in mvn prints what Maven prints.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    mvn = bindir / "mvn"
    mvn.write_text(
        "#!/bin/sh\n"
        'out=""; for a in "$@"; do case "$a" in -DoutputDirectory=*) out="${a#*=}";; esac; done\n'
        'echo "[INFO] Scanning for projects..."\n'
        'echo "Downloading from central: https://repo.example/kafka_2.13-4.3.1.jar"\n'
        'echo "Downloaded from central: https://repo.example/kafka_2.13-4.3.1.jar '
        '(6.9 MB at 12 MB/s)"\n'
        'echo "Downloaded from central: https://repo.example/log4j-core-2.25.4.jar '
        '(512 kB at 3 MB/s)"\n'
        'touch "$out/kafka_2.13-4.3.1.jar" "$out/log4j-core-2.25.4.jar" '
        '"$out/log4j-slf4j-impl-2.25.4.jar"\n'
    )
    mvn.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    lines: list[str] = []
    dist = maven.ensure_kafka_libs("4.3.1", cache_dir=tmp_path / "cache", progress=lines.append)
    assert (dist.home / "COMPLETE").is_file()
    assert lines[0].startswith("Resolving Apache Kafka 4.3.1 broker jars from Maven Central")
    assert any("downloaded 1 files, 6.9 MB: kafka_2.13-4.3.1.jar" in line for line in lines)
    assert any("downloaded 2 files, 7.4 MB: log4j-core-2.25.4.jar" in line for line in lines)
    assert lines[-1].strip().startswith("done:")
