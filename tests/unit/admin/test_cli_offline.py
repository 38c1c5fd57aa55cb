"""The kafka-share command without a broker: errors are one line, the extra is optional."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafka_share.commands import cli
from kafka_share.commands.common import read_properties
from kafka_share.config import ADMIN_PLACEHOLDER_GROUP_ID, parse_admin_config
from kafka_share.errors import ConfigError
from tests.fresh import run_fresh


def test_broker_start_with_an_unsupported_kafka_version_is_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KAFKA_SHARE_CACHE_DIR", str(tmp_path))
    result = CliRunner().invoke(cli, ["broker", "start", "--kafka-version", "4.0.0"])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert lines[-1].startswith("Error: Kafka 4.0.0 only has the early-access")
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_unreachable_broker_is_one_line(tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_text("default.api.timeout.ms=1000\nrequest.timeout.ms=800\n")
    result = CliRunner().invoke(
        cli, ["groups", "list", "--bootstrap-server", "127.0.0.1:1",
              "--command-config", str(props)],
    )
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert line.startswith("Error: fetch metadata of brokers did not complete within 1 s")


@pytest.mark.parametrize("command", [["groups", "list"], ["groups", "describe", "g"],
                                     ["groups", "config", "g"]])
def test_timeout_bounds_a_command_against_an_unreachable_broker(command: list[str]) -> None:
    # Without --timeout an unreachable broker costs default.api.timeout.ms (60 s).
    import time

    started = time.monotonic()
    result = CliRunner().invoke(
        cli, [*command, "--bootstrap-server", "127.0.0.1:1", "--timeout", "1.5"])
    assert time.monotonic() - started < 10
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert line.startswith("Error: ") and "did not complete within" in line


@pytest.mark.parametrize("bad", ["0", "-1", "soon"])
def test_a_bad_timeout_is_refused(bad: str) -> None:
    result = CliRunner().invoke(
        cli, ["groups", "list", "--bootstrap-server", "127.0.0.1:1", "--timeout", bad])
    assert result.exit_code == 2 and "--timeout" in result.output


def test_bad_config_in_command_config_is_one_line(tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_text("# comment\nrequest.timeout.ms=-5\nno.such.setting=1\n")
    result = CliRunner().invoke(
        cli, ["groups", "list", "--bootstrap-server", "127.0.0.1:1", "--command-config",
              str(props)],
    )
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert line.startswith("Error: ") and "request.timeout.ms" in line
    assert "no.such.setting" in line


def test_missing_bootstrap_server_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["groups", "list"], env={"KAFKA_SHARE_BOOTSTRAP_SERVER": ""})
    assert result.exit_code == 2
    assert "--bootstrap-server" in result.output


def test_reset_offsets_needs_exactly_one_target() -> None:
    result = CliRunner().invoke(
        cli, ["groups", "reset-offsets", "g", "--topic", "t", "--bootstrap-server", "x:1",
              "--to-earliest", "--to-latest"],
    )
    assert result.exit_code == 2
    assert "exactly one of" in result.output and "--to-earliest, --to-latest" in result.output


def test_read_properties(tmp_path: Path) -> None:
    props = tmp_path / "p.properties"
    props.write_text("! bang comment\nsecurity.protocol = SASL_SSL\nsasl.mechanism: PLAIN\n\n")
    assert read_properties(props) == {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}
    props.write_text("novalue\n")
    with pytest.raises(Exception, match=r"p.properties:1: expected KEY=VALUE"):
        read_properties(props)


@pytest.mark.parametrize("line", ["Hunter2-pasted-password", "=Hunter2-pasted-password"])
def test_a_bad_properties_line_is_named_by_number_not_quoted(tmp_path: Path, line: str) -> None:
    # The line may be a password: the error names file and line, never the text.
    props = tmp_path / "p.properties"
    props.write_text(f"security.protocol=SASL_SSL\n{line}\n")
    with pytest.raises(Exception, match=r"p\.properties:2: expected KEY=VALUE") as info:
        read_properties(props)
    assert "Hunter2" not in str(info.value)


def test_read_properties_java_continuations_and_escapes(tmp_path: Path) -> None:
    # As Kafka's documentation writes client.properties for its own tools.
    props = tmp_path / "client.properties"
    props.write_text(
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="alice" \\\n'
        '    password="a=b:c";\n'
        "bootstrap.servers=broker1\\:9093\n"
        "ssl.truststore.location C\\:\\\\certs\\\\ca.pem\n"
        "tab=a\\tb\n"
        "unicode=\\u00e9t\\u00e9\n"
        "empty=\n"
    )
    assert read_properties(props) == {
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                            'username="alice" password="a=b:c";',
        "bootstrap.servers": "broker1:9093",
        "ssl.truststore.location": "C:\\certs\\ca.pem",
        "tab": "a\tb",
        "unicode": "\u00e9t\u00e9",
        "empty": "",
    }
    props.write_text("trailing=continued \\\n")
    assert read_properties(props) == {"trailing": "continued"}  # trailing blanks dropped


def test_admin_config_needs_no_group_id_and_keeps_the_consumer_rules() -> None:
    cfg = parse_admin_config({"bootstrap.servers": "h:1"}, security_protocol="SASL_SSL",
                             sasl_mechanism="PLAIN", sasl_username="u", sasl_password="p")
    assert cfg.group_id == ADMIN_PLACEHOLDER_GROUP_ID
    assert cfg.sasl_username == "u"  # security settings flow through
    assert parse_admin_config(bootstrap_servers="h:1", group_id="mine").group_id == "mine"
    with pytest.raises(ConfigError, match=r"bootstrap\.servers"):
        parse_admin_config({})
    with pytest.raises(ConfigError, match=r"request\.timeout\.ms"):
        parse_admin_config(bootstrap_servers="h:1", request_timeout_ms=-1)


def test_the_entry_point_explains_a_missing_cli_extra(tmp_path: Path) -> None:
    # Hide click and rich from a child interpreter to stand in for an install
    # without the extra.
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text(
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('click', 'rich'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", "from kafka_share.cli import main; main(['groups', 'list'])"],
        capture_output=True, text=True, env={"PYTHONPATH": f"{tmp_path}:{Path.cwd()}"},
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "kafka-share: the command line needs click and rich, which are not installed; "
        "install the command line with: pip install 'kafka-share[cli]'"
    )


def test_the_library_imports_without_click_or_rich() -> None:
    code = (
        "import sys, kafka_share, kafka_share.admin, kafka_share.cli\n"
        "print([m for m in ('click', 'rich') if m in sys.modules])\n"
    )
    assert run_fresh(code).strip() == "[]"


def test_library_warnings_do_not_add_lines_to_the_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Warn about an unreachable broker at once (the real threshold is 10 s).
    from kafka_share._net import client as net_client

    monkeypatch.setattr(net_client, "UNREACHABLE_WARN_MS", 0)
    props = tmp_path / "client.properties"
    props.write_text("default.api.timeout.ms=1000\nrequest.timeout.ms=800\n")
    args = ["groups", "list", "--bootstrap-server", "127.0.0.1:1", "--command-config", str(props)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert line.startswith("Error: fetch metadata of brokers did not complete")
    verbose = CliRunner().invoke(cli, ["-v", *args])
    assert "kafka-share: WARNING cannot reach bootstrap server at 127.0.0.1:1" in verbose.output
    assert verbose.output.strip().splitlines()[-1].startswith("Error: ")


def test_a_missing_optional_module_names_the_extra() -> None:
    from kafka_share.commands import _missing_module

    error = ModuleNotFoundError("No module named 'confluent_kafka'", name="confluent_kafka")
    assert _missing_module(error) == (
        "this command needs confluent_kafka, which is not installed; install it with: "
        "pip install 'kafka-share[cli,testing]'"
    )


def test_broker_readiness_needs_no_confluent_kafka(monkeypatch: pytest.MonkeyPatch) -> None:
    # `kafka-share broker start` with only the cli extra: readiness uses kafka_share.admin.
    from kafka_share.testing.errors import BrokerStartError
    from kafka_share.testing.readiness import wait_until_ready

    monkeypatch.setitem(sys.modules, "confluent_kafka", None)
    monkeypatch.setitem(sys.modules, "confluent_kafka.admin", None)
    with pytest.raises(BrokerStartError, match=r"127\.0\.0\.1:1 did not become ready within 1 s"):
        wait_until_ready("127.0.0.1:1", expected_brokers=1, timeout_s=1.0)


def test_lag_summary_tells_an_old_broker_from_a_share_partition_without_state() -> None:
    from kafka_share import TopicPartition
    from kafka_share.admin import SharePartitionOffsetInfo as Info
    from kafka_share.commands.groups import LAG_UNAVAILABLE, lag_summary

    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    assert lag_summary({a: Info(5, 0, 3), b: Info(7, 0, 4)}) == (7, None)
    # Kafka 4.1: a start offset but no lag (DescribeShareGroupOffsets v0).
    assert lag_summary({a: Info(5, 0, None), b: Info(None, 0, None)}) == (None, LAG_UNAVAILABLE)
    # Kafka 4.2+: a share-partition nobody fetched yet has neither.
    total, note = lag_summary({a: Info(5, 0, 3), b: Info(None, 0, None)})
    assert total == 3 and note is not None and note.endswith("no share-partition state yet): t-1")


def test_top_shows_the_start_offset_progress_per_second() -> None:
    from typing import Any, cast

    from kafka_share import TopicPartition
    from kafka_share.commands.top import TopView

    view = TopView(cast(Any, None), "g")
    tp = TopicPartition("t", 0)
    assert view._rate(tp, 100, 10.0) is None  # first frame: nothing to compare with
    assert view._rate(tp, 150, 12.0) == "25.0"
    assert view._rate(tp, None, 13.0) is None  # state gone (offsets deleted)
    assert view._rate(tp, 150, 14.0) is None  # starts again
    assert view._rate(tp, 150, 15.0) == "0.0"


def test_top_smooths_a_start_offset_that_moves_in_steps() -> None:
    # The broker persists the start offset in steps: frame to frame the column
    # flipped between ~1000 and 0.0 at a steady 500 records/s.
    from typing import Any, cast

    from kafka_share import TopicPartition
    from kafka_share.commands.top import RATE_WINDOW_S, TopView

    view = TopView(cast(Any, None), "g")
    tp = TopicPartition("t", 0)
    shown = [view._rate(tp, 1000 * (i // 2), float(i)) for i in range(40)]
    settled = [float(x) for x in shown[int(RATE_WINDOW_S) + 2:] if x is not None]
    assert settled and all(400 <= r <= 600 for r in settled), settled


def test_tables_show_broker_strings_as_text_not_markup() -> None:
    # A client.id of "[/x]" crashed `groups describe` and `top` (rich parsed it
    # as a closing tag); "[bold]" must show as typed, not turn text bold.
    from rich.console import Console

    from kafka_share.commands.common import table

    out = Console(width=200, record=True, highlight=False)
    out.print(table(["CLIENT-ID", "GROUP"], [("[/x]", "[bold]g[/bold]"), (None, "[red")],
                    title="[/title]"))
    text = out.export_text()
    assert "[/x]" in text and "[bold]g[/bold]" in text and "[red" in text and "[/title]" in text


def test_consume_keeps_its_own_timeout() -> None:
    # `consume --timeout` is how long to wait without a record (as Kafka's console
    # consumer); the broker-call --timeout of the other commands must not take it over.
    result = CliRunner().invoke(cli, ["consume", "--help"])
    assert result.output.count("--timeout") == 1
    assert "--timeout" in CliRunner().invoke(cli, ["groups", "list", "--help"]).output


def test_broker_start_share_version_conflict_is_one_line() -> None:
    result = CliRunner().invoke(cli, ["broker", "start", "--share-version", "2", "--no-share"])
    assert result.exit_code == 2
    assert "--share-version cannot be combined with --no-share" in result.output
    assert "use --share-version 0" in result.output


def test_broker_start_refuses_share_version_2_before_kafka_44(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KAFKA_SHARE_CACHE_DIR", str(tmp_path))
    result = CliRunner().invoke(cli, ["broker", "start", "--kafka-version", "4.3.1",
                                      "--share-version", "2"])
    assert result.exit_code == 1
    assert "share.version=2 is not a level Kafka 4.3.1 has" in result.output
    assert list(tmp_path.iterdir()) == []  # refused before downloading anything
