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

# The GSSAPI tests run a real MIT KDC (Debian's krb5-kdc, krb5-admin-server,
# krb5-user) and build the gssapi extra against libkrb5-dev. Installed here where
# apt-get can (as root); elsewhere those tests skip and say what is missing.
install_kerberos() {
    local packages=(krb5-kdc krb5-admin-server krb5-user libkrb5-dev)
    if ! command -v krb5-config >/dev/null 2>&1 || [ ! -x /usr/sbin/krb5kdc ]; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            echo "installing ${packages[*]} for the Kerberos tests" >&2
            export DEBIAN_FRONTEND=noninteractive
            apt-get update -qq >/dev/null &&
                apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null ||
                echo "could not install ${packages[*]}: the Kerberos tests will skip" >&2
        else
            echo "not root or no apt-get: install ${packages[*]} for the Kerberos tests" >&2
        fi
    fi
    if command -v krb5-config >/dev/null 2>&1; then
        "$py" -m pip install --quiet --disable-pip-version-check -e '.[test,gssapi]' ||
            echo "the gssapi extra did not build: the Kerberos tests will skip" >&2
    fi
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
    demo)
        exec "$venv/bin/kafka-share" demo "$@"
        ;;
    test)
        install_kerberos
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
