#!/usr/bin/env python3
"""Read an Iceberg table with Apache Spark (PySpark 3.5 + Iceberg Spark runtime,
REST catalog, S3FileIO) and print its rows in the canonical format of common.py.

Spark is the reference reader for position deletes and deletion vectors: it
reads format v2 and v3 tables. The Iceberg jars come from
fetch_spark_jars.sh (downloaded once into .cache/spark-jars) and are passed
with spark.jars. Spark runs local[2], UI off, 1g driver, session time zone UTC,
logging (errors only) to stderr via spark-log4j2.properties.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cloud_storage  # noqa: E402
import common  # noqa: E402
from common import EXIT_FAILURE, EXIT_NO_TABLE, EXIT_UNREACHABLE, ReaderError  # noqa: E402

CATALOG = "tb"

# PySpark turns TimestampType values into naive datetimes in the Python
# process's local time zone: make that UTC, so they can be tagged as UTC.
os.environ["TZ"] = "UTC"
time.tzset()


def spark_jars(cloud: bool = False) -> str:
    try:
        out = subprocess.run([os.path.join(HERE, "fetch_spark_jars.sh")]
                             + (["--cloud"] if cloud else []) + ["--list"],
                             check=True, stdout=subprocess.PIPE, text=True).stdout
    except subprocess.CalledProcessError as e:
        raise ReaderError(f"fetch_spark_jars.sh failed (exit {e.returncode})", EXIT_FAILURE)
    return out.strip()


def catalog_conf(cfg: common.CatalogConfig, name: str = CATALOG) -> dict[str, str]:
    p = f"spark.sql.catalog.{name}"
    conf = {
        p: "org.apache.iceberg.spark.SparkCatalog",
        f"{p}.type": "rest",
        f"{p}.uri": cfg.uri,
        f"{p}.warehouse": cfg.warehouse,
        f"{p}.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        f"{p}.s3.endpoint": cfg.s3_endpoint,
        f"{p}.s3.path-style-access": "true",
        f"{p}.s3.access-key-id": cfg.s3_access_key,
        f"{p}.s3.secret-access-key": cfg.s3_secret_key,
        f"{p}.client.region": cfg.s3_region,
        f"{p}.cache-enabled": "false",
    }
    if cfg.remote_signing:
        # The catalog signs every S3 request (Nessie): S3FileIO follows the table's
        # s3.remote-signing-enabled / s3.signer.uri / s3.signer.endpoint. No keys;
        # ask for remote signing (Nessie answers "vended-credentials" alone with
        # neither keys nor signing).
        del conf[f"{p}.s3.access-key-id"], conf[f"{p}.s3.secret-access-key"]
        conf[f"{p}.header.X-Iceberg-Access-Delegation"] = "remote-signing"
    if cfg.vended:
        # The catalog vends temporary S3 credentials (vending, unity): ask for them;
        # S3FileIO takes keys, session token, endpoint and region from the table's
        # config / storage-credentials, and refreshes them at the endpoint it names.
        for k in ("s3.access-key-id", "s3.secret-access-key", "s3.endpoint"):
            del conf[f"{p}.{k}"]
        conf[f"{p}.header.X-Iceberg-Access-Delegation"] = "vended-credentials"
    if cfg.token:
        conf[f"{p}.token"] = cfg.token
    elif cfg.credential:
        conf[f"{p}.credential"] = cfg.credential
        if cfg.oauth2_server_uri:
            conf[f"{p}.oauth2-server-uri"] = cfg.oauth2_server_uri
    if cfg.scope:
        conf[f"{p}.scope"] = cfg.scope
    return conf


def session(cfg: common.CatalogConfig | None, extra: dict[str, str] | None = None):
    """A Spark session; with `cfg` (a REST catalog), its catalog as `tb`."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("AWS_REGION", cfg.s3_region if cfg else "us-east-1")
    log4j = os.path.join(HERE, "spark-log4j2.properties")
    # C1-only JIT and the serial GC: a short single-JVM job on 2 cores starts
    # about a third faster. TB_SPARK_JAVA_OPTS adds options.
    java_opts = (f"-Dlog4j2.configurationFile=file:{log4j} -Duser.timezone=UTC "
                 "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC "
                 + os.environ.get("TB_SPARK_JAVA_OPTS", "")).strip()
    b = (SparkSession.builder
         .master("local[2]")
         .appName("topicberg-testbed-reader")
         .config("spark.jars", spark_jars())
         .config("spark.driver.memory", "1g")
         .config("spark.driver.extraJavaOptions", java_opts)
         .config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.extensions",
                 "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"))
    if cfg and cfg.catalog != "sql":  # the embedded catalog's tables are read by path
        for k, v in catalog_conf(cfg).items():
            b = b.config(k, v)
    for k, v in (extra or {}).items():
        b = b.config(k, v)
    return b.getOrCreate()


