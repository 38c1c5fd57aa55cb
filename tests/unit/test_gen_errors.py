"""The error-code generator: the table, ``--check``, and the module it generates."""

from __future__ import annotations

import importlib.util
import pickle
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from kafka_share import _error_codes
from kafka_share import errors as e

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "kafka_share" / "errors.toml"
OUTPUT = ROOT / "kafka_share" / "_error_codes.py"
ENUM_OUTPUT = ROOT / "kafka_share" / "protocol" / "error_codes.py"


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_errors", ROOT / "tools" / "gen_errors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


gen = _load_generator()


@pytest.fixture
def copy(tmp_path: Path) -> tuple[Path, Path]:
    """A private copy of the table and of the generated modules (the ErrorCode
    module beside the classes, where _run points the generator)."""
    table, output = tmp_path / "errors.toml", tmp_path / "_error_codes.py"
    shutil.copy(TABLE, table)
    shutil.copy(OUTPUT, output)
    shutil.copy(ENUM_OUTPUT, _enum_of(output))
    return table, output


def _enum_of(output: Path) -> Path:
    return output.with_name("error_codes.py")


def _run(table: Path, output: Path, *extra: str) -> int:
    # Both outputs go to the copy: a run on an edited table must never write
    # into the source tree.
    code: int = gen.main(["--table", str(table), "--output", str(output),
                          "--enum-output", str(_enum_of(output)), *extra])
    return code


def test_checked_in_module_is_up_to_date(capsys: pytest.CaptureFixture[str]) -> None:
    assert gen.main(["--check"]) == 0
    assert "up to date" in capsys.readouterr().out


def test_check_detects_a_stale_module_after_a_table_edit(
    copy: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    table, output = copy
    assert _run(table, output, "--check") == 0
    text = table.read_text()
    edited = text.replace(
        'name = "SHARE_SESSION_NOT_FOUND"\nclass = "ShareSessionNotFoundError"\n'
        'java = "ShareSessionNotFoundException"\nretriable = true',
        'name = "SHARE_SESSION_NOT_FOUND"\nclass = "ShareSessionNotFoundError"\n'
        'java = "ShareSessionNotFoundException"\nretriable = false',
    )
    assert edited != text
    table.write_text(edited)
    before = output.read_text()
    assert _run(table, output, "--check") == 1
    assert "stale" in capsys.readouterr().err
    assert output.read_text() == before  # --check never writes
    assert _run(table, output) == 0
    assert _run(table, output, "--check") == 0
    assert "    code = 122\n" in output.read_text()
    assert output.read_text() != before


def test_check_detects_a_hand_edited_or_missing_module(copy: tuple[Path, Path]) -> None:
    table, output = copy
    output.write_text(output.read_text().replace("retriable = True", "retriable = False", 1))
    assert _run(table, output, "--check") == 1
    output.unlink()
    assert _run(table, output, "--check") == 1


def test_check_covers_the_error_code_enum(copy: tuple[Path, Path]) -> None:
    table, output = copy
    enum_module = _enum_of(output)
    assert _run(table, output, "--check") == 0
    enum_module.write_text(enum_module.read_text().replace("    NONE = 0\n", ""))
    assert _run(table, output, "--check") == 1
    assert _run(table, output) == 0
    assert "    NONE = 0\n" in enum_module.read_text()
    assert _run(table, output, "--check") == 0


_ROW_1 = (
    'code = 1\nname = "OFFSET_OUT_OF_RANGE"\nclass = "OffsetOutOfRangeError"\n'
    'java = "OffsetOutOfRangeException"\nretriable = false\n'
)


def _edit_row_1(old: str, new: str) -> Callable[[str], str]:
    """An edit of the table's row for code 1 (OFFSET_OUT_OF_RANGE), which has no doc."""

    def edit(text: str) -> str:
        assert _ROW_1 in text and old in _ROW_1
        return text.replace(_ROW_1, _ROW_1.replace(old, new, 1), 1)

    return edit


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (_edit_row_1("code = 1\n", "code = -1\n"), "ascending code order"),
        (_edit_row_1("code = 1\n", "code = 0\n"), "non-zero int16"),
        (_edit_row_1("code = 1\n", "code = 40000\n"), "non-zero int16"),
        (
            _edit_row_1('"OffsetOutOfRangeError"', '"UnknownServerError"'),
            "class 'UnknownServerError' is used by codes -1 and 1",
        ),
        (
            _edit_row_1('"OffsetOutOfRangeException"', '"UnknownServerException"'),
            "java 'UnknownServerException' is used by codes -1 and 1",
        ),
        (_edit_row_1('"OFFSET_OUT_OF_RANGE"', '"offset"'), "(code 1): name 'offset'"),
        (_edit_row_1('"OffsetOutOfRangeError"', '"Offset"'), "(code 1): class 'Offset'"),
        (_edit_row_1('"OffsetOutOfRangeError"', '"KafkaTimeoutError"'), "already defined by hand"),
        (_edit_row_1("= false", '= "no"'), "retriable must be true or false"),
        (_edit_row_1("= false\n", "= false\ncolour = 1\n"), "(code 1): unknown field(s) colour"),
        (_edit_row_1("retriable = false\n", ""), "row 2 (code 1): missing field(s) retriable"),
        (
            _edit_row_1("= false\n", '= false\nbases = ["TimeoutError"]\n'),
            "(code 1): base 'TimeoutError' is not a hand-written class",
        ),
        (
            _edit_row_1("= false\n", '= false\nbases = ["BrokerError"]\n'),
            "BrokerError is always the first base",
        ),
        (
            _edit_row_1("= false\n", '= false\ndoc = "a\\\\b"\n'),
            "(code 1): doc must be a string without",
        ),
        (lambda t: "version = 4\n" + t, "unknown top-level key(s) version"),
        (lambda t: t + "\n[[error]\n", "not valid TOML"),
    ],
)
def test_bad_table_is_refused_with_a_message_naming_the_problem(
    copy: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    edit: Callable[[str], str],
    expected: str,
) -> None:
    table, output = copy
    table.write_text(edit(table.read_text()))
    before = output.read_text()
    assert _run(table, output) == 2
    err = capsys.readouterr().err
    assert "error table is not valid" in err and expected in err, err
    assert output.read_text() == before  # nothing written from a bad table


