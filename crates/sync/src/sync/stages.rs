//! The stages of a sync, each over every table: plan, create, columns,
//! drain, commit, then the group's offsets. A stage that fails a table
//! records why ([`TableState::fail`]) and the later stages skip it; the
//! other tables go on.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use topicberg_core::columns::KAFKA_HEADERS;
use topicberg_core::config::{ChangeEvents, OnInvalid};
use topicberg_core::{Job, RegistryValues, TableColumns, TableSettings};
use topicberg_iceberg::key_index::ORDER_BY_PROPERTY;
use topicberg_iceberg::{Destination, NewTable, TableHandle};
use topicberg_kafka::{GroupClient, PartitionRange, PartitionState, SelectedTopic};

use super::commit::commit_table;
use super::context::{check_order_by, load_state, value_format, warn_if_spec_differs, SyncContext};
use super::failure::{CreateError, TableFailure};
use super::files_commit::{commit_with_sets, remove_uncommitted, Handing, Own};
use super::handoff::Role;
use super::kept_index::IndexHome;
use super::pipeline::{drain_and_write, TableInput, UpsertInput};
use super::plan::{cap_plans, plan_partitions, PartitionPlan, TableOffsets};
use super::progress::{PlannedTable, SyncPhase};
use super::report::TableStatus;
use super::table::{Stage, TableState};
use super::upsert_round::{commit_upsert_with_sets, OwnRound};
use crate::columns::{iceberg_columns, table_columns};
use crate::destination::iceberg_format;
use crate::hooks;
use crate::SAMPLE_PER_PARTITION;

/// Plan: each selected topic's table loaded (if it exists), its recorded
/// offsets read, its partitions planned against the group's offsets.
pub(super) async fn plan_tables(
    ctx: &SyncContext<'_>,
    selected: &[SelectedTopic],
    states: &[PartitionState],
) -> Vec<TableState> {
    let mut tables = Vec::new();
    for topic in selected {
        let settings = ctx.job.table_for(&topic.name);
        let topic_states: Vec<PartitionState> = states
            .iter()
            .filter(|s| s.topic == topic.name)
            .cloned()
            .collect();
        if settings.route.is_some() {
            tables.extend(super::route::plan_route(ctx, settings, topic_states).await);
            continue;
        }
        let table = format!("{}.{}", ctx.job.namespace, settings.table);
        let mut state = TableState::new(settings, table, topic_states);
        if let Some(upsert) = state.settings.upsert() {
            let version = state.settings.format_version.number();
            let said = || {
                let format = upsert.delete_format.as_str();
                format!("upsert {} {format} {version}", topic.name)
            };
            if crate::say(ctx.logged_once.as_deref(), said) {
                tracing::info!(
                    topic = %topic.name, delete_format = upsert.delete_format.as_str(),
                    format_version = version, reason = %upsert.reason,
                    "upsert stream"
                );
            }
        }
        value_format(ctx, &mut state).await;
        plan_table(ctx, &mut state).await;
        tables.push(state);
    }
    super::route::fail_shared_tables(&mut tables);
    if ctx.handed.is_some() {
        super::shared::fail_among_workers(&mut tables);
    }
    tables
}

async fn plan_table(ctx: &SyncContext<'_>, state: &mut TableState) {
    load_state(ctx, state).await;
    if state.failed() {
        return;
    }
    let handing = ctx.handed.is_some();
    state.role = Role::of(ctx.lease.as_ref(), handing, state.topic());
    let full = writer_start(ctx, state).await;
    if state.failed() {
        return;
    }
    let planned = plan_partitions(
        &ctx.job.consumer_group,
        &state.table,
        &state.committed,
        state.from.as_ref().unwrap_or(&state.offsets),
        state.settings.allow_data_loss,
    );
    match planned {
        Ok(mut plans) => {
            if full {
                // Enough of its sets wait for the committer: read nothing.
                plans.iter_mut().for_each(|p| p.range.end = p.range.start);
            }
            if let Some(caps) = &ctx.record_caps {
                state.report.more_waiting = cap_plans(&mut plans, caps.for_table(&state.table));
            }
            state.report.expired_messages = plans.iter().map(|p| p.expired).sum();
            for gap in plans.iter().filter_map(PartitionPlan::retention_gap) {
                tracing::warn!(
                    topic = %gap.topic, partition = gap.partition, lost_from = gap.from,
                    lost_to = gap.to, lost = gap.lost(), "{}", gap.warning()
                );
            }
            state.plans = plans;
        }
        Err(e) => state.fail(Stage::Plan, e),
    }
}

