//! `[destination]`: the Iceberg catalog, its credentials and the bucket.

use std::fmt;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{defaults, empty_as_none, secret_or_none};
use crate::Secret;

/// Which Iceberg catalog the tables live in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CatalogKind {
    /// An Iceberg REST catalog (Polaris, Unity Catalog, Nessie,
    /// SeaweedFS, ...).
    #[schemars(extend("x-label" = "REST catalog (Polaris, Nessie, Unity, ...)"))]
    Rest,
    /// The embedded catalog: a SQLite catalog file and the table files in
    /// `path`, laid out as PyIceberg's `SqlCatalog` and Iceberg's JDBC
    /// catalog do.
    #[schemars(extend("x-label" = "embedded (SQLite in the data folder)"))]
    Sql,
}

impl CatalogKind {
    /// The name the job file uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rest => "rest",
            Self::Sql => "sql",
        }
    }
}

impl Default for CatalogKind {
    /// `destination.catalog`: the embedded SQLite catalog.
    fn default() -> Self {
        Self::Sql
    }
}

/// The Iceberg table format version of the tables topicberg creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FormatVersion {
    /// v2: position (or equality) delete files.
    V2,
    /// v3: deletion vectors, row lineage.
    V3,
}

impl FormatVersion {
    /// The number in table metadata (`format-version`).
    pub fn number(self) -> u8 {
        match self {
            Self::V2 => 2,
            Self::V3 => 3,
        }
    }
}

/// OAuth2 client credentials written as `client_id:client_secret`.
///
/// The whole text is held as a [`Secret`]; `Debug` shows the client id only.
/// A value without `:` parses (so that validation can report it with every
/// other problem) and then has neither id nor secret.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Credential(Secret);

impl Credential {
    /// Wraps `client_id:client_secret`.
    pub fn new(text: impl Into<String>) -> Self {
        Self(Secret::new(text))
    }

    /// The part before the first `:`, if there is a `:`.
    pub fn client_id(&self) -> Option<&str> {
        self.0.expose().split_once(':').map(|(id, _)| id)
    }

    /// The part after the first `:`, if there is a `:`.
    pub fn client_secret(&self) -> Option<Secret> {
        self.0
            .expose()
            .split_once(':')
            .map(|(_, secret)| Secret::new(secret))
    }
}

impl From<String> for Credential {
    fn from(text: String) -> Self {
        Self::new(text)
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.client_id() {
            Some(id) => write!(f, "Credential({id}:***)"),
            None => f.write_str("Credential(***)"),
        }
    }
}

