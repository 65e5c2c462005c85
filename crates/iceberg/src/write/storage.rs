//! Where data and metadata files go: S3 (any S3-compatible store) or a
//! local folder, behind the `iceberg` crate's [`FileIO`].
//!
//! We implement the crate's [`Storage`] trait over the `object_store` crate
//! rather than using `iceberg-storage-opendal`:
//! - the credentials stay in our typed [`S3Config`] (a [`Secret`]); OpenDAL's
//!   factory takes them as plain `FileIO` properties, which `FileIO`'s
//!   `Debug` prints;
//! - writes stream through `object_store`'s `BufWriter`: one `PUT` for a small
//!   object, a multipart upload in fixed-size parts (>= 5 MiB, as S3 demands)
//!   for a large one, with bounded parts in flight;
//! - `object_store` 0.12 rides on the `reqwest` 0.12 already in the build
//!   (TLS through rustls with the system's root certificates), where OpenDAL
//!   0.57 would add `reqwest` 0.13 and the aws-lc C library.
//!
//! Locations: `s3://bucket/key` (also `s3a://`, `s3n://`) go to S3,
//! `file:///abs/path` and `/abs/path` to the local file system.
//!
//! Retries ([`S3RetryPolicy`]): `object_store` retries every S3 request
//! itself, with exponential backoff and jitter, bounded by a count and a
//! total time. It retries HTTP 5xx, 429 and 408 answers, refused
//! connections and connections closed before the answer for every
//! request, and resets and timeouts for idempotent ones, which include
//! `PUT` (overwrite), multipart create / part / complete and `DELETE`. A
//! 4xx answer (403, 404, 400) is final. So uploads need no retry loop of
//! ours; a failed multipart upload is aborted (best effort).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::ObjectStore;
use topicberg_core::Secret;

use crate::write::clouds::{is_azure, is_gcs, Stores, AZURE_CHAIN, GCS_CHAIN};
pub use crate::write::clouds::{AzureConfig, GcsConfig};
use crate::write::credentials::{
    describe_expiry, vended_provider, Refresh, Vended, VendedS3, VendedSource,
};
pub use crate::write::retry::{S3RetryPolicy, S3_RETRY_ENV};
use crate::write::signing::{RemoteSigning, SignerToken, SigningConnector};
use crate::write::storage_fault::{bad_location, bucket_of, fault, StorageFault};

/// How to reach an S3-compatible object store.
#[derive(Debug, Clone)]
pub struct S3Config {
    /// Endpoint URL, e.g. `http://127.0.0.1:8333`; `None` means AWS S3 in
    /// `region`. `http://` endpoints are allowed, `https://` use TLS.
    pub endpoint: Option<String>,
    /// The region to sign requests for (`us-east-1` for most local stores).
    pub region: String,
    /// Which credentials sign the requests.
    pub credentials: S3Credentials,
    /// Path-style requests (`endpoint/bucket/key`) instead of virtual-hosted
    /// style (`bucket.endpoint/key`); local stores (MinIO, SeaweedFS) want
    /// `true`.
    pub path_style: bool,
    /// PEM text of CA certificates to trust besides the system's (a
    /// store, or a catalog's signer, behind a private CA).
    pub ca_pem: Option<String>,
}

/// Which credentials an [`S3Config`] signs with (tables whose catalog
/// vends credentials use those instead: [`ObjectStorage::use_vended`]).
#[derive(Debug, Clone)]
pub enum S3Credentials {
    /// The job file's access key and secret.
    Keys {
        /// The access key id.
        access_key_id: String,
        /// The secret access key; never printed.
        secret_access_key: Secret,
    },
    /// The environment's default chain, as the AWS SDKs read it:
    /// `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` (/ `AWS_SESSION_TOKEN`),
    /// web identity (`AWS_WEB_IDENTITY_TOKEN_FILE` + `AWS_ROLE_ARN`, IRSA),
    /// the ECS container endpoint, then the instance metadata service.
    Environment,
}

