#!/usr/bin/env python3
"""How many data files Spark reads for a filtered query: partition pruning
as Spark does it, from Iceberg's scan metrics (`resultDataFiles`,
`skippedDataFiles` of the batch scan after the query ran).

    spark_plan_files.py [catalog options as the readers] --where SQL ns.t

SQL is a Spark SQL predicate, e.g. "region = 'eu' AND o >= 50". Prints
one JSON line: {"all": data files read without a filter, "filtered": data
files read with it, "skipped": data files the filter skipped, "rows": rows
it returned}. A session of its own (AQE off, so the scan's metrics are on
the executed plan). Exit codes as the readers (common.py).
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import spark_reader  # noqa: E402


def scan_metrics(df) -> tuple[dict[str, int], int]:
    """Runs the query; the Iceberg scan's metrics and the rows returned."""
    rows = len(df.collect())
    metrics: dict[str, int] = {}
    leaves = df._jdf.queryExecution().executedPlan().collectLeaves().iterator()
    while leaves.hasNext():
        m = leaves.next().metrics()
        keys = m.keySet().iterator()
        while keys.hasNext():
            k = keys.next()
            metrics[k] = metrics.get(k, 0) + int(m.apply(k).value())
    return metrics, rows


def main() -> None:
    argv = sys.argv[1:]
    if "--where" not in argv or argv.index("--where") + 1 >= len(argv):
        common.die("spark_plan_files", "--where SQL is required", common.EXIT_USAGE)
    i = argv.index("--where")
    where = argv[i + 1]
    _args, cfg, table = common.parse_reader_args("spark", argv[:i] + argv[i + 2:])
    spark = spark_reader.session(cfg, {"spark.sql.adaptive.enabled": "false"})
    try:
        name = ".".join(spark_reader.quote(x)
                        for x in (spark_reader.CATALOG,) + table.namespace + (table.name,))
        every, _ = scan_metrics(spark.table(name))
        kept, rows = scan_metrics(spark.table(name).where(where))
    finally:
        spark.stop()
    if "resultDataFiles" not in kept:
        common.die("spark_plan_files", "no Iceberg scan metrics on the plan", common.EXIT_FAILURE)
    print(json.dumps({"all": every["resultDataFiles"], "filtered": kept["resultDataFiles"],
                      "skipped": kept.get("skippedDataFiles", 0), "rows": rows}))


if __name__ == "__main__":
    main()
