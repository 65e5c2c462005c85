//! The settings a sync runs on: a loaded and validated [`JobConfig`]
//! resolved once into a [`Job`], as ripgrep and uv turn their arguments
//! into one settings value. Nothing downstream re-derives a setting: the
//! consumer group, the namespace, each topic's table and mode (append, or
//! upsert with its keys, delete format and format version, the value and
//! key formats), the schema registry, the paths (absolute) and the tuning
//! knobs are decided here.

use std::path::PathBuf;
use std::time::Duration;

use regex::Regex;

use crate::columns::KAFKA_KEY;
use crate::config::{
    default_key_format, parse_duration, resolve_delete_format, value_format_without_schema,
    CatalogKind, ChangeEvents, ConfigProblem, DeleteFormat, DestinationConfig, EngineTarget,
    FormatVersion, JobConfig, MaintainConfig, OnInvalid, OnTruncate, PartitionField, SortKey,
    SourceConfig, StreamMode, StreamSettings, SCHEMA_REGISTRY_REQUEST_TIMEOUT_SECS,
};
use crate::decode::ALL_KEY_FIELDS;
use crate::registry::ValueFormat;
use crate::Secret;

/// A job, resolved: what `topicberg sync`, `check`, `discover` and the
/// service's runs read their settings from.
#[derive(Debug, Clone)]
pub struct Job {
    /// The job's name.
    pub name: String,
    /// The consumer group whose offsets the sync commits.
    pub consumer_group: String,
    /// The Iceberg namespace of the job's tables.
    pub namespace: String,
    /// Which topics the job reads.
    pub topics: Regex,
    /// The Kafka cluster (turned into client settings by the Kafka crate).
    pub source: SourceConfig,
    /// The schema registry, when `source.schema_registry_url` is set.
    pub registry: Option<RegistrySettings>,
    /// The Iceberg catalog and storage (the embedded catalog's folder
    /// absolute).
    pub destination: DestinationConfig,
    /// The folder of rebuildable local state (key index, spill, locks),
    /// absolute.
    pub state_dir: PathBuf,
    /// The tuning knobs.
    pub tuning: Tuning,
    /// The engines that read the tables.
    pub engines: Vec<EngineTarget>,
    /// The format version of new append tables.
    pub format_version: FormatVersion,
    /// What `topicberg maintain` does (`[maintain]`).
    pub maintain: MaintainSettings,
    /// `[[streams]]` entries, resolved.
    configured: Vec<TableSettings>,
    /// `destination.format_version` as written, for upsert resolution.
    explicit_format_version: Option<u8>,
}

/// A Confluent-compatible schema registry, resolved from `[source]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistrySettings {
    /// Its base URL, without a trailing `/` (validated: http or https, no
    /// credentials in it).
    pub url: String,
    /// Basic-auth credentials, when set.
    pub credentials: Option<RegistryCredentials>,
    /// PEM text of the CA(s) to trust besides the system's, for https.
    pub ca_pem: Option<String>,
    /// Deadline of each request.
    pub request_timeout: Duration,
}

/// A registry's basic-auth user and password (Confluent Cloud: API key
/// and secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryCredentials {
    /// The user (API key).
    pub username: String,
    /// The password (API secret); never printed.
    pub password: Secret,
}

impl RegistrySettings {
    /// The registry `[source]` names, if any (validated: user and password
    /// come together).
    pub fn from_source(source: &SourceConfig) -> Option<Self> {
        let url = source.schema_registry_url.as_deref()?;
        let credentials = match (
            &source.schema_registry_username,
            &source.schema_registry_password,
        ) {
            (Some(username), Some(password)) => Some(RegistryCredentials {
                username: username.clone(),
                password: password.clone(),
            }),
            _ => None,
        };
        Some(Self {
            url: url.trim_end_matches('/').to_string(),
            credentials,
            ca_pem: source.schema_registry_ca_pem.clone(),
            request_timeout: Duration::from_secs(SCHEMA_REGISTRY_REQUEST_TIMEOUT_SECS),
        })
    }
}

/// How fast and how big: the `[sync]` knobs and `max_threads`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuning {
    /// Parallel drain threads.
    pub max_threads: usize,
    /// Messages per Arrow record batch.
    pub batch_rows: usize,
    /// Data files roll over at about this many bytes.
    pub target_file_size_bytes: u64,
    /// zstd level of the Parquet files.
    pub zstd_level: i32,
    /// Most columns a table may have (metadata included).
    pub max_columns: usize,
    /// A follower commits every table this often.
    pub commit_interval: Duration,
    /// A follower asked to stop commits what it read within this.
    pub stop_timeout: Duration,
    /// A follower's round reads at most this many messages per table.
    pub commit_records: u64,
    /// A follower's round reads about this many key and value bytes per
    /// table at most (`sync.commit_mb`).
    pub commit_bytes: u64,
    /// A follower's local spill holds at most this many bytes; 0: no spill
    /// (`sync.spill_mb`).
    pub spill_bytes: u64,
}

