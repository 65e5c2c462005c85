//! `topicberg check`: every step a sync needs, tried for real, each failure
//! named with its likely fix.

use std::sync::Arc;
use std::time::Duration;

use arrow_array::{Int64Array, RecordBatch};
use topicberg_core::Job;
use topicberg_iceberg::{
    CatalogErrorKind, Column, ColumnType, Destination, IcebergErrorKind, TableHandle,
};
use topicberg_kafka::{ping, select_topics, KafkaConnection, KafkaErrorKind};

use crate::destination::{connect_destination, iceberg_format};

/// Deadline for the broker ping.
pub const PING_TIMEOUT: Duration = Duration::from_secs(20);

/// One step's outcome.
#[derive(Debug, Clone)]
pub struct CheckStep {
    /// What was tried.
    pub step: &'static str,
    /// What happened (or the error with its fix).
    pub outcome: Result<String, String>,
}

/// Runs the checks in order, stopping at the first failure of a step the
/// later ones depend on.
pub async fn run_check(job: &Job) -> Vec<CheckStep> {
    let mut steps = check_kafka(job).await;
    if steps
        .iter()
        .any(|s| s.step == "kafka" && s.outcome.is_err())
    {
        return steps;
    }
    steps.extend(check_destination(job).await);
    steps
}

/// The Kafka steps of [`run_check`]: ping the brokers, list the matching
/// topics (the service's "Test connection" of a source).
pub async fn check_kafka(job: &Job) -> Vec<CheckStep> {
    let mut steps = Vec::new();
    let connection = KafkaConnection::from_source(&job.source);
    let ping_result = tokio::task::spawn_blocking({
        let connection = connection.clone();
        move || ping(&connection, PING_TIMEOUT)
    })
    .await
    .expect("ping thread");
    match ping_result {
        Ok(meta) => steps.push(CheckStep {
            step: "kafka",
            outcome: Ok(format!(
                "{} broker(s) answered at {}",
                meta.brokers.len(),
                job.source.bootstrap_servers
            )),
        }),
        Err(e) => {
            let hint = match e.kind {
                // The error itself names the user, mechanism and fields.
                KafkaErrorKind::Authentication => "",
                KafkaErrorKind::Unreachable => {
                    " (check bootstrap_servers and that the brokers advertise an address this machine can reach)"
                }
                _ => "",
            };
            steps.push(CheckStep {
                step: "kafka",
                outcome: Err(format!("{e}{hint}")),
            });
            return steps;
        }
    }
    let selected = select_topics(&connection, &job.topics, PING_TIMEOUT)
        .map_err(|e| e.to_string())
        .and_then(|selection| {
            let names = selection.selected.iter().map(|t| t.name.as_str());
            crate::check_table_collisions(job, names).map_err(|e| e.to_string())?;
            Ok(selection)
        });
    match selected {
        Ok(selection) => steps.push(CheckStep {
            step: "topics",
            outcome: Ok(format!(
                "{} topic(s) match: {}",
                selection.selected.len(),
                selection
                    .selected
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }),
        Err(e) => steps.push(CheckStep {
            step: "topics",
            outcome: Err(e),
        }),
    }
    steps
}

/// The destination steps of [`run_check`]: token exchange and catalog
/// configuration, create a throw-away table in the job's namespace, write
/// one file, drop the table (the service's "Test connection" of a
/// destination).
pub async fn check_destination(job: &Job) -> Vec<CheckStep> {
    let mut steps = Vec::new();
    let connected = connect_destination(job).await;
    steps.push(CheckStep {
        step: "catalog",
        outcome: match &connected {
            Ok(_) => Ok("credential exchanged, catalog configuration read".into()),
            Err(e) => Err(format!("{e}{}", catalog_hint(&e.to_string()))),
        },
    });
    let Ok(destination) = connected else {
        return steps;
    };
    let namespace = job.namespace_path();
    let table = format!("topicberg_check_{}", uuid::Uuid::new_v4().simple());
    let columns = [Column::optional("probe", 1, ColumnType::Long)];
    let format = iceberg_format(job.format_version);
    let created = destination
        .ensure_table(&namespace, &table, &columns, format)
        .await;
    steps.push(CheckStep {
        step: "create table",
        outcome: match &created {
            Ok(_) => Ok(format!("created {}.{table}", namespace.join("."))),
            Err(e) => Err(format!("{e}{}", create_hint(e.kind))),
        },
    });
    let Ok(handle) = created else {
        return steps;
    };
    steps.push(write_probe(&destination, &handle).await);
    steps.push(CheckStep {
        step: "drop table",
        outcome: match destination.drop_table(&namespace, &table, true).await {
            Ok(()) => Ok(format!("dropped {}.{table}", namespace.join("."))),
            Err(e) => Err(e.to_string()),
        },
    });
    steps
}

/// The likely fix of a failed catalog connection.
fn catalog_hint(text: &str) -> &'static str {
    if text.contains("401") || text.contains("Unauthorized") || text.contains("invalid_client") {
        " (wrong client id or secret)"
    } else if text.contains("403") {
        " (the principal lacks a privilege on the catalog)"
    } else if text.contains("404") {
        " (check uri and warehouse)"
    } else {
        ""
    }
}

/// The likely fix of a failed table creation.
fn create_hint(kind: IcebergErrorKind) -> &'static str {
    match kind {
        IcebergErrorKind::Catalog(CatalogErrorKind::Forbidden) => {
            " (grant the principal the right to create namespaces and tables, e.g. CATALOG_MANAGE_CONTENT on Polaris)"
        }
        IcebergErrorKind::Catalog(CatalogErrorKind::NotFound) => " (check the warehouse name)",
        _ => "",
    }
}

/// Writes one data file of one row into the throw-away table.
async fn write_probe(destination: &Destination, handle: &TableHandle) -> CheckStep {
    let batch = RecordBatch::try_new(
        Arc::clone(handle.arrow_schema()),
        vec![Arc::new(Int64Array::from(vec![1_i64]))],
    )
    .expect("one-column batch");
    CheckStep {
        step: "write file",
        outcome: match destination.write_data_files(handle, [batch]).await {
            Ok(files) => Ok(format!(
                "wrote {}",
                files.first().map(|f| f.file_path().to_string()).unwrap_or_default()
            )),
            Err(e) => Err(format!(
                "{e} (check s3_endpoint, s3_region, the S3 keys and that the bucket exists and is writable)"
            )),
        },
    }
}
