"""Shared code of the independent Iceberg readers (DuckDB, PyIceberg, Spark).

Each reader reads one Iceberg table through a REST catalog with its own engine,
turns the engine's native values into plain Python values, and prints the rows
through the ONE serialiser below, so that identical data gives identical bytes
whichever engine read it.

Canonical row format
====================
stdout carries one JSON object per row and nothing else, each line ending in
"\\n", encoded as UTF-8. The object's keys are the table's top-level column
names in the table's schema order. Values, by Iceberg type:

  null                      JSON null (at any nesting level)
  boolean                   true / false
  int, long                 JSON integer
  float, double             JSON number written as Python's shortest repr of the
                            value as a double (repr(float(v)), e.g. 0.1, 1299.0,
                            1e-07, -0.0); a float (32-bit) column is widened to
                            double exactly first (so 0.1f -> 0.10000000149011612).
                            NaN, +inf, -inf are the strings "NaN", "Infinity",
                            "-Infinity".
  decimal(p, s)             JSON string of the exact value in plain notation with
                            exactly s fraction digits: "12.30", "-0.05", "7"
  string                    JSON string, non-ASCII written as-is (ensure_ascii=False)
  uuid                      JSON string, lowercase 8-4-4-4-12 hex
  binary, fixed(n)          JSON string, standard base64 with padding
  date                      "YYYY-MM-DD"
  time                      "HH:MM:SS.ffffff"
  timestamp                 "YYYY-MM-DDTHH:MM:SS.ffffff"          (always 6 digits)
  timestamptz               "YYYY-MM-DDTHH:MM:SS.ffffff+00:00"    (always UTC)
  timestamp_ns              "YYYY-MM-DDTHH:MM:SS.fffffffff"       (9 digits)
  timestamptz_ns            "YYYY-MM-DDTHH:MM:SS.fffffffff+00:00"
  struct                    JSON object, keys = field names in field order
  list                      JSON array, element order kept
  map                       JSON array of [key, value] pairs, sorted by the
                            canonical JSON text of the key (byte order), so
                            that maps with any key type have one form

Lines are produced by json.dumps(obj, ensure_ascii=False, separators=(",", ":"),
allow_nan=False). The rows are sorted by their serialised line in plain byte
order of the UTF-8 encoding: that is the "sorted by all columns" order, fully
deterministic (duplicates stay, as adjacent identical lines).

Types are given to the serialiser as a small type tree (see `T` below) which each
reader derives from its own engine's schema: strings for primitives, and tuples
("decimal", p, s), ("struct", [(name, type), ...]), ("list", elem),
("map", key, value).

Catalog arguments
=================
  --catalog seaweed|fixture|nessie   pick defaults from the TESTBED_<CATALOG>_* and
                              TESTBED_S3_* environment variables (eval
                              "$(scripts/testbed env)"); default: seaweed
  --catalog vending|unity     the test bed's catalogs that vend temporary S3
                              credentials: the engine asks for them
                              (X-Iceberg-Access-Delegation: vended-credentials) and
                              gets no store keys; TESTBED_<CATALOG>_TOKEN (unity)
                              and _SCOPE (vending) are used too
  --catalog sql --sql-path DIR [--sql-name NAME]
                              topicberg's embedded catalog: DIR/catalog.db (the
                              SQLite layout of PyIceberg's SqlCatalog) and the
                              table files in DIR; NAME is the catalog_name
                              column (default: default). No REST or S3 options.
  --uri --warehouse --credential --oauth2-server-uri --token --scope
  --s3-endpoint --s3-region --s3-access-key --s3-secret-key   explicit overrides
  --remote-signing            the catalog signs the engine's S3 requests (Iceberg's
                              s3.remote-signing-enabled / s3.signer.*): the engine
                              gets no S3 keys. Implied by --catalog nessie.
  --store-keys                with --catalog nessie: give the engine the store's
                              own S3 keys (TESTBED_S3_*) instead of the signer
                              (the only way DuckDB reads a Nessie table)
  table                       namespace.table (the last dot separates the table
                              name; a nested namespace is a.b.table)

Exit codes (all readers): 0 ok, 2 usage/configuration error, 3 catalog not
reachable, 4 table (or namespace) does not exist, 1 any other failure.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import datetime as _dt
import decimal
import json
import math
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
import uuid as _uuid
from typing import Any, Iterable, Optional, Sequence

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_NO_TABLE = 4

UTC = _dt.timezone.utc
_EPOCH = _dt.datetime(1970, 1, 1)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------

class ReaderError(Exception):
    """A failure with a clear message and an exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILURE):
        super().__init__(message)
        self.code = code


