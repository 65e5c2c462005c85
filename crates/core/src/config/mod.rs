//! The job file: one TOML file that says which topics go to which tables.
//!
//! [`JobConfig::load`] reads a file, replaces `${VAR}` in string values from
//! the environment, parses it (every unknown key is an error naming the key,
//! its table, its line and a near match) and validates it, reporting every
//! problem, unknown keys included, at once with a hint on how to fix it. The result holds typed values only:
//! the Kafka and Iceberg crates turn [`SourceConfig`] and
//! [`DestinationConfig`] into their connection settings without parsing
//! anything again. Every field is documented by its `///` doc, which the
//! job file's JSON Schema ([`job_file_schema`]), the book's reference page
//! and the service's forms are made from.
//!
//! Secrets (`sasl_password`, `schema_registry_password`, `s3_secret_key`,
//! `azure_access_key`, `token`, the whole `credential`) are [`Secret`](crate::Secret)s: `Debug` of a config and
//! every error message leave them out, also when the value is not a string
//! or is malformed.

#![warn(missing_docs)]

mod defaults;
mod destination;
mod engine_target;
mod engines;
mod error;
mod interpolate;
mod interval;
mod maintain;
mod parse;
mod partition;
mod reference;
mod schema;
mod serve_section;
mod sort;
mod source;
mod streams;
#[cfg(test)]
pub(crate) mod tests;
mod unknown;
mod validate;
mod validate_security;
mod validate_streams;

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};

pub use defaults::{
    key_format as default_key_format, key_subject, value_format_without_schema, value_subject,
    CATALOG_REQUEST_TIMEOUT_SECS, SCHEMA_REGISTRY_REQUEST_TIMEOUT_SECS,
};
pub use destination::{CatalogKind, Credential, DestinationConfig, FormatVersion};
pub use engine_target::{EngineTarget, EngineTargetError, Version, VersionReq};
pub use engines::{
    resolve_delete_format, DeleteFormatError, DeleteFormatErrorKind, EngineSupport, ResolvedUpsert,
};
pub use error::{ConfigError, ConfigProblem, SettingErrorKind};
pub use interval::{parse_duration, DurationError, Interval, IntervalError};
pub use maintain::MaintainConfig;
pub use partition::{parse_partition_by, PartitionField, PartitionFieldError, PartitionTransform};
pub use reference::job_file_reference;
pub use schema::job_file_schema;
pub use serve_section::{JobMode, ServeSection};
pub use sort::{parse_sort_by, sortable, SortKey, SortKeyError};
pub use source::{FetchMethod, MissingTopics, SaslMechanism, SecurityProtocol, SourceConfig};
pub use streams::{
    control_character, is_identifier, sanitize_identifier, ChangeEvents, DeleteFormat, OnInvalid,
    OnTruncate, StreamConfig, StreamMode, StreamSettings,
};

/// A query engine that will read the tables (`target_engines`); upsert
/// tables get the delete format all of them read (see
/// [`TargetEngine::support`] and [`resolve_delete_format`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TargetEngine {
    /// Apache Spark.
    Spark,
    /// Trino.
    Trino,
    /// DuckDB.
    Duckdb,
    /// Databricks (Unity Catalog); implies format v3 with deletion vectors.
    Databricks,
    /// Snowflake.
    Snowflake,
    /// Amazon Athena.
    Athena,
    /// PyIceberg.
    Pyiceberg,
    /// Apache Flink.
    Flink,
    /// ClickHouse (and chDB, embedded ClickHouse).
    Clickhouse,
    /// Polars (`scan_iceberg`).
    Polars,
    /// Apache DataFusion with iceberg-rust's table provider (`pyiceberg-core`).
    Datafusion,
    /// Daft.
    Daft,
}

