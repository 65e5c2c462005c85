//! The destination, built from the job file: catalog client and storage;
//! and [`SetupError`], what stops a command before any table is touched.

use std::path::PathBuf;

use topicberg_core::config::{CatalogKind, FormatVersion as ConfigFormatVersion};
use topicberg_core::{Job, RegistryError};
use topicberg_iceberg::rest::RestCatalogConfig;
use topicberg_iceberg::{
    AzureConfig, Destination, FormatVersion, GcsConfig, IcebergError, S3Config, S3Credentials,
    StorageConfig,
};
use topicberg_kafka::KafkaError;

use crate::error::SyncErrorKind;
use crate::sample::SampleError;

/// An error that stops a command before any table is touched.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// Kafka is unreachable or refused us.
    #[error(transparent)]
    Kafka(#[from] KafkaError),
    /// The catalog or the storage is unreachable or refused us.
    #[error(transparent)]
    Iceberg(#[from] IcebergError),
    /// The schema registry is unreachable, refused us, or answered what
    /// the client cannot use.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// A REST catalog without its `uri` or `warehouse` (a job built in
    /// code: the job file's validation refuses it).
    #[error("destination: a rest catalog needs uri and warehouse")]
    IncompleteRestCatalog,
    /// Another sync of the job holds its lock on this machine.
    #[error(
        "another sync of this job (consumer group {group}) is already running elsewhere \
         on this machine ({holder}; lock {}); this run did nothing. That sync ends by itself; \
         the next run goes on from where it stops",
        lock.display()
    )]
    AlreadyRunning {
        /// The job's consumer group.
        group: String,
        /// What the holder wrote in the lock file: its pid and start.
        holder: String,
        /// The lock file.
        lock: PathBuf,
    },
    /// The job's lock file could not be made, opened, locked or written.
    #[error("{step} {}: {source}", path.display())]
    Lock {
        /// `creating`, `opening`, `locking` or `writing`.
        step: &'static str,
        /// The lock file or its folder.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Two selected topics would be written into one table: every clash
    /// with its fix.
    #[error("{}; nothing was read or written", .0.join("; "))]
    TableCollision(Vec<String>),
    /// Topics the job names that the cluster does not have
    /// (`missing_topics = "fail"`), each with the closest names and the fix.
    #[error("{}; nothing was read or written", .0.join("; "))]
    MissingTopics(Vec<String>),
    /// The task reading the topics stopped (it panicked).
    #[error("reading the topics failed: {0}")]
    Task(#[source] tokio::task::JoinError),
    /// A sample of a topic's messages could not give its columns
    /// (`discover`).
    #[error(transparent)]
    Sample(#[from] SampleError),
}

impl SetupError {
    /// What kind of failure.
    pub fn kind(&self) -> SyncErrorKind {
        match self {
            Self::Kafka(_) => SyncErrorKind::Kafka,
            Self::Iceberg(_) => SyncErrorKind::Iceberg,
            Self::Registry(_) => SyncErrorKind::Registry,
            Self::IncompleteRestCatalog | Self::TableCollision(_) | Self::MissingTopics(_) => {
                SyncErrorKind::Config
            }
            Self::AlreadyRunning { .. } => SyncErrorKind::AlreadyRunning,
            Self::Lock { .. } => SyncErrorKind::LocalDisk,
            Self::Task(_) => SyncErrorKind::Internal,
            Self::Sample(e) => e.kind(),
        }
    }

    /// Whether running the command again later may succeed without a
    /// change: an unreachable Kafka, catalog or registry, or another sync
    /// of the job that will end.
    pub fn retryable(&self) -> bool {
        match self {
            Self::Kafka(e) => e.retryable(),
            Self::Iceberg(e) => e.retryable(),
            Self::Registry(e) => e.is_retryable(),
            Self::AlreadyRunning { .. } => true,
            Self::Sample(e) => e.retryable(),
            Self::IncompleteRestCatalog
            | Self::Lock { .. }
            | Self::TableCollision(_)
            | Self::MissingTopics(_)
            | Self::Task(_) => false,
        }
    }
}

/// A format version as the Iceberg crate takes it (the one mapping).
pub fn iceberg_format(version: ConfigFormatVersion) -> FormatVersion {
    match version {
        ConfigFormatVersion::V2 => FormatVersion::V2,
        ConfigFormatVersion::V3 => FormatVersion::V3,
    }
}

/// The storage the job writes to. S3: with the job file's keys, or
/// without them (a REST catalog, an `s3://` warehouse of the embedded
/// catalog, or an `s3_endpoint` / `s3_region` given) the environment's
/// default chain, which tables whose catalog vends credentials do not use.
/// Azure and Google Cloud Storage: the job file's settings over their
/// environment's chain. Local folders always.
pub fn storage_config(job: &Job) -> StorageConfig {
    let d = &job.destination;
    let s3_warehouse = d
        .sql_warehouse_scheme()
        .is_some_and(|s| s.starts_with("s3"));
    let credentials = match (&d.s3_access_key, &d.s3_secret_key) {
        (Some(key), Some(secret)) => Some(S3Credentials::Keys {
            access_key_id: key.clone(),
            secret_access_key: secret.clone(),
        }),
        _ if d.catalog == CatalogKind::Rest
            || s3_warehouse
            || d.s3_endpoint.is_some()
            || d.s3_region.is_some() =>
        {
            Some(S3Credentials::Environment)
        }
        _ => None,
    };
    StorageConfig {
        s3: credentials.map(|credentials| S3Config {
            endpoint: d.s3_endpoint.clone(),
            region: d
                .s3_region
                .clone()
                .unwrap_or_else(|| "us-east-1".to_string()),
            credentials,
            path_style: d.s3_path_style(),
            ca_pem: d.ca_pem.clone(),
        }),
        azure: AzureConfig {
            account: d.azure_account.clone(),
            access_key: d.azure_access_key.clone(),
            endpoint: d.azure_endpoint.clone(),
        },
        gcs: GcsConfig {
            service_account_path: d
                .gcs_service_account_path
                .as_ref()
                .map(|p| p.display().to_string()),
        },
    }
}

/// Connects to the job's catalog (REST: token exchange, `GET /v1/config`;
/// embedded: opens or creates the SQLite catalog in `destination.path`).
pub async fn connect_destination(job: &Job) -> Result<Destination, SetupError> {
    let write_options = topicberg_iceberg::WriteOptions {
        target_file_size: job.tuning.target_file_size_bytes as usize,
        zstd_level: job.tuning.zstd_level,
        ..Default::default()
    };
    let target = match job.destination.catalog {
        CatalogKind::Rest => {
            let catalog = RestCatalogConfig::from_destination(&job.destination)
                .ok_or(SetupError::IncompleteRestCatalog)?;
            Destination::connect(&catalog, storage_config(job)).await?
        }
        CatalogKind::Sql => match (
            job.destination.sql_warehouse_scheme(),
            &job.destination.warehouse,
        ) {
            (Some(_), Some(warehouse)) => Destination::open_embedded_with_warehouse(
                &job.destination.sql_path(),
                topicberg_iceberg::sql::DEFAULT_CATALOG_NAME,
                warehouse,
                storage_config(job),
            )?,
            _ => Destination::open_embedded(
                &job.destination.sql_path(),
                topicberg_iceberg::sql::DEFAULT_CATALOG_NAME,
            )?,
        },
    };
    Ok(target.with_write_options(write_options))
}