def die(engine: str, message: str, code: int) -> "NoReturn":  # type: ignore[name-defined]
    sys.stderr.write(f"{engine}_reader: error: {message}\n")
    sys.stderr.flush()
    sys.exit(code)


# ---------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------

@dataclasses.dataclass
class CatalogConfig:
    catalog: str
    uri: str
    warehouse: str
    credential: Optional[str]
    oauth2_server_uri: Optional[str]
    token: Optional[str]
    scope: Optional[str]
    s3_endpoint: str
    s3_region: str
    s3_access_key: str
    s3_secret_key: str
    # --catalog sql: the embedded catalog's folder and catalog name.
    sql_path: Optional[str] = None
    sql_name: str = "default"
    # The catalog signs S3 requests (Nessie): no S3 keys go to the engine.
    remote_signing: bool = False
    # The catalog vends S3 credentials (vending, unity): the engine asks for them
    # (X-Iceberg-Access-Delegation: vended-credentials) and gets no keys or endpoint.
    vended: bool = False
    # Azure Blob / GCS emulator settings (cloud_storage.py), for tables whose
    # files live there (read through --catalog sql).
    cloud: Optional[Any] = None

    @property
    def client_id(self) -> Optional[str]:
        if not self.credential:
            return None
        return self.credential.split(":", 1)[0] if ":" in self.credential else None

    @property
    def client_secret(self) -> Optional[str]:
        if not self.credential:
            return None
        return self.credential.split(":", 1)[1] if ":" in self.credential else self.credential


@dataclasses.dataclass
class TableName:
    namespace: tuple[str, ...]
    name: str

    @property
    def dotted(self) -> str:
        return ".".join(self.namespace + (self.name,))


CATALOGS = ("seaweed", "fixture", "nessie", "vending", "unity", "sql")
# Catalogs that sign their clients' S3 requests unless --store-keys.
SIGNING_CATALOGS = ("nessie",)
# Catalogs that vend temporary S3 credentials (emulations of the contracts of
# Polaris-like catalogs and of Unity Catalog): no store keys, none needed.
VENDING_CATALOGS = ("vending", "unity")


def _env(name: str) -> Optional[str]:
    v = os.environ.get(name)
    return v if v else None


def add_catalog_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("catalog (defaults from TESTBED_* environment variables)")
    g.add_argument("--catalog", choices=CATALOGS, default="seaweed",
                   help="which test-bed catalog supplies the defaults (default: seaweed)")
    g.add_argument("--uri", help="REST catalog URI, e.g. http://127.0.0.1:8181")
    g.add_argument("--warehouse", help="catalog warehouse (seaweed: lakehouse)")
    g.add_argument("--credential", help="OAuth2 client credentials CLIENT_ID:SECRET")
    g.add_argument("--oauth2-server-uri", help="OAuth2 token endpoint")
    g.add_argument("--token", help="bearer token (instead of --credential)")
    g.add_argument("--scope", help="OAuth2 scope to request (default: engine default)")
    g.add_argument("--s3-endpoint", help="S3 endpoint, e.g. http://127.0.0.1:8333 (path-style)")
    g.add_argument("--s3-region")
    g.add_argument("--s3-access-key")
    g.add_argument("--s3-secret-key")
    g.add_argument("--remote-signing", action="store_true",
                   help="the catalog signs S3 requests: no S3 keys to the engine "
                        "(default for --catalog nessie)")
    g.add_argument("--store-keys", action="store_true",
                   help="--catalog nessie: use the store's S3 keys (TESTBED_S3_*) "
                        "instead of the catalog's signer")
    g.add_argument("--sql-path", help="--catalog sql: the embedded catalog's folder "
                                      "(holds catalog.db)")
    g.add_argument("--sql-name", default="default",
                   help="--catalog sql: the catalog name (default: default)")
    import cloud_storage
    cloud_storage.add_args(g)


def add_table_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("table", help="namespace.table")