impl TargetEngine {
    /// Every engine, in the order the job file documentation lists them.
    pub const ALL: [TargetEngine; 12] = [
        Self::Spark,
        Self::Trino,
        Self::Duckdb,
        Self::Databricks,
        Self::Snowflake,
        Self::Athena,
        Self::Pyiceberg,
        Self::Flink,
        Self::Clickhouse,
        Self::Polars,
        Self::Datafusion,
        Self::Daft,
    ];

    /// The name the job file uses (lower case).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Spark => "spark",
            Self::Trino => "trino",
            Self::Duckdb => "duckdb",
            Self::Databricks => "databricks",
            Self::Snowflake => "snowflake",
            Self::Athena => "athena",
            Self::Pyiceberg => "pyiceberg",
            Self::Flink => "flink",
            Self::Clickhouse => "clickhouse",
            Self::Polars => "polars",
            Self::Datafusion => "datafusion",
            Self::Daft => "daft",
        }
    }

    /// The engine named `name`, ignoring case.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|e| e.as_str().eq_ignore_ascii_case(name.trim()))
    }
}

/// `[sync]`: tuning knobs of one sync; the defaults suit most jobs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = schema::field_order::<Self>)]
pub struct SyncConfig {
    /// Parquet data files roll over to a new file at about this size, in
    /// MiB.
    #[serde(default = "defaults::target_file_size_mb")]
    #[schemars(range(min = 1))]
    #[schemars(extend(
        "x-label" = "Data file size (MiB)",
        "x-help" = "Parquet files roll over at about this size; empty: the default"
    ))]
    pub target_file_size_mb: u64,
    /// Messages decoded into one Arrow record batch; bounds the memory of
    /// each partition reader.
    #[serde(default = "defaults::batch_rows")]
    #[schemars(range(min = 1))]
    #[schemars(extend(
        "x-label" = "Rows per batch",
        "x-help" = "messages decoded together; bounds memory per partition reader"
    ))]
    pub batch_rows: usize,
    /// Local folder for state that can be rebuilt from the tables: the
    /// upsert key index. Relative to the job file's folder. Losing it costs
    /// a rebuild, never data.
    #[serde(default = "defaults::state_dir")]
    #[schemars(extend(
        "x-label" = "State folder",
        "x-type" = "path",
        "x-help" = "rebuildable local state (the upsert key index), relative to the data folder; empty: state/<job>"
    ))]
    pub state_dir: PathBuf,
    /// zstd level of the Parquet data files: 1 is the fastest, 22 makes
    /// the smallest files at more CPU.
    #[serde(default = "defaults::zstd_level")]
    #[schemars(range(min = 1, max = 22))]
    #[schemars(extend(
        "x-label" = "Compression level",
        "x-help" = "zstd, 1 (fastest) to 22 (smallest)"
    ))]
    pub zstd_level: i32,
    /// The most columns a table may have, the 8 metadata columns included.
    /// A new table whose sampled messages imply more is not created; a
    /// message whose new fields would pass it mid-sync is invalid
    /// (`on_invalid`). The error names topic, partition and offset.
    #[serde(default = "defaults::max_columns")]
    #[schemars(range(min = defaults::MIN_MAX_COLUMNS))]
    #[schemars(extend(
        "x-label" = "Most columns per table",
        "x-help" = "a table that would grow beyond it is refused (at least 9: the metadata columns and one more)"
    ))]
    pub max_columns: usize,
    /// How often a follower (`topicberg sync --follow`) commits: every
    /// table gets one snapshot with what was read since its last commit,
    /// at most this long after the message was read. A whole number and a
    /// unit, at least `1s`. Shorter means fresher tables and more, smaller
    /// files and snapshots (run `topicberg maintain`). A scheduled sync
    /// ignores it.
    #[serde(default = "defaults::commit_interval")]
    #[schemars(extend(
        "x-label" = "Commit interval (following)",
        "x-help" = "a follower commits each table this often, e.g. 5s (at least 1s)"
    ))]
    pub commit_interval: Interval,
    /// How long a follower may take to stop after SIGTERM or SIGINT: it
    /// commits what it read, then exits; past this it drops what it read
    /// and not yet committed (read again at the next start) and exits.
    #[serde(default = "defaults::stop_timeout")]
    #[schemars(extend(
        "x-label" = "Stop timeout (following)",
        "x-help" = "a follower asked to stop commits what it read within this, e.g. 20s"
    ))]
    pub stop_timeout: Interval,
    /// A follower commits a table as soon as a round has read this many of
    /// its messages (spread over its partitions), without reading further,
    /// and starts the next round at once: commits keep coming while it
    /// catches up on a backlog (after a stop or an outage) instead of one
    /// huge commit at its end. A scheduled sync ignores it.
    #[serde(default = "defaults::commit_records")]
    #[schemars(range(min = 1))]
    #[schemars(extend(
        "x-label" = "Records per commit (following)",
        "x-help" = "a follower catching up commits each table every this many messages, e.g. 1000000"
    ))]
    pub commit_records: u64,
    /// A follower commits a table as soon as a round has read about this
    /// many megabytes (10^6 bytes) of its messages' keys and values, like
    /// `commit_records`: a round reads at most this size divided by the
    /// bytes per message of the table's last committed round (the first
    /// round after a start is capped by `commit_records` only). Keeps
    /// rounds of large messages short. A scheduled sync ignores it.
    #[serde(default = "defaults::commit_mb")]
    #[schemars(range(min = 1))]
    #[schemars(extend(
        "x-label" = "Megabytes per commit (following)",
        "x-help" = "a follower catching up commits each table every this many MB of messages, e.g. 256"
    ))]
    pub commit_mb: u64,
    /// While the catalog or the object store is down, a follower keeps
    /// reading its topics ahead into files under `state_dir` (`spill/`),
    /// up to this many megabytes (10^6 bytes), then stops fetching; the
    /// rounds after the outage read those messages from the files instead
    /// of Kafka (also when Kafka's retention deleted them meanwhile).
    /// Offsets still move only with a commit. 0 turns it off. Needs the
    /// batch reader (a `PLAINTEXT` listener); a scheduled sync ignores it.
    #[serde(default = "defaults::spill_mb")]
    #[schemars(extend(
        "x-label" = "Local spill, MB (following)",
        "x-help" = "a follower reads ahead into local files up to this many MB while the catalog or store is down; 0: off"
    ))]
    pub spill_mb: u64,
}