def spark_type(t) -> object:
    """pyspark DataType -> common.py type tree."""
    from pyspark.sql import types as st

    if isinstance(t, st.BooleanType):
        return "boolean"
    if isinstance(t, (st.IntegerType, st.ShortType, st.ByteType)):
        return "int"
    if isinstance(t, st.LongType):
        return "long"
    if isinstance(t, st.FloatType):
        return "float"
    if isinstance(t, st.DoubleType):
        return "double"
    if isinstance(t, st.DecimalType):
        return ("decimal", t.precision, t.scale)
    if isinstance(t, st.StringType):  # Iceberg string and uuid
        return "string"
    if isinstance(t, st.BinaryType):  # Iceberg binary and fixed
        return "binary"
    if isinstance(t, st.DateType):
        return "date"
    if isinstance(t, st.TimestampNTZType):
        return "timestamp"
    if isinstance(t, st.TimestampType):
        return "timestamptz"
    if isinstance(t, st.StructType):
        return ("struct", [(f.name, spark_type(f.dataType)) for f in t.fields])
    if isinstance(t, st.ArrayType):
        return ("list", spark_type(t.elementType))
    if isinstance(t, st.MapType):
        return ("map", spark_type(t.keyType), spark_type(t.valueType))
    raise ReaderError(f"unsupported Spark type {t.simpleString()}", EXIT_FAILURE)


def to_python(v, t):
    """Tag Spark's naive (UTC, see TZ above) TimestampType values as UTC."""
    if v is None:
        return None
    if t == "timestamptz":
        return v.replace(tzinfo=dt.timezone.utc)
    if isinstance(t, tuple):
        if t[0] == "struct":
            return tuple(to_python(x, ft) for x, (_, ft) in zip(v, t[1]))
        if t[0] == "list":
            return [to_python(x, t[1]) for x in v]
        if t[0] == "map":
            return [(to_python(k, t[1]), to_python(x, t[2])) for k, x in v.items()]
    return v


def java_error(e) -> str:
    """The Java exception and its causes, one line each (no stack traces)."""
    parts = []
    try:
        t = e.java_exception
        while t is not None and len(parts) < 6:
            parts.append(str(t.toString()))
            t = t.getCause()
    except Exception:  # noqa: BLE001 - best effort only
        parts = [str(e).splitlines()[0]]
    return " / caused by: ".join(parts)


def quote(s: str) -> str:
    return "`" + s.replace("`", "``") + "`"


def cloud_location(cfg: common.CatalogConfig, table: common.TableName) -> str | None:
    """The metadata location of an embedded-catalog table whose files live in
    Azure Blob / GCS (the test bed's emulators), read through that catalog
    (cloud_storage.py) with extra jars; None otherwise."""
    if cfg.catalog != "sql":
        return None
    location = common.sql_metadata_location(cfg, table)
    return location if cloud_storage.is_remote(location) else None