/// The environment's chain for S3, in words (`check`).
const S3_CHAIN: &str =
    "the environment's default chain (AWS_* variables, web identity, ECS, instance metadata)";

impl S3Credentials {
    /// Where the credentials come from, in words (`check`, logs).
    pub fn describe(&self) -> &'static str {
        match self {
            Self::Keys { .. } => "the job file's keys (s3_access_key, s3_secret_key)",
            Self::Environment => S3_CHAIN,
        }
    }
}

/// Which object stores an [`ObjectStorage`] can reach, and how. Local
/// paths (`file://`, `/...`) always work; Azure and Google Cloud Storage
/// locations work with their environment's credentials when nothing is set.
#[derive(Debug, Clone, Default)]
pub struct StorageConfig {
    /// S3 locations go to this store; `None`: S3 locations are refused.
    pub s3: Option<S3Config>,
    /// Azure Blob Storage / ADLS Gen2 settings.
    pub azure: AzureConfig,
    /// Google Cloud Storage settings.
    pub gcs: GcsConfig,
}

impl StorageConfig {
    /// Local folders, and Azure / GCS with their environment's credentials.
    pub fn local() -> Self {
        Self::default()
    }

    /// S3 through `s3` (and the rest as [`StorageConfig::local`]).
    pub fn s3(s3: S3Config) -> Self {
        Self {
            s3: Some(s3),
            ..Self::default()
        }
    }
}

/// The storage behind topicberg's [`FileIO`]: S3 or the local file system,
/// chosen per location.
#[derive(Clone)]
pub struct ObjectStorage {
    inner: Arc<Inner>,
}

struct Inner {
    s3: Option<S3Config>,
    retry: S3RetryPolicy,
    /// Stores by bucket (S3), `azure:<container>@<account>`, `gcs:<bucket>`.
    buckets: Stores,
    local: Arc<dyn ObjectStore>,
    /// Tables whose catalog vends their credentials: by table location.
    vended: Mutex<Vec<VendedTable>>,
    azure: AzureConfig,
    gcs: GcsConfig,
}

/// A table's own store: signed with the credentials its catalog vends, or
/// by its catalog's signer.
struct VendedTable {
    /// The table's location, without a trailing `/`.
    location: String,
    store: Arc<dyn ObjectStore>,
    source: TableCredentials,
}

enum TableCredentials {
    Vended(Arc<dyn VendedSource>),
    /// Signed remotely by this signer (shown without its token).
    Signed(String),
}

/// Which credentials reach a location: for `check` and reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialPath {
    /// The job file's keys (S3 keys, an Azure account key, a GCS service
    /// account key file: which, in words).
    JobKeys(&'static str),
    /// Credentials the catalog vended for the table (expiry, if said).
    Vended { expires_at: Option<String> },
    /// Requests signed by the catalog's signer (its URL, token hidden).
    RemoteSigning { signer: String },
    /// The environment's default chain of that store (in words).
    Environment(&'static str),
    /// A local folder: none needed.
    Local,
}

impl fmt::Display for CredentialPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::JobKeys(which) => write!(f, "the job file's {which}"),
            Self::Vended {
                expires_at: Some(at),
            } => {
                write!(f, "credentials vended by the catalog, expiring {at}")
            }
            Self::Vended { expires_at: None } => {
                f.write_str("credentials vended by the catalog (no expiry given)")
            }
            Self::RemoteSigning { signer } => {
                write!(
                    f,
                    "requests signed by the catalog (remote signing, {signer})"
                )
            }
            Self::Environment(chain) => f.write_str(chain),
            Self::Local => f.write_str("a local folder (no credentials)"),
        }
    }
}

impl fmt::Debug for ObjectStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectStorage")
            .field("s3", &self.inner.s3)
            .field("retry", &self.inner.retry)
            .finish_non_exhaustive()
    }
}

