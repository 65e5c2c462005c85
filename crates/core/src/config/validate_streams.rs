//! The checks of a job file's `[[streams]]` entries: topic and table,
//! mode and dedup keys, delete format, formats, partition and sort
//! fields, columns. Each problem names its field and says how to fix it.

use std::collections::{BTreeSet, HashMap};

use regex::Regex;

use crate::columns::{KAFKA_KEY, METADATA_COLUMNS};

use super::{
    control_character, is_identifier, resolve_delete_format, ChangeEvents, ConfigProblem,
    EngineTarget, JobConfig, StreamConfig, StreamMode,
};
use crate::registry::ValueFormat;

fn push(out: &mut Vec<ConfigProblem>, field: impl Into<String>, message: impl Into<String>) {
    out.push(ConfigProblem::new(field, message));
}

/// What the checks of the `[[streams]]` entries share: the topics and
/// tables of the entries before, and whether the engines' delete-format
/// problem was reported.
struct StreamsSeen<'a> {
    pattern: Option<Regex>,
    topics: HashMap<&'a str, usize>,
    tables: HashMap<String, usize>,
    /// `destination.format_version` when 2 or 3 (another value is reported
    /// by the destination's checks already).
    explicit_version: Option<u8>,
    engines: Vec<EngineTarget>,
    engines_reported: bool,
}

pub(super) fn streams(config: &JobConfig, out: &mut Vec<ConfigProblem>) {
    let mut seen = StreamsSeen {
        pattern: config
            .source
            .topic_pattern
            .as_deref()
            .and_then(|p| Regex::new(p).ok()),
        topics: HashMap::new(),
        tables: HashMap::new(),
        explicit_version: config
            .destination
            .format_version
            .filter(|v| *v == 2 || *v == 3),
        engines: config.engines(),
        engines_reported: false,
    };
    for (i, s) in config.streams.iter().enumerate() {
        let at = |field: &str| format!("streams[{i}].{field}");
        stream_topic(&mut seen, i, s, &at, out);
        stream_table(config, &mut seen, i, s, &at, out);
        match s.mode {
            StreamMode::Upsert => upsert_stream(&mut seen, s, &at, out),
            StreamMode::Append => append_stream(s, &at, out),
        }
        stream_formats(config, s, &at, out);
        change_events(s, &at, out);
        order_by(s, &at, out);
        if let Err(problems) = super::parse_partition_by(&s.partition_by, s.columns.as_deref()) {
            for problem in problems {
                push(out, at("partition_by"), problem);
            }
        }
        if let Err(problems) = super::parse_sort_by(&s.sort_by, s.columns.as_deref()) {
            for problem in problems {
                push(out, at("sort_by"), problem);
            }
        }
        stream_columns(s, &at, out);
    }
}

/// A stream's topic: named, one entry per topic, matched by
/// `topic_pattern`.
fn stream_topic<'a>(
    seen: &mut StreamsSeen<'a>,
    i: usize,
    s: &'a StreamConfig,
    at: &dyn Fn(&str) -> String,
    out: &mut Vec<ConfigProblem>,
) {
    let topic = s.topic.as_str();
    if topic.is_empty() {
        push(
            out,
            at("topic"),
            "is empty; name the topic this entry configures",
        );
    }
    if let Some(why) = control_character(topic) {
        // The other checks would echo the name.
        return push(out, at("topic"), why);
    }
    if let Some(first) = seen.topics.insert(topic, i) {
        push(
            out,
            at("topic"),
            format!("\"{topic}\" already has an entry (streams[{first}]); merge the two entries into one"),
        );
    }
    if let Some(regex) = &seen.pattern {
        if !topic.is_empty() && !regex.is_match(topic) {
            push(
                out,
                at("topic"),
                format!("\"{topic}\" does not match topic_pattern, so this entry would never be used; widen the pattern or remove the entry"),
            );
        }
    }
}

