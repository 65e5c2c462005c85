#!/usr/bin/env python3
"""Read an Iceberg table with Daft (daft.read_iceberg, its native Parquet reader)
and print its rows in the canonical format of common.py.

Runs in Daft's own venv ($TB_DAFT_PYTHON, scripts/requirements-daft.txt: Daft
0.7.26 needs pyarrow < 26). PyIceberg loads the table (REST or embedded catalog)
and plans the scan (data files and the delete files that apply to each); Daft
reads the data files and the delete files itself, with its Rust Parquet reader
and object store client (no PyIceberg FileIO, no PyIceberg `to_arrow`). Daft takes
every delete file of a task for a Parquet position delete file: a deletion
vector (Puffin, format v3) fails with "DaftError::CorruptFile ... is not a valid
parquet file. Incorrect footer magic: [80, 70, 65, 49]" ("PFA1", Puffin's magic),
and the reader exits 1 with that error, never other rows. Equality deletes fail in
PyIceberg's planning inside daft.read_iceberg ("PyIceberg does not yet support
equality deletes"), exit 1 (asserted by sync_upsert_seeds_with_equality_deletes).
Daft's own log line ("Error when running pipeline node ...") is off (DAFT_LOG=off
unless set): stderr carries the reader's one error line.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import arrow_rows  # noqa: E402
import common  # noqa: E402
from common import EXIT_FAILURE, ReaderError  # noqa: E402

os.environ.setdefault("DAFT_LOG", "off")


def io_config(cfg: common.CatalogConfig, tbl):
    """Daft's IOConfig from the table's FileIO properties (catalog config + table
    config + ours: endpoint, keys, session token, region), as Daft itself maps
    them, with path-style requests to the test bed's store."""
    from daft.io import IOConfig, S3Config

    props = {k: str(v) for k, v in tbl.io.properties.items()}

    def first(*keys):
        for k in keys:
            if props.get(k):
                return props[k]
        return None

    endpoint = first("s3.endpoint")
    return IOConfig(s3=S3Config(
        endpoint_url=endpoint,
        region_name=first("s3.region", "client.region"),
        key_id=first("s3.access-key-id", "client.access-key-id"),
        access_key=first("s3.secret-access-key", "client.secret-access-key"),
        session_token=first("s3.session-token", "client.session-token"),
        force_virtual_addressing=False,
        # No keys (a public bucket) must not fall back to a credential chain.
        anonymous=not first("s3.access-key-id", "client.access-key-id"),
    ))


def read(cfg: common.CatalogConfig, table: common.TableName):
    import daft
    import polars_reader

    if cfg.remote_signing:
        raise ReaderError(f"Daft {daft.__version__} cannot use a remote S3 signer "
                          f"(s3.signer / X-Iceberg-Access-Delegation: remote-signing); "
                          f"use --store-keys", EXIT_FAILURE)
    tbl = polars_reader.load_table(cfg, table)
    columns = polars_reader.columns_of(tbl)
    try:
        df = daft.read_iceberg(tbl, io_config=io_config(cfg, tbl), ignore_corrupt_files=False)
        arrow = df.to_arrow()
    except Exception as e:  # Daft's errors (DaftCoreException, ValueError, ...)
        first_line = (str(e).strip().splitlines() or [""])[0]
        hint = ""
        if ".puffin" in first_line and "footer magic" in first_line:
            hint = (" (a deletion vector: Daft reads every delete file as a Parquet "
                    "position delete file)")
        raise ReaderError(f"Daft {daft.__version__} cannot read {table.dotted}: "
                          f"{type(e).__name__}: {first_line}{hint}", EXIT_FAILURE)
    return columns, arrow_rows.rows(arrow, columns)


def main() -> None:
    common.run_reader("daft", read)
    # Every row is written: leave without the interpreter's finalization,
    # where Daft's native threads once aborted the process after a full
    # read ("Fatal Python error: PyGILState_Release", CI of 9ee3c11).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
