//! `topicberg check`: every step a sync needs, tried for real, each failure
//! named with its likely fix.

mod failure;
mod registry;

use std::sync::Arc;
use std::time::Duration;

use arrow_array::{Int64Array, RecordBatch};
use topicberg_core::config::CatalogKind;
use topicberg_core::Job;
use topicberg_iceberg::{Column, ColumnType, Destination, TableHandle};
use topicberg_kafka::{ping, read_partition_states, select_topics, KafkaConnection};

pub use failure::CheckFailure;

use crate::destination::{connect_destination, iceberg_format, SetupError};

/// Deadline for the broker ping.
pub const PING_TIMEOUT: Duration = Duration::from_secs(20);

/// One step's outcome.
#[derive(Debug)]
pub struct CheckStep {
    /// What was tried.
    pub step: &'static str,
    /// What happened (or the error with its fix).
    pub outcome: Result<String, CheckFailure>,
    /// What may be wrong without failing the step (shown as warnings).
    pub warnings: Vec<String>,
}

impl CheckStep {
    /// A step without warnings.
    pub fn new(step: &'static str, outcome: Result<String, CheckFailure>) -> Self {
        Self {
            step,
            outcome,
            warnings: Vec::new(),
        }
    }
}

/// Runs the checks in order, stopping at the first failure of a step the
/// later ones depend on.
pub async fn run_check(job: &Job) -> Vec<CheckStep> {
    let mut steps = check_source(job).await;
    if steps
        .iter()
        .any(|s| s.step == "kafka" && s.outcome.is_err())
    {
        return steps;
    }
    steps.extend(check_destination(job).await);
    steps
}

/// The source steps of [`run_check`]: the Kafka steps, then the schema
/// registry's (when the job names one, or a stream needs one): reachable
/// with the credentials, and each selected topic's value format (the
/// service's "Test connection" of a source).
pub async fn check_source(job: &Job) -> Vec<CheckStep> {
    let (mut steps, topics) = kafka_steps(job).await;
    steps.extend(registry::check_registry(job, topics.as_deref()).await);
    steps
}

/// The Kafka steps of [`run_check`]: ping the brokers, list the matching
/// topics.
pub async fn check_kafka(job: &Job) -> Vec<CheckStep> {
    kafka_steps(job).await.0
}

/// The Kafka steps, and the selected topics when they could be listed.
async fn kafka_steps(job: &Job) -> (Vec<CheckStep>, Option<Vec<String>>) {
    let mut steps = Vec::new();
    let connection = KafkaConnection::from_source(&job.source);
    let ping_result = tokio::task::spawn_blocking({
        let connection = connection.clone();
        move || ping(&connection, PING_TIMEOUT)
    })
    .await
    .expect("ping thread");
    match ping_result {
        Ok(meta) => steps.push(CheckStep::new(
            "kafka",
            Ok(format!(
                "{} broker(s) answered at {}",
                meta.brokers.len(),
                job.source.bootstrap_servers
            )),
        )),
        Err(e) => {
            steps.push(CheckStep::new(
                "kafka",
                Err(CheckFailure::Kafka { source: e }),
            ));
            return (steps, None);
        }
    }
    let selected = select_topics(&connection, &job.topics, PING_TIMEOUT)
        .map_err(SetupError::from)
        .and_then(|selection| {
            let names = selection.selected.iter().map(|t| t.name.as_str());
            crate::check_table_collisions(job, names)?;
            // A named topic the cluster lacks fails (or, with `wait`,
            // warns) as in a sync; a pattern matching nothing warns.
            let warnings =
                crate::missing_topics::check_missing_topics(job, None, &selection, None)?;
            Ok((selection, warnings))
        });
    match selected {
        Ok((selection, warnings)) => {
            let names: Vec<String> = selection.selected.iter().map(|t| t.name.clone()).collect();
            let mut said = format!("{} topic(s) match: {}", names.len(), names.join(", "));
            for warning in &warnings {
                said.push_str("; warning: ");
                said.push_str(warning);
            }
            steps.push(CheckStep::new("topics", Ok(said)));
            if !selection.selected.is_empty() {
                // The group's committed offsets and the watermarks, as the
                // sync reads them: the group's and the topics' ACLs.
                let group = job.consumer_group.clone();
                let read = tokio::task::spawn_blocking(move || {
                    read_partition_states(&connection, &group, &selection.selected, PING_TIMEOUT)
                        .map(|states| states.len())
                })
                .await
                .expect("offsets thread");
                steps.push(CheckStep::new(
                    "consumer group",
                    read.map(|n| {
                        format!(
                            "group {} and {n} partition(s)' offsets readable",
                            job.consumer_group
                        )
                    })
                    .map_err(CheckFailure::Group),
                ));
            }
            (steps, Some(names))
        }
        Err(e) => {
            steps.push(CheckStep::new("topics", Err(CheckFailure::Topics(e))));
            (steps, None)
        }
    }
}

