//! Every default of the job file, in one place, but for the settings whose
//! default is a variant of their own enum: that is the enum's `Default`
//! (`destination.catalog`: `CatalogKind`, `source.security_protocol`:
//! `SecurityProtocol`, `[[streams]] mode`: `StreamMode`, `on_invalid`:
//! `OnInvalid`; `destination.format_version` is v2 unless the target
//! engines need v3, in `DestinationConfig::format_version`). The serde
//! attributes, the `Default` impls and the accessors that fill in an unset
//! value all call these; the job file's schema (and so the reference page
//! and the service's forms) takes its defaults from the serde attributes.

use std::path::PathBuf;

use super::Interval;
use crate::registry::ValueFormat;

/// `source.consumer_group`: one group per job.
pub fn consumer_group(job_name: &str) -> String {
    format!("topicberg_{job_name}")
}

/// `source.ssl_verify_hostname`: the broker's certificate must name the
/// host connected to.
pub fn ssl_verify_hostname() -> bool {
    true
}

/// The most drain threads [`max_threads`] picks.
pub const MAX_DEFAULT_THREADS: usize = 8;

/// `source.max_threads`: partitions read in parallel, one consumer per CPU
/// core (at least 1, at most [`MAX_DEFAULT_THREADS`]). More consumers than
/// cores only add librdkafka queues and thread switches: on 2 cores a 10M
/// append took 10.7 s and 385 MiB with 4, 9.2-9.6 s and 281 MiB with 2
/// (bench/README.md, "Drain threads").
pub fn max_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, MAX_DEFAULT_THREADS)
}

/// `destination.oauth2_server_uri`: the catalog's own token endpoint.
pub fn oauth2_server_uri(uri: &str) -> String {
    format!("{}/v1/oauth/tokens", uri.trim_end_matches('/'))
}

/// `destination.s3_path_style`: path-style addressing for a custom endpoint
/// (MinIO, SeaweedFS, ...), virtual-host style for AWS S3.
pub fn s3_path_style(has_endpoint: bool) -> bool {
    has_endpoint
}

/// `destination.path`: the embedded catalog's folder.
pub fn sql_path() -> PathBuf {
    PathBuf::from("./warehouse")
}

/// `destination.namespace`: `<name>_topics`, from the sanitised job name.
pub fn namespace(job_name: &str) -> String {
    format!("{}_topics", super::sanitize_identifier(job_name))
}

/// `[[streams]] value_format` when it is unset and there is no schema
/// registry, or the registry has no `<topic>-value` subject: plain JSON.
pub fn value_format_without_schema() -> ValueFormat {
    ValueFormat::Json
}

/// `[[streams]] key_format` when it is unset: with a schema registry
/// `auto` (registry-framed keys decoded by their schema, other keys kept
/// as they are), without one `json` (keys kept as their raw bytes).
pub fn key_format(has_registry: bool) -> ValueFormat {
    if has_registry {
        ValueFormat::Auto
    } else {
        ValueFormat::Json
    }
}

/// The registry subject of a topic's values (Confluent's
/// TopicNameStrategy), whose latest schema decides an unset `value_format`.
pub fn value_subject(topic: &str) -> String {
    format!("{topic}-value")
}

/// The registry subject of a topic's keys (TopicNameStrategy).
pub fn key_subject(topic: &str) -> String {
    format!("{topic}-key")
}

/// Deadline of each request to a schema registry.
pub const SCHEMA_REGISTRY_REQUEST_TIMEOUT_SECS: u64 = 10;

/// `sync.target_file_size_mb`.
pub fn target_file_size_mb() -> u64 {
    128
}

/// `sync.batch_rows`.
pub fn batch_rows() -> usize {
    65_536
}

/// `sync.zstd_level`: zstd's fastest level. Level 3 made no smaller files
/// of these rows and cost more CPU per message (bench/README.md).
pub fn zstd_level() -> i32 {
    1
}

