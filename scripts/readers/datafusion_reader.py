#!/usr/bin/env python3
"""Read an Iceberg table with Apache DataFusion (Python bindings) through the
Iceberg table provider of pyiceberg-core (iceberg-rust), and print its rows in
the canonical format of common.py.

PyIceberg resolves the table in the catalog (REST or embedded) to its current
metadata file and FileIO settings; iceberg-rust (pyiceberg-core) plans the scan
and reads the files, DataFusion runs `SELECT *`. pyiceberg-core is built against
one DataFusion major version (0.11 -> DataFusion 54): the FFI table provider of
another major is refused.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import arrow_rows  # noqa: E402
import common  # noqa: E402
from common import EXIT_FAILURE, ReaderError  # noqa: E402


def file_io_properties(cfg: common.CatalogConfig, tbl) -> dict[str, str]:
    """iceberg-rust FileIO properties: the table's (catalog + table config), with
    path-style requests to the test bed's store."""
    props = {k: str(v) for k, v in tbl.io.properties.items()}
    if props.get("s3.endpoint"):
        props.setdefault("s3.path-style-access", "true")
    return props


def read(cfg: common.CatalogConfig, table: common.TableName):
    import datafusion
    from pyiceberg_core.datafusion import IcebergDataFusionTable

    import polars_reader

    tbl = polars_reader.load_table(cfg, table)
    columns = polars_reader.columns_of(tbl)
    try:
        provider = IcebergDataFusionTable(
            identifier=list(table.namespace) + [table.name],
            metadata_location=tbl.metadata_location,
            file_io_properties=file_io_properties(cfg, tbl))
        ctx = datafusion.SessionContext()
        ctx.register_table("t", provider)
        arrow = ctx.sql("SELECT * FROM t").to_arrow_table()
    except Exception as e:  # DataFusion / iceberg-rust errors are plain Exceptions
        raise ReaderError(f"DataFusion {datafusion.__version__} (pyiceberg-core) cannot read "
                          f"{table.dotted}: {type(e).__name__}: {str(e).splitlines()[0]}",
                          EXIT_FAILURE)
    return columns, arrow_rows.rows(arrow, columns)


def main() -> None:
    common.run_reader("datafusion", read)


if __name__ == "__main__":
    main()