/// Where a writer's round of the table starts when sets it handed over
/// still wait for the committer (`handoff.rs`): past them. Whether it has
/// so many waiting that it reads nothing this round.
///
/// The pending sets are listed after the table was loaded, so a set the
/// committer took in between is gone from the listing while the loaded
/// offsets do not show it yet: when a waiting set is missing, the table is
/// loaded again (after the listing), and its offsets say whether the set
/// landed or was dropped.
async fn writer_start(ctx: &SyncContext<'_>, state: &mut TableState) -> bool {
    let (Role::Writer, Some(handed), Some(handle)) = (state.role, &ctx.handed, &state.handle)
    else {
        return false;
    };
    if !handed.waiting(&state.table, state.topic(), &state.offsets) {
        return false;
    }
    let existing = match ctx.destination.pending_set_locations(handle).await {
        Ok(existing) => existing,
        Err(e) => {
            state.fail(Stage::Plan, TableFailure::Load(e));
            return false;
        }
    };
    if handed.missing(&state.table, &existing) {
        let reloaded = match ctx
            .destination
            .load_table(handle.namespace(), handle.name())
            .await
        {
            Ok(reloaded) => reloaded,
            Err(e) => {
                state.fail(Stage::Plan, TableFailure::Load(e));
                return false;
            }
        };
        match TableOffsets::of_metadata(reloaded.metadata()) {
            Ok(offsets) => state.offsets = offsets,
            Err(e) => {
                state.fail(Stage::Plan, TableFailure::RecordedOffsets(e));
                return false;
            }
        }
        state.handle = Some(reloaded);
    }
    let (from, full) = handed.plan_from(&state.table, state.topic(), &state.offsets, &existing);
    state.from = Some(from);
    full
}

/// Create: the tables that do not exist yet and have messages to read, with
/// columns inferred from a sample of them.
pub(super) async fn create_tables(ctx: &SyncContext<'_>, tables: &mut [TableState]) {
    let mut made: std::collections::HashMap<String, TableHandle> = Default::default();
    for state in tables
        .iter_mut()
        .filter(|s| !s.failed() && s.handle.is_none())
    {
        let ranges = state.ranges_to_read();
        if ranges.is_empty() {
            continue;
        }
        if let Some(handle) = made.get(&state.table) {
            // Another topic's stream made it (several topics into one
            // table): this one writes into it as into any table there.
            if let Err(e) = check_order_by(handle, &state.settings) {
                state.fail(Stage::Create, e);
            }
            state.handle = Some(handle.clone());
            continue;
        }
        let created = match state.route.as_mut() {
            // A routed table's columns were sampled from its own messages.
            Some(routed) => {
                let payload = routed.columns.take().unwrap_or_default();
                let property = routed.property();
                create_with_columns(ctx, &state.settings, payload, Some(property)).await
            }
            None => create_table(ctx, &state.settings, state.registry.as_ref(), &ranges).await,
        };
        match created {
            Ok(handle) => {
                if let Err(e) = check_order_by(&handle, &state.settings) {
                    state.fail(Stage::Create, e);
                }
                made.insert(state.table.clone(), handle.clone());
                state.handle = Some(handle);
            }
            Err(e) => state.fail(Stage::Create, e),
        }
    }
}

