#!/usr/bin/env python3
"""Read an Iceberg table with PyIceberg (RestCatalog, PyArrow FileIO) and print
its rows in the canonical format of common.py.

table.scan().to_arrow() applies position/equality deletes PyIceberg supports;
PyIceberg 0.12 is meant for format v2 tables here (Spark and DuckDB are the
readers for v3 features such as deletion vectors).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import EXIT_FAILURE, EXIT_NO_TABLE, EXIT_UNREACHABLE, ReaderError  # noqa: E402

from pyiceberg import types as it  # noqa: E402


def catalog_properties(cfg: common.CatalogConfig) -> dict[str, str]:
    props = {
        "type": "rest",
        "uri": cfg.uri,
        "warehouse": cfg.warehouse,
        "py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO",
        "s3.endpoint": cfg.s3_endpoint,
        "s3.region": cfg.s3_region,
        "s3.access-key-id": cfg.s3_access_key,
        "s3.secret-access-key": cfg.s3_secret_key,
        # PyIceberg 0.12 has no s3.path-style-access: PyArrow's S3 filesystem
        # uses path-style requests unless virtual addressing is forced.
        "s3.force-virtual-addressing": "false",
        "s3.resolve-region": "false",
    }
    if cfg.remote_signing:
        # The catalog signs every S3 request (Nessie): PyIceberg's signer hooks into
        # botocore, so the fsspec/s3fs FileIO (PyArrowFileIO cannot sign remotely).
        # PyIceberg asks for vended credentials by default, and Nessie answers that
        # with neither keys nor signing: ask for remote signing instead.
        for k in ("s3.access-key-id", "s3.secret-access-key"):
            del props[k]
        props["py-io-impl"] = "pyiceberg.io.fsspec.FsspecFileIO"
        props["s3.signer"] = "S3V4RestSigner"
        props["header.X-Iceberg-Access-Delegation"] = "remote-signing"
    if cfg.vended:
        # The catalog vends temporary S3 credentials (vending, unity): ask for them;
        # the table's config brings keys, session token, endpoint and region.
        for k in ("s3.access-key-id", "s3.secret-access-key", "s3.endpoint"):
            del props[k]
        props["header.X-Iceberg-Access-Delegation"] = "vended-credentials"
    if cfg.token:
        props["token"] = cfg.token
    elif cfg.credential:
        props["credential"] = cfg.credential
        if cfg.oauth2_server_uri:
            props["oauth2-server-uri"] = cfg.oauth2_server_uri
    if cfg.scope:
        props["scope"] = cfg.scope
    return props


def unshare_s3_filesystems() -> None:
    """One s3fs client per FileIO and thread, so that remote signing is reliable.

    PyIceberg 0.12's FsspecFileIO hooks its signer into the botocore client of
    the S3FileSystem it builds (unregister, then register, under one fixed id),
    once per FileIO and thread. fsspec hands out ONE cached S3FileSystem (one
    client) for equal arguments in every thread, so (a) while another thread
    re-registers, requests in flight on the shared client go out unsigned (seen:
    a manifest PUT answered AccessDenied, ~1 make_sample_table.py run in 10),
    and (b) the last table's signer (its signer URL names that table) signs
    every table's requests. Without the instance cache each FileIO and thread
    gets its own client.
    """
    import s3fs

    s3fs.S3FileSystem.cachable = False


def load_catalog(cfg: common.CatalogConfig):
    import requests
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.exceptions import OAuthError, RESTError

    if cfg.remote_signing:
        unshare_s3_filesystems()
    if cfg.catalog == "sql":
        from pyiceberg.catalog.sql import SqlCatalog

        import cloud_storage

        # Table files may live in Azure Blob / GCS (the test bed's emulators):
        # cloud_storage.py's PyArrowFileIO settings reach them.
        # s3:// tables: the test bed store's keys, path-style.
        s3 = {k: v for k, v in catalog_properties(cfg).items()
              if k.startswith("s3.") and v} if cfg.s3_endpoint else {}
        return SqlCatalog(cfg.sql_name, uri=f"sqlite:///{common.sql_catalog_file(cfg)}",
                          warehouse=cfg.warehouse or f"file://{cfg.sql_path}",
                          **s3, **cloud_storage.pyiceberg_properties(cfg.cloud))
    try:
        return RestCatalog(f"tb_{cfg.catalog}", **catalog_properties(cfg))
    except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as e:
        raise ReaderError(f"catalog {cfg.uri} is not reachable: {e}", EXIT_UNREACHABLE)
    except (OAuthError, RESTError) as e:
        raise ReaderError(f"catalog {cfg.uri} refused the connection: {type(e).__name__}: {e}",
                          EXIT_UNREACHABLE)


def ice_type(t) -> object:
    """pyiceberg IcebergType -> common.py type tree."""
    if isinstance(t, it.BooleanType):
        return "boolean"
    if isinstance(t, it.IntegerType):
        return "int"
    if isinstance(t, it.LongType):
        return "long"
    if isinstance(t, it.FloatType):
        return "float"
    if isinstance(t, it.DoubleType):
        return "double"
    if isinstance(t, it.DecimalType):
        return ("decimal", t.precision, t.scale)
    if isinstance(t, it.StringType):
        return "string"
    if isinstance(t, it.UUIDType):
        return "uuid"
    if isinstance(t, (it.BinaryType, it.FixedType)):
        return "binary"
    if isinstance(t, it.DateType):
        return "date"
    if isinstance(t, it.TimeType):
        return "time"
    if isinstance(t, it.TimestamptzType):
        return "timestamptz"
    if isinstance(t, it.TimestampType):
        return "timestamp"
    ns_tz = getattr(it, "TimestamptzNanoType", None)
    ns = getattr(it, "TimestampNanoType", None)
    if ns_tz is not None and isinstance(t, ns_tz):
        return "timestamptz_ns"
    if ns is not None and isinstance(t, ns):
        return "timestamp_ns"
    if isinstance(t, it.StructType):
        return ("struct", [(f.name, ice_type(f.field_type)) for f in t.fields])
    if isinstance(t, it.ListType):
        return ("list", ice_type(t.element_type))
    if isinstance(t, it.MapType):
        return ("map", ice_type(t.key_type), ice_type(t.value_type))
    raise ReaderError(f"unsupported Iceberg type {t}", EXIT_FAILURE)


def patch_null_nested() -> None:
    """Keep null lists of structs and null maps with struct values null.

    PyIceberg 0.12 rebuilds such arrays from their offsets when it projects a
    file's columns onto the table schema (ArrowProjectionVisitor.list / .map,
    both on read and on write) and drops their validity, so a null becomes an
    empty list / map: apache/iceberg-python#3833 (open; fix proposed in #3834,
    which passes the mask). This wrapper puts the input's nulls back on the
    result. TB_PYICEBERG_UNPATCHED=1 turns it off (to see the bug).
    """
    import pyarrow as pa
    from pyiceberg.io.pyarrow import ArrowProjectionVisitor as V

    if getattr(V, "_topicberg_null_nested", False) or os.environ.get("TB_PYICEBERG_UNPATCHED"):
        return

    def keep_nulls(orig):
        def wrapped(self, iceberg_type, array, *children):
            out = orig(self, iceberg_type, array, *children)
            if out is not None and array is not None and array.null_count > out.null_count:
                # Same offsets, children and type (with its field ids), plus the
                # nulls. (from_arrays refuses a mask with sliced offsets: copy them.)
                mask = array.is_null()
                offsets = out.offsets
                if offsets.offset:
                    offsets = pa.concat_arrays([offsets])
                if isinstance(out, pa.MapArray):
                    out = pa.MapArray.from_arrays(offsets, out.keys, out.items,
                                                  type=out.type, mask=mask)
                else:
                    out = type(out).from_arrays(offsets, out.values, type=out.type, mask=mask)
            return out
        return wrapped

    V.list = keep_nulls(V.list)
    V.map = keep_nulls(V.map)
    V._topicberg_null_nested = True


def read(cfg: common.CatalogConfig, table: common.TableName):
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    patch_null_nested()
    cat = load_catalog(cfg)
    try:
        tbl = cat.load_table(table.namespace + (table.name,))
    except (NoSuchTableError, NoSuchNamespaceError) as e:
        where = cfg.sql_path if cfg.catalog == "sql" else cfg.uri
        raise ReaderError(f"table {table.dotted} does not exist in {where}: {e}",
                          EXIT_NO_TABLE)
    schema = tbl.schema()
    columns = [(f.name, ice_type(f.field_type)) for f in schema.fields]
    arrow = tbl.scan().to_arrow()

    pylists = []
    for name, t in columns:
        col = arrow.column(name)
        if t in ("timestamp_ns", "timestamptz_ns"):
            # Python datetimes hold microseconds: take int nanoseconds since the epoch.
            col = pc.cast(col, pa.int64())
        elif t == "timestamptz" and pa.types.is_timestamp(col.type) and col.type.tz is None:
            raise ReaderError(f"column {name}: timestamptz read without a time zone",
                              EXIT_FAILURE)
        pylists.append(col.to_pylist())
    rows = list(zip(*pylists)) if pylists else []
    if not columns:
        rows = [()] * arrow.num_rows
    return columns, rows


def main() -> None:
    common.run_reader("pyiceberg", read)


if __name__ == "__main__":
    main()