impl ObjectStorage {
    /// Storage for the given configuration, with the S3 retry policy of
    /// [`S3RetryPolicy::from_env`]; connects lazily, per bucket.
    pub fn new(config: StorageConfig) -> Self {
        Self::with_retry(config, S3RetryPolicy::from_env())
    }

    /// Storage for the given configuration with an explicit S3 retry
    /// policy; connects lazily, per bucket.
    pub fn with_retry(config: StorageConfig, retry: S3RetryPolicy) -> Self {
        Self {
            inner: Arc::new(Inner {
                s3: config.s3,
                retry,
                buckets: Mutex::new(HashMap::new()),
                local: Arc::new(LocalFileSystem::new()),
                vended: Mutex::new(Vec::new()),
                azure: config.azure,
                gcs: config.gcs,
            }),
        }
    }

    /// The locations of every object under the folder `location` (its
    /// whole subtree), in the same scheme, e.g. to find the files a failed
    /// commit left in a table's `metadata/` folder.
    pub async fn list(&self, location: &str) -> iceberg::Result<Vec<String>> {
        let folder = location.trim_end_matches('/');
        let (store, prefix) = self.resolve(folder)?;
        let base = listing_base(folder)?;
        let mut out = Vec::new();
        let mut listing = store.list(Some(&prefix));
        while let Some(meta) = listing.next().await {
            let meta = meta.map_err(|e| fault("listing", folder, e))?;
            out.push(format!("{base}{}", meta.location));
        }
        out.sort();
        Ok(out)
    }

    /// Every file under `location` (recursively) with its size and
    /// last-modified time, in the folder's scheme as [`Self::list`] gives
    /// them.
    pub async fn list_with_times(&self, location: &str) -> iceberg::Result<Vec<ListedFile>> {
        let folder = location.trim_end_matches('/');
        let (store, prefix) = self.resolve(folder)?;
        let base = listing_base(folder)?;
        let mut out = Vec::new();
        let mut listing = store.list(Some(&prefix));
        while let Some(meta) = listing.next().await {
            let meta = meta.map_err(|e| fault("listing", folder, e))?;
            out.push(ListedFile {
                location: format!("{base}{}", meta.location),
                last_modified_ms: meta.last_modified.timestamp_millis(),
                size: meta.size,
            });
        }
        out.sort_by(|a, b| a.location.cmp(&b.location));
        Ok(out)
    }

    /// Builds the store of `location` now, as its first read or write would
    /// (kept per bucket). A store's HTTP client loads the system's trusted
    /// certificates, about 50 ms of CPU: a sync asks for it while it waits
    /// on Kafka, not on its first write. A failure is left to that use.
    pub fn prepare(&self, location: &str) {
        let _ = self.resolve(location);
    }

    /// The store and key of a location.
    pub(super) fn resolve(&self, location: &str) -> iceberg::Result<(Arc<dyn ObjectStore>, Path)> {
        if location.starts_with('/') {
            let path = Path::from_absolute_path(location)
                .map_err(|e| bad_location(location, &e.to_string()))?;
            return Ok((self.inner.local.clone(), path));
        }
        let url = url::Url::parse(location).map_err(|e| bad_location(location, &e.to_string()))?;
        let path =
            Path::from_url_path(url.path()).map_err(|e| bad_location(location, &e.to_string()))?;
        let scheme = url.scheme();
        if scheme == "file" {
            return Ok((self.inner.local.clone(), path));
        }
        let known = matches!(scheme, "s3" | "s3a" | "s3n") || is_azure(scheme) || is_gcs(scheme);
        if let Some(store) = self.vended_store(location).filter(|_| known) {
            return Ok((store, path));
        }
        match scheme {
            "s3" | "s3a" | "s3n" => Ok((self.bucket(bucket_of(&url, location)?, location)?, path)),
            scheme if is_azure(scheme) => Ok((self.inner.azure.store(&self.inner.buckets, &self.inner.retry, &url, location)?, path)),
            scheme if is_gcs(scheme) => {
                let bucket = bucket_of(&url, location)?;
                let gcs = &self.inner.gcs;
                Ok((gcs.store(&self.inner.buckets, &self.inner.retry, bucket, location)?, path))
            }
            other => Err(bad_location(
                location,
                &format!(
                    "scheme {other}:// is not supported (s3://, gs://, abfss://, wasbs://, az://, file://)"
                ),
            )),
        }
    }