def resolve_catalog(args: argparse.Namespace) -> CatalogConfig:
    if args.catalog == "sql":
        if not args.sql_path:
            raise ReaderError("--catalog sql needs --sql-path DIR", EXIT_USAGE)
        return CatalogConfig(
            catalog="sql", uri="", credential=None, oauth2_server_uri=None,
            token=None, scope=None,
            # s3:// tables of the embedded catalog: the test bed's store.
            s3_endpoint=args.s3_endpoint or _env("TESTBED_S3_ENDPOINT") or "",
            s3_region=args.s3_region or _env("TESTBED_S3_REGION") or "",
            s3_access_key=args.s3_access_key or _env("TESTBED_S3_ACCESS_KEY") or "",
            s3_secret_key=args.s3_secret_key or _env("TESTBED_S3_SECRET_KEY") or "",
            sql_path=os.path.abspath(args.sql_path),
            sql_name=args.sql_name,
            # --warehouse: where PyIceberg creates new tables (default: DIR), e.g.
            # abfss://warehouse@devstoreaccount1.dfs.core.windows.net/tb or gs://warehouse/tb
            warehouse=args.warehouse or "", cloud=_cloud(args))
    prefix = "TESTBED_" + args.catalog.upper() + "_"

    def pick(explicit: Optional[str], env_name: Optional[str], what: str,
             required: bool = True) -> Optional[str]:
        if explicit:
            return explicit
        v = _env(env_name) if env_name else None
        if v is None and required:
            raise ReaderError(
                f"no {what}: pass --{what} or set {env_name} "
                f"(eval \"$(scripts/testbed env)\")", EXIT_USAGE)
        return v

    token = args.token or None
    signing = bool(getattr(args, "remote_signing", False)) or (
        args.catalog in SIGNING_CATALOGS and not getattr(args, "store_keys", False))
    cfg = CatalogConfig(
        catalog=args.catalog,
        uri=pick(args.uri, prefix + "URI", "uri").rstrip("/"),
        warehouse=pick(args.warehouse, prefix + "WAREHOUSE", "warehouse"),
        # With an explicit --token the env credential is not used.
        credential=args.credential or (None if token else _env(prefix + "CREDENTIAL")),
        oauth2_server_uri=args.oauth2_server_uri or _env(prefix + "OAUTH2_URI"),
        token=token,
        scope=args.scope or None,
        s3_endpoint=pick(args.s3_endpoint, "TESTBED_S3_ENDPOINT", "s3-endpoint").rstrip("/"),
        s3_region=pick(args.s3_region, "TESTBED_S3_REGION", "s3-region"),
        # With remote signing the engine gets no keys (they stay with the catalog).
        s3_access_key="" if signing else
        pick(args.s3_access_key, "TESTBED_S3_ACCESS_KEY", "s3-access-key"),
        s3_secret_key="" if signing else
        pick(args.s3_secret_key, "TESTBED_S3_SECRET_KEY", "s3-secret-key"),
        remote_signing=signing,
    )
    # TESTBED_<CATALOG>_TOKEN (unity: a static bearer token) and _SCOPE (vending:
    # PRINCIPAL_ROLE:ALL) when not given.
    if cfg.token is None and not args.credential:
        cfg.token = _env(prefix + "TOKEN")
        if cfg.token:
            cfg.credential = None
    if cfg.scope is None:
        cfg.scope = _env(prefix + "SCOPE")
    if args.catalog in VENDING_CATALOGS:
        # The store and its temporary keys come from the catalog's answer only.
        cfg.vended = True
        cfg.s3_endpoint = cfg.s3_access_key = cfg.s3_secret_key = ""
    if cfg.credential and cfg.oauth2_server_uri is None:
        cfg.oauth2_server_uri = cfg.uri + "/v1/oauth/tokens"
    return cfg


def _cloud(args: argparse.Namespace):
    import cloud_storage
    return cloud_storage.resolve(args)


def parse_table(s: str) -> TableName:
    parts = s.split(".")
    if len(parts) < 2 or any(not x for x in parts):
        raise ReaderError(f"table must be namespace.table, got {s!r}", EXIT_USAGE)
    return TableName(tuple(parts[:-1]), parts[-1])


def parse_reader_args(engine: str, argv: Optional[Sequence[str]] = None):
    p = argparse.ArgumentParser(
        prog=f"{engine}_reader.py",
        description=f"Read an Iceberg table with {engine} and print its rows in the "
                    "canonical format (see scripts/readers/README.md).")
    add_catalog_args(p)
    add_table_arg(p)
    args = p.parse_args(argv)
    try:
        return args, resolve_catalog(args), parse_table(args.table)
    except ReaderError as e:
        die(engine, str(e), e.code)


# ---------------------------------------------------------------------------
# Catalog pre-flight: one cheap HTTP request, so that an unreachable catalog
# gives exit code 3 and a clear message before any engine starts.
# ---------------------------------------------------------------------------

