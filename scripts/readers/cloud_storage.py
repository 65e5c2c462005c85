"""Cloud object stores for the readers: Azure Blob Storage / ADLS Gen2 and Google
Cloud Storage, as the test bed emulates them (Azurite, fake-gcs-server).

A table whose files live in such a store is read through the embedded catalog
(`--catalog sql --sql-path DIR`): the catalog file names the metadata location
(abfss://, abfs://, wasbs://, wasb://, az:// or gs://), and each engine opens it
with the settings below. Defaults come from `scripts/testbed env`:

  --azure-endpoint  TESTBED_AZURITE_BLOB_ENDPOINT  http://127.0.0.1:10000/devstoreaccount1
                    (the Blob endpoint, path-style: scheme://host:port/<account>)
  --azure-account   TESTBED_AZURE_ACCOUNT          devstoreaccount1
  --azure-key       TESTBED_AZURE_KEY              the account's shared key
  --gcs-endpoint    TESTBED_GCS_ENDPOINT           http://127.0.0.1:4443 (no auth)

Azure URI forms (all name a container and a blob; Azurite serves only the Blob
API, so every engine is pointed at the Blob endpoint whatever the scheme says):
  abfss://<container>@<account>.dfs.core.windows.net/<path>   (Hadoop ABFS form)
  wasbs://<container>@<account>.blob.core.windows.net/<path>  (Hadoop WASB form)
  abfs[s]://<container>/<path>, az://<container>/<path>       (fsspec/DuckDB form)

How each engine gets there (what works against the emulators, see README.md):
  PyIceberg  PyArrowFileIO (TestbedArrowFileIO below): pyarrow.fs.AzureFileSystem
             with the Blob and DFS authorities set to the emulator, and
             pyarrow.fs.GcsFileSystem with endpoint_override. PyIceberg 0.12's
             PyArrowFileIO takes "<container>@<account>.dfs.core.windows.net" for
             the container name; the subclass strips the "@<account>..." part.
  DuckDB     gs://: httpfs's GCS support (the XML API, path-style, dummy HMAC
             keys: fake-gcs-server checks no signature). az://: the azure
             extension with a connection string. abfs[s]://, wasb[s]://: the
             azure extension would call <account>.dfs.core.windows.net (DFS API,
             ignoring the connection string's endpoint), so these go through
             fsspec (adlfs, Blob API) registered on the connection.
  Spark      Iceberg's ResolvingFileIO: GCSFileIO (gcs.service.host,
             gcs.no-auth) and ADLSFileIO (adls.connection-string.<account host>
             = the emulator, shared key); the table is registered by its metadata
             file in an in-memory catalog.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import urllib.parse
from typing import Optional

AZURE_SCHEMES = ("abfs", "abfss", "wasb", "wasbs", "az", "azure")
GCS_SCHEMES = ("gs", "gcs")
# PyArrow's GcsFileSystem wants a token and its expiry to skip Google's default
# credentials; fake-gcs-server accepts any token.
GCS_DUMMY_TOKEN = "testbed-no-auth"
GCS_TOKEN_EXPIRES_AT_MS = "4102444800000"  # 2100-01-01


@dataclasses.dataclass
class CloudConfig:
    azure_endpoint: Optional[str]
    azure_account: Optional[str]
    azure_key: Optional[str]
    gcs_endpoint: Optional[str]

    @property
    def azure_connection_string(self) -> str:
        ep = urllib.parse.urlsplit(self.azure_endpoint or "")
        return (f"DefaultEndpointsProtocol={ep.scheme or 'https'};"
                f"AccountName={self.azure_account};AccountKey={self.azure_key};"
                f"BlobEndpoint={self.azure_endpoint};")


def add_args(g) -> None:
    g.add_argument("--azure-endpoint", help="Azure Blob endpoint, path-style "
                   "(default TESTBED_AZURITE_BLOB_ENDPOINT, e.g. "
                   "http://127.0.0.1:10000/devstoreaccount1)")
    g.add_argument("--azure-account", help="Azure storage account (default TESTBED_AZURE_ACCOUNT)")
    g.add_argument("--azure-key", help="Azure shared key (default TESTBED_AZURE_KEY)")
    g.add_argument("--gcs-endpoint", help="GCS endpoint, no auth "
                   "(default TESTBED_GCS_ENDPOINT, e.g. http://127.0.0.1:4443)")


def resolve(args: argparse.Namespace) -> CloudConfig:
    def pick(name: str, env: str) -> Optional[str]:
        v = getattr(args, name, None) or os.environ.get(env) or None
        return v.rstrip("/") if v and name.endswith("endpoint") else v

    return CloudConfig(
        azure_endpoint=pick("azure_endpoint", "TESTBED_AZURITE_BLOB_ENDPOINT"),
        azure_account=pick("azure_account", "TESTBED_AZURE_ACCOUNT"),
        azure_key=pick("azure_key", "TESTBED_AZURE_KEY"),
        gcs_endpoint=pick("gcs_endpoint", "TESTBED_GCS_ENDPOINT"),
    )


class Unsupported(ValueError):
    """The engine cannot read this URI form (exit 1); other ValueErrors here
    are missing settings (exit 2)."""


def scheme_of(location: str) -> str:
    return urllib.parse.urlsplit(location).scheme.lower()


def is_remote(location: str) -> bool:
    return scheme_of(location) in AZURE_SCHEMES + GCS_SCHEMES


def require(cloud: CloudConfig, location: str) -> None:
    """Raise ValueError naming the missing setting for a location in a cloud store."""
    s = scheme_of(location)
    if s in AZURE_SCHEMES:
        missing = [n for n, v in (("--azure-endpoint", cloud.azure_endpoint),
                                  ("--azure-account", cloud.azure_account),
                                  ("--azure-key", cloud.azure_key)) if not v]
    elif s in GCS_SCHEMES:
        missing = [] if cloud.gcs_endpoint else ["--gcs-endpoint"]
    else:
        return
    if missing:
        raise ValueError(f"{location} is in a cloud store: pass {', '.join(missing)} "
                         f"(or eval \"$(scripts/testbed env)\")")


def azure_container_and_path(location: str) -> tuple[str, Optional[str], str]:
    """(container, account or None, path) of an Azure URI in any of its forms."""
    u = urllib.parse.urlsplit(location)
    netloc = u.netloc
    account = None
    if "@" in netloc:
        container, host = netloc.split("@", 1)
        account = host.split(".", 1)[0]
    else:
        container = netloc
        if "." in netloc:  # az://<account>.blob.core.windows.net/<container>/<path>
            account = netloc.split(".", 1)[0]
            container, _, rest = u.path.lstrip("/").partition("/")
            return container, account, rest
    return container, account, u.path.lstrip("/")


# ---------------------------------------------------------------------------
# PyIceberg
# ---------------------------------------------------------------------------

def pyiceberg_properties(cloud: CloudConfig) -> dict[str, str]:
    """Catalog properties for PyIceberg's FileIO (set what is configured)."""
    props = {"py-io-impl": "cloud_storage.TestbedArrowFileIO"}
    if cloud.azure_endpoint and cloud.azure_account and cloud.azure_key:
        ep = urllib.parse.urlsplit(cloud.azure_endpoint)
        props.update({
            "adls.account-name": cloud.azure_account,
            "adls.account-key": cloud.azure_key,
            # PyArrowFileIO (pyarrow.fs.AzureFileSystem): an authority with a port
            # makes Arrow put the account in the path (emulator style).
            "adls.blob-storage-authority": ep.netloc,
            "adls.dfs-storage-authority": ep.netloc,
            "adls.blob-storage-scheme": ep.scheme,
            "adls.dfs-storage-scheme": ep.scheme,
            # FsspecFileIO (adlfs), should anyone pick it with py-io-impl.
            "adls.connection-string": cloud.azure_connection_string,
        })
    if cloud.gcs_endpoint:
        props.update({
            "gcs.service.host": cloud.gcs_endpoint,
            "gcs.oauth2.token": GCS_DUMMY_TOKEN,
            "gcs.oauth2.token-expires-at": GCS_TOKEN_EXPIRES_AT_MS,
        })
    return props