/// `[maintain]`, resolved: sizes in bytes, durations parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaintainSettings {
    /// Compaction writes data files of about this many bytes.
    pub target_file_size_bytes: u64,
    /// Small files that make a partition worth rewriting.
    pub min_input_files: usize,
    /// Deleted rows, in percent of a file's rows, that make a data file
    /// worth rewriting (0: any).
    pub min_deleted_percent: u8,
    /// Snapshots of each branch kept whatever their age.
    pub keep_snapshots: usize,
    /// Snapshots older than this (beyond `keep_snapshots`) expire.
    pub max_snapshot_age: Duration,
    /// Unreferenced files younger than this are kept.
    pub orphan_min_age: Duration,
    /// More manifests than this in the current snapshot are rewritten.
    pub max_manifests: usize,
    /// How often a follower maintains its tables; `None`: never.
    pub follow_every: Option<Duration>,
    /// The snapshot age a follower's maintenance expires past.
    pub follow_max_snapshot_age: Duration,
    /// The bytes of large data files with deletes a follower's pass
    /// rewrites at most; `None`: no bound.
    pub follow_rewrite_bytes: Option<u64>,
}

impl MaintainSettings {
    fn resolve(config: &MaintainConfig) -> Result<Self, Vec<ConfigProblem>> {
        let duration = |field: &str, text: &str| {
            parse_duration(text).map_err(|why| vec![ConfigProblem::new(field, why.to_string())])
        };
        Ok(Self {
            target_file_size_bytes: config.target_file_size_mb * 1024 * 1024,
            min_input_files: config.min_input_files.max(1),
            min_deleted_percent: config.min_deleted_percent.min(100),
            keep_snapshots: config.keep_snapshots.max(1),
            max_snapshot_age: duration("maintain.max_snapshot_age", &config.max_snapshot_age)?,
            orphan_min_age: duration("maintain.orphan_min_age", &config.orphan_min_age)?,
            max_manifests: config.max_manifests.max(1),
            follow_every: Some(duration("maintain.follow_every", &config.follow_every)?)
                .filter(|d| !d.is_zero()),
            follow_max_snapshot_age: duration(
                "maintain.follow_max_snapshot_age",
                &config.follow_max_snapshot_age,
            )?,
            follow_rewrite_bytes: Some(config.follow_rewrite_mb * 1024 * 1024).filter(|&b| b > 0),
        })
    }
}

/// One topic's table and how it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSettings {
    /// The topic.
    pub topic: String,
    /// The table name (in the job's namespace).
    pub table: String,
    /// Append or upsert.
    pub mode: TableMode,
    /// A message that cannot become a row.
    pub on_invalid: OnInvalid,
    /// The payload fields kept as columns; `None` keeps all.
    pub columns: Option<Vec<String>>,
    /// A retention gap is a warning instead of a failure.
    pub allow_data_loss: bool,
    /// The format version the table is created with.
    pub format_version: FormatVersion,
    /// How the values are encoded; `None`: from the registry's
    /// `<topic>-value` subject at sync start (only with a registry; without
    /// one an unset format is `json`).
    pub value_format: Option<ValueFormat>,
    /// How the keys are encoded (unset: `auto` with a registry, `json`, the
    /// raw bytes, without).
    pub key_format: ValueFormat,
    /// The partition fields the table is created with (empty:
    /// unpartitioned); an existing table keeps its own spec.
    pub partition_by: Vec<PartitionField>,
    /// The sort order the table is created with and rows are written in
    /// within each file (empty: unsorted); an existing table keeps its own.
    pub sort_by: Vec<SortKey>,
    /// Whether the messages are change events (`change_events`).
    pub change_events: ChangeEvents,
    /// What a truncate event does (`on_truncate`).
    pub on_truncate: OnTruncate,
    /// Whether deleted rows are kept, marked (`soft_deletes`).
    pub soft_deletes: bool,
    /// Whether rows keep the message's headers (`_kafka_headers`).
    pub kafka_headers: bool,
    /// A `table` template: each message goes to the table it names (see
    /// [`crate::route`]); `table` is then the template's text.
    pub route: Option<crate::route::RouteTemplate>,
    /// Whether the stream names its table (`table = ...`): streams that do
    /// may write one table together ([`crate::shared_table`]).
    pub table_named: bool,
}

