#!/usr/bin/env python3
"""Read an Iceberg table with chDB (embedded ClickHouse) and print its rows in
the canonical format of common.py.

PyIceberg resolves the table in the catalog (REST or embedded) to its location,
current snapshot and FileIO settings (metadata only); ClickHouse's table
functions read the table themselves: icebergS3(<endpoint>/<bucket>/<path>,
key, secret) for s3:// tables (path-style, the test bed's store), icebergLocal(DIR)
for file:// tables of the embedded catalog, as table engines (IcebergS3,
IcebergLocal) in a temporary chDB session, pinned to the catalog's current
metadata file (SETTINGS iceberg_metadata_file_path; left to itself ClickHouse
takes the highest version number in metadata/, which may be a dropped table's).
Rows come back as Arrow.

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


def refuse_unreadable(tbl, table: common.TableName) -> None:
    """Refuse the types ClickHouse 26.9 reads with other values (never print them):
    `time` comes back as Int64 whole seconds (12:34:56.789 -> 45296); an optional
    struct, list or map cannot be null in ClickHouse (Tuple, Array, Map are never
    Nullable): a null one reads as an empty / all-null one."""
    from pyiceberg import types as it

    def walk(t, path, optional):
        if isinstance(t, it.TimeType):
            raise ReaderError(f"chDB cannot read {table.dotted}: column {path} is Iceberg "
                              "time, which ClickHouse reads as Int64 whole seconds",
                              EXIT_FAILURE)
        if isinstance(t, (it.StructType, it.ListType, it.MapType)) and optional:
            raise ReaderError(f"chDB cannot read {table.dotted}: column {path} is an optional "
                              f"{type(t).__name__[:-4].lower()}, and ClickHouse reads a null "
                              "one as empty (Tuple/Array/Map are never Nullable)",
                              EXIT_FAILURE)
        if isinstance(t, it.StructType):
            for f in t.fields:
                walk(f.field_type, f"{path}.{f.name}", f.optional)
        elif isinstance(t, it.ListType):
            walk(t.element_type, f"{path}[]", t.element_required is False)
        elif isinstance(t, it.MapType):
            walk(t.key_type, f"{path}.key", False)
            walk(t.value_type, f"{path}.value", t.value_required is False)

    for f in tbl.schema().fields:
        walk(f.field_type, f.name, f.optional)


def read(cfg: common.CatalogConfig, table: common.TableName):
    import chdb

    import polars_reader

    tbl = polars_reader.load_table(cfg, table)
    columns = polars_reader.columns_of(tbl)
    refuse_unreadable(tbl, table)
    if tbl.metadata.current_snapshot_id is None:
        return columns, []
    loc = tbl.location().rstrip("/")
    meta = tbl.metadata_location
    if not meta.startswith(loc + "/"):
        raise ReaderError(f"metadata file {meta} is not under the table location {loc}",
                          EXIT_FAILURE)
    # The catalog's metadata file, not the one ClickHouse would pick (the highest
    # version number in metadata/, which may belong to a dropped table at the same
    # location): the table engine's iceberg_metadata_file_path (no query setting).
    engine = table_function(cfg, tbl).replace("iceberg", "Iceberg", 1)
    names = ", ".join("`" + n.replace("`", "\\`") + "`" for n, _ in columns)
    from chdb import session as chs

    sess = chs.Session()
    try:
        sess.query(f"CREATE TABLE t ENGINE = {engine} "
                   f"SETTINGS iceberg_metadata_file_path = {_lit(meta[len(loc) + 1:])}")
        arrow = sess.query(
            f"SELECT {names} FROM t SETTINGS session_timezone = 'UTC', "
            # ClickHouse strings are bytes: hand them over as Arrow binary (Iceberg
            # string columns are decoded as UTF-8 in arrow_rows, binary ones kept).
            "output_format_arrow_string_as_string = 0", "ArrowTable")
    except Exception as e:  # chDB raises RuntimeError("Code: N. DB::Exception: ...")
        msg = str(e).splitlines()[0]
        raise ReaderError(f"chDB {chdb.__version__} cannot read {table.dotted}: {msg}",
                          EXIT_FAILURE)
    finally:
        sess.close()
    return columns, arrow_rows.rows(arrow, columns, binary_strings=True, utc_timestamps=True)


def main() -> None:
    common.run_reader("chdb", read)


if __name__ == "__main__":
    main()