async fn create_table(
    ctx: &SyncContext<'_>,
    settings: &TableSettings,
    registry: Option<&Arc<RegistryValues>>,
    ranges: &[PartitionRange],
) -> Result<TableHandle, CreateError> {
    let sample: Vec<PartitionRange> = ranges
        .iter()
        .map(|r| PartitionRange {
            end: r.end.min(r.start + SAMPLE_PER_PARTITION),
            ..r.clone()
        })
        .collect();
    // The stream's `columns`: only these fields become columns.
    let keep = settings
        .columns
        .as_ref()
        .map(|k| Arc::new(k.iter().cloned().collect()));
    let skip_invalid = settings.on_invalid != OnInvalid::Fail;
    let payload = match registry {
        _ if settings.change_events != ChangeEvents::None => {
            super::change_columns::sample_change_columns(
                &ctx.connection,
                &ctx.drain,
                &sample,
                registry.cloned(),
                skip_invalid,
                keep,
                ctx.job.tuning.max_columns,
            )?
        }
        Some(registry) => super::schema_columns::sample_columns(
            &ctx.connection,
            &ctx.drain,
            &sample,
            registry,
            skip_invalid,
            keep,
        )?,
        None => crate::discover::infer_columns(
            &ctx.connection,
            &ctx.drain,
            &sample,
            skip_invalid,
            keep,
            ctx.job.tuning.max_columns,
        )?
        .columns(),
    };
    create_with_columns(ctx, settings, payload, None).await
}

/// A new table of `payload`'s columns (with the metadata columns its
/// stream asks for), and `property` among its properties.
async fn create_with_columns(
    ctx: &SyncContext<'_>,
    settings: &TableSettings,
    payload: Vec<(String, topicberg_core::ColumnType)>,
    property: Option<(String, String)>,
) -> Result<TableHandle, CreateError> {
    let mut columns = TableColumns::for_new_table(&payload).map_err(CreateError::Columns)?;
    if settings.change_events != ChangeEvents::None {
        columns = columns
            .with_change_columns()
            .map_err(CreateError::Columns)?;
    }
    if settings.kafka_headers {
        columns = columns
            .with_metadata_column(KAFKA_HEADERS, 0)
            .map_err(CreateError::Columns)?;
    }
    let namespace = ctx.job.namespace_path();
    let format = iceberg_format(settings.format_version);
    let order_by = settings.upsert().and_then(|u| u.order_by.as_deref());
    let properties: Vec<(&str, &str)> = order_by
        .map(|column| (ORDER_BY_PROPERTY, column))
        .into_iter()
        .chain(property.as_ref().map(|(k, v)| (k.as_str(), v.as_str())))
        .collect();
    let layout = NewTable {
        partition_by: &settings.partition_by,
        sort_by: &settings.sort_by,
        properties: &properties,
    };
    let handle = ctx
        .destination
        .ensure_partitioned_table(
            &namespace,
            &settings.table,
            &iceberg_columns(&columns),
            format,
            &layout,
        )
        .await
        .map_err(|source| CreateError::Table {
            topic: settings.topic.clone(),
            source,
        })?;
    warn_if_spec_differs(&handle, settings);
    Ok(handle)
}

/// The store of a table with messages to read is built on a blocking
/// thread while the sync goes on (its TLS set-up is CPU the drain's waits
/// can hide), not on the table's first write.
fn prepare_storage(destination: &Destination, handle: &TableHandle) {
    let storage = destination.storage().clone();
    let location = handle.metadata().location().to_string();
    tokio::task::spawn_blocking(move || storage.prepare(&location));
}