def read(cfg: common.CatalogConfig, table: common.TableName) -> list[bytes]:
    """The table's canonical lines, read through the test bed's Spark reader server (spark_server.py),
    or in a session of its own for cloud tables, with TB_SPARK_SERVER=0, or
    when no server can be reached."""
    location = cloud_location(cfg, table)
    if location:
        try:
            extra = cloud_storage.spark_catalog_conf(
                cfg.cloud, cfg.sql_name, common.sql_catalog_file(cfg),
                "file://" + cfg.sql_path, location)
        except cloud_storage.Unsupported as e:
            raise ReaderError(str(e), EXIT_FAILURE)
        except ValueError as e:
            raise ReaderError(str(e), common.EXIT_USAGE)
        extra["spark.jars"] = spark_jars(cloud=True)
        return common.serialize_rows(*read_in_session(cfg, table, extra, cfg.sql_name))
    if os.environ.get("TB_SPARK_SERVER") != "0":
        import dataclasses
        import spark_server
        try:
            lines, error = spark_server.request(dataclasses.replace(cfg, cloud=None), table)
        except OSError as e:
            sys.stderr.write(f"spark_reader: no reader server ({e}); reading in-process\n")
        else:
            if error:
                raise error
            return lines
    catalog = None if cfg.catalog == "sql" else CATALOG
    return common.serialize_rows(*read_in_session(cfg, table, None, catalog))


def read_in_session(cfg, table, extra, catalog):
    spark = session(cfg, extra)
    try:
        return read_with(spark, cfg, table, catalog)
    finally:
        spark.stop()


def read_with(spark, cfg: common.CatalogConfig, table: common.TableName, catalog: str | None):
    """Reads `table` with `spark` from `catalog` (a session catalog name), or
    by metadata path for the embedded catalog when `catalog` is None."""
    from pyspark.errors import AnalysisException
    from pyspark.errors.exceptions.captured import CapturedException
    from py4j.protocol import Py4JJavaError

    try:
        if catalog:
            df = spark.table(".".join(quote(x) for x in (catalog,) + table.namespace + (table.name,)))
        else:
            # The embedded catalog: Iceberg loads a table from the current
            # metadata file the SQLite catalog points at.
            df = spark.read.format("iceberg").load(common.sql_metadata_location(cfg, table))
    except AnalysisException as e:
        cls = getattr(e, "getErrorClass", lambda: None)()
        if cls in ("TABLE_OR_VIEW_NOT_FOUND", "SCHEMA_NOT_FOUND") or "not found" in str(e):
            raise ReaderError(f"table {table.dotted} does not exist in {cfg.uri}: "
                              f"{str(e).splitlines()[0]}", EXIT_NO_TABLE)
        raise
    except Py4JJavaError as e:
        msg = java_error(e)
        unreachable = any(x in msg for x in ("NotAuthorizedException", "ForbiddenException",
                                             "Connect", "RESTException"))
        raise ReaderError(f"cannot load {table.dotted} from {cfg.uri}: {msg}",
                          EXIT_UNREACHABLE if unreachable else EXIT_FAILURE)
    except CapturedException as e:  # e.g. "Spark does not support time fields"
        raise ReaderError(f"Spark cannot read {table.dotted}: {type(e).__name__}: "
                          f"{str(e).splitlines()[0]}", EXIT_FAILURE)
    columns = [(f.name, spark_type(f.dataType)) for f in df.schema.fields]
    try:
        collected = df.collect()
    except Py4JJavaError as e:
        raise ReaderError(f"reading {table.dotted} failed: {java_error(e)}", EXIT_FAILURE)
    except CapturedException as e:
        raise ReaderError(f"reading {table.dotted} failed: {type(e).__name__}: "
                          f"{str(e).splitlines()[0]}", EXIT_FAILURE)
    rows = [tuple(to_python(v, t) for v, (_, t) in zip(r, columns)) for r in collected]
    return columns, rows


def main() -> None:
    # The JVM inherits our stdout: point fd 1 at stderr for everything but the
    # rows, which go to a private duplicate of the original stdout.
    sys.stdout.flush()
    rows_fd = os.dup(1)
    os.dup2(2, 1)
    out = os.fdopen(rows_fd, "wb")
    try:
        _args, cfg, table = common.parse_reader_args("spark")
        try:
            common.check_catalog_reachable(cfg)
            lines = read(cfg, table)
        except ReaderError as e:
            common.die("spark", str(e), e.code)
        common.write_lines(lines, out)
    finally:
        out.flush()


if __name__ == "__main__":
    main()