impl TableSettings {
    /// These settings for the table `table` of a routed stream.
    pub fn routed_to(&self, table: &str) -> TableSettings {
        TableSettings {
            table: table.to_owned(),
            ..self.clone()
        }
    }
}

/// How a table's rows relate to the messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableMode {
    /// Every message is a row.
    Append,
    /// One row per key.
    Upsert(Upsert),
}

/// An upsert table's key and how old rows are retired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upsert {
    /// The dedup key.
    pub keys: DedupKeys,
    /// Position deletes, deletion vectors or equality deletes.
    pub delete_format: DeleteFormat,
    /// Why this delete format (for the log).
    pub reason: String,
    /// The payload field that orders a key's messages (`order_by`).
    pub order_by: Option<String>,
}

/// An upsert table's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DedupKeys {
    /// The message key alone (`_kafka_key`): tombstones delete rows.
    KafkaKey,
    /// Columns (payload fields, possibly with `_kafka_key`), in key order.
    Columns(Vec<String>),
}

impl TableMode {
    /// `append` or `upsert`, as the job file writes it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Append => "append",
            Self::Upsert(_) => "upsert",
        }
    }
}

impl DedupKeys {
    fn from_names(names: &[String]) -> Self {
        match names {
            [only] if only == KAFKA_KEY => Self::KafkaKey,
            _ => Self::Columns(names.to_vec()),
        }
    }

    /// The key's column names, in key order.
    pub fn columns(&self) -> Vec<String> {
        match self {
            Self::KafkaKey => vec![KAFKA_KEY.to_string()],
            Self::Columns(names) => names.clone(),
        }
    }
}

impl TableSettings {
    /// The upsert settings, `None` in append mode.
    pub fn upsert(&self) -> Option<&Upsert> {
        match &self.mode {
            TableMode::Upsert(upsert) => Some(upsert),
            TableMode::Append => None,
        }
    }
}

impl Job {
    /// Resolves a loaded (and so validated) job file. The problems are the
    /// ones [`JobConfig::validate`] reports about upsert streams, should a
    /// config built in code skip it.
    pub fn resolve(config: &JobConfig) -> Result<Self, Vec<ConfigProblem>> {
        let topics = match &config.source.topic_pattern {
            Some(pattern) => Regex::new(pattern).map_err(|e| {
                vec![ConfigProblem::new(
                    "source.topic_pattern",
                    format!("is not a valid regular expression: {e}"),
                )]
            })?,
            None => Regex::new(&format!(
                "^({})$",
                config
                    .streams
                    .iter()
                    .map(|s| regex::escape(&s.topic))
                    .collect::<Vec<_>>()
                    .join("|")
            ))
            .expect("escaped topics make a valid pattern"),
        };
        let mut destination = config.destination.clone();
        if destination.catalog == CatalogKind::Sql {
            destination.path = Some(absolute(destination.sql_path()));
        }
        let mut job = Self {
            name: config.name.clone(),
            consumer_group: config.consumer_group(),
            namespace: config.namespace(),
            topics,
            source: config.source.clone(),
            registry: RegistrySettings::from_source(&config.source),
            destination,
            state_dir: absolute(config.sync.state_dir.clone()),
            tuning: Tuning {
                max_threads: config.source.max_threads.max(1),
                batch_rows: config.sync.batch_rows,
                target_file_size_bytes: config.sync.target_file_size_mb * 1024 * 1024,
                zstd_level: config.sync.zstd_level,
                max_columns: config.sync.max_columns,
                commit_interval: config.sync.commit_interval.get(),
                stop_timeout: config.sync.stop_timeout.get(),
                commit_records: config.sync.commit_records.max(1),
                commit_bytes: config.sync.commit_mb.max(1).saturating_mul(1_000_000),
                spill_bytes: config.sync.spill_mb.saturating_mul(1_000_000),
            },
            engines: config.engines(),
            format_version: config.destination.format_version(),
            maintain: MaintainSettings::resolve(&config.maintain)?,
            configured: Vec::new(),
            explicit_format_version: config.destination.format_version,
        };
        let mut problems = Vec::new();
        for entry in &config.streams {
            match job.settings(StreamSettings::from(entry)) {
                Ok(settings) => job.configured.push(settings),
                Err(problem) => problems.push(problem),
            }
        }
        if problems.is_empty() {
            Ok(job)
        } else {
            Err(problems)
        }
    }