/// Columns: what the drain needs per table with messages to read (the
/// table's columns for the decoders, the ranges, the upsert key); the
/// table's store is built meanwhile ([`prepare_storage`]).
pub(super) fn prepare_inputs(job: &Job, destination: &Destination, tables: &mut [TableState]) {
    // The spill folders of upsert syncs killed part-way, before this sync
    // adds its own (see `upsert/folder.rs`).
    if tables.iter().any(|s| s.settings.upsert().is_some()) {
        super::upsert::remove_abandoned_spill_folders(&job.state_dir.join("spill"));
    }
    for state in tables.iter_mut().filter(|s| !s.failed()) {
        let ranges = state.ranges_to_read();
        let Some(handle) = state.handle.as_ref().filter(|_| !ranges.is_empty()) else {
            continue;
        };
        prepare_storage(destination, handle);
        let settings = &state.settings;
        match table_columns(handle) {
            Ok(columns) => {
                state.input = Some(TableInput {
                    topic: settings.topic.clone(),
                    on_invalid: settings.on_invalid,
                    payload_fields: settings
                        .columns
                        .as_ref()
                        .map(|c| Arc::new(c.iter().cloned().collect())),
                    upsert: settings.upsert().map(|upsert| UpsertInput {
                        keys: upsert.keys.clone(),
                        spill_dir: job.state_dir.join("spill"),
                        order_by: upsert.order_by.clone(),
                    }),
                    columns,
                    handle: handle.clone(),
                    ranges,
                    max_columns: job.tuning.max_columns,
                    registry: state.registry.clone(),
                    key_format: settings.key_format,
                    change_events: settings.change_events,
                    on_truncate: settings.on_truncate,
                    kafka_headers: settings.kafka_headers,
                    soft_deletes: settings.soft_deletes,
                    keep_unsent: settings.upsert().is_some()
                        && settings.change_events != ChangeEvents::None
                        && state.role != Role::Writer,
                    route: state.route.as_ref().map(|r| Arc::clone(&r.group)),
                });
            }
            Err(e) => state.fail(Stage::Columns, e),
        }
    }
}

/// Drain: every table's partitions read in parallel to the planned ends,
/// decoded and written; each table's output kept beside it.
pub(super) async fn drain_tables(
    ctx: &SyncContext<'_>,
    tables: &mut [TableState],
    cancel: Arc<AtomicBool>,
) {
    let counters = ctx.progress.plan(&planned_tables(tables));
    let (indices, inputs): (Vec<usize>, Vec<TableInput>) = tables
        .iter_mut()
        .enumerate()
        .filter_map(|(i, t)| t.input.take().map(|input| (i, input)))
        .unzip();
    let input_counters = indices.iter().map(|&i| Arc::clone(&counters[i])).collect();
    ctx.progress.set_phase(SyncPhase::Reading);
    let ticker = super::spawn_progress_line(Arc::clone(&ctx.progress));
    let outputs = drain_and_write(
        &ctx.connection,
        &ctx.drain,
        &ctx.destination,
        &inputs,
        ctx.job.tuning.max_threads,
        ctx.job.tuning.batch_rows,
        ctx.olake_timestamp_micros,
        Arc::clone(&ctx.progress),
        input_counters,
        cancel,
    )
    .await;
    ticker.abort();
    for (index, output) in indices.into_iter().zip(outputs) {
        let status = if output.error.is_some() {
            "failed"
        } else {
            "written"
        };
        counters[index].set_status(status);
        tables[index].output = Some(output);
    }
}

/// Every table as the progress view shows it: its planned ranges, and
/// whether it has anything to read.
fn planned_tables(tables: &[TableState]) -> Vec<PlannedTable<'_>> {
    tables
        .iter()
        .map(|t| {
            let ranges = t.input.as_ref().map_or(&[][..], |i| &i.ranges[..]);
            let status = match (&t.input, t.failed()) {
                (_, true) => "failed",
                (Some(_), false) => "waiting",
                (None, false) => "up_to_date",
            };
            PlannedTable {
                topic: &t.settings.topic,
                table: &t.table,
                ranges,
                status,
            }
        })
        .collect()
}

/// After a cancel: the files the drain wrote are deleted.
pub(super) async fn discard_outputs(ctx: &SyncContext<'_>, tables: &mut [TableState]) {
    for state in tables.iter_mut() {
        if let Some(output) = state.output.take() {
            state.report.orphan_files =
                remove_uncommitted(&ctx.destination, &output.data_files).await;
        }
    }
}

