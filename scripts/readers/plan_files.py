#!/usr/bin/env python3
"""How many data files a filtered scan plans, with PyIceberg: partition
pruning made visible (what a query skips because the manifests' partition
values and column bounds rule the file out).

    plan_files.py [catalog options as the readers] --filter EXPR ns.t

EXPR is a PyIceberg row filter string, e.g. "region == 'eu'" or
"_kafka_timestamp >= '2026-01-02T00:00:00+00:00'". Prints one JSON line:
{"all": files planned without a filter, "filtered": with it,
 "partitions": distinct partition values of the filtered files,
 "paths": the filtered files, "spec_ids": the spec ids of every file}.
Exit codes as the readers (common.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import pyiceberg_reader  # noqa: E402
from common import ReaderError  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(prog="plan_files.py", description=__doc__)
    common.add_catalog_args(p)
    p.add_argument("--filter", required=True, help="PyIceberg row filter")
    common.add_table_arg(p)
    args = p.parse_args()
    try:
        cfg = common.resolve_catalog(args)
        table = common.parse_table(args.table)
        cat = pyiceberg_reader.load_catalog(cfg)
        t = cat.load_table(table.namespace + (table.name,))
        every = list(t.scan().plan_files())
        kept = list(t.scan(row_filter=args.filter).plan_files())
    except ReaderError as e:
        common.die("plan_files", str(e), e.code)
    print(json.dumps({
        "all": len(every),
        "filtered": len(kept),
        "partitions": sorted({str(task.file.partition) for task in kept}),
        "spec_ids": sorted({getattr(task.file, "spec_id", -1) for task in every}),
        "paths": sorted(task.file.file_path for task in kept),
    }))


if __name__ == "__main__":
    main()