/// A stream's table: an identifier, written by no other topic.
fn stream_table(
    config: &JobConfig,
    seen: &mut StreamsSeen<'_>,
    i: usize,
    s: &StreamConfig,
    at: &dyn Fn(&str) -> String,
    out: &mut Vec<ConfigProblem>,
) {
    let table = s
        .table
        .clone()
        .unwrap_or_else(|| super::sanitize_identifier(&s.topic));
    if let Some(t) = &s.table {
        match crate::route::RouteTemplate::parse(t) {
            Err(e) => return push(out, at("table"), e.to_string()),
            Ok(Some(route)) => return routed_stream(&route, s, at, out),
            Ok(None) => {}
        }
        if !is_identifier(t) {
            push(
                out,
                at("table"),
                format!(
                    "\"{t}\" must be lower-case letters, digits and underscores; e.g. \"{}\"",
                    super::sanitize_identifier(t)
                ),
            );
        }
    }
    if let Some(first) = seen.tables.insert(table.clone(), i) {
        // Two entries that both name the table write it together when
        // their settings agree (checked with the job: shared_table.rs).
        let both_named = s.table.is_some() && config.streams[first].table.is_some();
        if config.streams[first].topic != s.topic && !both_named {
            push(
                out,
                at("table"),
                format!("table \"{table}\" is also written by streams[{first}] (topic \"{}\"); set a distinct table = \"...\"", config.streams[first].topic),
            );
        }
    }
}

/// A stream whose `table` is a template: what routing reads must be there.
fn routed_stream(
    route: &crate::route::RouteTemplate,
    s: &StreamConfig,
    at: &dyn Fn(&str) -> String,
    out: &mut Vec<ConfigProblem>,
) {
    let json = matches!(s.value_format, None | Some(ValueFormat::Json));
    if route.reads_value() && !json {
        push(
            out,
            at("table"),
            format!(
                "{route:?} names tables by fields of the value, which are read from JSON values \
                 only; use {{topic}} and {{header:NAME}} placeholders, or value_format = \"json\"",
                route = route.text()
            ),
        );
    }
}

/// An upsert stream: its dedup keys, and a delete format every target
/// engine reads.
fn upsert_stream(
    seen: &mut StreamsSeen<'_>,
    s: &StreamConfig,
    at: &dyn Fn(&str) -> String,
    out: &mut Vec<ConfigProblem>,
) {
    let topic = s.topic.as_str();
    if s.dedup_keys.is_empty() && s.change_events == ChangeEvents::None {
        push(
            out,
            at("dedup_keys"),
            format!("upsert stream \"{topic}\" needs dedup_keys: the payload field(s) that identify a row, e.g. dedup_keys = [\"id\"], or [\"_kafka_key\"] to key on the message key"),
        );
    }
    dedup_keys(s, at, out);
    // The delete format and format version, from target_engines
    // (engines.rs): an explicit delete_format is checked per stream;
    // without one the answer depends on target_engines and format_version
    // only, so it is reported once.
    if let Err(message) =
        resolve_delete_format(&seen.engines, s.delete_format, seen.explicit_version)
    {
        if s.delete_format.is_some() {
            push(out, at("delete_format"), message.to_string());
        } else if !seen.engines_reported {
            seen.engines_reported = true;
            push(
                out,
                "target_engines",
                format!("{message} (upsert stream \"{topic}\")"),
            );
        }
    }
}

/// `order_by`: an upsert stream's payload field, not with change events
/// (ordered by the source's log position).
fn order_by(s: &StreamConfig, at: &dyn Fn(&str) -> String, out: &mut Vec<ConfigProblem>) {
    let Some(field) = &s.order_by else {
        return;
    };
    let problem = if s.mode != StreamMode::Upsert {
        Some(
            "orders the messages of an upsert table's key: set mode = \"upsert\", or remove it"
                .to_owned(),
        )
    } else if s.change_events != ChangeEvents::None {
        Some(
            "change events are ordered by the source's log position (_cdc_lsn): remove order_by"
                .to_owned(),
        )
    } else if field.is_empty() {
        Some("is empty; name a payload field, or remove it".to_owned())
    } else if crate::columns::metadata_column_type(field).is_some() {
        Some(format!(
            "\"{field}\" is a metadata column; name a payload field (a version or an event time)"
        ))
    } else if s.columns.as_ref().is_some_and(|c| !c.contains(field)) {
        Some(format!("\"{field}\" is not in columns; add it there"))
    } else {
        None
    };
    if let Some(problem) = problem {
        push(
            out,
            at("order_by"),
            format!("{problem} (on \"{}\")", s.topic),
        );
    }
}