impl Default for SyncConfig {
    /// Every field's default, as an empty `[sync]` table reads.
    fn default() -> Self {
        toml::from_str("").expect("every [sync] field has a default")
    }
}

/// A whole job file.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "topicberg job file")]
#[schemars(transform = schema::field_order::<Self>)]
pub struct JobConfig {
    /// The job's name. The namespace defaults to `<name>_topics` (the name
    /// lower-cased, characters other than letters, digits and `_` turned
    /// into `_`), the consumer group to `topicberg_<name>`.
    #[schemars(extend(
        "x-label" = "Name",
        "x-help" = "names the consumer group and the default namespace"
    ))]
    pub name: String,
    /// The engines that will read the tables, each optionally with the
    /// releases meant (`trino<480`, `trino=476`, `clickhouse>=26.10`). They
    /// decide the delete format of upsert tables: `databricks` implies
    /// format v3 with deletion vectors; `trino<480` and `daft` never get
    /// them. Unset: none named.
    #[serde(default)]
    #[schemars(with = "Vec<EngineTarget>")]
    #[schemars(extend(
        "x-label" = "Target engines",
        "x-help" = "the engines that read the tables; they decide the delete format of upsert tables"
    ))]
    pub target_engines: Vec<String>,
    /// `[source]`: the Kafka cluster and the topics.
    #[schemars(extend("x-label" = "the Kafka cluster"))]
    pub source: SourceConfig,
    /// `[destination]`: the Iceberg catalog and the store the files go to.
    /// Unset: the embedded catalog in `./warehouse`.
    #[serde(default)]
    #[schemars(extend("x-label" = "the Iceberg catalog"))]
    pub destination: DestinationConfig,
    /// `[[streams]]`: per-topic settings.
    #[serde(default)]
    #[schemars(extend("x-label" = "per-topic settings"))]
    pub streams: Vec<StreamConfig>,
    /// `[sync]`: tuning; the defaults suit most jobs.
    #[serde(default)]
    #[schemars(extend("x-label" = "tuning"))]
    pub sync: SyncConfig,
    /// `[maintain]`: what `topicberg maintain` does to the tables.
    #[serde(default)]
    #[schemars(extend("x-label" = "table maintenance"))]
    pub maintain: MaintainConfig,
    /// `[serve]`: the job's settings in `topicberg serve` besides the sync
    /// (its schedules, its mode, the topics its streams page offers); an
    /// export writes them, an import reads them back; `topicberg sync` and
    /// `maintain` ignore them.
    #[serde(default)]
    #[schemars(extend("x-label" = "the service's settings"))]
    pub serve: ServeSection,
}

