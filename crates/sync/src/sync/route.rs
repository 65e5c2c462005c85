//! A topic routed to many tables by its messages (`table` a template, see
//! `topicberg_core::route`): where its read starts, which tables it names,
//! and when the group's offsets move.
//!
//! The consumer group's offsets are the route's start: they move only once
//! every table the round's messages named committed, so no table misses a
//! message before them, whatever failed or crashed between the tables'
//! commits. Each table's own offsets (committed with its rows, as any
//! table's) say up to where it holds its messages: the drain passes the
//! messages below them, so a table that committed a round the group did not
//! move past gets nothing twice. Without group offsets the route starts at
//! the earliest retained offset, and the tables' offsets pass what they
//! hold.
//!
//! The round's tables are found by reading the planned messages once
//! before the drain (each table's columns sampled from its own messages on
//! the way); the drain then reads them once more for all the tables at a
//! time (`chunk.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;

use topicberg_core::config::ChangeEvents;
use topicberg_core::route::RoutedName;
use topicberg_core::{ColumnType, SchemaInference, SourceRecord, TableSettings};
use topicberg_kafka::{drain, DrainError, PartitionRange, PartitionState};

use super::change_columns::ChangeSample;
use super::context::{load_state, value_format, SyncContext};
use super::failure::TableFailure;
use super::plan::{cap_plans, plan_route_partitions, plan_routed_table, PartitionPlan};
use super::route_group::{RouteFailure, RouteGroup, RoutedTable, ROUTE_PROPERTY_PREFIX};
use super::table::{Stage, TableState};
use crate::sample::SampleError;
use crate::SAMPLE_PER_PARTITION;

/// The tables of a routed topic with messages this round, planned: each
/// from the route's start (or its own offsets, when later). A failure is
/// one failed state named by the template.
pub(super) async fn plan_route(
    ctx: &SyncContext<'_>,
    settings: TableSettings,
    states: Vec<PartitionState>,
) -> Vec<TableState> {
    let template = settings.route.clone().expect("a routed stream");
    let label = format!("{}.{}", ctx.job.namespace, template.text());
    let mut probe = TableState::new(settings.clone(), label.clone(), states.clone());
    let failed = |mut state: TableState, cause: TableFailure| {
        state.fail(Stage::Plan, cause);
        vec![state]
    };
    let topic = settings.topic.clone();
    if ctx.handed.is_some() {
        return failed(probe, RouteFailure::AmongWorkers { topic }.into());
    }
    value_format(ctx, &mut probe).await;
    if probe.failed() {
        return vec![probe];
    }
    if probe.registry.is_some() {
        let template = template.text().to_owned();
        return failed(probe, RouteFailure::NotJson { topic, template }.into());
    }
    let group = &ctx.job.consumer_group;
    let mut plans = match plan_route_partitions(group, &label, &states, settings.allow_data_loss) {
        Ok(plans) => plans,
        Err(e) => return failed(probe, e.into()),
    };
    let more_waiting = match &ctx.record_caps {
        Some(caps) => cap_plans(&mut plans, caps.for_table(&label)),
        None => false,
    };
    for gap in plans.iter().filter_map(PartitionPlan::retention_gap) {
        tracing::warn!(
            topic = %gap.topic, partition = gap.partition, lost_from = gap.from,
            lost_to = gap.to, lost = gap.lost(), "{}", gap.warning()
        );
    }
    let envelope = settings.change_events != ChangeEvents::None;
    let mut group = RouteGroup {
        topic: topic.clone(),
        template,
        envelope,
        plans,
        tables: Default::default(),
    };
    let found = match discover(ctx, &settings, &group).await {
        Ok(found) => found,
        Err(e) => return failed(probe, e.into()),
    };
    group.tables = found.keys().cloned().collect();
    let group = Arc::new(group);
    let mut tables = Vec::with_capacity(found.len());
    for (table, routed) in found {
        let qualified = format!("{}.{table}", ctx.job.namespace);
        let mut state = TableState::new(settings.routed_to(&table), qualified, states.clone());
        state.registry = probe.registry.clone();
        state.route = Some(RoutedTable {
            group: Arc::clone(&group),
            text: routed.text,
            columns: Some(routed.columns),
        });
        plan_routed(ctx, &mut state).await;
        state.report.more_waiting = more_waiting;
        tables.push(state);
    }
    tables
}

/// A routed table that another topic's stream writes (or that another
/// routed topic names) fails: one table takes one topic's messages.
pub(super) fn fail_shared_tables(tables: &mut [TableState]) {
    for i in 0..tables.len() {
        if tables[i].route.is_none() {
            continue;
        }
        let first = tables
            .iter()
            .find(|t| t.table == tables[i].table && t.topic() != tables[i].topic());
        let Some(first) = first.map(|t| t.topic().to_owned()) else {
            continue;
        };
        let state = &mut tables[i];
        let cause = RouteFailure::Shared {
            table: state.table.clone(),
            first,
            second: state.topic().to_owned(),
        };
        state.fail(Stage::Plan, TableFailure::from(cause));
    }
}

