"""``groups reset-offsets --from-file`` / ``--from-consumer-group``: the file, the plan, the CLI."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType

import pytest
from click.testing import CliRunner

from kafka_share.admin import (
    ListOffsetsResultInfo,
    OffsetSpec,
    PartitionInfo,
    SharePartitionOffsetInfo,
    TopicDescription,
    TopicListing,
)
from kafka_share.commands import cli
from kafka_share.commands import groups as groups_cmd
from kafka_share.commands.offset_sources import (
    FileOffset,
    OffsetsFileError,
    parse_offsets_file,
    plan_reset,
)
from kafka_share.errors import (
    GroupIdNotFoundError,
    NonEmptyGroupError,
    UnknownTopicOrPartitionError,
)
from kafka_share.models import TopicPartition

T0, T1, T2 = (TopicPartition("t", p) for p in range(3))


# -- the file ------------------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "offsets.csv"
    path.write_text(text)
    return path


def test_parse_reads_topic_partition_offset_lines(tmp_path: Path) -> None:
    path = write(tmp_path, "# exported\nt,0,42\n\n t , 2 , 7 \nu.v-w,0,0\n")
    assert parse_offsets_file(path, "sg") == {
        T0: FileOffset(42, 2), T2: FileOffset(7, 4), TopicPartition("u.v-w", 0): FileOffset(0, 5),
    }


def test_parse_takes_kafka_44_csv_quoting_a_trailing_comma_and_a_byte_order_mark(
    tmp_path: Path,
) -> None:
    path = tmp_path / "offsets.csv"
    path.write_text('\ufeff"t","0","42"\r\nt,2,7,\n', encoding="utf-8")
    assert parse_offsets_file(path, "sg") == {T0: FileOffset(42, 1), T2: FileOffset(7, 2)}


def test_parse_of_group_topic_partition_offset_lines_takes_the_groups_own(
    tmp_path: Path,
) -> None:
    # What kafka-consumer-groups.sh --export writes for several groups.
    path = write(tmp_path, "other,t,0,1\nsg,t,0,42\nsg,t,2,7\nother,t,2,9\n")
    assert parse_offsets_file(path, "sg") == {T0: FileOffset(42, 2), T2: FileOffset(7, 3)}


@pytest.mark.parametrize(("text", "problem"), [
    ("t,0,1\nt,0\n",
     r":2: expected topic,partition,offset \(3 fields, as on the first line\), got 2"),
    ("sg,t,0,1\nt,0,1\n", r":2: expected group,topic,partition,offset \(4 fields"),
    ("t,0\n", r":1: expected topic,partition,offset or group,topic,partition,offset "
               r"\(3 or 4 fields\), got 2"),
    ("t,0,\n", r":1: expected .* \(3 or 4 fields\), got 2"),
    ("a,t,0,1\nb,t,1,1\n", r": no offsets for share group 'sg': its lines are "
                            r"group,topic,partition,offset and name only a, b"),
    (",0,1\n", r":1: the topic is empty"),
    ("t,x,1\n", r":1: the partition must be a number from 0 to 2147483647, got 'x'"),
    ("t,-1,1\n", r":1: the partition must be a number from 0 to 2147483647, got '-1'"),
    ("t,2147483648,1\n", r":1: the partition must be a number from 0 to 2147483647"),
    ("t,0,-5\n", r":1: the offset must be a number from 0 to 9223372036854775807, got '-5'"),
    ("t,0,9223372036854775808\n", r":1: the offset must be a number from 0 to "),
    ('t,0,"1\n', r":1: not a CSV line"),
    ("t,0,1\n\nt,0,2\n", r":3: partition t-0 is already given on line 1"),
    ("# nothing\n\n", r": no offsets: expected lines of topic,partition,offset"),
])
def test_parse_names_the_file_line_and_problem(tmp_path: Path, text: str, problem: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(OffsetsFileError, match=str(path).replace(".", r"\.") + problem):
        parse_offsets_file(path, "sg")


def test_parse_of_a_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(OffsetsFileError, match=r"cannot read the offsets file .*nope\.csv"):
        parse_offsets_file(tmp_path / "nope.csv", "sg")


# -- the plan ------------------------------------------------------------------------------


def test_plan_leaves_uncommitted_partitions_and_moves_offsets_into_the_log() -> None:
    earliest = {T0: 10, T1: 0, T2: 0}
    latest = {T0: 100, T1: 50, T2: 9}
    plan = plan_reset([T2, T1, T0], {T0: 3, T2: 20, TopicPartition("x", 0): 1},
                      earliest, latest)
    assert plan.target == {T0: 10, T2: 9}
    assert plan.uncommitted == [T1]
    assert plan.clamped == {T0: (3, 10), T2: (20, 9)}
    inside = plan_reset([T0], {T0: 55}, earliest, latest)
    assert inside.target == {T0: 55} and inside.clamped == {} and inside.uncommitted == []


# -- the command, against a stand-in admin -------------------------------------------------


class FakeAdmin:
    """Topic ``t`` with 3 partitions (log 0..100); consumer group ``cg`` committed t-0, t-1."""

    def __init__(self, *, members: int = 0) -> None:
        self.members = members
        self.altered: dict[TopicPartition, int] | None = None
        self.committed = {"cg": {T0: 40, T1: 7}, "idle": {}}

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        pass

    def describe_topics(self, topics: Iterable[str]) -> dict[str, TopicDescription]:
        names = sorted(set(topics))
        if any(n != "t" for n in names):
            raise UnknownTopicOrPartitionError("UNKNOWN_TOPIC_OR_PARTITION (error code 3)")
        parts = tuple(PartitionInfo(p, 1, (1,), (1,)) for p in range(3))
        return {"t": TopicDescription("t", uuid.UUID(int=1), False, parts)}

    def list_topics(self) -> dict[str, TopicListing]:
        return {"t": TopicListing("t", uuid.UUID(int=1), False)}

    def list_offsets(
        self, specs: Mapping[TopicPartition, OffsetSpec]
    ) -> dict[TopicPartition, ListOffsetsResultInfo]:
        latest = specs and next(iter(specs.values())) == OffsetSpec.latest()
        return {tp: ListOffsetsResultInfo(100 if latest else 0, -1, None) for tp in specs}

    def list_consumer_group_offsets(
        self, group: str, topics: Iterable[str] | None = None
    ) -> dict[TopicPartition, int]:
        if group not in self.committed:
            raise GroupIdNotFoundError(
                f"GROUP_ID_NOT_FOUND (error code 69): consumer group {group!r} does not exist")
        return dict(self.committed[group])

    def list_share_group_offsets(
        self, group: str
    ) -> dict[TopicPartition, SharePartitionOffsetInfo]:
        return {T0: SharePartitionOffsetInfo(5, 0, 95)}

    def alter_share_group_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        if self.members:
            raise NonEmptyGroupError(
                f"NON_EMPTY_GROUP (error code 68): share group {group!r} has "
                f"{self.members} active member(s)")
        self.altered = dict(offsets)


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> FakeAdmin:
    fake = FakeAdmin()
    monkeypatch.setattr(groups_cmd, "_admin", lambda *a: fake)
    return fake


def reset(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        cli, ["groups", "reset-offsets", "sg", "--bootstrap-server", "x:1", *args])
    return result.exit_code, result.output


def test_from_consumer_group_dry_run_prints_the_plan_and_changes_nothing(
    admin: FakeAdmin,
) -> None:
    code, out = reset("--topic", "t", "--from-consumer-group", "cg")
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-START-OFFSET",
                                "CURRENT-START-OFFSET"]
    assert lines[1].split() == ["sg", "t", "0", "40", "5"]
    assert lines[2].split() == ["sg", "t", "1", "7", "-"]
    assert ("Left unchanged (consumer group 'cg' has no committed offset for them): t-2"
            in lines)
    assert lines[-1] == "Dry run: nothing was changed. Add --execute to apply."
    assert admin.altered is None


def test_from_consumer_group_execute_applies_only_committed_partitions(
    admin: FakeAdmin,
) -> None:
    code, out = reset("--topic", "t", "--from-consumer-group", "cg", "--execute")
    assert code == 0, out
    assert admin.altered == {T0: 40, T1: 7}
    assert "Reset the start offsets of share group 'sg'." in out


def test_from_consumer_group_json_lists_the_unchanged_partitions(admin: FakeAdmin) -> None:
    code, out = reset("--topic", "t:1,2", "--from-consumer-group", "cg", "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["partitions"] == [{"topic": "t", "partition": 1, "new_start_offset": 7}]
    assert doc["unchanged"] == [{"topic": "t", "partition": 2}]


def test_from_consumer_group_without_commits_is_an_error(admin: FakeAdmin) -> None:
    code, out = reset("--topic", "t", "--from-consumer-group", "idle", "--execute")
    assert code == 1
    assert "consumer group 'idle' has no committed offsets on 't': nothing to reset" in out
    assert admin.altered is None


def test_from_an_unknown_consumer_group_is_one_line(admin: FakeAdmin) -> None:
    code, out = reset("--topic", "t", "--from-consumer-group", "nope")
    assert code == 1
    (line,) = out.strip().splitlines()
    assert "consumer group 'nope' does not exist" in line


def test_a_non_empty_share_group_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeAdmin(members=2)
    monkeypatch.setattr(groups_cmd, "_admin", lambda *a: fake)
    code, out = reset("--topic", "t", "--from-consumer-group", "cg", "--execute")
    assert code == 1
    assert "NON_EMPTY_GROUP (error code 68): share group 'sg' has 2 active member(s)" in out
    assert fake.altered is None


def test_from_file_needs_no_topic_and_clamps_into_the_log(
    admin: FakeAdmin, tmp_path: Path
) -> None:
    path = write(tmp_path, "t,0,3\nt,2,500\n")
    code, out = reset("--from-file", str(path), "--execute")
    assert code == 0, out
    assert admin.altered == {T0: 3, T2: 100}
    assert "t-2: offset 500 is outside the log; moved to 100" in out


def test_from_file_with_topic_resets_those_partitions(admin: FakeAdmin, tmp_path: Path) -> None:
    path = write(tmp_path, "t,0,3\nt,2,9\n")
    code, out = reset("--from-file", str(path), "--topic", "t:1,2", "--execute")
    assert code == 0, out
    assert admin.altered == {T2: 9}
    assert f"Left unchanged ({path} gives no offset for them): t-1" in out


@pytest.mark.parametrize(("text", "problem"), [
    ("t,0,3\nnope,0,1\n", ":2: topic 'nope' does not exist"),
    ("t,0,3\n\nt,3,1\n", ":3: topic 't' has no partition 3 (it has 3: 0-2)"),
    ("t,zero,3\n", ":1: the partition must be a number from 0 to 2147483647, got 'zero'"),
])
def test_from_file_errors_name_the_file_and_line(
    admin: FakeAdmin, tmp_path: Path, text: str, problem: str
) -> None:
    path = write(tmp_path, text)
    code, out = reset("--from-file", str(path), "--execute")
    assert code == 1
    assert f"Error: {path}{problem}" in out
    assert admin.altered is None


@pytest.mark.parametrize("args", [
    ["--topic", "t", "--from-consumer-group", "cg", "--to-earliest"],
    ["--topic", "t", "--from-consumer-group", "cg", "--from-file", "f.csv"],
    ["--from-file", "f.csv", "--to-offset", "3"],
])
def test_sources_are_mutually_exclusive(admin: FakeAdmin, args: list[str]) -> None:
    code, out = reset(*args)
    assert code == 2
    assert "give exactly one of" in out and "--from-consumer-group GROUP" in out


def test_topic_is_required_except_with_a_file(admin: FakeAdmin) -> None:
    code, out = reset("--from-consumer-group", "cg")
    assert code == 2
    assert "give --topic TOPIC (required, except with --from-file PATH)" in out


def test_to_latest_still_resets_every_partition(admin: FakeAdmin) -> None:
    code, out = reset("--topic", "t", "--to-latest", "--execute")
    assert code == 0, out
    assert admin.altered == {T0: 100, T1: 100, T2: 100}


def test_nothing_to_reset_is_an_error_not_an_empty_change(
    admin: FakeAdmin, tmp_path: Path
) -> None:
    code, out = reset("--topic", "t:2", "--from-consumer-group", "cg", "--execute")
    assert code == 1
    assert ("Error: consumer group 'cg' has no committed offset for any of t-2: "
            "nothing to reset") in out
    path = write(tmp_path, "t,0,3\n")
    code, out = reset("--from-file", str(path), "--topic", "t:1", "--execute")
    assert code == 1
    assert f"Error: {path} gives no offset for any of t-1: nothing to reset" in out
    assert admin.altered is None


def test_dry_run_on_a_share_group_that_does_not_exist_yet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeAdmin()

    def no_group(group: str) -> dict[TopicPartition, SharePartitionOffsetInfo]:
        raise GroupIdNotFoundError(f"GROUP_ID_NOT_FOUND (error code 69): share group {group!r}")

    monkeypatch.setattr(fake, "list_share_group_offsets", no_group)
    monkeypatch.setattr(groups_cmd, "_admin", lambda *a: fake)
    code, out = reset("--topic", "t:0", "--from-consumer-group", "cg")
    assert code == 0, out
    assert out.splitlines()[1].split() == ["sg", "t", "0", "40", "-"]