def test_generated_classes_match_the_table_row_by_row() -> None:
    rows = tomllib.loads(TABLE.read_text())["error"]
    assert [row["code"] for row in rows] == list(e.ERROR_CODES)
    for row in rows:
        cls = e.ERROR_CODES[row["code"]]
        assert cls is getattr(e, row["class"])
        assert (cls.name, cls.retriable) == (row["name"], row["retriable"])
        extra = tuple(getattr(e, base) for base in row.get("bases", []))
        assert cls.__bases__ == (e.BrokerError, *extra)
        assert cls.__module__ == "kafka_share.errors"
        assert cls.__doc__ is not None
        assert cls.__doc__.startswith(f"{row['name']} ({row['code']}).")
        assert f"``{row['java']}``" in cls.__doc__
    assert set(_error_codes.__all__) == {row["class"] for row in rows}
    assert set(_error_codes.__all__) <= set(e.__all__)


def test_generated_classes_pickle_and_print_as_kafka_share_errors() -> None:
    err = e.error_for_code(121, "lock expired")
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is e.InvalidRecordStateError and again.args == err.args
    assert repr(e.InvalidRecordStateError) == "<class 'kafka_share.errors.InvalidRecordStateError'>"


@pytest.mark.parametrize(
    "module", ["kafka_share._error_codes", "kafka_share.errors", "kafka_share"]
)
def test_any_import_order_works(module: str) -> None:
    # errors.py and _error_codes.py import each other; a fresh interpreter that imports
    # either one first must end up with the full, consistent set of classes.
    probe = (
        f"import {module}; from kafka_share import errors as e, _error_codes as g; "
        "assert len(e.ERROR_CODES) == len(g.BY_CODE) == len(g.__all__); "
        "assert e.ShareSessionNotFoundError is g.ShareSessionNotFoundError"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
