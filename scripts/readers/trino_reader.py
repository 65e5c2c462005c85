#!/usr/bin/env python3
"""Read an Iceberg table with Trino (the test bed's Trino 476 server, Iceberg
connector) and print its rows in the canonical format of common.py.

The query runs on the server that `scripts/testbed up` starts (TESTBED_TRINO_URL,
default http://127.0.0.1:18080), through Trino's HTTP client protocol
(trino_client.py: POST /v1/statement, follow nextUri). Trino reads the data
files, applies the deletes and returns the values; the reader only converts
Trino's JSON encoding of each type (from the column's typeSignature) into the
values common.py serialises.

Which Trino catalog:
  --catalog seaweed|fixture   the server's static catalogs of the same name
                              (etc/catalog/*.properties, written by
                              scripts/testbed.d/trino.sh), when no override
                              changes the catalog or the store
  --catalog sql --sql-path DIR  a catalog created for this read (CREATE CATALOG,
                              the server has catalog.management=dynamic):
                              Iceberg's JDBC catalog on DIR/catalog.db (the
                              SQLite driver is in the Iceberg plugin's folder),
                              Trino's local file system for file:// tables,
                              its S3 file system for s3:// ones; dropped after
                              the read
  overrides (--uri ...), vending, unity  a REST catalog created the same way
                              (vending/unity: with vended credentials)
  nessie                      refused: Trino has no S3 remote signing
                              (--store-keys reads with the store's keys)

Names: Trino lower-cases top-level column names (row field names keep their
case). The reader takes the table's top-level names from its Iceberg schema,
loaded with PyIceberg (names only; every value comes from Trino).

Refusals (exit 1, the reason on stderr): a table with deletion vectors (format
v3): Trino 476 fails with "ICEBERG_BAD_DATA: Unexpected PUFFIN file format"
(deletion vectors are read from Trino 480 on).
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import hashlib
import os
import re
import secrets
import struct
import sys
import zoneinfo
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import trino_client  # noqa: E402
from common import (EXIT_FAILURE, EXIT_NO_TABLE, EXIT_UNREACHABLE, EXIT_USAGE,  # noqa: E402
                    ReaderError)

STATIC_CATALOGS = ("seaweed", "fixture")
UTC = _dt.timezone.utc


def server() -> str:
    return os.environ.get("TESTBED_TRINO_URL") or trino_client.DEFAULT_SERVER


def user() -> str:
    return os.environ.get("TESTBED_TRINO_USER") or "topicberg"


def q(ident: str) -> str:
    return '"' + ident.replace('"', '""') + '"'


def lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def run(sql: str):
    try:
        return trino_client.execute(sql, server(), user())
    except trino_client.TrinoUnreachable as e:
        raise ReaderError(f"Trino is not reachable at {server()} ({e}): start it with "
                          "`scripts/testbed up trino`", EXIT_UNREACHABLE)


# ---------------------------------------------------------------------------
# Catalogs
# ---------------------------------------------------------------------------

def _env_matches(cfg: common.CatalogConfig) -> bool:
    """True when cfg is exactly the test bed's catalog of that name (no override),
    i.e. what the server's static catalog of the same name is configured with."""
    p = "TESTBED_" + cfg.catalog.upper() + "_"
    env = os.environ.get
    return (cfg.uri == (env(p + "URI") or "").rstrip("/")
            and cfg.warehouse == env(p + "WAREHOUSE")
            and cfg.credential == env(p + "CREDENTIAL")
            and cfg.token is None
            and cfg.s3_endpoint == (env("TESTBED_S3_ENDPOINT") or "").rstrip("/")
            and cfg.s3_access_key == env("TESTBED_S3_ACCESS_KEY")
            and cfg.s3_secret_key == env("TESTBED_S3_SECRET_KEY"))


