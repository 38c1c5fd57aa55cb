"""Import numpy for the package's own decoders without OpenBLAS's idle spin.

numpy's Linux and Windows wheels link OpenBLAS, whose worker threads spin for
about 2^28 cycles (~0.1 s of a core) after the library loads, waiting for
linear-algebra work that a Kafka consumer never gives them. Measured on a
2-core machine: importing numpy cost 0.16-0.18 s of CPU, 0.06-0.08 s with
``OPENBLAS_THREAD_TIMEOUT=4`` (spin 2^4 cycles, then sleep); a consumer that
loads numpy part way through reading 200,000 records of 1 KiB paid 0.1-1.1 µs a
record for the spin (six interleaved pairs), which also took the core the
broker and the network needed. Matrix products keep every thread (300 x 300:
20-23 ms for 20 either way); only the idle wait before a thread sleeps is
shorter.

So when the package is the first to import numpy and the application has not
set the variable, it is set for the import (OpenBLAS reads it when it loads)
and removed again, so child processes do not inherit it. An application that
imports numpy itself first, or sets ``OPENBLAS_THREAD_TIMEOUT``, keeps its own
choice (``docs/performance.md``).
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from types import ModuleType

__all__ = ["import_numpy"]

_TIMEOUT_VARIABLE = "OPENBLAS_THREAD_TIMEOUT"
#: the shortest wait OpenBLAS accepts: 2^4 cycles before an idle thread sleeps
_TIMEOUT_EXPONENT = "4"
_lock = threading.Lock()


def import_numpy() -> ModuleType:
    """numpy, imported with OpenBLAS's idle spin cut short when this is the
    first import (raises ImportError when numpy is not installed)."""
    loaded = sys.modules.get("numpy")
    if loaded is not None:
        return loaded
    with _lock:  # two threads must not restore each other's variable
        if _TIMEOUT_VARIABLE in os.environ or "numpy" in sys.modules:
            return importlib.import_module("numpy")
        os.environ[_TIMEOUT_VARIABLE] = _TIMEOUT_EXPONENT
        try:
            return importlib.import_module("numpy")
        finally:
            os.environ.pop(_TIMEOUT_VARIABLE, None)