/// The destination steps of [`run_check`]: token exchange and catalog
/// configuration, create a throw-away table in the job's namespace, write
/// one file, drop the table (the service's "Test connection" of a
/// destination).
pub async fn check_destination(job: &Job) -> Vec<CheckStep> {
    let mut steps = Vec::new();
    let destination = match connect_destination(job).await {
        Ok(destination) => {
            steps.push(CheckStep::new("catalog", Ok(catalog_ok(job))));
            destination
        }
        Err(e) => {
            steps.push(CheckStep::new(
                "catalog",
                Err(CheckFailure::Catalog { source: e }),
            ));
            return steps;
        }
    };
    let namespace = job.namespace_path();
    let table = format!("topicberg_check_{}", uuid::Uuid::new_v4().simple());
    let columns = [Column::optional("probe", 1, ColumnType::Long)];
    let format = iceberg_format(job.format_version);
    let created = destination
        .ensure_table(&namespace, &table, &columns, format)
        .await;
    let handle = match created {
        Ok(handle) => {
            let text = format!("created {}.{table}", namespace.join("."));
            steps.push(CheckStep::new("create table", Ok(text)));
            handle
        }
        Err(e) => {
            steps.push(CheckStep::new(
                "create table",
                Err(CheckFailure::CreateTable { source: e }),
            ));
            return steps;
        }
    };
    steps.push(CheckStep::new(
        "storage credentials",
        Ok(destination.credential_path(&handle).to_string()),
    ));
    steps.push(write_probe(&destination, &handle).await);
    steps.push(CheckStep::new(
        "drop table",
        match destination.drop_table(&namespace, &table, true).await {
            Ok(()) => Ok(format!("dropped {}.{table}", namespace.join("."))),
            Err(e) => Err(CheckFailure::DropTable(e)),
        },
    ));
    steps
}

/// What a successful catalog connection did, by how the job logs in.
fn catalog_ok(job: &Job) -> String {
    let d = &job.destination;
    match (d.catalog, &d.credential, &d.token) {
        (CatalogKind::Sql, _, _) => match (d.sql_warehouse_scheme(), &d.warehouse) {
            (Some(_), Some(warehouse)) => {
                format!("embedded catalog opened, tables in {warehouse}")
            }
            _ => "embedded catalog opened".into(),
        },
        (_, Some(_), _) => "credential exchanged, catalog configuration read".into(),
        (_, None, Some(_)) => "bearer token accepted, catalog configuration read".into(),
        _ => "catalog configuration read (no authentication configured)".into(),
    }
}

/// Writes one data file of one row into the throw-away table.
async fn write_probe(destination: &Destination, handle: &TableHandle) -> CheckStep {
    let batch = RecordBatch::try_new(
        Arc::clone(handle.arrow_schema()),
        vec![Arc::new(Int64Array::from(vec![1_i64]))],
    )
    .expect("one-column batch");
    CheckStep::new(
        "write file",
        match destination.write_data_files(handle, [batch]).await {
            Ok(files) => Ok(format!(
                "wrote {}",
                files
                    .first()
                    .map(|f| f.file_path().to_string())
                    .unwrap_or_default()
            )),
            Err(e) => Err(CheckFailure::WriteFile(e)),
        },
    )
}