def _s3_properties(cfg: common.CatalogConfig) -> dict[str, str]:
    props = {"fs.native-s3.enabled": "true", "s3.region": cfg.s3_region or "us-east-1",
             "s3.path-style-access": "true"}
    if cfg.s3_endpoint:
        props["s3.endpoint"] = cfg.s3_endpoint
    if cfg.s3_access_key:
        props["s3.aws-access-key"] = cfg.s3_access_key
        props["s3.aws-secret-key"] = cfg.s3_secret_key
    return props


def dynamic_properties(cfg: common.CatalogConfig) -> dict[str, str]:
    """Iceberg connector properties of a catalog created for this read."""
    if cfg.catalog == "sql":
        props = {
            "iceberg.catalog.type": "jdbc",
            "iceberg.jdbc-catalog.driver-class": "org.sqlite.JDBC",
            "iceberg.jdbc-catalog.connection-url": "jdbc:sqlite:" + common.sql_catalog_file(cfg),
            "iceberg.jdbc-catalog.catalog-name": cfg.sql_name,
            "iceberg.jdbc-catalog.default-warehouse-dir": cfg.warehouse or f"file://{cfg.sql_path}",
            "iceberg.jdbc-catalog.schema-version": "V1",
            # file:// tables (the embedded catalog's default): Trino's local file system,
            # rooted at / so that a location's path is the file's path.
            "fs.native-local.enabled": "true",
            "local.location": "/",
        }
        if cfg.s3_endpoint:
            props.update(_s3_properties(cfg))
        return props
    if cfg.remote_signing:
        raise ReaderError(
            "Trino 476 cannot use a remote S3 signer (the catalog signs S3 requests: "
            "s3.remote-signing-enabled); read with --store-keys to give it the store's keys",
            EXIT_FAILURE)
    props = {
        "iceberg.catalog.type": "rest",
        "iceberg.rest-catalog.uri": cfg.uri,
        "iceberg.rest-catalog.warehouse": cfg.warehouse,
    }
    if cfg.token:
        props["iceberg.rest-catalog.security"] = "OAUTH2"
        props["iceberg.rest-catalog.oauth2.token"] = cfg.token
    elif cfg.credential:
        props["iceberg.rest-catalog.security"] = "OAUTH2"
        props["iceberg.rest-catalog.oauth2.credential"] = cfg.credential
        if cfg.oauth2_server_uri:
            props["iceberg.rest-catalog.oauth2.server-uri"] = cfg.oauth2_server_uri
        if cfg.scope:
            props["iceberg.rest-catalog.oauth2.scope"] = cfg.scope
    if cfg.vended:
        # Trino 476 takes the vended keys (s3.access-key-id, ...) from the catalog's
        # answer, but not its s3.endpoint: without one it goes to s3.amazonaws.com
        # (UnknownHostException here). The store's address is given, no keys.
        endpoint = os.environ.get("TESTBED_VENDING_S3_ENDPOINT")
        props["iceberg.rest-catalog.vended-credentials-enabled"] = "true"
        props.update({"fs.native-s3.enabled": "true", "s3.region": cfg.s3_region or "us-east-1",
                      "s3.path-style-access": "true"})
        if endpoint:
            props["s3.endpoint"] = endpoint
    else:
        props.update(_s3_properties(cfg))
    return props


class Catalog:
    """The Trino catalog to read from: a static one, or one created (and dropped)
    for this read."""

    def __init__(self, cfg: common.CatalogConfig):
        self.cfg = cfg
        self.created = False
        if cfg.catalog in STATIC_CATALOGS and _env_matches(cfg):
            self.name = cfg.catalog
            return
        props = dynamic_properties(cfg)
        # One catalog per read: a name no other read uses at the same time.
        tag = hashlib.sha1(repr(sorted(props.items())).encode()).hexdigest()[:8]
        self.name = f"tb_{cfg.catalog}_{tag}_{secrets.token_hex(4)}"
        with_ = ", ".join(f"{q(k)} = {lit(v)}" for k, v in props.items())
        try:
            run(f"CREATE CATALOG {q(self.name)} USING iceberg WITH ({with_})")
        except trino_client.TrinoError as e:
            raise ReaderError(f"Trino cannot create a catalog for {cfg.catalog}: {e}",
                              EXIT_UNREACHABLE)
        self.created = True

    def close(self) -> None:
        if self.created:
            try:
                run(f"DROP CATALOG IF EXISTS {q(self.name)}")
            except (trino_client.TrinoError, ReaderError):
                pass


