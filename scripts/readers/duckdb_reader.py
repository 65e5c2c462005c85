#!/usr/bin/env python3
"""Read an Iceberg table with DuckDB (iceberg extension, REST catalog) and print
its rows in the canonical format of common.py.

The iceberg, httpfs and avro extensions are LOADed from the files of the PyPI
packages duckdb-extension-<x> (no network INSTALL). Time zone is set to UTC;
timestamptz values come back as aware datetimes (needs pytz) and are normalised
to UTC by the serialiser anyway.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cloud_storage  # noqa: E402
import common  # noqa: E402
from common import EXIT_FAILURE, EXIT_NO_TABLE, EXIT_UNREACHABLE, ReaderError  # noqa: E402

import duckdb  # noqa: E402

EXTENSIONS = ("httpfs", "avro", "iceberg")


def extension_path(name: str) -> str:
    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    if spec is None or not spec.submodule_search_locations:
        raise ReaderError(f"PyPI package duckdb-extension-{name} is not installed", EXIT_FAILURE)
    base = list(spec.submodule_search_locations)[0]
    path = os.path.join(base, "extensions", "v" + duckdb.__version__,
                        f"{name}.duckdb_extension")
    if not os.path.isfile(path):
        raise ReaderError(f"extension file not found: {path} (DuckDB {duckdb.__version__})",
                          EXIT_FAILURE)
    return path


def sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def ident(s: str) -> str:
    return '"' + s.replace('"', '""') + '"'


def duck_type(t) -> object:
    """DuckDBPyType -> common.py type tree."""
    tid = t.id
    if tid in ("bigint", "hugeint", "ubigint", "uinteger"):
        return "long"
    if tid in ("integer", "smallint", "tinyint", "usmallint", "utinyint"):
        return "int"
    if tid == "double":
        return "double"
    if tid == "float":
        return "float"
    if tid == "boolean":
        return "boolean"
    if tid == "varchar":
        return "string"
    if tid == "uuid":
        return "uuid"
    if tid == "blob":
        return "binary"
    if tid == "date":
        return "date"
    if tid == "time":
        return "time"
    if tid in ("timestamp", "timestamp_ms", "timestamp_s"):
        return "timestamp"
    if tid == "timestamp with time zone":
        return "timestamptz"
    if tid == "timestamp_ns":
        return "timestamp_ns"
    if tid == "decimal":
        c = dict(t.children)
        return ("decimal", int(c["precision"]), int(c["scale"]))
    if tid == "struct":
        return ("struct", [(n, duck_type(ct)) for n, ct in t.children])
    if tid == "list":
        return ("list", duck_type(dict(t.children)["child"]))
    if tid == "map":
        c = dict(t.children)
        return ("map", duck_type(c["key"]), duck_type(c["value"]))
    raise ReaderError(f"unsupported DuckDB type {t}", EXIT_FAILURE)


def create_s3_secret(con: duckdb.DuckDBPyConnection, cfg: common.CatalogConfig) -> None:
    ep = urllib.parse.urlsplit(cfg.s3_endpoint if "://" in cfg.s3_endpoint
                               else "http://" + cfg.s3_endpoint)
    con.execute(f"""CREATE SECRET tb_s3 (TYPE s3,
        KEY_ID {sql_str(cfg.s3_access_key)}, SECRET {sql_str(cfg.s3_secret_key)},
        REGION {sql_str(cfg.s3_region)}, ENDPOINT {sql_str(ep.netloc)},
        URL_STYLE 'path', USE_SSL {'true' if ep.scheme == 'https' else 'false'})""")


def connect(cfg: common.CatalogConfig) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": "false",
                                             "autoload_known_extensions": "false"})
    for ext in EXTENSIONS:
        con.execute(f"LOAD {sql_str(extension_path(ext))}")
    con.execute("SET TimeZone = 'UTC'")
    if cfg.catalog == "sql":
        # No REST catalog to attach; s3:// tables of the embedded catalog are
        # read with the test bed store's keys.
        if cfg.s3_endpoint and cfg.s3_access_key:
            create_s3_secret(con, cfg)
        return con
    if cfg.remote_signing:
        # DuckDB's iceberg extension knows two access modes, 'none' (its own S3
        # secret) and 'vended_credentials'; it ignores s3.remote-signing-enabled and
        # s3.signer.* in a loadTable answer, so its S3 requests go out unsigned.
        raise ReaderError(
            "DuckDB (iceberg extension " + duckdb.__version__ + ") cannot use a remote S3 "
            "signer: with ACCESS_DELEGATION_MODE 'vended_credentials' its unsigned GETs "
            "get HTTP 403 AccessDenied, with 'none' it ignores the catalog's s3.endpoint; "
            "--store-keys reads with the store's own keys instead", EXIT_FAILURE)

    if not cfg.vended:  # vending, unity: each table's answer brings its S3 secret
        create_s3_secret(con, cfg)

    if cfg.token:
        opts = [f"TOKEN {sql_str(cfg.token)}"]
    elif cfg.credential:
        opts = [f"CLIENT_ID {sql_str(cfg.client_id or '')}",
                f"CLIENT_SECRET {sql_str(cfg.client_secret or '')}",
                f"OAUTH2_SERVER_URI {sql_str(cfg.oauth2_server_uri)}"]
        if cfg.scope:
            opts.append(f"OAUTH2_SCOPE {sql_str(cfg.scope)}")
    else:
        opts = None
    attach_opts = [f"TYPE iceberg", f"ENDPOINT {sql_str(cfg.uri)}",
                   "ACCESS_DELEGATION_MODE " + ("'vended_credentials'" if cfg.vended
                                                else "'none'")]
    if opts is not None:
        try:  # the token request happens here
            con.execute(f"CREATE SECRET tb_iceberg (TYPE iceberg, {', '.join(opts)})")
        except duckdb.Error as e:
            raise ReaderError(f"catalog {cfg.uri} refused the credentials: {e}",
                              EXIT_UNREACHABLE)
        attach_opts.append("SECRET tb_iceberg")
    else:
        attach_opts.append("AUTHORIZATION_TYPE 'none'")
    try:
        con.execute(f"ATTACH {sql_str(cfg.warehouse)} AS cat ({', '.join(attach_opts)})")
    except duckdb.Error as e:
        raise ReaderError(f"cannot attach catalog {cfg.uri} (warehouse {cfg.warehouse}): {e}",
                          EXIT_UNREACHABLE)
    return con


def read(cfg: common.CatalogConfig, table: common.TableName):
    con = connect(cfg)
    if cfg.catalog == "sql":
        # The embedded catalog: scan the current metadata file the SQLite
        # catalog points at (DuckDB reads file:// locations as they are; Azure
        # Blob and GCS ones through cloud_storage.py's settings).
        location = common.sql_metadata_location(cfg, table)
        if cloud_storage.is_remote(location):
            try:
                cloud_storage.duckdb_prepare(con, cfg.cloud, location, extension_path)
            except ValueError as e:
                raise ReaderError(str(e), common.EXIT_USAGE)
        qname = f"iceberg_scan({sql_str(location)})"
    else:
        qname = f"cat.{ident('.'.join(table.namespace))}.{ident(table.name)}"
    try:
        rel = con.sql(f"SELECT * FROM {qname}")
        columns = [(n, duck_type(t)) for n, t in zip(rel.columns, rel.types)]
    except duckdb.CatalogException as e:
        msg = str(e)
        if "does not exist" in msg or "not found" in msg.lower():
            raise ReaderError(f"table {table.dotted} does not exist in {cfg.uri}: {msg}",
                              EXIT_NO_TABLE)
        raise
    # Python's datetime holds microseconds: fetch nanosecond timestamps as
    # integer nanoseconds since the epoch (top-level columns only).
    select = []
    for n, t in columns:
        if t == "timestamp_ns":
            select.append(f"epoch_ns({ident(n)}) AS {ident(n)}")
        else:
            select.append(ident(n))
    rows = con.execute(f"SELECT {', '.join(select)} FROM {qname}").fetchall()
    return columns, rows


def main() -> None:
    try:
        common.run_reader("duckdb", read)
    except duckdb.Error as e:
        common.die("duckdb", f"{type(e).__name__}: {e}", EXIT_FAILURE)


if __name__ == "__main__":
    main()
