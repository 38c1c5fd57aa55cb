"""What importing the source costs a process Spark starts for it."""

from __future__ import annotations

from tests.fresh import run_fresh


def test_the_source_imports_no_arrow_numpy_or_pool_code() -> None:
    # Spark imports the source in each Python process it starts for planning and
    # as the source runner, before the first trigger; those never touch Arrow data.
    script = (
        "import sys\n"
        "import kafka_share.spark.source\n"
        "heavy = ('numpy', 'pyarrow', 'pyarrow.compute', 'asyncio', 'kafka_share.spark.pool',\n"
        "         'kafka_share.spark._slots')\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
        "from kafka_share.spark import OUTCOME_SCHEMA, process_queue\n"
        "print(callable(process_queue), 'kafka_share.spark.pool' in sys.modules)\n"
    )
    assert run_fresh(script, timeout_s=120).split("\n")[:2] == ["", "True True"]
