//! `check`'s schema registry steps: `GET /subjects` (reachable, the
//! credentials taken), then per selected topic the format its values will
//! be read with and the latest schema of its `<topic>-value` (and
//! `<topic>-key`) subject.

use topicberg_core::config::key_subject;
use topicberg_core::{Job, RegistryError, TableSettings, ValueFormat};
use topicberg_kafka::RegistryClient;

use super::{CheckFailure, CheckStep};
use crate::registry::{
    connect_registry, decide_value_format, format_of_kind, FormatChoice, FormatReason,
};

/// The registry steps; none when the job names no registry and no stream
/// needs one. `topics`: the selected topics, when Kafka listed them.
pub(super) async fn check_registry(job: &Job, topics: Option<&[String]>) -> Vec<CheckStep> {
    let tables: Vec<TableSettings> = topics
        .unwrap_or_default()
        .iter()
        .map(|t| job.table_for(t))
        .collect();
    let client = match connect_registry(job) {
        Ok(Some(client)) => client,
        Ok(None) => return missing_registry(&tables),
        Err(e) => {
            return vec![CheckStep::new(
                "registry",
                Err(CheckFailure::Registry { source: e }),
            )]
        }
    };
    match client.subjects().await {
        Ok(subjects) => {
            let text = format!("{} answered: {} subject(s)", client.url(), subjects.len());
            let mut steps = vec![CheckStep::new("registry", Ok(text))];
            for table in &tables {
                steps.push(stream_format(&client, table).await);
            }
            steps
        }
        Err(e) => vec![CheckStep::new(
            "registry",
            Err(CheckFailure::Registry { source: e }),
        )],
    }
}

/// Without a registry: a failed step per stream that needs one (the job
/// file's validation refuses those; a job built in code may not).
fn missing_registry(tables: &[TableSettings]) -> Vec<CheckStep> {
    tables
        .iter()
        .filter_map(|t| {
            let format = [t.value_format, Some(t.key_format)]
                .into_iter()
                .flatten()
                .find(|f| f.uses_registry())?;
            Some(CheckStep::new(
                "registry",
                Err(CheckFailure::NoRegistry {
                    topic: t.topic.clone(),
                    format,
                }),
            ))
        })
        .collect()
}

/// One stream: the format its values are read with and why, its key
/// subject if any; a registry format whose subject is missing or of
/// another kind is a warning.
async fn stream_format(client: &RegistryClient, table: &TableSettings) -> CheckStep {
    let topic = &table.topic;
    let failed = |source| {
        let topic = topic.clone();
        CheckStep::new("format", Err(CheckFailure::Format { topic, source }))
    };
    let choice = match decide_value_format(Some(client), table).await {
        Ok(choice) => choice,
        Err(e) => return failed(e),
    };
    let mut warnings = Vec::new();
    let mut reason = choice.reason.to_string();
    if choice.reason == FormatReason::Configured {
        match explicit_format_subject(client, table, &choice).await {
            Ok((text, warning)) => {
                reason = text;
                warnings.extend(warning);
            }
            Err(e) => return failed(e),
        }
    }
    let keys = match client.latest_version_if_any(&key_subject(topic)).await {
        Ok(Some(v)) => format!(
            "keys {} (subject {} version {} is {}, schema id {})",
            table.key_format,
            v.subject,
            v.version,
            v.kind.as_str(),
            v.id
        ),
        Ok(None) => format!("keys {}", table.key_format),
        Err(e) => return failed(e),
    };
    let text = format!("{topic}: values {} ({reason}), {keys}", choice.format);
    CheckStep {
        step: "format",
        outcome: Ok(text),
        warnings,
    }
}

/// For a format set in the job: what its `<topic>-value` subject holds,
/// and a warning when an Avro / Protobuf stream has no such subject or one
/// of another kind.
async fn explicit_format_subject(
    client: &RegistryClient,
    table: &TableSettings,
    choice: &FormatChoice,
) -> Result<(String, Option<String>), RegistryError> {
    let subject = topicberg_core::config::value_subject(&table.topic);
    let latest = client.latest_version_if_any(&subject).await?;
    let (topic, format) = (&table.topic, choice.format);
    let framed = matches!(format, ValueFormat::Avro | ValueFormat::Protobuf);
    Ok(match latest {
        Some(v) => {
            let text = format!(
                "set in the job; subject {} version {} is {} (schema id {})",
                v.subject,
                v.version,
                v.kind.as_str(),
                v.id
            );
            let implied = format_of_kind(v.kind);
            let warning = (framed && implied != format).then(|| {
                format!(
                    "{topic}: value_format = \"{format}\" but subject {subject} holds {} \
                     schemas; set value_format = \"{implied}\", or \"auto\" to read each \
                     message by its schema's kind",
                    v.kind.as_str()
                )
            });
            (text, warning)
        }
        None if framed => (
            format!("set in the job; no subject {subject}"),
            Some(format!(
                "{topic}: value_format = \"{format}\" but the registry has no subject \
                 {subject}; fine if the producers register under another subject name \
                 strategy (RecordNameStrategy, TopicRecordNameStrategy), otherwise check the \
                 topic name"
            )),
        ),
        None => ("set in the job".to_string(), None),
    })
}
