"""The guide's table of consumer keys agrees with the keys ShareConsumerConfig declares.

The table is written by hand (its "Meaning" column says more than the code's
comments); this keeps its key names and defaults from drifting from the one
declaration of each key.
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from kafka_share.config import ShareConsumerConfig

GUIDE = Path(__file__).parents[2] / "docs" / "guide.md"
HEADER = "| Key | Default | Meaning |\n|---|---|---|\n"


def table_rows() -> list[tuple[list[str], list[str]]]:
    """(keys, defaults) of each row of the guide's consumer key table."""
    text = GUIDE.read_text(encoding="utf-8")
    assert HEADER in text, f"the consumer key table is gone from {GUIDE}"
    table = text.split(HEADER, 1)[1].split("\n\n", 1)[0]
    rows = []
    for line in table.splitlines():
        key_cell, default_cell, _ = line.strip().strip("|").split(" | ", 2)
        keys = re.findall(r"`([^`]+)`", key_cell)
        defaults = [d.strip() for d in default_cell.split(", ")]
        rows.append((keys, defaults))
    return rows


def documented(value: object) -> str:
    """A default the way the guide writes it."""
    if value is attrs.NOTHING:
        return "required"
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)  # an enum's str() is its config string


def test_every_key_of_the_table_is_declared_with_its_documented_default() -> None:
    fields = attrs.fields_dict(ShareConsumerConfig)
    rows = table_rows()
    assert len(rows) > 30
    for keys, cells in rows:
        defaults = cells * len(keys) if len(cells) == 1 else cells
        assert len(defaults) == len(keys), (keys, cells)
        for key, cell in zip(keys, defaults, strict=True):
            field = fields.get(key.replace(".", "_"))
            assert field is not None, f"the guide documents {key}, which is not a config key"
            if "<" in cell:
                continue  # a pattern (client.id), not a literal
            written = "unset" if cell.startswith("unset") else cell.strip("`")
            assert written == documented(field.default), (
                f"the guide gives {key} the default {written!r}, the config "
                f"{documented(field.default)!r}"
            )
