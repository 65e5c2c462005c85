#!/usr/bin/env python3
"""Create (replacing it if it exists) a small sample Iceberg table with PyIceberg.

  make_sample_table.py [catalog args] [--format-version 2|3] namespace.table

Columns: id long, amount double, name string, flag boolean, created_at
timestamptz, day date. Rows include a non-ASCII string ("São Paulo"), nulls,
doubles without NaN (99.19, 1299.0, 0.1, ...) and microsecond timestamps.
The same rows are printed, in canonical form, with --print-expected (to stdout,
no table is touched), so tests can compare the readers against them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import EXIT_FAILURE, EXIT_USAGE, ReaderError  # noqa: E402

UTC = dt.timezone.utc

COLUMNS = [
    ("id", "long"),
    ("amount", "double"),
    ("name", "string"),
    ("flag", "boolean"),
    ("created_at", "timestamptz"),
    ("day", "date"),
]

ROWS = [
    (1, 99.19, "São Paulo", True, dt.datetime(2024, 1, 15, 10, 30, 0, 123456, tzinfo=UTC),
     dt.date(2024, 1, 15)),
    (2, 1299.0, "Zürich — 東京", False, dt.datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC),
     dt.date(2024, 2, 29)),
    (3, 0.1, None, None, dt.datetime(1970, 1, 1, 0, 0, 0, 0, tzinfo=UTC), dt.date(1970, 1, 1)),
    (4, -2.5, "plain ascii", True, dt.datetime(2025, 6, 30, 12, 0, 0, 1, tzinfo=UTC),
     dt.date(2025, 6, 30)),
    (5, 1e-07, "quote \" backslash \\ tab \t", False,
     dt.datetime(2000, 12, 31, 23, 0, 0, 500000, tzinfo=UTC), None),
    (6, None, "", True, None, dt.date(1999, 12, 31)),
    (7, 123456789.125, "emoji 🚀", False,
     dt.datetime(2038, 1, 19, 3, 14, 8, 0, tzinfo=UTC), dt.date(2038, 1, 19)),
]


def main() -> None:
    p = argparse.ArgumentParser(prog="make_sample_table.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_catalog_args(p)
    p.add_argument("--format-version", type=int, choices=(2, 3), default=2)
    p.add_argument("--print-expected", action="store_true",
                   help="print the canonical rows of the sample and exit")
    p.add_argument("table", nargs="?", help="namespace.table")
    args = p.parse_args()

    if args.print_expected:
        common.write_lines(common.serialize_rows(COLUMNS, ROWS))
        return

    if not args.table:
        p.error("the following arguments are required: table")
    try:
        cfg = common.resolve_catalog(args)
        table = common.parse_table(args.table)
        common.check_catalog_reachable(cfg)
        create(cfg, table, args.format_version)
    except ReaderError as e:
        common.die("make_sample_table", str(e), e.code)


def create(cfg: common.CatalogConfig, table: common.TableName, format_version: int) -> None:
    import pyarrow as pa
    from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError
    from pyiceberg.schema import Schema
    from pyiceberg.types import (BooleanType, DateType, DoubleType, LongType, NestedField,
                                 StringType, TimestamptzType)

    from pyiceberg_reader import load_catalog

    cat = load_catalog(cfg)
    try:
        cat.create_namespace(table.namespace)
    except NamespaceAlreadyExistsError:
        pass
    ident = table.namespace + (table.name,)
    try:
        cat.drop_table(ident)
    except NoSuchTableError:
        pass

    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "amount", DoubleType(), required=False),
        NestedField(3, "name", StringType(), required=False),
        NestedField(4, "flag", BooleanType(), required=False),
        NestedField(5, "created_at", TimestamptzType(), required=False),
        NestedField(6, "day", DateType(), required=False),
    )
    # PyIceberg 0.12 creates v3 tables but cannot write their manifests
    # ("Cannot write manifest for table version: 3"): a v3 sample is written as
    # v2 and then upgraded by the catalog (see upgrade_to_v3).
    tbl = cat.create_table(ident, schema=schema, properties={"format-version": "2"})
    arrow_schema = pa.schema([
        pa.field("id", pa.int64()),
        pa.field("amount", pa.float64()),
        pa.field("name", pa.string()),
        pa.field("flag", pa.bool_()),
        pa.field("created_at", pa.timestamp("us", tz="UTC")),
        pa.field("day", pa.date32()),
    ])
    data = pa.Table.from_pylist([dict(zip([c for c, _ in COLUMNS], r)) for r in ROWS],
                                schema=arrow_schema)
    # Two appends: two data files, two snapshots (a slightly less trivial table).
    tbl.append(data.slice(0, 4))
    tbl.append(data.slice(4))
    if format_version == 3:
        upgrade_to_v3(cat, table, tbl)
    tbl = cat.load_table(ident)
    if tbl.metadata.format_version != format_version:
        raise ReaderError(f"table is format-version {tbl.metadata.format_version}, "
                          f"wanted {format_version}", EXIT_FAILURE)
    sys.stderr.write(f"make_sample_table: {table.dotted} format-version "
                     f"{tbl.metadata.format_version}, {len(ROWS)} rows, "
                     f"{len(tbl.metadata.snapshots)} snapshots\n")



def upgrade_to_v3(cat, table: common.TableName, tbl) -> None:
    """Upgrade a v2 table to v3 with a plain REST commit (the catalog server
    rewrites the metadata; PyIceberg 0.12 refuses the update locally).

    The data and manifests stay as PyIceberg wrote them (v2 manifests, no row
    lineage fields), which v3 readers must accept.
    """
    import json

    body = {
        "identifier": {"namespace": list(table.namespace), "name": table.name},
        "requirements": [{"type": "assert-table-uuid", "uuid": str(tbl.metadata.table_uuid)}],
        "updates": [{"action": "upgrade-format-version", "format-version": 3}],
    }
    url = cat.url("namespaces/{namespace}/tables/{table}", prefixed=True,
                  **cat._split_identifier_for_path(table.namespace + (table.name,)))
    r = cat._session.post(url, data=json.dumps(body))
    if r.status_code != 200:
        raise ReaderError(f"catalog refused the upgrade to format-version 3: "
                          f"HTTP {r.status_code} {r.text[:500]}", EXIT_FAILURE)


if __name__ == "__main__":
    main()
