"""DuckDB on a table of the test bed's reference REST catalog: count(*)
and a point query on `id`, each timed (best of 3, after one warm-up).
Prints one JSON object. Run with the test bed's Python:

    maintain_query.py <namespace> <table> <id>
"""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scripts", "readers"))

import common  # noqa: E402
import duckdb_reader  # noqa: E402


def best(con, sql):
    con.execute(sql).fetchall()
    times = []
    for _ in range(3):
        started = time.monotonic()
        rows = con.execute(sql).fetchall()
        times.append(time.monotonic() - started)
    return rows, round(min(times), 3)


def main():
    namespace, table, key = sys.argv[1], sys.argv[2], int(sys.argv[3])
    _, cfg, _ = common.parse_reader_args("duckdb", ["--catalog", "fixture", f"{namespace}.{table}"])
    con = duckdb_reader.connect(cfg)
    name = f"cat.{duckdb_reader.ident(namespace)}.{duckdb_reader.ident(table)}"
    rows, count_s = best(con, f"SELECT count(*) FROM {name}")
    point, point_s = best(con, f"SELECT count(*) FROM {name} WHERE id = {key}")
    print(json.dumps({"rows": rows[0][0], "count_s": count_s, "point_rows": point[0][0], "point_s": point_s}))


if __name__ == "__main__":
    main()
