#!/usr/bin/env python3
"""Read an Iceberg table with chDB (embedded ClickHouse) and print its rows in
the canonical format of common.py.

PyIceberg resolves the table in the catalog (REST or embedded) to its location,
current snapshot and FileIO settings (metadata only); ClickHouse's table
functions read the table themselves: icebergS3(<endpoint>/<bucket>/<path>,
key, secret) for s3:// tables (path-style, the test bed's store), icebergLocal(DIR)
for file:// tables of the embedded catalog, both pinned to the catalog's current
snapshot with SETTINGS iceberg_snapshot_id (ClickHouse finds the metadata file
itself, in the table's metadata/ folder). Rows come back as Arrow.

What chDB 4.4.0 (ClickHouse 26.9.2.1) cannot read makes the reader exit 1 with
ClickHouse's message, e.g. deletion vectors (format v3): "Position deletes are
supported only for parquet format". Tables whose S3 requests the catalog signs
(nessie) are refused: icebergS3 needs keys.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import arrow_rows  # noqa: E402
import common  # noqa: E402
from common import EXIT_FAILURE, ReaderError  # noqa: E402


def _lit(s: str) -> str:
    """A ClickHouse string literal."""
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def table_function(cfg: common.CatalogConfig, tbl) -> str:
    loc = tbl.location().rstrip("/")
    props = tbl.io.properties
    if loc.startswith("file://") or loc.startswith("/"):
        path = loc[len("file://"):] if loc.startswith("file://") else loc
        return f"icebergLocal({_lit(path)})"
    if loc.startswith(("s3://", "s3a://")):
        if cfg.remote_signing:
            raise ReaderError("chDB (icebergS3) cannot use a remote S3 signer: it needs "
                              "S3 keys (use --store-keys)", EXIT_FAILURE)
        endpoint = (props.get("s3.endpoint") or cfg.s3_endpoint or "").rstrip("/")
        key = props.get("s3.access-key-id") or cfg.s3_access_key
        secret = props.get("s3.secret-access-key") or cfg.s3_secret_key
        token = props.get("s3.session-token")
        if not endpoint or not key:
            raise ReaderError(f"no S3 endpoint or keys for {loc}", EXIT_FAILURE)
        url = endpoint + "/" + loc.split("://", 1)[1] + "/"
        args = [url, key, secret] + ([token] if token else [])
        return "icebergS3(" + ", ".join(_lit(a) for a in args) + ")"
    raise ReaderError(f"chDB reader: table location {loc} is not s3:// or file://",
                      EXIT_FAILURE)


def read(cfg: common.CatalogConfig, table: common.TableName):
    import chdb

    import polars_reader

    tbl = polars_reader.load_table(cfg, table)
    columns = polars_reader.columns_of(tbl)
    snap = tbl.metadata.current_snapshot_id
    if snap is None:
        return columns, []
    names = ", ".join("`" + n.replace("`", "\\`") + "`" for n, _ in columns)
    sql = (f"SELECT {names} FROM {table_function(cfg, tbl)} "
           f"SETTINGS iceberg_snapshot_id = {int(snap)}, session_timezone = 'UTC'")
    try:
        arrow = chdb.query(sql, "ArrowTable")
    except Exception as e:  # chDB raises RuntimeError("Code: N. DB::Exception: ...")
        msg = str(e).splitlines()[0]
        raise ReaderError(f"chDB {chdb.__version__} cannot read {table.dotted}: {msg}",
                          EXIT_FAILURE)
    return columns, arrow_rows.rows(arrow, columns)


def main() -> None:
    common.run_reader("chdb", read)


if __name__ == "__main__":
    main()