/// Commit: one snapshot per table, in order; a table whose drain failed
/// commits nothing and its files are deleted.
pub(super) async fn commit_tables(ctx: &SyncContext<'_>, tables: &mut [TableState]) {
    let mut first_commit_done = false;
    for (index, state) in tables.iter_mut().enumerate() {
        let counters = ctx.progress.table(index);
        if let Some(mut output) = state.output.take() {
            if let Some(counters) = counters {
                counters.set_status("committing");
            }
            state.report.schema_changes = std::mem::take(&mut output.schema_changes);
            log_renamed(state.topic(), &output.renamed);
            state.report.skipped_records = output.skipped;
            state.report.change_operations = output.changes;
            if let Some(e) = output.error.take() {
                state.fail(Stage::Drain, e);
                state.report.orphan_files =
                    remove_uncommitted(&ctx.destination, &output.data_files).await;
            } else {
                let mut handle = output.handle.clone();
                let micros = ctx.olake_timestamp_micros;
                let home = IndexHome {
                    state_dir: &ctx.job.state_dir,
                    kept: ctx.kept_indexes.as_deref(),
                };
                let handing = handing(ctx, state);
                commit_table(
                    &ctx.destination,
                    home,
                    state,
                    output,
                    &mut handle,
                    micros,
                    ctx.job.tuning.max_threads,
                    handing,
                )
                .await;
                if state.report.status == TableStatus::Committed && !first_commit_done {
                    first_commit_done = true;
                    hooks::fault_point("after_first_table_commit");
                }
            }
        } else if let (Role::Committer, Some(handing), Some(handle)) =
            (state.role, handing(ctx, state), state.handle.clone())
        {
            // Nothing of its own to read: the sets handed over still land.
            commit_sets_only(ctx, state, handle, handing).await;
        }
        state.report.duration_ms = state.started.elapsed().as_millis() as u64;
        if let Some(counters) = counters {
            counters.set_status(state.report.status.as_str());
        }
    }
}

/// A follower's part in committing `state`'s table among workers.
fn handing<'a>(ctx: &'a SyncContext<'_>, state: &TableState) -> Option<Handing<'a>> {
    let handed = ctx.handed.as_deref()?;
    let assigned = ctx.lease.as_ref().and_then(|l| l.assigned());
    let topic = state.topic();
    let owned = assigned.map_or(0, |a| a.iter().filter(|(t, _)| t == topic).count());
    let owns_all = ctx
        .partition_counts
        .get(topic)
        .is_some_and(|&n| n > 0 && owned == n);
    Some(Handing { handed, owns_all })
}

/// A committer's round that read nothing of the table: the sets handed
/// over, alone in a snapshot (when any continues the table's offsets).
async fn commit_sets_only(
    ctx: &SyncContext<'_>,
    state: &mut TableState,
    mut handle: TableHandle,
    handing: Handing<'_>,
) {
    if state.failed() {
        return;
    }
    let started = std::time::Instant::now();
    let destination = &ctx.destination;
    if state.settings.upsert().is_some() {
        let home = IndexHome {
            state_dir: &ctx.job.state_dir,
            kept: ctx.kept_indexes.as_deref(),
        };
        let spill_dir = ctx.job.state_dir.join("spill");
        let order_by = state.settings.upsert().and_then(|u| u.order_by.clone());
        let own = OwnRound::Nothing {
            spill_dir: &spill_dir,
            order_by: order_by.as_deref(),
        };
        let writers = ctx.job.tuning.max_threads;
        commit_upsert_with_sets(destination, home, state, &mut handle, own, writers, handing).await;
    } else {
        let own = Own::nothing(state.topic().to_string());
        commit_with_sets(destination, state, &mut handle, own, handing).await;
    }
    state.report.commit_ms = started.elapsed().as_millis() as u64;
}

