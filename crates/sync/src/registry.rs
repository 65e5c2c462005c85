//! The job's schema registry, connected once per command, and the value
//! format of each table decided once at the start (`sync`, `check` and
//! `discover` ask the same functions, so they agree).
//!
//! A table's `value_format` is the stream's when it sets one; unset, the
//! latest version of the registry's `<topic>-value` subject decides: Avro
//! -> `avro`, Protobuf -> `protobuf`, JSON Schema -> `auto` (its messages
//! are framed: `auto` reads the framing, then plain JSON); no such subject,
//! or no registry, -> `json`. Keys need no registry lookup: the job
//! resolved `key_format` already (`auto` with a registry).

use std::fmt;
use std::sync::Arc;

use tokio::runtime::Handle;
use topicberg_core::config::{value_format_without_schema, value_subject};
use topicberg_core::{
    Job, RegistryError, RegistryErrorKind, SchemaKind, SchemaSource, TableSettings, ValueFormat,
};
use topicberg_kafka::{RegistryClient, SubjectVersion};

/// The job's registry client, when the job names a registry. Call from
/// inside a tokio runtime (a task or a blocking thread of one): the
/// client's blocking calls ([`SchemaSource::schema_by_id`], from drain
/// threads) run on that runtime.
pub fn connect_registry(job: &Job) -> Result<Option<Arc<RegistryClient>>, RegistryError> {
    let Some(settings) = &job.registry else {
        return Ok(None);
    };
    let runtime = Handle::try_current().map_err(|e| RegistryError {
        kind: RegistryErrorKind::Invalid,
        registry: topicberg_core::redact_urls(&settings.url),
        what: "connecting".into(),
        message: format!("the registry client needs a tokio runtime: {e}"),
    })?;
    RegistryClient::new(settings, runtime).map(|client| Some(Arc::new(client)))
}

/// The client as the decoder asks it: schemas by id, cached.
pub fn schema_source(client: &Arc<RegistryClient>) -> Arc<dyn SchemaSource> {
    Arc::clone(client) as Arc<dyn SchemaSource>
}

/// A table's value format and why it is that one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatChoice {
    /// The format the table's values are read with.
    pub format: ValueFormat,
    /// Where it comes from.
    pub reason: FormatReason,
}

/// Where a table's value format comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatReason {
    /// `value_format` in its `[[streams]]` entry (or `json` without a
    /// registry).
    Configured,
    /// The latest version of its `<topic>-value` subject.
    Subject(SubjectVersion),
    /// The registry has no `<topic>-value` subject (named here).
    NoSubject(String),
}

impl fmt::Display for FormatReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Configured => f.write_str("set in the job"),
            Self::Subject(v) => write!(
                f,
                "subject {} version {} is {} (schema id {})",
                v.subject,
                v.version,
                v.kind.as_str(),
                v.id
            ),
            Self::NoSubject(subject) => write!(f, "no subject {subject} in the registry"),
        }
    }
}

/// The value format a subject's latest schema kind implies.
pub fn format_of_kind(kind: SchemaKind) -> ValueFormat {
    match kind {
        SchemaKind::Avro => ValueFormat::Avro,
        SchemaKind::Protobuf => ValueFormat::Protobuf,
        // JSON Schema messages are framed: `auto` strips the framing.
        SchemaKind::Json => ValueFormat::Auto,
    }
}

/// `table`'s value format when there is no registry to ask: its own (the
/// Job resolves an unset one to `json` without a registry).
pub fn format_without_registry(table: &TableSettings) -> FormatChoice {
    FormatChoice {
        format: table
            .value_format
            .unwrap_or_else(value_format_without_schema),
        reason: FormatReason::Configured,
    }
}

/// `table`'s value format: its own, or (unset, with a registry) its
/// `<topic>-value` subject's. Fails when the registry cannot say (down,
/// credentials refused); a missing subject is `json`.
pub async fn decide_value_format(
    client: Option<&RegistryClient>,
    table: &TableSettings,
) -> Result<FormatChoice, RegistryError> {
    let (Some(client), None) = (client, table.value_format) else {
        return Ok(format_without_registry(table));
    };
    let subject = value_subject(&table.topic);
    Ok(match client.latest_version_if_any(&subject).await? {
        Some(version) => FormatChoice {
            format: format_of_kind(version.kind),
            reason: FormatReason::Subject(version),
        },
        None => FormatChoice {
            format: value_format_without_schema(),
            reason: FormatReason::NoSubject(subject),
        },
    })
}

/// [`decide_value_format`] for every table, in order; the first registry
/// failure fails them all (it would fail each table the same way). Logs
/// each decision.
pub async fn value_formats(
    client: Option<&RegistryClient>,
    tables: &[TableSettings],
) -> Result<Vec<ValueFormat>, RegistryError> {
    let mut formats = Vec::with_capacity(tables.len());
    for table in tables {
        let choice = decide_value_format(client, table).await?;
        tracing::info!(
            topic = %table.topic, value_format = choice.format.as_str(),
            key_format = table.key_format.as_str(), reason = %choice.reason,
            "stream format"
        );
        formats.push(choice.format);
    }
    Ok(formats)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(extra_source: &str, streams: &str) -> Job {
        let text = format!(
            "name = \"j\"\n[source]\nbootstrap_servers = \"k:9092\"\ntopic_pattern = \".*\"\n\
             {extra_source}\n{streams}"
        );
        let config = topicberg_core::JobConfig::from_toml_str(&text, |_| None).unwrap();
        Job::resolve(&config).unwrap()
    }

    #[tokio::test]
    async fn without_a_registry_every_format_is_decided_by_the_job() {
        let job = job("", "[[streams]]\ntopic = \"a\"\nvalue_format = \"json\"\n");
        assert!(connect_registry(&job).unwrap().is_none());
        let tables = [job.table_for("a"), job.table_for("b")];
        let formats = value_formats(None, &tables).await.unwrap();
        assert_eq!(formats, [ValueFormat::Json, ValueFormat::Json]);
    }

    #[tokio::test]
    async fn an_explicit_format_never_asks_the_registry() {
        // Nothing listens on port 9: asking would fail.
        let job = job(
            "schema_registry_url = \"http://127.0.0.1:9\"",
            "[[streams]]\ntopic = \"a\"\nvalue_format = \"protobuf\"\n",
        );
        let client = connect_registry(&job).unwrap().unwrap();
        let choice = decide_value_format(Some(&client), &job.table_for("a"))
            .await
            .unwrap();
        assert_eq!(choice.format, ValueFormat::Protobuf);
        assert_eq!(choice.reason, FormatReason::Configured);
        assert_eq!(job.table_for("a").key_format, ValueFormat::Auto);
    }

    #[test]
    fn subject_kinds_map_to_formats() {
        assert_eq!(format_of_kind(SchemaKind::Avro), ValueFormat::Avro);
        assert_eq!(format_of_kind(SchemaKind::Protobuf), ValueFormat::Protobuf);
        assert_eq!(format_of_kind(SchemaKind::Json), ValueFormat::Auto);
        let reason = FormatReason::Subject(SubjectVersion {
            subject: "o-value".into(),
            version: 2,
            id: 9,
            kind: SchemaKind::Avro,
        });
        assert_eq!(
            reason.to_string(),
            "subject o-value version 2 is AVRO (schema id 9)"
        );
    }
}
