#!/usr/bin/env python3
"""A table's layout as PyIceberg sees it: its default sort order, its
partition specs, and every live data file with its spec, partition, sort
order id, record count and (with --columns) the values of those columns in
the file's row order, read from the Parquet file itself with pyarrow.

    file_layout.py [catalog options as the readers] [--columns a,b] ns.t

Prints one JSON object:
{"sort_order": {"order_id": N, "fields": [{"column", "direction",
 "null_order", "transform"}]}, "default_spec_id": N,
 "files": [{"path", "spec_id", "partition", "sort_order_id", "records",
 "values": {"a": [...]}}]}.
Exit codes as the readers (common.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import pyiceberg_reader  # noqa: E402
from common import ReaderError  # noqa: E402


def sort_order(t) -> dict:
    order = t.sort_order()
    schema = t.schema()
    return {
        "order_id": order.order_id,
        "fields": [
            {
                "column": schema.find_column_name(f.source_id),
                "direction": f.direction.value,
                "null_order": f.null_order.value,
                "transform": str(f.transform),
            }
            for f in order.fields
        ],
    }


def file_values(t, path: str, columns: list[str]) -> dict:
    if not columns:
        return {}
    with t.io.new_input(path).open() as f:
        data = pq.read_table(f, columns=columns)
    return {c: [None if v is None else str(v) for v in data.column(c).to_pylist()] for c in columns}


def main() -> None:
    p = argparse.ArgumentParser(prog="file_layout.py", description=__doc__)
    common.add_catalog_args(p)
    p.add_argument("--columns", default="", help="columns whose values to list per file")
    common.add_table_arg(p)
    args = p.parse_args()
    columns = [c for c in args.columns.split(",") if c]
    try:
        cfg = common.resolve_catalog(args)
        table = common.parse_table(args.table)
        cat = pyiceberg_reader.load_catalog(cfg)
        t = cat.load_table(table.namespace + (table.name,))
        files = []
        for task in t.scan().plan_files():
            f = task.file
            files.append({
                "path": f.file_path,
                "spec_id": getattr(f, "spec_id", -1),
                "partition": str(f.partition),
                "sort_order_id": f.sort_order_id,
                "records": f.record_count,
                "deletes": len(task.delete_files),
                "values": file_values(t, f.file_path, columns),
            })
    except ReaderError as e:
        common.die("file_layout", str(e), e.code)
    print(json.dumps({
        "sort_order": sort_order(t),
        "default_spec_id": t.metadata.default_spec_id,
        "files": files,
    }))


if __name__ == "__main__":
    main()