/// The group's offsets: every table that did not fail (nor was superseded)
/// moves its partitions' group offsets to what the table records, where
/// they differ. Whether the commit succeeded.
/// `opened` is the group's client when one was opened before the Iceberg
/// commits; otherwise one is opened here, only if offsets move.
pub(super) fn commit_group(
    ctx: &SyncContext<'_>,
    tables: &[TableState],
    opened: Option<Result<GroupClient, topicberg_kafka::KafkaError>>,
) -> GroupCommit {
    let mut group_offsets = BTreeMap::new();
    let moving = tables
        .iter()
        .filter(|s| s.route.is_none())
        .filter(|s| !s.failed() && s.report.status != TableStatus::Superseded);
    route_group_offsets(tables, &mut group_offsets);
    for state in moving {
        for plan in &state.plans {
            let (topic, partition) = (&plan.range.topic, plan.range.partition);
            let next = state
                .offsets
                .get(topic, partition)
                .unwrap_or(plan.range.start);
            let committed = state
                .committed
                .iter()
                .find(|s| s.partition == partition)
                .and_then(|s| s.committed);
            if committed != Some(next) {
                group_offsets.insert((topic.clone(), partition), next);
            }
        }
    }
    hooks::fault_point("before_group_commit");
    if group_offsets.is_empty() {
        return GroupCommit::Committed;
    }
    let committed = match &ctx.member {
        Some(member) => member.commit(&group_offsets),
        None => opened
            .unwrap_or_else(|| GroupClient::open(&ctx.connection, &ctx.job.consumer_group))
            .and_then(|client| client.commit(&group_offsets)),
    };
    match committed {
        Ok(()) => GroupCommit::Committed,
        Err(e) if e.kind == topicberg_kafka::KafkaErrorKind::GroupInUse && ctx.member.is_none() => {
            tracing::warn!(
                group = %ctx.job.consumer_group,
                "the consumer group has members, so the broker takes its offsets only from them: \
                 the tables hold the offsets, and a follower of this job (sync --follow) commits \
                 them at its next round. If no follower of this job runs, another application \
                 uses the group: give this job a consumer_group of its own"
            );
            GroupCommit::LeftToMembers
        }
        Err(e) => {
            tracing::error!(error = %e, "committing consumer-group offsets failed; the next sync repairs them from the tables");
            GroupCommit::Failed
        }
    }
}

/// A routed topic's group offsets move to the end of its round once every
/// table its messages named committed it (see `route.rs`).
fn route_group_offsets(tables: &[TableState], out: &mut BTreeMap<(String, i32), i64>) {
    let mut groups: Vec<&Arc<super::route_group::RouteGroup>> = Vec::new();
    for routed in tables.iter().filter_map(|s| s.route.as_ref()) {
        if !groups.iter().any(|g| Arc::ptr_eq(g, &routed.group)) {
            groups.push(&routed.group);
        }
    }
    for group in groups {
        let members: Vec<&TableState> = tables
            .iter()
            .filter(|s| {
                s.route
                    .as_ref()
                    .is_some_and(|r| Arc::ptr_eq(&r.group, group))
            })
            .collect();
        let landed = |s: &&TableState| !s.failed() && s.report.status != TableStatus::Superseded;
        if !members.iter().all(landed) {
            continue;
        }
        // Where every table holds the messages up to (the drain may stop
        // short of the planned end: an open transaction).
        for plan in &group.plans {
            let (topic, partition) = (&plan.range.topic, plan.range.partition);
            let held = members
                .iter()
                .map(|s| s.offsets.get(topic, partition).unwrap_or(plan.range.start))
                .min()
                .unwrap_or(plan.range.start)
                .max(plan.range.start);
            if held != plan.range.start || plan.repair_group {
                out.insert((topic.clone(), partition), held);
            }
        }
    }
}

/// What became of the consumer group's offsets after the snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum GroupCommit {
    /// Committed, or nothing to move.
    Committed,
    /// Refused because the group has members (a follower of the job).
    LeftToMembers,
    /// Failed; the next sync repairs them from the tables.
    Failed,
}

/// One warning per table and sync when payload fields are stored under
/// other names than their own (docs/src/explanation/columns.md, "Column names").
fn log_renamed(topic: &str, renamed: &[(String, String)]) {
    if renamed.is_empty() {
        return;
    }
    let fields = renamed
        .iter()
        .map(|(field, column)| format!("{field} -> {column}"))
        .collect::<Vec<_>>()
        .join(", ");
    tracing::warn!(
        topic,
        renamed = %fields,
        count = renamed.len(),
        "payload fields stored under renamed columns: their own name is a metadata column's, or differs only in case from an earlier column's"
    );
}