    fn bucket(&self, bucket: &str, location: &str) -> iceberg::Result<Arc<dyn ObjectStore>> {
        let mut buckets = self
            .inner
            .buckets
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(store) = buckets.get(bucket) {
            return Ok(store.clone());
        }
        let s3 = self.inner.s3.as_ref().ok_or_else(|| {
            bad_location(location, "an S3 location, but no S3 storage is configured")
        })?;
        let builder = match &s3.credentials {
            S3Credentials::Keys {
                access_key_id,
                secret_access_key,
            } => AmazonS3Builder::new()
                .with_access_key_id(access_key_id)
                .with_secret_access_key(secret_access_key.expose()),
            S3Credentials::Environment => AmazonS3Builder::from_env(),
        };
        let store = self.build_s3(
            builder,
            bucket,
            &s3.region,
            s3.endpoint.as_deref(),
            s3.path_style,
        )?;
        buckets.insert(bucket.to_string(), store.clone());
        Ok(store)
    }

    /// An S3 store for `bucket` from a builder that holds its credentials.
    fn build_s3(
        &self,
        builder: AmazonS3Builder,
        bucket: &str,
        region: &str,
        endpoint: Option<&str>,
        path_style: bool,
    ) -> iceberg::Result<Arc<dyn ObjectStore>> {
        let mut options = object_store::ClientOptions::new();
        if let Some(pem) = self.inner.s3.as_ref().and_then(|s| s.ca_pem.as_deref()) {
            let certificates =
                object_store::Certificate::from_pem_bundle(pem.as_bytes()).map_err(|e| {
                    let message = format!("destination.ca_pem holds no usable certificate: {e}");
                    iceberg::Error::new(iceberg::ErrorKind::DataInvalid, message)
                        .with_source(StorageFault { retryable: false })
                })?;
            for certificate in certificates {
                options = options.with_root_certificate(certificate);
            }
        }
        let mut builder = builder
            .with_client_options(options)
            .with_bucket_name(bucket)
            .with_region(region)
            .with_virtual_hosted_style_request(!path_style)
            .with_retry(self.inner.retry.retry_config());
        if let Some(endpoint) = endpoint {
            let endpoint = endpoint.trim_end_matches('/');
            builder = builder.with_allow_http(endpoint.starts_with("http://"));
            builder = builder.with_endpoint(if path_style {
                endpoint.to_string()
            } else {
                virtual_host_endpoint(endpoint, bucket)
            });
        }
        Ok(Arc::new(builder.build().map_err(|e| {
            let message = format!("configuring S3 for bucket {bucket}: {e}");
            iceberg::Error::new(iceberg::ErrorKind::DataInvalid, message)
                .with_source(StorageFault { retryable: false })
        })?))
    }

    /// The store of the vended table whose location holds `location`.
    fn vended_store(&self, location: &str) -> Option<Arc<dyn ObjectStore>> {
        let tables = self.inner.vended.lock().unwrap_or_else(|p| p.into_inner());
        tables
            .iter()
            .filter(|t| within(location, &t.location))
            .max_by_key(|t| t.location.len())
            .map(|t| t.store.clone())
    }

