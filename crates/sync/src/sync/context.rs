//! What every stage of a sync needs ([`SyncContext`]), and a table as
//! planning finds it: loaded when it exists, its recorded offsets read,
//! its values' format decided.

use std::collections::BTreeMap;
use std::sync::Arc;

use topicberg_core::{Job, RegistryValues, TableSettings};
use topicberg_iceberg::key_index::ORDER_BY_PROPERTY;
use topicberg_iceberg::{CatalogErrorKind, Destination, IcebergErrorKind, TableHandle};
use topicberg_kafka::{DrainSettings, KafkaConnection, RegistryClient};

use super::failure::TableFailure;
use super::plan::{RecordCaps, TableOffsets};
use super::progress::SyncProgress;
use super::table::{Stage, TableState};
use crate::registry::{decide_value_format, schema_source};

/// What every stage needs: the job, its Kafka cluster and its catalog.
pub(super) struct SyncContext<'a> {
    pub(super) job: &'a Job,
    pub(super) connection: KafkaConnection,
    pub(super) destination: Arc<Destination>,
    pub(super) drain: DrainSettings,
    pub(super) olake_timestamp_micros: i64,
    /// The job's schema registry, when it names one.
    pub(super) registry: Option<Arc<RegistryClient>>,
    /// A follower's cap on each table's messages per round.
    pub(super) record_caps: Option<RecordCaps>,
    /// A follower's upsert key indexes, kept open between rounds.
    pub(super) kept_indexes: Option<Arc<super::KeptIndexes>>,
    /// What a follower's earlier rounds logged, if this is one's round.
    pub(super) logged_once: Option<Arc<crate::LoggedOnce>>,
    /// The follower's membership in the job's consumer group, if any.
    pub(super) member: Option<Arc<topicberg_kafka::GroupMember>>,
    /// A member's hold on the partitions it planned, released when the
    /// sync ends (after its commits): a revocation waits for it.
    pub(super) lease: Option<topicberg_kafka::Lease>,
    /// Each selected topic's partitions, assigned to this member or not.
    pub(super) partition_counts: BTreeMap<String, usize>,
    /// A member's file sets handed to committers, from round to round.
    pub(super) handed: Option<Arc<super::HandedSets>>,
    /// What the sync has read so far, per table and partition.
    pub(super) progress: Arc<SyncProgress>,
    /// What the sync warns about before any table (a named topic missing
    /// with `missing_topics = "wait"`, a pattern that matches nothing).
    pub(super) warnings: Vec<String>,
}

/// How the table's values are read, decided once: registry-framed values
/// get the registry's schemas (cached for the sync), JSON gets none.
pub(super) async fn value_format(ctx: &SyncContext<'_>, state: &mut TableState) {
    match decide_value_format(ctx.registry.as_deref(), &state.settings).await {
        Ok(choice) => {
            let topic = &state.settings.topic;
            let said = || format!("format {topic} {} {}", choice.format, choice.reason);
            if crate::say(ctx.logged_once.as_deref(), said) {
                tracing::info!(
                    topic = %topic, value_format = %choice.format, reason = %choice.reason,
                    "value format"
                );
            }
            if let (true, Some(client)) = (choice.format.uses_registry(), &ctx.registry) {
                let values = RegistryValues::new(choice.format, schema_source(client));
                state.registry = Some(Arc::new(values));
            }
        }
        Err(e) => state.fail(Stage::Plan, e),
    }
}

/// The table of `state` loaded, when it exists: its recorded offsets read,
/// its partition spec and `order_by` checked against the stream's.
pub(super) async fn load_state(ctx: &SyncContext<'_>, state: &mut TableState) {
    if state.failed() {
        return;
    }
    let namespace = ctx.job.namespace_path();
    match ctx
        .destination
        .load_table(&namespace, &state.settings.table)
        .await
    {
        Ok(handle) => {
            match TableOffsets::of_metadata(handle.metadata()) {
                Ok(o) => state.offsets = o,
                Err(e) => state.fail(Stage::Plan, TableFailure::RecordedOffsets(e)),
            }
            warn_if_spec_differs(&handle, &state.settings);
            if let Err(e) = check_order_by(&handle, &state.settings) {
                state.fail(Stage::Plan, e);
            }
            state.handle = Some(handle);
        }
        Err(e) if e.kind == IcebergErrorKind::Catalog(CatalogErrorKind::NotFound) => {}
        Err(e) => state.fail(Stage::Plan, TableFailure::Load(e)),
    }
}

/// A table's `order_by` (its [`ORDER_BY_PROPERTY`]) is the stream's: it
/// decides which stamps the key index keeps, so it never changes.
pub(super) fn check_order_by(
    handle: &TableHandle,
    settings: &TableSettings,
) -> Result<(), TableFailure> {
    let recorded = handle.metadata().properties().get(ORDER_BY_PROPERTY);
    let configured = settings.upsert().and_then(|u| u.order_by.as_ref());
    if recorded != configured && settings.upsert().is_some() {
        return Err(TableFailure::OrderByChanged {
            table: handle.qualified_name(),
            recorded: recorded.cloned(),
            configured: configured.cloned(),
        });
    }
    match configured {
        Some(column) if handle.schema().field_by_name(column).is_none() => {
            Err(TableFailure::OrderByMissing {
                table: handle.qualified_name(),
                column: column.clone(),
            })
        }
        _ => Ok(()),
    }
}

/// A table that exists keeps its partition spec: say so when the stream
/// sets a `partition_by` the spec is not (files follow the table's spec).
pub(super) fn warn_if_spec_differs(handle: &TableHandle, settings: &TableSettings) {
    if settings.partition_by.is_empty() {
        return;
    }
    let spec = handle.metadata().default_partition_spec();
    if spec.fields().len() != settings.partition_by.len()
        || spec
            .fields()
            .iter()
            .zip(&settings.partition_by)
            .any(|(f, p)| f.name != p.field_name())
    {
        tracing::warn!(
            table = %settings.table,
            table_spec = %topicberg_iceberg::table_metadata::partition_by(handle.metadata()).join(", "),
            partition_by = %settings.partition_by.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
            "the table's partition spec is not the stream's partition_by; partition_by applies \
             when topicberg creates a table, and files are written under the table's current spec"
        );
    }
}