/// `sync.max_columns`: columns a table may have, metadata included. A
/// message with thousands of distinct keys (a map keyed by ids) would
/// otherwise make a table no engine queries well; a real record type
/// rarely has more than a few hundred fields.
pub fn max_columns() -> usize {
    1_000
}

/// The least `sync.max_columns` accepts: the 8 metadata columns and one
/// payload column.
pub const MIN_MAX_COLUMNS: usize = 9;

/// Deadline of each request to a REST catalog.
pub const CATALOG_REQUEST_TIMEOUT_SECS: u64 = 30;

/// `[sync] state_dir`: the key index and other rebuildable state.
pub fn state_dir() -> PathBuf {
    PathBuf::from(".topicberg-state")
}

/// `maintain.target_file_size_mb`: the data file size compaction writes.
pub fn maintain_target_file_size_mb() -> u64 {
    128
}

/// `maintain.min_input_files`: small files that make a partition worth
/// rewriting (as Spark's `rewrite_data_files` `min-input-files`).
pub fn maintain_min_input_files() -> usize {
    5
}

/// `maintain.min_deleted_percent`: any delete makes a data file worth
/// rewriting (readers then merge no delete file for it).
pub fn maintain_min_deleted_percent() -> u8 {
    0
}

/// `maintain.keep_snapshots`: snapshots of each branch kept whatever their
/// age. More than one, so that the snapshot the upsert key index reflects
/// is usually still there after a compaction (no rebuild).
pub fn maintain_keep_snapshots() -> usize {
    10
}

/// `maintain.max_snapshot_age`: as the Java library's
/// `history.expire.max-snapshot-age-ms` (5 days).
pub fn maintain_max_snapshot_age() -> String {
    "5d".to_string()
}

/// `maintain.follow_every`: a follower's background maintenance.
pub fn maintain_follow_every() -> String {
    "5m".to_string()
}

pub fn maintain_follow_max_snapshot_age() -> String {
    "30m".to_string()
}

/// `maintain.follow_rewrite_mb`: about 12M rows of the bench's narrow
/// upsert table per pass, what its first pass on 10M rows rewrote
/// (bench/README.md).
pub fn maintain_follow_rewrite_mb() -> u64 {
    256
}

/// `maintain.orphan_min_age`: unreferenced files younger than this are
/// kept (a commit may be in flight).
pub fn maintain_orphan_min_age() -> String {
    "1d".to_string()
}

/// `maintain.max_manifests`: more manifests than this in the current
/// snapshot are rewritten into few.
pub fn maintain_max_manifests() -> usize {
    100
}

/// `source.connect_timeout`: 10 seconds for a bootstrap server to accept
/// a connection (a broker on the same network answers in milliseconds;
/// a wrong address then fails in seconds, not at the 30-second deadline).
pub fn connect_timeout() -> Interval {
    Interval::default_of("10s")
}

/// `sync.commit_interval`: a follower commits every 5 seconds. Seconds
/// behind Kafka, where the continuous sinks this replaces commit every
/// minute (Redpanda Iceberg Topics, AutoMQ) or five (Kafka Connect's
/// Iceberg sink); 17,280 snapshots a day per table, which `maintain`'s
/// expiry keeps in check.
pub fn commit_interval() -> Interval {
    Interval::default_of("5s")
}

/// `sync.commit_records`: a follower catching up commits every million
/// messages per table (about a second of reading on two cores).
pub fn commit_records() -> u64 {
    1_000_000
}

/// `sync.commit_mb`: a follower catching up commits every 256 MB of a
/// table's messages (a million messages of 256 bytes).
pub fn commit_mb() -> u64 {
    256
}

/// `sync.spill_mb`: a follower reads up to 1 GB ahead into local files
/// while the catalog or the object store is down (at 5,000 messages of
/// 200 bytes a second, about 17 minutes of messages).
pub fn spill_mb() -> u64 {
    1_000
}

/// `sync.stop_timeout`: a follower stops within 20 seconds of SIGTERM,
/// inside Kubernetes' default grace period of 30 before its SIGKILL.
pub fn stop_timeout() -> Interval {
    Interval::default_of("20s")
}