    /// Whether the job reads `topic`.
    pub fn selects(&self, topic: &str) -> bool {
        self.topics.is_match(topic)
    }

    /// The topics of the `[[streams]]` entries.
    pub fn stream_topics(&self) -> impl Iterator<Item = &str> {
        self.configured.iter().map(|t| t.topic.as_str())
    }

    /// The table `topic` goes to and how: its `[[streams]]` entry, or
    /// append mode with the defaults.
    pub fn table_for(&self, topic: &str) -> TableSettings {
        self.configured
            .iter()
            .find(|t| t.topic == topic)
            .cloned()
            .unwrap_or_else(|| {
                self.settings(StreamSettings::defaults_for(topic))
                    .expect("append defaults always resolve")
            })
    }

    /// The namespace as the catalogs take it (one level).
    pub fn namespace_path(&self) -> Vec<String> {
        vec![self.namespace.clone()]
    }

    /// The stream's mode and the format version its table is made with.
    fn mode(&self, stream: &StreamSettings) -> Result<(TableMode, FormatVersion), ConfigProblem> {
        Ok(match stream.mode {
            StreamMode::Append => (TableMode::Append, self.format_version),
            StreamMode::Upsert => {
                let resolved = resolve_delete_format(
                    &self.engines,
                    stream.delete_format,
                    self.explicit_format_version,
                )
                .map_err(|e| {
                    ConfigProblem::new(
                        "streams",
                        format!("upsert stream \"{}\": {e}", stream.topic),
                    )
                })?;
                let keys =
                    if stream.dedup_keys.is_empty() && stream.change_events != ChangeEvents::None {
                        vec![ALL_KEY_FIELDS.to_owned()]
                    } else {
                        stream.dedup_keys.clone()
                    };
                let upsert = Upsert {
                    keys: DedupKeys::from_names(&keys),
                    delete_format: resolved.delete_format,
                    reason: resolved.reason.clone(),
                    order_by: stream.order_by.clone(),
                };
                (TableMode::Upsert(upsert), resolved.format_version)
            }
        })
    }

    fn settings(&self, stream: StreamSettings) -> Result<TableSettings, ConfigProblem> {
        let (mode, format_version) = self.mode(&stream)?;
        let has_registry = self.registry.is_some();
        for format in [stream.value_format, stream.key_format]
            .into_iter()
            .flatten()
        {
            if format.uses_registry() && !has_registry {
                return Err(ConfigProblem::new(
                    "streams",
                    format!(
                        "stream \"{}\" reads {format} messages but [source] has no \
                         schema_registry_url; set one, or the format to \"json\"",
                        stream.topic
                    ),
                ));
            }
        }
        let partition_by =
            crate::config::parse_partition_by(&stream.partition_by, stream.columns.as_deref())
                .map_err(|problems| {
                    ConfigProblem::new(
                        "streams",
                        format!(
                            "stream \"{}\" partition_by: {}",
                            stream.topic,
                            problems.join("; ")
                        ),
                    )
                })?;
        let sort_by = crate::config::parse_sort_by(&stream.sort_by, stream.columns.as_deref())
            .map_err(|problems| {
                ConfigProblem::new(
                    "streams",
                    format!(
                        "stream \"{}\" sort_by: {}",
                        stream.topic,
                        problems.join("; ")
                    ),
                )
            })?;
        let value_format = match stream.value_format {
            Some(format) => Some(format),
            None if has_registry => None,
            None => Some(value_format_without_schema()),
        };
        let route = crate::route::RouteTemplate::parse(&stream.table).map_err(|e| {
            ConfigProblem::new("streams", format!("stream \"{}\" table: {e}", stream.topic))
        })?;
        Ok(TableSettings {
            topic: stream.topic,
            table: stream.table,
            route,
            mode,
            on_invalid: stream.on_invalid,
            columns: stream.columns,
            allow_data_loss: stream.allow_data_loss,
            format_version,
            value_format,
            key_format: stream
                .key_format
                .unwrap_or_else(|| default_key_format(has_registry)),
            partition_by,
            sort_by,
            change_events: stream.change_events,
            on_truncate: stream.on_truncate,
            soft_deletes: stream.soft_deletes,
            kafka_headers: stream.kafka_headers,
            table_named: stream.table_named,
        })
    }
}