/// A routed table loaded (if it exists) and planned from the route's start.
async fn plan_routed(ctx: &SyncContext<'_>, state: &mut TableState) {
    load_state(ctx, state).await;
    if state.failed() {
        return;
    }
    let routed = state.route.as_ref().expect("routed");
    if let Some(handle) = &state.handle {
        let key = format!("{ROUTE_PROPERTY_PREFIX}{}", routed.group.topic);
        if let Some(recorded) = handle.metadata().properties().get(&key) {
            if *recorded != routed.text {
                let cause = RouteFailure::Collision {
                    topic: routed.group.topic.clone(),
                    table: state.settings.table.clone(),
                    first: recorded.clone(),
                    second: routed.text.clone(),
                };
                return state.fail(Stage::Plan, TableFailure::from(cause));
            }
        }
    }
    match plan_routed_table(
        &state.table,
        &routed.group.plans,
        &state.committed,
        &state.offsets,
    ) {
        Ok(plans) => state.plans = plans,
        Err(e) => state.fail(Stage::Plan, e),
    }
}

/// What the route's messages say of one table.
struct Found {
    text: String,
    columns: Vec<(String, ColumnType)>,
}

/// Reads the route's planned messages once: the tables they name, each
/// with the columns of its first messages.
async fn discover(
    ctx: &SyncContext<'_>,
    settings: &TableSettings,
    group: &RouteGroup,
) -> Result<BTreeMap<String, Found>, RouteFailure> {
    let ranges: Vec<PartitionRange> = group
        .plans
        .iter()
        .map(|p| p.range.clone())
        .filter(|r| r.start < r.end)
        .collect();
    if ranges.is_empty() {
        return Ok(BTreeMap::new());
    }
    let (connection, drain_settings) = (ctx.connection.clone(), ctx.drain.clone());
    let group = RouteGroup {
        topic: group.topic.clone(),
        template: group.template.clone(),
        envelope: group.envelope,
        plans: Vec::new(),
        tables: Default::default(),
    };
    let keep = settings
        .columns
        .as_ref()
        .map(|k| Arc::new(k.iter().cloned().collect()));
    let limit = SAMPLE_PER_PARTITION as u64 * ranges.len() as u64;
    let max_columns = ctx.job.tuning.max_columns;
    let topic = group.topic.clone();
    let read = tokio::task::spawn_blocking(move || {
        let mut names = Names::new(&group, keep, max_columns, limit);
        let read = drain(&connection, &ranges, &drain_settings, |r| names.add(r));
        read.map_err(|e| match e {
            DrainError::Sink(collision) => collision,
            DrainError::Kafka(k) => RouteFailure::Read {
                topic: group.topic.clone(),
                source: Box::new(SampleError::Read(DrainError::Kafka(k))),
            },
        })?;
        names.finish()
    })
    .await;
    read.unwrap_or_else(|e| {
        Err(RouteFailure::Stopped {
            topic,
            reason: e.to_string(),
        })
    })
}

/// The tables named so far, each with its sample.
struct Names<'g> {
    group: &'g RouteGroup,
    keep: Option<Arc<std::collections::HashSet<String>>>,
    max_columns: usize,
    limit: u64,
    tables: BTreeMap<String, (String, Sample, u64)>,
}

/// A table's sampled columns.
enum Sample {
    Change(ChangeSample),
    Json(SchemaInference),
}

impl<'g> Names<'g> {
    fn new(
        group: &'g RouteGroup,
        keep: Option<Arc<std::collections::HashSet<String>>>,
        max_columns: usize,
        limit: u64,
    ) -> Self {
        Names {
            group,
            keep,
            max_columns,
            limit,
            tables: BTreeMap::new(),
        }
    }

    /// One message: the table it names (a message naming none is left to
    /// the drain, which applies the stream's `on_invalid`), sampled.
    fn add(&mut self, record: &SourceRecord<'_>) -> Result<(), RouteFailure> {
        let Ok(RoutedName { text, table }) =
            self.group.template.name_for(record, self.group.envelope)
        else {
            return Ok(());
        };
        let (keep, max_columns) = (self.keep.clone(), self.max_columns);
        let envelope = self.group.envelope;
        let (first, sample, sampled) = self.tables.entry(table.clone()).or_insert_with(|| {
            let sample = match envelope {
                true => Sample::Change(ChangeSample::new(keep.clone(), max_columns)),
                false => Sample::Json(
                    SchemaInference::new()
                        .keep_only(keep)
                        .max_columns(max_columns),
                ),
            };
            (text.clone(), sample, 0)
        });
        if *first != text {
            return Err(RouteFailure::Collision {
                topic: self.group.topic.clone(),
                table,
                first: first.clone(),
                second: text,
            });
        }
        if *sampled < self.limit {
            *sampled += 1;
            // A message that cannot be sampled is left to the drain too,
            // which applies the stream's `on_invalid` to it.
            match sample {
                Sample::Change(s) => drop(s.add(record)),
                Sample::Json(s) => {
                    if let Some(value) = record.value {
                        drop(s.add(value));
                    }
                }
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<BTreeMap<String, Found>, RouteFailure> {
        let topic = self.group.topic.clone();
        let mut found = BTreeMap::new();
        for (table, (text, sample, _)) in self.tables {
            let columns = match sample {
                Sample::Change(s) => s.columns(),
                Sample::Json(s) => Ok(s.columns()),
            }
            .map_err(|source| RouteFailure::Read {
                topic: topic.clone(),
                source: Box::new(source),
            })?;
            found.insert(table, Found { text, columns });
        }
        Ok(found)
    }
}
