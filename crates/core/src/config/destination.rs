//! `[destination]`: the Iceberg catalog, its credentials and the bucket.

use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;

use super::{defaults, empty_as_none, secret_or_none};
use crate::Secret;

/// Which Iceberg catalog the tables live in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CatalogKind {
    /// An Iceberg REST catalog (Polaris, Unity Catalog, SeaweedFS, ...).
    Rest,
    /// The embedded catalog: a SQLite file and a local warehouse folder.
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
/// store their files go to. Every field is optional; the default is the
/// embedded `sql` catalog in `./warehouse`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DestinationConfig {
    /// `rest` (an Iceberg REST catalog) or `sql` (embedded; the default).
    #[serde(default)]
    pub catalog: CatalogKind,
    /// REST: the catalog's base URI without `/v1` (Polaris:
    /// `http://host:8181/api/catalog`). Required with `rest`.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub uri: Option<String>,
    /// REST: the warehouse to ask `GET /v1/config` for (Polaris catalog
    /// name, Unity catalog name, SeaweedFS table bucket). Required with `rest`.
    /// SQL: where the tables' folders (metadata and data) go, as a URI
    /// (`s3://bucket/prefix`, `gs://bucket/prefix`,
    /// `abfss://container@account.dfs.core.windows.net/prefix`); the
    /// SQLite file stays in `path`. Unset: `path` itself.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub warehouse: Option<String>,
    /// REST: OAuth2 client credentials `client_id:client_secret`, exchanged
    /// for a token. Mutually exclusive with `token`.
    #[serde(default, deserialize_with = "secret_or_none")]
    pub credential: Option<Credential>,
    /// REST: a static bearer token (Unity personal access token); never
    /// printed. Mutually exclusive with `credential`.
    #[serde(default, deserialize_with = "secret_or_none")]
    pub token: Option<Secret>,
    /// REST: the OAuth2 token endpoint. Unset: `<uri>/v1/oauth/tokens`.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub oauth2_server_uri: Option<String>,
    /// REST: the OAuth2 scope to ask for (Polaris: `PRINCIPAL_ROLE:ALL`).
    #[serde(default, deserialize_with = "empty_as_none")]
    pub scope: Option<String>,
    /// REST: S3 endpoint of a non-AWS store (MinIO, SeaweedFS); unset or
    /// empty for AWS S3 or when the catalog hands out the endpoint.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub s3_endpoint: Option<String>,
    /// REST: S3 region.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub s3_region: Option<String>,
    /// REST: S3 access key id; set together with `s3_secret_key`.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub s3_access_key: Option<String>,
    /// REST: S3 secret access key; never printed.
    #[serde(default, deserialize_with = "secret_or_none")]
    pub s3_secret_key: Option<Secret>,
    /// REST: path-style S3 addressing. Unset: true when `s3_endpoint` is set.
    #[serde(default)]
    pub s3_path_style: Option<bool>,
    /// REST: CA certificate(s) to trust besides the system's, for an
    /// `https://` catalog, its token endpoint, S3 store and signer behind a
    /// private CA: PEM text, or a path to a PEM file (relative to the job
    /// file's folder). After loading, always the PEM text.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub ca_pem: Option<String>,
    /// Azure Blob / ADLS Gen2: the storage account, for `az://` locations
    /// (`abfss://` and `wasbs://` name theirs). Unset: `AZURE_STORAGE_ACCOUNT_NAME`.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub azure_account: Option<String>,
    /// Azure: the account key; never printed. Unset: the environment's
    /// chain (`AZURE_STORAGE_ACCOUNT_KEY`, a SAS, a service principal, a
    /// managed identity).
    #[serde(default, deserialize_with = "secret_or_none")]
    pub azure_access_key: Option<Secret>,
    /// Azure: the Blob endpoint of a non-Azure store (an emulator such as
    /// Azurite, a private endpoint), the account in its path, e.g.
    /// `http://127.0.0.1:10000/devstoreaccount1`. Unset: Azure's own.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub azure_endpoint: Option<String>,
    /// Google Cloud Storage: a service account key file (JSON), relative to
    /// the job file's folder. Unset: application default credentials
    /// (`GOOGLE_APPLICATION_CREDENTIALS`, gcloud, the metadata server).
    #[serde(default)]
    pub gcs_service_account_path: Option<PathBuf>,
    /// SQL: the folder holding the SQLite catalog file and the table files,
    /// relative to the job file's folder. Unset: `./warehouse`. After
    /// loading a `sql` destination, always set.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// The Iceberg namespace of the job's tables. Unset: `<name>_topics`.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub namespace: Option<String>,
    /// Format version (2 or 3) of the tables topicberg creates. Unset: 2
    /// (the upsert work resolves it from `target_engines`).
    #[serde(default)]
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