# ---------------------------------------------------------------------------
# Types and values
# ---------------------------------------------------------------------------

def ttype(sig: dict) -> Any:
    """Trino typeSignature -> common.py type tree."""
    raw = sig["rawType"]
    args = sig.get("arguments") or []
    if raw == "bigint":
        return "long"
    if raw in ("integer", "smallint", "tinyint"):
        return "int"
    if raw == "real":
        return "float"
    if raw == "double":
        return "double"
    if raw == "boolean":
        return "boolean"
    if raw in ("varchar", "char"):
        return "string"
    if raw == "varbinary":
        return "binary"
    if raw == "uuid":
        return "uuid"
    if raw == "date":
        return "date"
    if raw == "time":
        return "time"
    if raw in ("timestamp", "timestamp with time zone"):
        p = args[0]["value"] if args else 3
        tz = raw != "timestamp"
        if p == 9:
            return "timestamptz_ns" if tz else "timestamp_ns"
        if p != 6:
            raise ReaderError(f"unexpected Trino type {raw}({p})", EXIT_FAILURE)
        return "timestamptz" if tz else "timestamp"
    if raw == "decimal":
        return ("decimal", int(args[0]["value"]), int(args[1]["value"]))
    if raw == "array":
        return ("list", ttype(args[0]["value"]))
    if raw == "map":
        return ("map", ttype(args[0]["value"]), ttype(args[1]["value"]))
    if raw == "row":
        fields = []
        for a in args:
            v = a["value"]
            fields.append(((v.get("fieldName") or {}).get("name"), ttype(v["typeSignature"])))
        return ("struct", fields)
    raise ReaderError(f"unsupported Trino type {raw}", EXIT_FAILURE)


_FLOATS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
_TS = re.compile(r"^(-?\d{4,})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))?(?: (.+))?$")


def _zone(name: str):
    if name in ("UTC", "Z", "+00:00"):
        return UTC
    m = re.fullmatch(r"([+-])(\d\d):(\d\d)", name)
    if m:
        off = _dt.timedelta(hours=int(m.group(2)), minutes=int(m.group(3)))
        return _dt.timezone(-off if m.group(1) == "-" else off)
    return zoneinfo.ZoneInfo(name)


def _timestamp(s: str, tz: bool, ns: bool) -> Any:
    m = _TS.match(s)
    if not m:
        raise ReaderError(f"unexpected Trino timestamp {s!r}", EXIT_FAILURE)
    y, mo, d, h, mi, sec, frac, zone = m.groups()
    frac = (frac or "").ljust(9, "0")
    base = _dt.datetime(int(y), int(mo), int(d), int(h), int(mi), int(sec))
    if tz:
        base = base.replace(tzinfo=_zone(zone or "UTC")).astimezone(UTC).replace(tzinfo=None)
    elif zone:
        raise ReaderError(f"timestamp without time zone carries one: {s!r}", EXIT_FAILURE)
    if ns:
        delta = base - _dt.datetime(1970, 1, 1)
        return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + int(frac)
    if frac[6:] != "000":
        raise ReaderError(f"timestamp {s!r} has more than 6 fraction digits", EXIT_FAILURE)
    v = base.replace(microsecond=int(frac[:6]))
    return v.replace(tzinfo=UTC) if tz else v


def _float32(v: Any) -> float:
    f = _FLOATS[v] if isinstance(v, str) else float(v)
    # Trino writes a real as the shortest text of the 32-bit value: round to it.
    return struct.unpack("<f", struct.pack("<f", f))[0]