def _arrow_file_io_class():
    from pyiceberg.io.pyarrow import PyArrowFileIO

    class TestbedArrowFileIO(PyArrowFileIO):
        """PyArrowFileIO that understands abfss://<container>@<account>.dfs... and
        wasbs://<container>@<account>.blob... (PyIceberg 0.12 passes the whole
        "<container>@<host>" on to pyarrow.fs.AzureFileSystem as the container)."""

        @staticmethod
        def parse_location(location, properties=None):
            scheme, netloc, path = PyArrowFileIO.parse_location(location, properties or {})
            if scheme in AZURE_SCHEMES and scheme not in ("az", "azure"):
                container, _account, rest = azure_container_and_path(location)
                path = f"{container}/{rest}"
            return scheme, netloc, path

        def _initialize_fs(self, scheme, netloc=None):
            if scheme in ("az", "azure"):
                scheme = "abfs"  # pyarrow's AzureFileSystem, same Blob API
            return super()._initialize_fs(scheme, netloc)

    return TestbedArrowFileIO


def __getattr__(name):  # py-io-impl "cloud_storage.TestbedArrowFileIO", imported lazily
    if name == "TestbedArrowFileIO":
        cls = _arrow_file_io_class()
        globals()[name] = cls
        return cls
    raise AttributeError(name)


# ---------------------------------------------------------------------------
# DuckDB
# ---------------------------------------------------------------------------

