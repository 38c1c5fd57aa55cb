"""The ``kafka-share`` command's entry point.

The commands need click and rich, which the library itself does not: they come
with the ``cli`` extra (``pip install 'kafka-share[cli]'``). This module imports
neither, so a missing extra is reported in one line instead of a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]

CLI_EXTRA_HINT = "install the command line with: pip install 'kafka-share[cli]'"


def main(argv: Sequence[str] | None = None) -> None:
    """Run ``kafka-share`` with ``argv`` (default: the process's arguments)."""
    missing = [name for name in ("click", "rich") if not _importable(name)]
    if missing:
        sys.stderr.write(
            f"kafka-share: the command line needs {' and '.join(missing)}, which are not "
            f"installed; {CLI_EXTRA_HINT}\n"
        )
        raise SystemExit(1)
    from kafka_share.commands import cli  # noqa: PLC0415 (needs the extra)

    cli.main(args=list(argv) if argv is not None else None, prog_name="kafka-share")


def _importable(name: str) -> bool:
    import importlib  # noqa: PLC0415

    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True
