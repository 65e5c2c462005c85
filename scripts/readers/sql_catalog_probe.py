#!/usr/bin/env python3
"""Open a folder of topicberg's embedded catalog (`catalog = "sql"`) with
PyIceberg's own SqlCatalog and print what PyIceberg sees of one table, as one
JSON object:

  {"metadata_location": ..., "format_version": 2, "location": ...,
   "properties": {...}, "current_schema_id": 0,
   "schema": [["id", "long", false], ...],
   "current_snapshot_id": null or int,
   "snapshots": [{"snapshot_id": ..., "summary": {...}}, ...],
   "metadata_log": [file, ...], "rows": N}

  sql_catalog_probe.py --path DIR [--name NAME] [--create] [--append N] namespace.table

--create first creates the namespace (when missing) and a format v2 table
(id long, name string); --append N then appends N rows (ids following the
table's current row count, name "row-<id>"), both with PyIceberg: the reverse
direction, for topicberg to load.

The folder is opened as SqlCatalog(NAME, uri="sqlite:///DIR/catalog.db",
warehouse="file://DIR"), exactly as a user would. Exit codes: 0 ok, 4 no such
table, 1 other failure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def open_catalog(path: str, name: str):
    from pyiceberg.catalog.sql import SqlCatalog

    folder = os.path.abspath(path)
    return SqlCatalog(name, uri=f"sqlite:///{folder}/catalog.db", warehouse=f"file://{folder}")


SCHEMA_FIELDS = [("id", "int64"), ("name", "string")]


def create(catalog, namespace: tuple[str, ...], name: str) -> None:
    import pyarrow as pa
    from pyiceberg.exceptions import NamespaceAlreadyExistsError

    try:
        catalog.create_namespace(namespace)
    except NamespaceAlreadyExistsError:
        pass
    schema = pa.schema([(n, getattr(pa, t)()) for n, t in SCHEMA_FIELDS])
    catalog.create_table(namespace + (name,), schema=schema, properties={"format-version": "2"})


def append(catalog, identifier: tuple[str, ...], rows: int) -> None:
    import pyarrow as pa

    table = catalog.load_table(identifier)
    schema = pa.schema([(n, getattr(pa, t)()) for n, t in SCHEMA_FIELDS])
    start = table.scan().to_arrow().num_rows + 1
    ids = list(range(start, start + rows))
    table.append(pa.table({"id": ids, "name": [f"row-{i}" for i in ids]}, schema=schema))


def describe(catalog, identifier: tuple[str, ...]) -> dict:
    table = catalog.load_table(identifier)
    meta = table.metadata
    schema = table.schema()
    current = table.current_snapshot()
    return {
        "metadata_location": table.metadata_location,
        "format_version": meta.format_version,
        "location": meta.location,
        "properties": dict(meta.properties),
        "current_schema_id": meta.current_schema_id,
        "schema": [[f.name, str(f.field_type), f.required] for f in schema.fields],
        "current_snapshot_id": current.snapshot_id if current else None,
        "snapshots": [
            {"snapshot_id": s.snapshot_id,
             "summary": {k: str(v) for k, v in (s.summary.model_dump() if s.summary else {}).items()}}
            for s in meta.snapshots
        ],
        "metadata_log": [entry.metadata_file for entry in meta.metadata_log],
        "rows": table.scan().to_arrow().num_rows,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--path", required=True, help="the embedded catalog's folder")
    p.add_argument("--name", default="default", help="the catalog name (catalog_name column)")
    p.add_argument("--create", action="store_true",
                   help="create the namespace and table with PyIceberg first")
    p.add_argument("--append", type=int, metavar="N",
                   help="append N rows with PyIceberg first")
    p.add_argument("table", help="namespace.table")
    args = p.parse_args()
    parts = args.table.split(".")
    if len(parts) < 2 or not all(parts):
        p.error(f"table must be namespace.table, got {args.table!r}")
    namespace, name = tuple(parts[:-1]), parts[-1]

    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    if args.create:
        os.makedirs(args.path, exist_ok=True)
    elif not os.path.isfile(os.path.join(args.path, "catalog.db")):
        sys.stderr.write(f"sql_catalog_probe: no catalog.db in {args.path}\n")
        sys.exit(4)
    catalog = open_catalog(args.path, args.name)
    try:
        if args.create:
            create(catalog, namespace, name)
        if args.append:
            append(catalog, namespace + (name,), args.append)
        print(json.dumps(describe(catalog, namespace + (name,)), sort_keys=True))
    except (NoSuchTableError, NoSuchNamespaceError) as e:
        sys.stderr.write(f"sql_catalog_probe: no such table {args.table}: {e}\n")
        sys.exit(4)


if __name__ == "__main__":
    main()