/// `[destination]`: the catalog the tables are committed to and the object
/// store their files go to. The whole table is optional: without it, tables
/// go to the embedded catalog in `./warehouse`. REST-only fields are
/// refused with `catalog = "sql"` (so a forgotten `catalog = "rest"` cannot
/// silently write locally), and `path` with `catalog = "rest"`. With
/// `catalog = "sql"`, a store's settings (`s3_*` and `ca_pem`, `azure_*`,
/// `gcs_*`) are taken only when `warehouse` puts the tables on that store.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = super::schema::field_order::<Self>)]
pub struct DestinationConfig {
    /// Which catalog the tables live in.
    #[serde(default)]
    #[schemars(extend(
        "x-label" = "Catalog",
        "x-group" = "Catalog",
        "x-new-default" = "rest"
    ))]
    pub catalog: CatalogKind,
    /// REST: the catalog's base URI, without `/v1` (Polaris:
    /// `http://host:8181/api/catalog`). Required with `rest`.
    #[serde(default, deserialize_with = "empty_as_none")]
    #[schemars(extend(
        "x-when" = {"catalog": ["rest"]},
        "x-label" = "Catalog URL",
        "x-group" = "Catalog",
        "x-type" = "URL",
        "x-default" = "required with `rest`",
        "x-help" = "REST: the catalog's base URL, without /v1"
    ))]
    pub uri: Option<String>,
    /// REST: the warehouse asked for in `GET /v1/config` (Polaris or Unity
    /// catalog name, SeaweedFS table bucket); required. SQL: where the
    /// tables' folders (metadata and data) go, as a URI
    /// (`s3://bucket/prefix`, `gs://bucket/prefix`,
    /// `abfss://container@account.dfs.core.windows.net/prefix`, also
    /// `wasbs://` and `az://`); the SQLite catalog file stays in `path`.
    #[serde(default, deserialize_with = "empty_as_none")]
    #[schemars(extend(
        "x-label" = "Warehouse",
        "x-group" = "Catalog",
        "x-default" = "required with `rest`; `sql`: `path`",
        "x-help" = "REST: the warehouse the catalog serves (its name); embedded: where the table files go, an s3://, gs:// or abfss:// URI (empty: the catalog folder)"
    ))]
    pub warehouse: Option<String>,
    /// REST: OAuth2 client credentials `client_id:client_secret`, exchanged
    /// for a token. Not with `token`.
    #[serde(default, deserialize_with = "secret_or_none")]
    #[schemars(with = "Option<Secret>")]
    #[schemars(extend(
        "x-when" = {"catalog": ["rest"]},
        "x-label" = "OAuth2 client credentials",
        "x-group" = "Catalog login",
        "x-help" = "client_id:client_secret, exchanged for a token (or a bearer token below, not both)"
    ))]
    pub credential: Option<Credential>,
    /// REST: a static bearer token (a Databricks or Unity personal access
    /// token); never printed. Not with `credential`.
    #[serde(default, deserialize_with = "secret_or_none")]
    #[schemars(extend(
        "x-when" = {"catalog": ["rest"]},
        "x-label" = "Bearer token",
        "x-group" = "Catalog login",
        "x-help" = "a static token (Unity: a personal access token)"
    ))]
    pub token: Option<Secret>,
    /// REST: the OAuth2 token endpoint (with `credential` only).
    #[serde(default, deserialize_with = "empty_as_none")]
    #[schemars(extend(
        "x-when" = {"catalog": ["rest"]},
        "x-label" = "OAuth2 token URI",
        "x-group" = "Catalog login",
        "x-type" = "URL",
        "x-default" = "`<uri>/v1/oauth/tokens`",
        "x-help" = "empty: <catalog URL>/v1/oauth/tokens"
    ))]
    pub oauth2_server_uri: Option<String>,
    /// REST: the OAuth2 scope to ask for (Polaris: `PRINCIPAL_ROLE:ALL`;
    /// with `credential` only).
    #[serde(default, deserialize_with = "empty_as_none")]
    #[schemars(extend(
        "x-when" = {"catalog": ["rest"]},
        "x-label" = "OAuth2 scope",
        "x-group" = "Catalog login",
        "x-help" = "e.g. PRINCIPAL_ROLE:ALL for Polaris"
    ))]
    pub scope: Option<String>,
    /// S3 endpoint of a non-AWS store (MinIO, SeaweedFS); unset for AWS S3
    /// or when the catalog hands out the endpoint.
    #[serde(default, deserialize_with = "empty_as_none")]
    #[schemars(extend(
        "x-label" = "S3 endpoint",
        "x-group" = "S3 storage",
        "x-type" = "URL",
        "x-default" = "AWS S3",
        "x-help" = "a non-AWS store (MinIO, SeaweedFS); empty for AWS or when the catalog hands it out"
    ))]
    pub s3_endpoint: Option<String>,
    /// The S3 region of the store, e.g. `eu-west-1`.
    #[serde(default, deserialize_with = "empty_as_none")]
    #[schemars(extend("x-label" = "S3 region", "x-group" = "S3 storage"))]
    pub s3_region: Option<String>,
    /// S3 access key id; set together with `s3_secret_key`. Unset: the
    /// catalog's vended credentials, or the environment's chain.
    #[serde(default, deserialize_with = "empty_as_none")]
    #[schemars(extend("x-label" = "S3 access key", "x-group" = "S3 storage"))]
    pub s3_access_key: Option<String>,
    /// S3 secret access key; never printed.
    #[serde(default, deserialize_with = "secret_or_none")]
    #[schemars(extend("x-label" = "S3 secret key", "x-group" = "S3 storage"))]
    pub s3_secret_key: Option<Secret>,
    /// Path-style S3 addressing (needed by most local stores).
    #[serde(default)]
    #[schemars(extend(
        "x-label" = "S3 path-style addressing",
        "x-group" = "S3 storage",
        "x-default" = "yes with an endpoint"
    ))]
    pub s3_path_style: Option<bool>,
    /// For an `https://` catalog, token endpoint, S3 store or signer behind
    /// a private CA: the CA certificate(s) as PEM text, or the path of a
    /// PEM file (relative to the job file's folder). Without it, a
    /// certificate the system does not trust fails `check` and the sync at
    /// once, naming the certificate problem and this setting.
    // After loading, always the PEM text.
    #[serde(default, deserialize_with = "empty_as_none")]
    #[schemars(extend(
        "x-label" = "CA certificate",
        "x-group" = "Catalog login",
        "x-widget" = "pem",
        "x-default" = "the system trust store",
        "x-help" = "an https catalog, token endpoint or store behind a private CA: its PEM text, or a file path"
    ))]
    pub ca_pem: Option<String>,
    /// Azure Blob / ADLS Gen2: the storage account of `az://` locations
    /// (`abfss://` and `wasbs://` name theirs).
    #[serde(default, deserialize_with = "empty_as_none")]
    #[schemars(extend(
        "x-label" = "Azure storage account",
        "x-group" = "Azure and Google Cloud storage",
        "x-default" = "`AZURE_STORAGE_ACCOUNT_NAME`",
        "x-help" = "for az:// locations (abfss:// names its own); empty: AZURE_STORAGE_ACCOUNT_NAME"
    ))]
    pub azure_account: Option<String>,
    /// Azure: the account key; never printed. Unset: the environment's
    /// chain (`AZURE_STORAGE_ACCOUNT_KEY`, a SAS in `AZURE_STORAGE_SAS_KEY`,
    /// a service principal, workload identity, then managed identity).
    #[serde(default, deserialize_with = "secret_or_none")]
    #[schemars(extend(
        "x-label" = "Azure account key",
        "x-group" = "Azure and Google Cloud storage",
        "x-default" = "the environment's chain",
        "x-help" = "empty: the environment's chain (SAS, service principal, managed identity)"
    ))]
    pub azure_access_key: Option<Secret>,
    /// Azure: the Blob endpoint of an emulator or private endpoint, the
    /// account in its path (`http://127.0.0.1:10000/devstoreaccount1` for
    /// Azurite).
    #[serde(default, deserialize_with = "empty_as_none")]
    #[schemars(extend(
        "x-label" = "Azure Blob endpoint",
        "x-group" = "Azure and Google Cloud storage",
        "x-type" = "URL",
        "x-default" = "Azure's own",
        "x-help" = "an emulator or private endpoint, the account in its path; empty: Azure's own"
    ))]
    pub azure_endpoint: Option<String>,
    /// Google Cloud Storage: a service account key file (JSON), relative to
    /// the job file's folder. Unset: `GOOGLE_APPLICATION_CREDENTIALS`,
    /// gcloud's credentials file, then the metadata server.
    #[serde(default)]
    #[schemars(extend(
        "x-label" = "GCS service account file",
        "x-group" = "Azure and Google Cloud storage",
        "x-type" = "path",
        "x-default" = "application default credentials",
        "x-help" = "a key file (JSON); empty: application default credentials"
    ))]
    pub gcs_service_account_path: Option<PathBuf>,
    /// `sql` only: the folder holding the SQLite catalog file (and the
    /// table files, unless `warehouse` puts them on a store), relative to
    /// the job file's folder.
    // After loading a `sql` destination, always set.
    #[serde(default)]
    #[schemars(extend(
        "x-when" = {"catalog": ["sql"]},
        "x-label" = "Catalog folder",
        "x-group" = "Catalog",
        "x-type" = "path",
        "x-default" = "`./warehouse`",
        "x-help" = "embedded: the folder of its SQLite file (and of the table files without a warehouse), relative to the data folder; empty: warehouse"
    ))]
    pub path: Option<PathBuf>,
    /// The Iceberg namespace of the job's tables: lower-case letters,
    /// digits and `_`.
    #[serde(default, deserialize_with = "empty_as_none")]
    #[schemars(extend(
        "x-label" = "Namespace",
        "x-place" = "job",
        "x-default" = "`<name>_topics`",
        "x-help" = "the Iceberg namespace of its tables; empty: <job name>_topics"
    ))]
    pub namespace: Option<String>,
    /// The format version of the tables topicberg creates. Unset: 2,
    /// except upsert tables whose delete format needs 3 (from
    /// `target_engines`).
    #[serde(default)]
    #[schemars(extend(
        "enum" = [2, 3],
        "x-label" = "Format version",
        "x-group" = "Catalog",
        "x-default" = "from the target engines; 2 otherwise",
        "x-help" = "of the tables topicberg creates"
    ))]
    pub format_version: Option<u8>,
}