impl JobConfig {
    /// Reads, interpolates, parses and validates the job file at `path`,
    /// taking `${VAR}` from the process environment. Relative paths inside
    /// (`ssl_ca_pem`, `schema_registry_ca_pem`, `destination.path`) are
    /// relative to the file's folder.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            file: file.clone(),
            source,
        })?;
        let base = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let env = |name: &str| std::env::var(name).ok();
        parse::load_text(&text, &file, &env, Some(&base))
    }

    /// Like [`JobConfig::load`] for text in memory, with `env` standing in
    /// for the environment; relative paths stay relative to the current
    /// folder. Errors name the file `<inline>`.
    pub fn from_toml_str(
        text: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        parse::load_text(text, "<inline>", &env, None)
    }

    /// Every problem of this configuration, each saying how to fix it;
    /// `Ok` when there is none. [`JobConfig::load`] already ran it.
    pub fn validate(&self) -> Result<(), Vec<ConfigProblem>> {
        let problems = validate::problems(self);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// The consumer group: `source.consumer_group` or `topicberg_<name>`.
    pub fn consumer_group(&self) -> String {
        self.source
            .consumer_group
            .clone()
            .unwrap_or_else(|| defaults::consumer_group(&self.name))
    }

    /// The Iceberg namespace: `destination.namespace` or `<name>_topics`.
    pub fn namespace(&self) -> String {
        self.destination
            .namespace
            .clone()
            .unwrap_or_else(|| defaults::namespace(&self.name))
    }

    /// The settings `topic` is synced with: its `[[streams]]` entry, or
    /// append mode with the defaults.
    pub fn stream_for(&self, topic: &str) -> StreamSettings {
        self.streams
            .iter()
            .find(|s| s.topic == topic)
            .map(StreamSettings::from)
            .unwrap_or_else(|| StreamSettings::defaults_for(topic))
    }

    /// The valid entries of `target_engines` (engine and versions),
    /// without duplicates (invalid ones are validation problems).
    pub fn engines(&self) -> Vec<EngineTarget> {
        let mut engines: Vec<EngineTarget> = self
            .target_engines
            .iter()
            .filter_map(|name| EngineTarget::parse(name).ok())
            .collect();
        engines.sort();
        engines.dedup();
        engines
    }
}

/// Deserialises an optional string, treating `""` (for instance from an
/// empty environment variable) as unset.
fn empty_as_none<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: From<String>,
{
    let text: Option<String> = Option::deserialize(deserializer)?;
    Ok(text.filter(|t| !t.is_empty()).map(T::from))
}

/// [`empty_as_none`] for a secret: anything but a string is refused with a
/// message that leaves the value out (see [`Secret`](crate::Secret)).
fn secret_or_none<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: From<String>,
{
    let secret: Option<crate::Secret> = Option::deserialize(deserializer)?;
    Ok(secret
        .map(crate::Secret::into_exposed)
        .filter(|t| !t.is_empty())
        .map(T::from))
}
