#!/usr/bin/env bash
# The project's two entry points, each self-contained on a fresh machine
# (needs git, Python 3.11+, Java 17+ and Maven):
#   ./run.sh demo   run the demo on an embedded local Kafka broker
#   ./run.sh test   run the whole test suite (lint, types, generated-code check, tests)
# Both create .venv, install the package with its extras and fetch the broker jars.
set -euo pipefail
cd "$(dirname "$0")"

pick_python() {
    for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
        [ -n "$candidate" ] || continue
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    echo "kafka-share needs Python 3.11 or newer on PATH (or set PYTHON=/path/to/python3.11)" >&2
    return 1
}

venv=.venv
if [ ! -x "$venv/bin/python" ]; then
    "$(pick_python)" -m venv "$venv"
fi
py="$venv/bin/python"
"$py" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$py" -m pip install --quiet --disable-pip-version-check -e '.[test]'

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
    demo)
        exec "$venv/bin/kafka-share" demo "$@"
        ;;
    test)
        # Fetch the broker jars first so a Maven failure is reported on its own.
        "$venv/bin/kafka-share" broker fetch
        "$venv/bin/ruff" check kafka_share tests tools benchmarks examples
        "$venv/bin/mypy"
        "$py" tools/gen_messages.py --check
        "$py" tools/gen_errors.py --check
        exec "$py" -m pytest "$@"
        ;;
    *)
        echo "usage: ./run.sh demo|test [args...]" >&2
        exit 2
        ;;
esac