def check_catalog_reachable(cfg: CatalogConfig, timeout: float = 5.0) -> None:
    if cfg.catalog == "sql":
        if not os.path.isfile(sql_catalog_file(cfg)):
            raise ReaderError(f"no embedded catalog: {sql_catalog_file(cfg)} does not exist",
                              EXIT_UNREACHABLE)
        return
    url = cfg.uri + "/v1/config?" + urllib.parse.urlencode({"warehouse": cfg.warehouse})
    try:
        urllib.request.urlopen(url, timeout=timeout).close()
    except urllib.error.HTTPError:
        return  # it answered (401/403/400 are fine: the engine authenticates itself)
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise ReaderError(f"catalog {cfg.uri} is not reachable: {reason}", EXIT_UNREACHABLE)


def sql_catalog_file(cfg: CatalogConfig) -> str:
    """The SQLite file of the embedded catalog (--catalog sql)."""
    return os.path.join(cfg.sql_path or "", "catalog.db")


def sql_metadata_location(cfg: CatalogConfig, table: TableName) -> str:
    """The current metadata file of `table` in the embedded catalog, read from
    its SQLite file (iceberg_tables.metadata_location) without PyIceberg."""
    import sqlite3

    path = sql_catalog_file(cfg)
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        row = con.execute(
            "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = ? "
            "AND table_namespace = ? AND table_name = ?",
            (cfg.sql_name, ".".join(table.namespace), table.name)).fetchone()
    except sqlite3.Error as e:
        raise ReaderError(f"{path} is not an embedded catalog: {e}", EXIT_FAILURE)
    finally:
        con.close()
    if not row or not row[0]:
        raise ReaderError(f"table {table.dotted} does not exist in {path} "
                          f"(catalog {cfg.sql_name})", EXIT_NO_TABLE)
    return row[0]


# ---------------------------------------------------------------------------
# Canonical serialisation
# ---------------------------------------------------------------------------

PRIMITIVES = {
    "boolean", "int", "long", "float", "double", "string", "uuid", "binary",
    "date", "time", "timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns",
}


def _float(v: Any) -> Any:
    f = float(v)
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    return f


def _decimal(v: Any, scale: int) -> str:
    d = v if isinstance(v, decimal.Decimal) else decimal.Decimal(str(v))
    ctx = decimal.Context(prec=100)
    q = d.quantize(decimal.Decimal(1).scaleb(-scale), context=ctx)
    if q != d:
        raise ValueError(f"decimal {d} does not fit scale {scale}")
    return format(q, "f")


def _seconds_text(v: _dt.datetime) -> str:
    # Not strftime: glibc's %Y does not zero-pad years below 1000.
    return (f"{v.year:04d}-{v.month:02d}-{v.day:02d}"
            f"T{v.hour:02d}:{v.minute:02d}:{v.second:02d}")


def _micros_text(v: _dt.datetime) -> str:
    return _seconds_text(v) + f".{v.microsecond:06d}"


def _ns_text(ns: int) -> str:
    secs, frac = divmod(int(ns), 1_000_000_000)
    d = _EPOCH + _dt.timedelta(seconds=secs)
    return _seconds_text(d) + f".{frac:09d}"


def _timestamp(v: Any, tz: bool) -> str:
    if not isinstance(v, _dt.datetime):
        raise TypeError(f"expected datetime for timestamp, got {type(v).__name__}")
    if tz:
        if v.tzinfo is None:
            raise TypeError("timestamptz value has no time zone (engine must give aware values)")
        return _micros_text(v.astimezone(UTC).replace(tzinfo=None)) + "+00:00"
    if v.tzinfo is not None:
        raise TypeError("timestamp (without zone) value carries a time zone")
    return _micros_text(v)