    /// From now on, files under the table location `location` are read and
    /// written with the credentials the catalog vended (`vended`), renewed
    /// through `refresh` before they expire. Called again for the same
    /// table (a reload), it takes the newly vended credentials.
    pub fn use_vended(
        &self,
        table: &str,
        location: &str,
        vended: &Vended,
        refresh: Refresh,
    ) -> iceberg::Result<()> {
        let location = location.trim_end_matches('/').to_string();
        let mut tables = self.inner.vended.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = tables.iter().find(|t| t.location == location) {
            if let TableCredentials::Vended(provider) = &t.source {
                if provider.replace(vended) {
                    return Ok(());
                }
            }
        }
        tables.retain(|t| t.location != location);
        let (store, source) = match vended {
            Vended::S3(s3) => self.vended_s3_store(table, &location, s3, vended, refresh)?,
            Vended::Gcs(_) => {
                GcsConfig::vended_store(&self.inner.retry, table, &location, vended, refresh)?
            }
            Vended::Adls(_) => self.inner.azure.vended_store(
                &self.inner.retry,
                table,
                &location,
                vended,
                refresh,
            )?,
        };
        tables.push(VendedTable {
            location,
            store,
            source: TableCredentials::Vended(source),
        });
        Ok(())
    }

    fn vended_s3_store(
        &self,
        table: &str,
        location: &str,
        s3: &VendedS3,
        vended: &Vended,
        refresh: Refresh,
    ) -> iceberg::Result<(Arc<dyn ObjectStore>, Arc<dyn VendedSource>)> {
        let (bucket, region, endpoint) = self.table_target(location, &s3.region, &s3.endpoint)?;
        let job = self.inner.s3.as_ref();
        let path_style = s3.path_style.or(job.map(|s| s.path_style)).unwrap_or(false);
        let provider = Arc::new(vended_provider(table, vended, refresh)?);
        let builder = AmazonS3Builder::new().with_credentials(provider.clone());
        let store = self.build_s3(builder, &bucket, &region, endpoint.as_deref(), path_style)?;
        Ok((store, provider))
    }

    /// From now on, requests for files under the table location `location`
    /// are signed by the catalog's signer (`signing`), with the catalog's
    /// bearer token from `token`.
    pub fn use_remote_signing(
        &self,
        location: &str,
        signing: &RemoteSigning,
        token: SignerToken,
    ) -> iceberg::Result<()> {
        let location = location.trim_end_matches('/').to_string();
        let (bucket, region, endpoint) =
            self.table_target(&location, &signing.region, &signing.endpoint)?;
        let job = self.inner.s3.as_ref();
        // The signers seen refuse virtual-hosted URIs: path style unless
        // the catalog says otherwise.
        let path_style = signing.path_style.unwrap_or(true);
        let builder = AmazonS3Builder::new()
            .with_skip_signature(true)
            .with_http_connector(SigningConnector::new(
                signing,
                &region,
                token,
                job.and_then(|s| s.ca_pem.as_deref()),
            ));
        let store = self.build_s3(builder, &bucket, &region, endpoint.as_deref(), path_style)?;
        let mut tables = self.inner.vended.lock().unwrap_or_else(|p| p.into_inner());
        tables.retain(|t| t.location != location);
        tables.push(VendedTable {
            location,
            store,
            source: TableCredentials::Signed(signing.signer_shown()),
        });
        Ok(())
    }

    /// A table's bucket, and the region and endpoint its catalog named (else
    /// the job's, else `us-east-1` and AWS).
    fn table_target(
        &self,
        location: &str,
        region: &Option<String>,
        endpoint: &Option<String>,
    ) -> iceberg::Result<(String, String, Option<String>)> {
        let url = url::Url::parse(location).map_err(|e| bad_location(location, &e.to_string()))?;
        let bucket = bucket_of(&url, location)?.to_string();
        let job = self.inner.s3.as_ref();
        let region = region
            .clone()
            .or_else(|| job.map(|s| s.region.clone()))
            .unwrap_or_else(|| "us-east-1".to_string());
        let endpoint = endpoint
            .clone()
            .or_else(|| job.and_then(|s| s.endpoint.clone()));
        Ok((bucket, region, endpoint))
    }

