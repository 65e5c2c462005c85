#!/usr/bin/env python3
"""Read an Iceberg table with Polars (pl.scan_iceberg, its native Parquet reader)
and print its rows in the canonical format of common.py.

PyIceberg loads the table (REST or embedded catalog) and plans the scan; Polars
reads the data files and applies position deletes and deletion vectors itself.
reader_override="native" is forced: without it Polars falls back, silently, to
PyIceberg's reader for what its own reader cannot do (e.g. equality deletes),
which would not test Polars. Such a table makes the reader exit 1 with Polars'
reason ("iceberg reader_override='native' failed: ...").
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import arrow_rows  # noqa: E402
import common  # noqa: E402
from common import EXIT_FAILURE, EXIT_NO_TABLE, ReaderError  # noqa: E402

# Plan with PyIceberg, quietly (the optional polars planner plugin is not installed).
os.environ.setdefault("POLARS_ICEBERG_PLANNER", "pyiceberg")


def load_table(cfg: common.CatalogConfig, table: common.TableName):
    import pyiceberg_reader
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    cat = pyiceberg_reader.load_catalog(cfg)
    try:
        return cat.load_table(table.namespace + (table.name,))
    except (NoSuchTableError, NoSuchNamespaceError) as e:
        where = cfg.sql_path if cfg.catalog == "sql" else cfg.uri
        raise ReaderError(f"table {table.dotted} does not exist in {where}: {e}",
                          EXIT_NO_TABLE)


def columns_of(tbl):
    import pyiceberg_reader

    return [(f.name, pyiceberg_reader.ice_type(f.field_type)) for f in tbl.schema().fields]


def read(cfg: common.CatalogConfig, table: common.TableName):
    import polars as pl

    tbl = load_table(cfg, table)
    columns = columns_of(tbl)
    try:
        # The table's FileIO settings (catalog config + table config + ours),
        # which Polars maps onto its object store (s3.endpoint, keys, region).
        df = pl.scan_iceberg(tbl, reader_override="native",
                             storage_options=dict(tbl.io.properties)).collect()
    except (pl.exceptions.PolarsError, OSError) as e:
        raise ReaderError(f"Polars {pl.__version__} cannot read {table.dotted}: "
                          f"{type(e).__name__}: {str(e).splitlines()[0]}", EXIT_FAILURE)
    return columns, arrow_rows.rows(df.to_arrow(), columns)


def main() -> None:
    common.run_reader("polars", read)


if __name__ == "__main__":
    main()