def _timestamp_ns(v: Any, tz: bool) -> str:
    # Engines give nanosecond timestamps as int nanoseconds since the epoch
    # (Python's datetime holds microseconds only); microsecond datetimes are
    # accepted too (3 zero digits appended).
    if isinstance(v, _dt.datetime):
        if tz:
            v = v.astimezone(UTC).replace(tzinfo=None)
        delta = v - _EPOCH
        ns = (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
    else:
        ns = int(v)
    return _ns_text(ns) + ("+00:00" if tz else "")


def _binary(v: Any) -> str:
    if isinstance(v, memoryview):
        v = v.tobytes()
    if not isinstance(v, (bytes, bytearray)):
        raise TypeError(f"expected bytes for binary, got {type(v).__name__}")
    return base64.b64encode(bytes(v)).decode("ascii")


def _uuid_text(v: Any) -> str:
    if isinstance(v, _uuid.UUID):
        return str(v)
    if isinstance(v, (bytes, bytearray)):
        return str(_uuid.UUID(bytes=bytes(v)))
    return str(_uuid.UUID(str(v)))


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def canonical(v: Any, t: Any) -> Any:
    """The JSON-ready canonical form of engine value `v` of type `t`."""
    if v is None:
        return None
    if isinstance(t, str):
        if t == "boolean":
            if not isinstance(v, bool):
                raise TypeError(f"expected bool, got {type(v).__name__}")
            return v
        if t in ("int", "long"):
            if isinstance(v, bool):
                raise TypeError("expected integer, got bool")
            return int(v)
        if t in ("float", "double"):
            return _float(v)
        if t == "string":
            if not isinstance(v, str):
                raise TypeError(f"expected str, got {type(v).__name__}")
            return v
        if t == "uuid":
            return _uuid_text(v)
        if t == "binary":
            return _binary(v)
        if t == "date":
            if isinstance(v, _dt.datetime) or not isinstance(v, _dt.date):
                raise TypeError(f"expected date, got {type(v).__name__}")
            return v.isoformat()
        if t == "time":
            if not isinstance(v, _dt.time):
                raise TypeError(f"expected time, got {type(v).__name__}")
            return v.replace(tzinfo=None).isoformat(timespec="microseconds")
        if t == "timestamp":
            return _timestamp(v, tz=False)
        if t == "timestamptz":
            return _timestamp(v, tz=True)
        if t == "timestamp_ns":
            return _timestamp_ns(v, tz=False)
        if t == "timestamptz_ns":
            return _timestamp_ns(v, tz=True)
        raise TypeError(f"unknown type {t!r}")
    kind = t[0]
    if kind == "decimal":
        return _decimal(v, t[2])
    if kind == "struct":
        fields = t[1]
        if isinstance(v, dict):
            return {n: canonical(v.get(n), ft) for n, ft in fields}
        # tuples, Spark Rows (positional)
        vals = list(v)
        if len(vals) != len(fields):
            raise TypeError(f"struct has {len(vals)} values for {len(fields)} fields")
        return {n: canonical(x, ft) for (n, ft), x in zip(fields, vals)}
    if kind == "list":
        return [canonical(x, t[1]) for x in v]
    if kind == "map":
        kt, vt = t[1], t[2]
        pairs = v.items() if isinstance(v, dict) else v  # dict or [(k, v), ...]
        out = [(canonical(k, kt), canonical(x, vt)) for k, x in pairs]
        out.sort(key=lambda kv: dumps(kv[0]).encode("utf-8"))
        return [[k, x] for k, x in out]
    raise TypeError(f"unknown type {t!r}")


def serialize_row(columns: Sequence[tuple[str, Any]], row: Sequence[Any]) -> str:
    if len(row) != len(columns):
        raise ValueError(f"row has {len(row)} values for {len(columns)} columns")
    return dumps({name: canonical(v, t) for (name, t), v in zip(columns, row)})


def serialize_rows(columns: Sequence[tuple[str, Any]], rows: Iterable[Sequence[Any]]) -> list[bytes]:
    """Canonical lines (UTF-8 bytes, no newline), sorted in byte order."""
    lines = [serialize_row(columns, r).encode("utf-8") for r in rows]
    lines.sort()
    return lines


def write_lines(lines: Iterable[bytes], out=None) -> None:
    out = out if out is not None else sys.stdout.buffer
    for line in lines:
        out.write(line)
        out.write(b"\n")
    out.flush()


def type_text(t: Any) -> str:
    """Human-readable form of a type tree (for debugging/--schema output)."""
    if isinstance(t, str):
        return t
    if t[0] == "decimal":
        return f"decimal({t[1]},{t[2]})"
    if t[0] == "struct":
        return "struct<" + ",".join(f"{n}:{type_text(ft)}" for n, ft in t[1]) + ">"
    if t[0] == "list":
        return f"list<{type_text(t[1])}>"
    if t[0] == "map":
        return f"map<{type_text(t[1])},{type_text(t[2])}>"
    return repr(t)


def run_reader(engine: str, read_fn, argv: Optional[Sequence[str]] = None, out=None) -> None:
    """Common main: parse args, pre-flight the catalog, read, print, map errors.

    read_fn(cfg, table) -> (columns, rows) with columns [(name, type tree)].
    """
    _args, cfg, table = parse_reader_args(engine, argv)
    try:
        check_catalog_reachable(cfg)
        columns, rows = read_fn(cfg, table)
        lines = serialize_rows(columns, rows)
    except ReaderError as e:
        die(engine, str(e), e.code)
    write_lines(lines, out)
