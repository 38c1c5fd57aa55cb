"""attrs_repr: the package's one repr for its attrs classes prints what attrs' own would."""

from __future__ import annotations

import uuid

import attrs

from kafka_share._reprs import attrs_repr
from kafka_share.models import TopicIdPartition


def _hidden(value: object) -> str:
    return f"<{len(str(value))} chars>"


@attrs.frozen
class WithAttrsRepr:
    count: int
    secret: str = attrs.field(default="pw", repr=False)
    token: str = attrs.field(default="abc", repr=_hidden)
    items: list[int] = attrs.field(factory=list)


@attrs_repr
@attrs.frozen(repr=False)
class WithSharedRepr:
    count: int
    secret: str = attrs.field(default="pw", repr=False)
    token: str = attrs.field(default="abc", repr=_hidden)
    items: list[int] = attrs.field(factory=list)


class Outer:
    @attrs_repr
    @attrs.define(repr=False)
    class Inner:
        a: int = 3


@attrs_repr
@attrs.define(repr=False)
class OwnRepr:
    a: int = 1

    def __repr__(self) -> str:
        return "mine"


def test_the_shared_repr_prints_what_attrs_does() -> None:
    theirs = repr(WithAttrsRepr(2, items=[1, "x"]))  # type: ignore[list-item]
    ours = repr(WithSharedRepr(2, items=[1, "x"]))  # type: ignore[list-item]
    assert ours == theirs.replace("WithAttrsRepr", "WithSharedRepr")
    assert ours == "WithSharedRepr(count=2, token=<3 chars>, items=[1, 'x'])"


def test_nested_classes_and_own_reprs() -> None:
    assert repr(Outer.Inner()) == "Outer.Inner(a=3)"
    assert repr(OwnRepr()) == "mine"


def test_the_package_classes_use_it() -> None:
    tip = TopicIdPartition(uuid.UUID(int=1), "t", 0)
    assert repr(tip) == (
        "TopicIdPartition(topic_id=UUID('00000000-0000-0000-0000-000000000001'), "
        "topic='t', partition=0)"
    )


def test_every_attrs_class_of_the_package_takes_the_shared_repr() -> None:
    # Start-up: a class made with attrs' own repr compiles one more method at import.
    import re
    from pathlib import Path

    package = Path(__file__).resolve().parents[2] / "kafka_share"
    decorator = re.compile(r"^\s*@attrs\.(frozen|define|mutable)\b(.*)$")
    missing = []
    for path in sorted(package.rglob("*.py")):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            match = decorator.match(line)
            if match and not ("repr=False" in match.group(2)
                              and lines[i - 1].strip() == "@attrs_repr"):
                missing.append(f"{path.relative_to(package.parent)}:{i + 1}")
    assert missing == []
