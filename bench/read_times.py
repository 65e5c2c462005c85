"""DuckDB and Spark on a table of the test bed's reference REST catalog:
`count(*)`, a scan (`max(planned)`: every row's value read) and a point
query on `id`, each timed in the engine's own session (best and median of 10, after
one warm-up; a session's start is not timed). Prints one JSON object:

    {"duckdb": {"rows": N, "count_s": .., "count_median_s": .., "scan_s": .., ...},
     "spark": {...}}

Run with the test bed's Python:

    read_times.py <namespace> <table> <id>
"""

import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scripts", "readers"))

import common  # noqa: E402


TIMES = 10


def best(run, sql):
    """The rows, the best and the median time of TIMES runs."""
    run(sql)
    times = []
    for _ in range(TIMES):
        started = time.monotonic()
        rows = run(sql)
        times.append(time.monotonic() - started)
    return rows, round(min(times), 3), round(statistics.median(times), 3)


def timed(run, name, key):
    count, count_s, count_med = best(run, f"SELECT count(*) FROM {name}")
    _, scan_s, scan_med = best(run, f"SELECT max(planned) FROM {name}")
    point, point_s, point_med = best(run, f"SELECT count(*) FROM {name} WHERE id = {key}")
    return {"rows": count[0][0], "count_s": count_s, "count_median_s": count_med,
            "scan_s": scan_s, "scan_median_s": scan_med,
            "point_rows": point[0][0], "point_s": point_s, "point_median_s": point_med}


def duckdb_times(namespace, table, key):
    import duckdb_reader
    _, cfg, _ = common.parse_reader_args("duckdb", ["--catalog", "fixture", f"{namespace}.{table}"])
    con = duckdb_reader.connect(cfg)
    name = f"cat.{duckdb_reader.ident(namespace)}.{duckdb_reader.ident(table)}"
    return timed(lambda sql: con.execute(sql).fetchall(), name, key)


def spark_times(namespace, table, key):
    import spark_reader
    _, cfg, _ = common.parse_reader_args("spark", ["--catalog", "fixture", f"{namespace}.{table}"])
    spark = spark_reader.session(cfg)
    try:
        name = f"{spark_reader.CATALOG}.`{namespace}`.`{table}`"
        return timed(lambda sql: [tuple(r) for r in spark.sql(sql).collect()], name, key)
    finally:
        spark.stop()


def main():
    namespace, table, key = sys.argv[1], sys.argv[2], int(sys.argv[3])
    print(json.dumps({"duckdb": duckdb_times(namespace, table, key),
                      "spark": spark_times(namespace, table, key)}))


if __name__ == "__main__":
    main()
