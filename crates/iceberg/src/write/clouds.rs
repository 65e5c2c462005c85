//! Azure Blob Storage / ADLS Gen2 and Google Cloud Storage for
//! [`ObjectStorage`](super::storage::ObjectStorage): one `object_store`
//! client per container or bucket, with the job file's settings over the
//! environment's credential chain.
//!
//! Location forms:
//! - Azure: `abfss://<container>@<account>.dfs.core.windows.net/<key>`
//!   (also `abfs://`, `wasbs://`, `wasb://` with `.blob.`), and
//!   `az://<container>/<key>` / `azure://` with the account from the
//!   settings or the environment;
//! - Google Cloud Storage: `gs://<bucket>/<key>` (also `gcs://`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use object_store::azure::{AzureCredential, MicrosoftAzureBuilder};
use object_store::gcp::{GcpCredential, GoogleCloudStorageBuilder};
use object_store::ObjectStore;
use topicberg_core::Secret;

use super::credentials::{vended_provider, Refresh, Vended, VendedSource};
use super::retry::S3RetryPolicy;
use super::storage_fault::{bad_location, bucket_of, StorageFault};

/// How to reach Azure Blob Storage / ADLS Gen2 (`abfss://`, `abfs://`,
/// `wasbs://`, `wasb://`, `az://`). Unset parts come from the environment
/// (`AZURE_STORAGE_ACCOUNT_NAME`, `AZURE_STORAGE_ACCOUNT_KEY`, a SAS, a
/// service principal, a managed identity: `object_store`'s chain).
#[derive(Debug, Clone, Default)]
pub struct AzureConfig {
    /// The storage account, for locations that do not name one (`az://`).
    pub account: Option<String>,
    /// The account key; never printed.
    pub access_key: Option<Secret>,
    /// The Blob endpoint of a non-Azure store (an emulator, a private
    /// endpoint), the account in its path: `http://127.0.0.1:10000/devstoreaccount1`.
    pub endpoint: Option<String>,
}

/// How to reach Google Cloud Storage (`gs://`). Unset: application default
/// credentials (`GOOGLE_APPLICATION_CREDENTIALS`, gcloud's file, the
/// metadata server).
#[derive(Debug, Clone, Default)]
pub struct GcsConfig {
    /// A service account key file (its `gcs_base_url`, if any, moves the
    /// client to another endpoint, as for an emulator).
    pub service_account_path: Option<String>,
}

/// The environment's chain for Azure, in words (`check`).
pub(super) const AZURE_CHAIN: &str =
    "the environment's Azure chain (AZURE_STORAGE_* variables, SAS, service principal, managed identity)";
/// The environment's chain for Google Cloud Storage, in words (`check`).
pub(super) const GCS_CHAIN: &str =
    "application default credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud, metadata server)";

/// Whether a location is on Azure.
pub(super) fn is_azure(scheme: &str) -> bool {
    matches!(
        scheme,
        "abfss" | "abfs" | "wasbs" | "wasb" | "az" | "azure" | "adl"
    )
}

/// Whether a location is on Google Cloud Storage.
pub(super) fn is_gcs(scheme: &str) -> bool {
    matches!(scheme, "gs" | "gcs")
}

/// The container and (when the location names one) account of an Azure
/// location: `abfss://` and `wasbs://` name them as
/// `container@account.<host>`, `az://` and `azure://` the container only.
fn azure_container(url: &url::Url, location: &str) -> iceberg::Result<(String, Option<String>)> {
    let host = url.host_str().unwrap_or_default();
    let (container, account) = match url.username() {
        "" => (host.to_string(), None),
        container => (
            container.to_string(),
            host.split('.').next().map(str::to_string),
        ),
    };
    if container.is_empty() {
        return Err(bad_location(location, "no container"));
    }
    Ok((container, account))
}

fn configuring(what: &str, location: &str, e: object_store::Error) -> iceberg::Error {
    let message = format!("configuring {what} for {location}: {e}");
    iceberg::Error::new(iceberg::ErrorKind::DataInvalid, message)
        .with_source(StorageFault { retryable: false })
}

/// The stores of `write/`, by key (a bucket, `azure:<container>@<account>`,
/// `gcs:<bucket>`), built once each.
pub(super) type Stores = Mutex<HashMap<String, Arc<dyn ObjectStore>>>;

impl AzureConfig {
    /// The Azure store of a location's container (and account), with the
    /// job's key or the environment's chain; kept in `stores`.
    pub(super) fn store(
        &self,
        stores: &Stores,
        retry: &S3RetryPolicy,
        url: &url::Url,
        location: &str,
    ) -> iceberg::Result<Arc<dyn ObjectStore>> {
        let (container, account) = azure_container(url, location)?;
        let key = format!("azure:{}@{}", container, account.as_deref().unwrap_or(""));
        let mut stores = stores.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(store) = stores.get(&key) {
            return Ok(store.clone());
        }
        let mut builder = self.builder(
            MicrosoftAzureBuilder::from_env(),
            retry,
            &container,
            account,
        );
        if let Some(secret) = &self.access_key {
            builder = builder.with_access_key(secret.expose());
        }
        let store: Arc<dyn ObjectStore> = Arc::new(
            builder
                .build()
                .map_err(|e| configuring("Azure storage", location, e))?,
        );
        stores.insert(key, store.clone());
        Ok(store)
    }