impl DestinationConfig {
    /// The token endpoint: `oauth2_server_uri`, or `<uri>/v1/oauth/tokens`.
    pub fn oauth2_server_uri(&self) -> Option<String> {
        match (&self.oauth2_server_uri, &self.uri) {
            (Some(explicit), _) => Some(explicit.clone()),
            (None, Some(uri)) => Some(defaults::oauth2_server_uri(uri)),
            (None, None) => None,
        }
    }

    /// Whether S3 requests use path-style addressing.
    pub fn s3_path_style(&self) -> bool {
        self.s3_path_style
            .unwrap_or_else(|| defaults::s3_path_style(self.s3_endpoint.is_some()))
    }

    /// The scheme of a SQL catalog's remote warehouse (`s3`, `gs`,
    /// `abfss`, ...); `None` with a REST catalog or a local warehouse.
    pub fn sql_warehouse_scheme(&self) -> Option<&str> {
        if self.catalog != CatalogKind::Sql {
            return None;
        }
        let (scheme, _) = self.warehouse.as_deref()?.split_once("://")?;
        (scheme != "file").then_some(scheme)
    }

    /// The embedded catalog's folder.
    pub fn sql_path(&self) -> PathBuf {
        self.path.clone().unwrap_or_else(defaults::sql_path)
    }

    /// The format version of new tables (explicit, else the default).
    pub fn format_version(&self) -> FormatVersion {
        match self.format_version {
            Some(3) => FormatVersion::V3,
            Some(_) => FormatVersion::V2,
            // `destination.format_version`'s default, unless the target
            // engines need v3 (engines.rs).
            None => FormatVersion::V2,
        }
    }
}
