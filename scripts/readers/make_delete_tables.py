#!/usr/bin/env python3
"""Create, with Spark, two small tables that carry row-level deletes:

  NAMESPACE.del_v2   format v2, merge-on-read: position delete files (Parquet)
  NAMESPACE.del_v3   format v3, merge-on-read: deletion vectors (Puffin)

Each gets 4 rows inserted, then DELETE id=2, UPDATE id=3, DELETE id=1, so the
live rows are (3,'C',null) and (4,'São',2024-06-01 12:34:56.789 UTC). Use it to
check that the readers agree on deletes (--print-expected prints the expected
canonical rows).

  make_delete_tables.py [catalog args] NAMESPACE

Known limit: SeaweedFS 4.48's table bucket refuses (403) objects named *.puffin,
so del_v3 cannot be written there (the DELETE fails); use --catalog fixture.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import ReaderError  # noqa: E402

COLUMNS = [("id", "long"), ("name", "string"), ("ts", "timestamptz")]
EXPECTED = [
    (3, "C", None),
    (4, "São", dt.datetime(2024, 6, 1, 12, 34, 56, 789000, tzinfo=dt.timezone.utc)),
]


def main() -> None:
    p = argparse.ArgumentParser(prog="make_delete_tables.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_catalog_args(p)
    p.add_argument("--print-expected", action="store_true")
    p.add_argument("namespace", nargs="?")
    args = p.parse_args()
    if args.print_expected:
        common.write_lines(common.serialize_rows(COLUMNS, EXPECTED))
        return
    if not args.namespace:
        p.error("the following arguments are required: namespace")
    try:
        cfg = common.resolve_catalog(args)
        common.check_catalog_reachable(cfg)
    except ReaderError as e:
        common.die("make_delete_tables", str(e), e.code)

    # Keep Spark's stdout off ours, as the reader does.
    os.dup2(2, 1)
    import spark_reader

    spark = spark_reader.session(cfg)
    c = spark_reader.CATALOG
    ns = ".".join(spark_reader.quote(x) for x in args.namespace.split("."))
    try:
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {c}.{ns}")
        for v in (2, 3):
            n = f"{c}.{ns}.del_v{v}"
            spark.sql(f"DROP TABLE IF EXISTS {n}")
            spark.sql(f"""CREATE TABLE {n} (id bigint, name string, ts timestamp) USING iceberg
                TBLPROPERTIES ('format-version'='{v}', 'write.delete.mode'='merge-on-read',
                'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read')""")
            spark.sql(f"""INSERT INTO {n} VALUES (1, 'a', TIMESTAMP'2024-01-01 00:00:00'),
                (2, 'b', NULL), (3, 'c', NULL), (4, 'São', TIMESTAMP'2024-06-01 12:34:56.789')""")
            spark.sql(f"DELETE FROM {n} WHERE id = 2")
            spark.sql(f"UPDATE {n} SET name = 'C' WHERE id = 3")
            spark.sql(f"DELETE FROM {n} WHERE id = 1")
            kinds = sorted({r.file_format for r in
                            spark.sql(f"SELECT file_format FROM {n}.delete_files").collect()})
            sys.stderr.write(f"make_delete_tables: {args.namespace}.del_v{v}: "
                             f"delete files {kinds}\n")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
