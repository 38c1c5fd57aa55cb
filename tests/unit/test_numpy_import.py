"""kafka_share._numpy_import: numpy loaded by the package does not leave OpenBLAS's
threads spinning, and the application's environment is as it was."""

from __future__ import annotations

import os

import pytest

from tests.fresh import run_fresh

pytest.importorskip("numpy")

# CPU of the threads other than the main one (OpenBLAS's pool) over the 0.3 s
# after the import: its default idle spin is ~0.1 s of a core on each.
_SPIN_AFTER_IMPORT = """
import os, sys, threading, time
main = threading.get_native_id()
def others_cpu_s():
    total = 0
    for tid in os.listdir('/proc/self/task'):
        if int(tid) != main:
            fields = open(f'/proc/self/task/{tid}/stat').read().rsplit(')', 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf('SC_CLK_TCK')
before = others_cpu_s()
"""

_AFTER = """
time.sleep(0.3)
print(round(others_cpu_s() - before, 3), os.environ.get('OPENBLAS_THREAD_TIMEOUT'))
"""


_LOADERS = {
    "import_numpy": "from kafka_share._numpy_import import import_numpy\n"
                    "assert import_numpy() is sys.modules['numpy']\n",
    # poll()'s vectorised decoder, loaded on a daemon thread in a consumer
    "vectorised": "from kafka_share._app import decoding\n"
                  "decoding._load_vectorised()\nassert decoding._VECTORISED\n",
    # poll_arrow's helpers
    "columnar": "from kafka_share._app import decoding\ndecoding.columnar_helpers()\n",
}


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads per-thread CPU from /proc")
@pytest.mark.parametrize("loader", sorted(_LOADERS))
def test_first_import_leaves_no_spinning_threads_and_restores_the_environment(loader: str) -> None:
    spin_s, variable = run_fresh(_SPIN_AFTER_IMPORT + _LOADERS[loader] + _AFTER).split()
    assert float(spin_s) < 0.03
    assert variable == "None"


def test_an_application_setting_keeps_its_value() -> None:
    out = run_fresh(
        "import os, sys\nos.environ['OPENBLAS_THREAD_TIMEOUT'] = '20'\n"
        "from kafka_share._numpy_import import import_numpy\n"
        "import_numpy()\nprint('numpy' in sys.modules, os.environ['OPENBLAS_THREAD_TIMEOUT'])\n"
    )
    assert out.split() == ["True", "20"]


def test_numpy_imported_already_is_returned_as_it_is() -> None:
    out = run_fresh(
        "import os, numpy\n"
        "from kafka_share._numpy_import import import_numpy\n"
        "print(import_numpy() is numpy, 'OPENBLAS_THREAD_TIMEOUT' in os.environ)\n"
    )
    assert out.split() == ["True", "False"]