    /// A builder for `container` (of `account`, else the configured one),
    /// with the configured endpoint and the retry policy.
    fn builder(
        &self,
        builder: MicrosoftAzureBuilder,
        retry: &S3RetryPolicy,
        container: &str,
        account: Option<String>,
    ) -> MicrosoftAzureBuilder {
        let mut builder = builder
            .with_container_name(container)
            .with_retry(retry.retry_config());
        if let Some(account) = account.as_ref().or(self.account.as_ref()) {
            builder = builder.with_account(account);
        }
        if let Some(endpoint) = &self.endpoint {
            let endpoint = endpoint.trim_end_matches('/');
            builder = builder
                .with_endpoint(endpoint.to_string())
                .with_allow_http(endpoint.starts_with("http://"));
        }
        builder
    }

    /// The store of a table on Azure whose catalog vended a SAS token.
    pub(super) fn vended_store(
        &self,
        retry: &S3RetryPolicy,
        table: &str,
        location: &str,
        vended: &Vended,
        refresh: Refresh,
    ) -> iceberg::Result<(Arc<dyn ObjectStore>, Arc<dyn VendedSource>)> {
        let url = url::Url::parse(location).map_err(|e| bad_location(location, &e.to_string()))?;
        let (container, account) = azure_container(&url, location)?;
        let provider = Arc::new(vended_provider::<AzureCredential>(table, vended, refresh)?);
        let builder = self
            .builder(MicrosoftAzureBuilder::new(), retry, &container, account)
            .with_credentials(provider.clone());
        let store: Arc<dyn ObjectStore> = Arc::new(
            builder
                .build()
                .map_err(|e| configuring("Azure storage", location, e))?,
        );
        Ok((store, provider))
    }

    /// Whether the job file gives Azure's account key.
    pub(super) fn has_key(&self) -> bool {
        self.access_key.is_some()
    }
}

/// A builder for `bucket` with the retry policy.
fn gcs_builder(
    builder: GoogleCloudStorageBuilder,
    retry: &S3RetryPolicy,
    bucket: &str,
) -> GoogleCloudStorageBuilder {
    builder
        .with_bucket_name(bucket)
        .with_retry(retry.retry_config())
}

impl GcsConfig {
    /// The store of a table on Google Cloud Storage whose catalog vended
    /// an OAuth2 token.
    pub(super) fn vended_store(
        retry: &S3RetryPolicy,
        table: &str,
        location: &str,
        vended: &Vended,
        refresh: Refresh,
    ) -> iceberg::Result<(Arc<dyn ObjectStore>, Arc<dyn VendedSource>)> {
        let url = url::Url::parse(location).map_err(|e| bad_location(location, &e.to_string()))?;
        let bucket = bucket_of(&url, location)?;
        let provider = Arc::new(vended_provider::<GcpCredential>(table, vended, refresh)?);
        let store: Arc<dyn ObjectStore> = Arc::new(
            gcs_builder(GoogleCloudStorageBuilder::new(), retry, bucket)
                .with_credentials(provider.clone())
                .build()
                .map_err(|e| configuring("Google Cloud Storage", location, e))?,
        );
        Ok((store, provider))
    }

    /// The Google Cloud Storage store of a bucket; kept in `stores`.
    pub(super) fn store(
        &self,
        stores: &Stores,
        retry: &S3RetryPolicy,
        bucket: &str,
        location: &str,
    ) -> iceberg::Result<Arc<dyn ObjectStore>> {
        let key = format!("gcs:{bucket}");
        let mut stores = stores.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(store) = stores.get(&key) {
            return Ok(store.clone());
        }
        let mut builder = gcs_builder(GoogleCloudStorageBuilder::from_env(), retry, bucket);
        if let Some(path) = &self.service_account_path {
            builder = builder.with_service_account_path(path);
            // An emulator's base URL (in the key file) may be plain HTTP.
            builder = builder
                .with_client_options(object_store::ClientOptions::new().with_allow_http(true));
        }
        let store: Arc<dyn ObjectStore> = Arc::new(
            builder
                .build()
                .map_err(|e| configuring("Google Cloud Storage", location, e))?,
        );
        stores.insert(key, store.clone());
        Ok(store)
    }

    /// Whether the job file gives a GCS service account key file.
    pub(super) fn has_key(&self) -> bool {
        self.service_account_path.is_some()
    }
}