/// `path` made absolute against the current folder (already-absolute
/// paths as they are).
fn absolute(path: PathBuf) -> PathBuf {
    std::path::absolute(&path).unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(text: &str) -> Job {
        let config = JobConfig::from_toml_str(text, |_| None).unwrap();
        Job::resolve(&config).unwrap()
    }

    #[test]
    fn every_setting_is_decided_once_with_absolute_paths() {
        let job = job(r#"name = "shop"
target_engines = ["databricks"]
[source]
bootstrap_servers = "k:9092"
topic_pattern = "^shop\\..*"
[[streams]]
topic = "shop.orders"
mode = "upsert"
dedup_keys = ["id"]
[[streams]]
topic = "shop.customers"
mode = "upsert"
dedup_keys = ["_kafka_key"]
[sync]
state_dir = "state"
target_file_size_mb = 2
"#);
        assert_eq!(job.consumer_group, "topicberg_shop");
        assert_eq!(job.namespace, "shop_topics");
        assert!(job.state_dir.is_absolute() && job.state_dir.ends_with("state"));
        assert_eq!(job.tuning.target_file_size_bytes, 2 * 1024 * 1024);
        assert!(job.selects("shop.orders") && !job.selects("other"));

        let orders = job.table_for("shop.orders");
        assert_eq!(orders.table, "shop_orders");
        let upsert = orders.upsert().unwrap();
        assert_eq!(upsert.keys, DedupKeys::Columns(vec!["id".into()]));
        assert_eq!(upsert.delete_format, DeleteFormat::Dv);
        assert_eq!(orders.format_version, FormatVersion::V3);
        let customers = job.table_for("shop.customers");
        assert_eq!(customers.upsert().unwrap().keys, DedupKeys::KafkaKey);
        // A topic without an entry: append, the destination's version.
        let events = job.table_for("shop.events-v1");
        assert_eq!(events.mode, TableMode::Append);
        assert_eq!(events.table, "shop_events_v1");
        assert_eq!(events.format_version, FormatVersion::V2);
        assert!(events.partition_by.is_empty());
    }

    #[test]
    fn partition_by_is_parsed_once_into_the_table_settings() {
        let job = job(r#"name = "j"
[source]
bootstrap_servers = "k:9092"
[[streams]]
topic = "orders"
partition_by = ["day(_kafka_timestamp)", "bucket(16, id)"]
"#);
        let fields = job.table_for("orders").partition_by;
        assert_eq!(
            fields,
            vec![
                PartitionField {
                    transform: crate::config::PartitionTransform::Day,
                    column: "_kafka_timestamp".into()
                },
                PartitionField {
                    transform: crate::config::PartitionTransform::Bucket(16),
                    column: "id".into()
                },
            ]
        );
    }

    #[test]
    fn without_a_pattern_the_streams_are_the_selection() {
        let job = job(r#"name = "j"
[source]
bootstrap_servers = "k:9092"
[[streams]]
topic = "a.b"
"#);
        assert!(job.selects("a.b"));
        assert!(!job.selects("aXb") && !job.selects("a.b.c"));
    }

    #[test]
    fn formats_and_the_registry_are_resolved_once() {
        let job = job(r#"name = "j"
[source]
bootstrap_servers = "k:9092"
topic_pattern = ".*"
schema_registry_url = "https://sr.example:8081/"
schema_registry_username = "KEY"
schema_registry_password = "${SR_SECRET}"
[[streams]]
topic = "orders"
value_format = "avro"
[[streams]]
topic = "events"
key_format = "json"
"#
        .replace("${SR_SECRET}", "s3cr3t")
        .as_str());
        let registry = job.registry.as_ref().unwrap();
        assert_eq!(registry.url, "https://sr.example:8081");
        let credentials = registry.credentials.as_ref().unwrap();
        assert_eq!(credentials.username, "KEY");
        assert_eq!(credentials.password.expose(), "s3cr3t");
        assert!(!format!("{job:?}").contains("s3cr3t"));

        let orders = job.table_for("orders");
        assert_eq!(orders.value_format, Some(ValueFormat::Avro));
        assert_eq!(orders.key_format, ValueFormat::Auto);
        let events = job.table_for("events");
        assert_eq!(events.value_format, None, "from the registry at sync start");
        assert_eq!(events.key_format, ValueFormat::Json);
        let other = job.table_for("other");
        assert_eq!(
            (other.value_format, other.key_format),
            (None, ValueFormat::Auto)
        );

        let plain = self::job(
            "name = \"j\"\n[source]\nbootstrap_servers = \"k:9092\"\ntopic_pattern = \".*\"\n",
        );
        assert!(plain.registry.is_none());
        let t = plain.table_for("orders");
        assert_eq!(
            (t.value_format, t.key_format),
            (Some(ValueFormat::Json), ValueFormat::Json)
        );
    }
}