    /// Whether the job file gave keys for the store of `location` (they
    /// come first: a table's vended credentials or signer are then not
    /// used).
    pub fn has_job_keys_for(&self, location: &str) -> bool {
        let scheme = location.split_once("://").map_or("", |(s, _)| s);
        if is_azure(scheme) {
            return self.inner.azure.has_key();
        }
        if is_gcs(scheme) {
            return self.inner.gcs.has_key();
        }
        matches!(
            self.inner.s3.as_ref().map(|s| &s.credentials),
            Some(S3Credentials::Keys { .. })
        )
    }

    /// Which credentials reach `location` (a table's, or one of its files).
    pub fn credential_path(&self, location: &str) -> CredentialPath {
        if location.starts_with('/') || location.starts_with("file:") {
            return CredentialPath::Local;
        }
        let tables = self.inner.vended.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = tables
            .iter()
            .filter(|t| within(location, &t.location))
            .max_by_key(|t| t.location.len())
        {
            return match &t.source {
                TableCredentials::Vended(provider) => CredentialPath::Vended {
                    expires_at: provider.expires_at().map(describe_expiry),
                },
                TableCredentials::Signed(signer) => CredentialPath::RemoteSigning {
                    signer: signer.clone(),
                },
            };
        }
        let scheme = location.split_once("://").map_or("", |(s, _)| s);
        match self.inner.s3.as_ref().map(|s| &s.credentials) {
            _ if is_azure(scheme) && self.inner.azure.has_key() => {
                CredentialPath::JobKeys("Azure account key (azure_access_key)")
            }
            _ if is_azure(scheme) => CredentialPath::Environment(AZURE_CHAIN),
            _ if is_gcs(scheme) && self.inner.gcs.has_key() => {
                CredentialPath::JobKeys("service account key file (gcs_service_account_path)")
            }
            _ if is_gcs(scheme) => CredentialPath::Environment(GCS_CHAIN),
            Some(S3Credentials::Keys { .. }) => {
                CredentialPath::JobKeys("keys (s3_access_key, s3_secret_key)")
            }
            _ => CredentialPath::Environment(S3_CHAIN),
        }
    }
}

