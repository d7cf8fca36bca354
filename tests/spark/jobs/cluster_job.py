"""A Spark job run in its own process by tests/spark/test_cluster.py: read + audit on a given master or Connect URL.

Usage: python -m tests.spark.jobs.cluster_job BOOTSTRAP TOPIC (--master URL | --remote URL)
Prints one JSON line: rows read, audit figures, the driver's pid, the pids of the Python workers that ran tasks,
the reader engine and (classic sessions) the read's query plan.
"""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    bootstrap, topic, how, url = argv
    from rocketkafka.spark import audit_order, choose_engine, read_messages, spark_session

    spark = spark_session(**{how.lstrip("-"): url}, app_name="rocketkafka-cluster-test")
    df = read_messages(spark, {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, includeHeaders=True)
    rows = df.count()

    def pids(batches):
        import pyarrow as pa

        for batch in batches:
            yield pa.RecordBatch.from_pylist([{"pid": os.getpid()}] * batch.num_rows)

    workers = sorted({r.pid for r in df.select("offset").mapInArrow(pids, "pid long").distinct().collect()})
    result = audit_order(spark, bootstrap, topic, sequence="header:seq")
    print(json.dumps({"rows": rows, "summary": result.summary, "driver": os.getpid(), "workers": workers,
                      "session": type(spark).__module__, "engine": choose_engine(spark),
                      "plan": df._jdf.queryExecution().toString() if hasattr(df, "_jdf") else ""}))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
