"""``kafka-share work``: loading the handler and the retryable types, its options
(the command against a broker: tests/integration/test_workers.py)."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from kafka_share.commands import cli
from kafka_share.commands.work import (
    _exception_type,
    _is_coroutine_function,
    _properties,
    _summary_line,
    load_handler,
)
from kafka_share.workers import WorkerSummary


@pytest.fixture
def app(tmp_path: Path) -> Path:
    (tmp_path / "jobs_app.py").write_text(
        "class Busy(Exception):\n    pass\n\n"
        "def handle(record):\n    return None\n\n"
        "async def ahandle(record):\n    return None\n\n"
        "class Handler:\n    async def __call__(self, record):\n        return None\n\n"
        "handler_object = Handler()\n"
        "NOT_CALLABLE = 3\n"
    )
    (tmp_path / "broken_app.py").write_text("import not_a_module_anywhere\n")
    return tmp_path


def test_load_handler_from_the_app_dir(app: Path) -> None:
    handler = load_handler("jobs_app:handle", str(app))
    assert handler.__name__ == "handle"  # type: ignore[attr-defined]
    assert not _is_coroutine_function(handler)
    assert _is_coroutine_function(load_handler("jobs_app:ahandle", str(app)))
    assert _is_coroutine_function(load_handler("jobs_app:handler_object", str(app)))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("jobs_app.handle", "is not module:function"),
        ("jobs_app:", "is not module:function"),
        ("no_such_app:handle", "cannot import module 'no_such_app'"),
        ("jobs_app:missing", "has no attribute 'missing'"),
        ("jobs_app:NOT_CALLABLE", "is not callable"),
    ],
)
def test_bad_handlers_are_named(app: Path, spec: str, message: str) -> None:
    with pytest.raises(click.BadParameter, match=message):
        load_handler(spec, str(app))


def test_an_import_failing_inside_the_module_is_its_own_error(app: Path) -> None:
    with pytest.raises(ModuleNotFoundError, match="not_a_module_anywhere"):
        load_handler("broken_app:handle", str(app))


def test_retryable_types(app: Path) -> None:
    assert _exception_type("TimeoutError", str(app)) is TimeoutError
    busy = _exception_type("jobs_app:Busy", str(app))
    assert busy.__name__ == "Busy" and _exception_type("jobs_app.Busy", str(app)) is busy
    for spec in ("NoSuchError", "jobs_app:handle", "len"):
        with pytest.raises(click.BadParameter, match="is not an exception type"):
            _exception_type(spec, str(app))


def test_properties() -> None:
    assert _properties(("a.b=1", " c = x=y ")) == {"a.b": "1", "c": "x=y"}
    with pytest.raises(click.BadParameter, match="is not KEY=VALUE"):
        _properties(("novalue",))


def test_summary_line() -> None:
    summary = WorkerSummary(accepted=5, released=1, rejected=2, released_on_stop=7,
                            abandoned=1, stopped_by="SIGTERM")
    assert _summary_line(summary) == (
        "Stopped (SIGTERM): 5 accepted, 1 released, 2 rejected; 7 released unhandled on "
        "stop (1 handlers still running were abandoned)"
    )


def test_bad_handler_is_one_line_before_connecting(app: Path) -> None:
    result = CliRunner().invoke(cli, [
        "work", "jobs_app:missing", "--app-dir", str(app), "--group", "g", "--topic", "t",
        "--bootstrap-server", "localhost:1",
    ])
    assert result.exit_code == 2
    assert "has no attribute 'missing'" in result.output