/// A stream of change events: JSON or Avro values.
fn change_events(s: &StreamConfig, at: &dyn Fn(&str) -> String, out: &mut Vec<ConfigProblem>) {
    if s.change_events == ChangeEvents::None {
        if s.on_truncate != super::OnTruncate::default() {
            push(
                out,
                at("on_truncate"),
                format!("applies to streams of change events only: remove it from \"{}\", or set change_events = \"debezium\"", s.topic),
            );
        }
        if s.soft_deletes {
            push(
                out,
                at("soft_deletes"),
                format!("applies to streams of change events only: remove it from \"{}\", or set change_events = \"debezium\"", s.topic),
            );
        }
        return;
    }
    if s.mode != StreamMode::Upsert && s.soft_deletes {
        push(
            out,
            at("soft_deletes"),
            format!("an append of change events keeps every event, deletes included (marked _cdc_op = \"d\"): remove soft_deletes from \"{}\"", s.topic),
        );
    }
    if let Some(format) = s.value_format.filter(|f| *f == ValueFormat::Protobuf) {
        push(
            out,
            at("value_format"),
            format!("change events are read as JSON or Avro; {format} values are not supported yet: remove value_format on \"{}\" or set it to \"json\" or \"avro\"", s.topic),
        );
    }
}

/// An append stream sets no upsert-only field.
fn append_stream(s: &StreamConfig, at: &dyn Fn(&str) -> String, out: &mut Vec<ConfigProblem>) {
    for (field, is_set) in [
        ("dedup_keys", !s.dedup_keys.is_empty()),
        ("delete_format", s.delete_format.is_some()),
    ] {
        if is_set {
            push(
                out,
                at(field),
                format!("only applies to upsert streams; set mode = \"upsert\" on \"{}\" or remove {field}", s.topic),
            );
        }
    }
}

/// A stream's `columns`: not empty, no blank, metadata or repeated name.
fn stream_columns(s: &StreamConfig, at: &dyn Fn(&str) -> String, out: &mut Vec<ConfigProblem>) {
    let Some(columns) = &s.columns else {
        return;
    };
    let mut seen = BTreeSet::new();
    for c in columns {
        if c.is_empty() {
            push(out, at("columns"), "holds an empty name; remove it");
        } else if is_metadata_column(c) {
            push(
                out,
                at("columns"),
                format!("\"{c}\" is a metadata column, always present; remove it from columns"),
            );
        } else if !seen.insert(c.as_str()) {
            push(
                out,
                at("columns"),
                format!("\"{c}\" is listed twice; remove one"),
            );
        }
    }
    if columns.is_empty() {
        push(out, at("columns"), "is empty, so no payload field would be kept; list the fields, or remove columns to keep all");
    }
}

/// Upsert keys: payload fields and/or `_kafka_key` (a composite key may mix
/// them); no other metadata column, no blanks, no repeats, and kept by
/// `columns` when that is set.
fn dedup_keys(s: &StreamConfig, at: &dyn Fn(&str) -> String, out: &mut Vec<ConfigProblem>) {
    let mut seen = BTreeSet::new();
    for key in &s.dedup_keys {
        if key.is_empty() {
            push(out, at("dedup_keys"), "holds an empty name; remove it");
        } else if key != KAFKA_KEY && is_metadata_column(key) {
            push(
                out,
                at("dedup_keys"),
                format!("\"{key}\" is a metadata column; only \"{KAFKA_KEY}\" and payload fields can be dedup keys"),
            );
        } else if !seen.insert(key.as_str()) {
            push(
                out,
                at("dedup_keys"),
                format!("\"{key}\" is listed twice; remove one"),
            );
        } else if let Some(columns) = &s.columns {
            let in_key = key.starts_with(crate::decode::KEY_FIELD_PREFIX);
            if key != KAFKA_KEY && !in_key && !columns.contains(key) {
                push(
                    out,
                    at("dedup_keys"),
                    format!("\"{key}\" is not among columns; add it to columns so the key is in the table"),
                );
            }
        }
    }
}

/// A stream's `value_format` / `key_format` that needs a registry the
/// source lacks.
fn stream_formats(
    config: &JobConfig,
    s: &StreamConfig,
    at: &dyn Fn(&str) -> String,
    out: &mut Vec<ConfigProblem>,
) {
    if config.source.schema_registry_url.is_some() {
        return;
    }
    for (field, format) in [
        ("value_format", s.value_format),
        ("key_format", s.key_format),
    ] {
        if let Some(format) = format.filter(|f| f.uses_registry()) {
            push(
                out,
                at(field),
                format!(
                    "is \"{format}\", which reads schema-registry framed messages, but \
                     [source] has no schema_registry_url; set source.schema_registry_url = \
                     \"http://host:8081\", or {field} = \"json\""
                ),
            );
        }
    }
}

/// Whether `name` is one of the metadata columns every table carries.
fn is_metadata_column(name: &str) -> bool {
    METADATA_COLUMNS
        .iter()
        .any(|(metadata, _)| *metadata == name)
}