def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def duckdb_prepare(con, cloud: CloudConfig, location: str, extension_path) -> None:
    """Make DuckDB connection `con` able to read the table at `location`.
    extension_path(name) gives the file of a PyPI duckdb-extension-<name>."""
    s = scheme_of(location)
    require(cloud, location)
    if s in GCS_SCHEMES:
        ep = urllib.parse.urlsplit(cloud.gcs_endpoint)
        con.execute(f"""CREATE SECRET tb_gcs (TYPE gcs, KEY_ID 'testbed', SECRET 'testbed',
            ENDPOINT {_sql_str(ep.netloc)}, URL_STYLE 'path',
            USE_SSL {'true' if ep.scheme == 'https' else 'false'})""")
    elif s in ("az", "azure"):
        con.execute(f"LOAD {_sql_str(extension_path('azure'))}")
        con.execute(f"CREATE SECRET tb_azure (TYPE azure, "
                    f"CONNECTION_STRING {_sql_str(cloud.azure_connection_string)})")
    elif s in AZURE_SCHEMES:
        for fs in adlfs_filesystems(cloud):
            con.register_filesystem(fs)


def adlfs_filesystems(cloud: CloudConfig) -> list:
    """fsspec filesystems (adlfs, Blob API) for abfs[s]:// and wasb[s]://."""
    from adlfs import AzureBlobFileSystem

    class Abfs(AzureBlobFileSystem):
        protocol = ("abfs", "abfss")

    class Wasb(AzureBlobFileSystem):
        # adlfs knows "<container>@<account>.dfs.core.windows.net" hosts; the same
        # parsing serves wasb's "<container>@<account>.blob.core.windows.net".
        protocol = ("wasb", "wasbs")

    cs = cloud.azure_connection_string
    return [Abfs(connection_string=cs, skip_instance_cache=True),
            Wasb(connection_string=cs, skip_instance_cache=True)]


# ---------------------------------------------------------------------------
# Spark
# ---------------------------------------------------------------------------

def spark_supported(location: str) -> None:
    """Raise ValueError for the URI forms Iceberg's ResolvingFileIO cannot take
    (checked here: ADLSFileIO would look up the container as a host name and
    the Azure SDK retries that for minutes)."""
    s = scheme_of(location)
    if s in GCS_SCHEMES and s != "gs":
        raise Unsupported(f"Spark (Iceberg 1.10 ResolvingFileIO) reads gs:// only, not {s}://")
    if s in ("az", "azure"):
        raise Unsupported(f"Spark (Iceberg 1.10 ResolvingFileIO) has no FileIO for {s}://; "
                         "abfs[s]://<container>@<account>.dfs.core.windows.net/... and "
                         "wasb[s]://<container>@<account>.blob.core.windows.net/... work")
    if s in AZURE_SCHEMES:
        host = urllib.parse.urlsplit(location).netloc.rpartition("@")
        if not host[1] or not host[2].endswith(".core.windows.net"):
            raise Unsupported(f"Spark (Iceberg 1.10 ADLSFileIO) needs {s}://<container>@<account>"
                             f".(dfs|blob).core.windows.net/..., not {location}")


def spark_catalog_conf(cloud: CloudConfig, name: str, sqlite_file: str, warehouse: str,
                       location: str) -> dict[str, str]:
    """The embedded catalog (SQLite, Iceberg's JDBC layout) as Spark catalog
    `name` (JdbcCatalog names its rows by the catalog's name: use the embedded
    catalog's), whose ResolvingFileIO reaches the emulators: gs:// through
    GCSFileIO, abfs[s]:// and wasb[s]:// (with the account host) through
    ADLSFileIO. Needs the SDK bundles (fetch_spark_jars.sh --cloud)."""
    require(cloud, location)
    spark_supported(location)
    p = f"spark.sql.catalog.{name}"
    conf = {
        p: "org.apache.iceberg.spark.SparkCatalog",
        f"{p}.type": "jdbc",
        f"{p}.uri": "jdbc:sqlite:" + sqlite_file,
        f"{p}.warehouse": warehouse,
        f"{p}.io-impl": "org.apache.iceberg.io.ResolvingFileIO",
        f"{p}.cache-enabled": "false",
    }
    if cloud.gcs_endpoint:
        conf[f"{p}.gcs.service.host"] = cloud.gcs_endpoint
        conf[f"{p}.gcs.no-auth"] = "true"
        conf[f"{p}.gcs.project-id"] = os.environ.get("TESTBED_GCS_PROJECT", "topicberg-testbed")
    if cloud.azure_endpoint and cloud.azure_account and cloud.azure_key:
        # ADLSFileIO: the endpoint for an account host, here the emulator's Blob
        # endpoint (Azurite has no DFS API; reads go through the Blob API).
        for host in ("dfs", "blob"):
            conf[f"{p}.adls.connection-string.{cloud.azure_account}.{host}.core.windows.net"] = \
                cloud.azure_endpoint
        conf[f"{p}.adls.auth.shared-key.account.name"] = cloud.azure_account
        conf[f"{p}.adls.auth.shared-key.account.key"] = cloud.azure_key
    return conf
