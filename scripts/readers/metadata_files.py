#!/usr/bin/env python3
"""A table's metadata JSON files as its catalog and its bucket see them,
through PyIceberg and pyarrow's file system (no topicberg code).

    metadata_files.py [catalog options as the readers] [--set key=value ...] ns.t

With --set, first commits those table properties (e.g.
write.metadata.previous-versions-max=1) through the catalog. Prints one
JSON object: {"current": the current metadata file, "log": the files in
its metadata log, "in_folder": every *.metadata.json file in the folder
of the current one, "manifest_lists": the manifest list of each of the
table's snapshots, "manifest_lists_in_folder": every snap-*.avro file in
that folder, "files_referenced": every data and delete file a manifest
of any snapshot names, "data_in_folder": every file under the table's
data/ folder}, each a full location. Exit codes as the readers
(common.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from pyarrow.fs import FileSelector, FileType

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import pyiceberg_reader  # noqa: E402
from common import ReaderError  # noqa: E402


def in_folder(io, current: str, keep) -> list[str]:
    """The files of the current metadata file's folder whose name `keep`
    accepts, as full locations."""
    folder = current.rsplit("/", 1)[0]
    scheme, netloc, path = io.parse_location(folder, io.properties)
    fs = io.fs_by_scheme(scheme, netloc)
    infos = fs.get_file_info(FileSelector(path, recursive=False))
    prefix = f"{scheme}://" if scheme != "file" else ""
    return sorted(
        prefix + i.path
        for i in infos
        if i.type == FileType.File and keep(i.path.rsplit("/", 1)[-1])
    )


def files_under(io, folder: str) -> list[str]:
    """Every file under `folder` (recursively), as full locations."""
    scheme, netloc, path = io.parse_location(folder, io.properties)
    fs = io.fs_by_scheme(scheme, netloc)
    infos = fs.get_file_info(FileSelector(path, recursive=True, allow_not_found=True))
    prefix = f"{scheme}://" if scheme != "file" else ""
    return sorted(prefix + i.path for i in infos if i.type == FileType.File)


def files_referenced(t) -> list[str]:
    """Every data and delete file named by a manifest of any snapshot."""
    seen = set()
    for snapshot in t.metadata.snapshots:
        for manifest in snapshot.manifests(t.io):
            for entry in manifest.fetch_manifest_entry(t.io, discard_deleted=False):
                seen.add(entry.data_file.file_path)
    return sorted(seen)


def main() -> None:
    p = argparse.ArgumentParser(prog="metadata_files.py", description=__doc__)
    common.add_catalog_args(p)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a table property to commit before listing")
    common.add_table_arg(p)
    args = p.parse_args()
    try:
        cfg = common.resolve_catalog(args)
        table = common.parse_table(args.table)
        cat = pyiceberg_reader.load_catalog(cfg)
        identifier = table.namespace + (table.name,)
        t = cat.load_table(identifier)
        if args.set:
            properties = dict(kv.split("=", 1) for kv in args.set)
            with t.transaction() as tx:
                tx.set_properties(properties)
            t = cat.load_table(identifier)
        current = t.metadata_location
        out = {
            "current": current,
            "log": [m.metadata_file for m in t.metadata.metadata_log],
            "in_folder": in_folder(t.io, current, lambda n: n.endswith(".metadata.json")),
            "manifest_lists": [s.manifest_list for s in t.metadata.snapshots],
            "manifest_lists_in_folder": in_folder(
                t.io, current, lambda n: n.startswith("snap-") and n.endswith(".avro")),
            "files_referenced": files_referenced(t),
            "data_in_folder": files_under(t.io, t.location().rstrip("/") + "/data"),
        }
    except ReaderError as e:
        common.die("metadata_files", str(e), e.code)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