def value(v: Any, t: Any) -> Any:
    """Trino's JSON encoding of a value of type t -> what common.canonical takes."""
    if v is None:
        return None
    if isinstance(t, str):
        if t in ("long", "int", "boolean", "string"):
            return v
        if t == "double":
            return _FLOATS[v] if isinstance(v, str) else float(v)
        if t == "float":
            return _float32(v)
        if t == "binary":
            return base64.b64decode(v)
        if t == "uuid":
            return v
        if t == "date":
            return _dt.date.fromisoformat(v)
        if t == "time":
            return _dt.time.fromisoformat(v)
        if t in ("timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"):
            return _timestamp(v, tz="tz" in t, ns=t.endswith("_ns"))
        raise ReaderError(f"no conversion for {t}", EXIT_FAILURE)
    kind = t[0]
    if kind == "decimal":
        return decimal.Decimal(v)
    if kind == "list":
        return [value(x, t[1]) for x in v]
    if kind == "struct":
        # Trino gives a row as a JSON array, positional.
        return [value(x, ft) for (_n, ft), x in zip(t[1], v)]
    if kind == "map":
        # A JSON object: its keys are the key values' text.
        return [(value(_map_key(k, t[1]), t[1]), value(x, t[2])) for k, x in v.items()]
    raise ReaderError(f"no conversion for {t}", EXIT_FAILURE)


def _map_key(k: str, t: Any) -> Any:
    if t in ("long", "int"):
        return int(k)
    if t == "boolean":
        return k == "true"
    if t in ("double", "float"):
        return k if k in _FLOATS else float(k)
    return k  # string, decimal, date, ...: the text value() takes


# ---------------------------------------------------------------------------
# Read
# ---------------------------------------------------------------------------

def iceberg_names(cfg: common.CatalogConfig, table: common.TableName) -> list[str]:
    """The table's top-level column names as its Iceberg schema spells them."""
    import pyiceberg_reader
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    cat = pyiceberg_reader.load_catalog(cfg)
    try:
        tbl = cat.load_table(table.namespace + (table.name,))
    except (NoSuchTableError, NoSuchNamespaceError) as e:
        where = cfg.sql_path if cfg.catalog == "sql" else cfg.uri
        raise ReaderError(f"table {table.dotted} does not exist in {where}: {e}", EXIT_NO_TABLE)
    return [f.name for f in tbl.schema().fields]


def _refusal(e: trino_client.TrinoError, table: common.TableName) -> ReaderError:
    msg = str(e)
    if e.name in ("TABLE_NOT_FOUND", "SCHEMA_NOT_FOUND"):
        return ReaderError(f"table {table.dotted} does not exist: {msg}", EXIT_NO_TABLE)
    if "PUFFIN" in e.message:
        return ReaderError(
            f"Trino 476 cannot read {table.dotted}: it has deletion vectors (format v3; "
            f"read from Trino 480 on): {msg}", EXIT_FAILURE)
    return ReaderError(f"Trino cannot read {table.dotted}: {msg}", EXIT_FAILURE)


def read(cfg: common.CatalogConfig, table: common.TableName):
    if cfg.remote_signing:
        dynamic_properties(cfg)  # raises the refusal
    names = iceberg_names(cfg, table)
    cat = Catalog(cfg)
    try:
        schema = ".".join(table.namespace)
        sql = f"SELECT * FROM {q(cat.name)}.{q(schema)}.{q(table.name)}"
        try:
            cols, rows = run(sql)
        except trino_client.TrinoError as e:
            raise _refusal(e, table)
    finally:
        cat.close()
    types = [ttype(c["typeSignature"]) for c in cols]
    lowered = {n.lower(): n for n in names}
    if len(lowered) != len(names) or sorted(lowered) != sorted(c["name"] for c in cols):
        raise ReaderError(f"Trino's columns {[c['name'] for c in cols]} do not match the "
                          f"table's Iceberg columns {names}", EXIT_FAILURE)
    columns = [(lowered[c["name"]], t) for c, t in zip(cols, types)]
    return columns, ([value(x, t) for x, t in zip(r, types)] for r in rows)


def main() -> None:
    common.run_reader("trino", read)


if __name__ == "__main__":
    main()