/// Whether `location` is `folder` or inside it.
fn within(location: &str, folder: &str) -> bool {
    location == folder
        || location
            .strip_prefix(folder)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// `https://host:port` -> `https://bucket.host:port` (object_store wants the
/// bucket in a virtual-hosted endpoint).
fn virtual_host_endpoint(endpoint: &str, bucket: &str) -> String {
    match endpoint.split_once("://") {
        Some((scheme, rest)) => format!("{scheme}://{bucket}.{rest}"),
        None => format!("{bucket}.{endpoint}"),
    }
}

/// What the store's listing starts each key with for `folder`: `/` for a
/// local path, `<scheme>://[container@]<host>/` for a URL.
fn listing_base(folder: &str) -> iceberg::Result<String> {
    if folder.starts_with('/') {
        return Ok("/".to_string());
    }
    let url = url::Url::parse(folder).map_err(|e| bad_location(folder, &e.to_string()))?;
    let host = url.host_str().unwrap_or_default();
    Ok(match url.username() {
        "" => format!("{}://{host}/", url.scheme()),
        container => format!("{}://{container}@{host}/", url.scheme()),
    })
}

/// A file as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedFile {
    /// Its location, in the listed folder's scheme.
    pub location: String,
    /// When it was last written (milliseconds since the epoch).
    pub last_modified_ms: i64,
    /// Its size in bytes.
    pub size: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use iceberg::io::Storage;

    #[test]
    fn virtual_host_endpoint_puts_the_bucket_first() {
        assert_eq!(
            virtual_host_endpoint("https://s3.example.com:9000", "b"),
            "https://b.s3.example.com:9000"
        );
    }

    #[test]
    fn debug_never_prints_the_secret() {
        let storage = ObjectStorage::new(StorageConfig::s3(S3Config {
            endpoint: Some("http://127.0.0.1:1".into()),
            region: "us-east-1".into(),
            credentials: S3Credentials::Keys {
                access_key_id: "AKIA".into(),
                secret_access_key: Secret::new("very-secret-key"),
            },
            path_style: true,
            ca_pem: None,
        }));
        let text = format!("{storage:?} {:?}", storage.file_io());
        assert!(!text.contains("very-secret-key"), "{text}");
    }

    #[test]
    fn credential_path_names_each_stores_job_setting_or_environment_chain() {
        let bare = ObjectStorage::new(StorageConfig::local());
        let keyed = ObjectStorage::new(StorageConfig {
            s3: None,
            azure: AzureConfig {
                access_key: Some(Secret::new("k")),
                ..AzureConfig::default()
            },
            gcs: GcsConfig {
                service_account_path: Some("/keys/sa.json".into()),
            },
        });
        let azure = "abfss://c@a.dfs.core.windows.net/t/data/f.parquet";
        let gcs = "gs://b/t/data/f.parquet";
        let shown = |s: &ObjectStorage, l: &str| s.credential_path(l).to_string();
        assert!(shown(&bare, azure).contains("environment's Azure chain"));
        assert!(shown(&bare, gcs).contains("application default credentials"));
        assert!(shown(&bare, "s3://b/t").contains("AWS_* variables"));
        assert_eq!(
            shown(&keyed, azure),
            "the job file's Azure account key (azure_access_key)"
        );
        assert!(shown(&keyed, gcs).contains("service account key file"));
        assert_eq!(shown(&keyed, "/tmp/t"), "a local folder (no credentials)");
    }

    #[test]
    fn s3_location_without_s3_config_is_refused() {
        let storage = ObjectStorage::new(StorageConfig::local());
        let err = storage.resolve("s3://bucket/key").unwrap_err();
        assert!(err.to_string().contains("no S3 storage"), "{err}");
        let err = storage.resolve("hdfs://namenode/key").unwrap_err();
        assert!(
            err.to_string().contains("scheme hdfs:// is not supported"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn list_returns_locations_in_the_folders_scheme() {
        let dir = std::env::temp_dir().join(format!("tb-list-{}", uuid::Uuid::new_v4()));
        let storage = ObjectStorage::new(StorageConfig::local());
        for name in ["a/x.avro", "a/b/y.avro", "z.avro"] {
            let location = format!("{}/{name}", dir.display());
            storage
                .write(&location, Bytes::from_static(b"1"))
                .await
                .unwrap();
        }
        let plain = storage
            .list(&format!("{}/a/", dir.display()))
            .await
            .unwrap();
        assert_eq!(
            plain,
            [
                format!("{}/a/b/y.avro", dir.display()),
                format!("{}/a/x.avro", dir.display())
            ]
        );
        let url = storage
            .list(&format!("file://{}/a", dir.display()))
            .await
            .unwrap();
        assert_eq!(url[1], format!("file://{}/a/x.avro", dir.display()));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn local_files_round_trip_through_file_io() {
        let dir = std::env::temp_dir().join(format!("tb-storage-{}", uuid::Uuid::new_v4()));
        let io = ObjectStorage::new(StorageConfig::local()).file_io();
        let location = format!("file://{}/a/b.bin", dir.display());
        let out = io.new_output(&location).unwrap();
        let mut writer = out.writer().await.unwrap();
        let big = Bytes::from(vec![7u8; crate::write::file_io::PART_SIZE + 10]);
        writer.write(Bytes::from_static(b"head")).await.unwrap();
        writer.write(big.clone()).await.unwrap();
        writer.close().await.unwrap();
        assert!(writer.close().await.is_err(), "a second close must fail");
        let input = io.new_input(&location).unwrap();
        assert_eq!(input.metadata().await.unwrap().size, 4 + big.len() as u64);
        let reader = input.reader().await.unwrap();
        assert_eq!(&reader.read(0..4).await.unwrap()[..], b"head");
        io.delete_prefix(format!("{}", dir.display()))
            .await
            .unwrap();
        assert!(!io.exists(&location).await.unwrap());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
