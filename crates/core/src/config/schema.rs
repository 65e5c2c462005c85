//! The job file's JSON Schema, derived from the config structs: their
//! `///` docs are the descriptions, the serde attributes the names,
//! defaults (from `defaults.rs`) and `additionalProperties: false`, and
//! `#[schemars(extend(...))]` on a field says what the service's forms
//! need beyond that (see [`job_file_schema`]). The job-file reference page
//! of the book and the service's forms are made from this schema.

use std::borrow::Cow;

use schemars::generate::SchemaSettings;
use schemars::Schema;
use serde::Deserialize;
use serde_json::Value;

use super::{EngineTarget, JobConfig, PartitionField, SortKey, TargetEngine};
use crate::registry::ValueFormat;

/// The JSON Schema (draft 2020-12) of a job file, as `docs/src/reference/
/// job-file.schema.json` holds it.
///
/// Besides the standard keywords each field may carry:
/// - `x-label`: the short name the forms show (`"Brokers"`);
/// - `x-help`: the forms' one-line help, when it differs from the
///   description's first sentence;
/// - `x-group`: the heading the field sits under in its form;
/// - `x-default`: the default in words, when it is not a fixed value
///   (`"topicberg_<name>"`);
/// - `x-type`: what the string is, in words (`"URL"`, `"duration"`);
/// - `x-widget`: `"pem"` for PEM text (a text area);
/// - `x-separator`: the separator the forms use for a list's items when
///   an item may hold a comma;
/// - `x-new-default`: the value a new form starts with, when it is not
///   the default;
/// - `x-place`: where the service edits the field when not in its table's
///   form (`"job"`: the job form; `"streams-table"`: the streams page's
///   row);
/// - `x-when`: `{"<field>": [values]}`: the field applies only while
///   another field of its table holds one of those values (the SASL user
///   with a `SASL_*` protocol); the forms hide it otherwise, unless it
///   holds a value.
///
/// Objects carry `x-order`, their fields in the order they are declared
/// (the order of the reference and the forms), and a secret is a string
/// marked `writeOnly`.
pub fn job_file_schema() -> Value {
    let generator = SchemaSettings::draft2020_12().into_generator();
    let mut schema = generator.into_root_schema_for::<JobConfig>().to_value();
    for_toml(&mut schema);
    schema
}

/// A TOML file has no null: an optional field is left out, so `null` goes
/// from the types, the `anyOf`s and the defaults. Descriptions lose the
/// line breaks of the doc comments (paragraphs stay).
fn for_toml(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Array(types)) = map.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let only = types.remove(0);
                    map.insert("type".into(), only);
                }
            }
            if let Some(Value::Array(choices)) = map.get("anyOf") {
                let not_null: Vec<&Value> = choices
                    .iter()
                    .filter(|c| c.get("type") != Some(&"null".into()))
                    .collect();
                if let ([Value::Object(only)], true) =
                    (&not_null[..], not_null.len() < choices.len())
                {
                    let only = only.clone();
                    map.remove("anyOf");
                    map.extend(only);
                }
            }
            if map.get("default") == Some(&Value::Null) {
                map.remove("default");
            }
            if let Some(Value::String(text)) = map.get_mut("description") {
                *text = unwrap_lines(text);
            }
            map.values_mut().for_each(for_toml);
        }
        Value::Array(items) => items.iter_mut().for_each(for_toml),
        _ => {}
    }
}

/// `text` with the line breaks inside each paragraph made spaces.
fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            paragraph
                .split('\n')
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Adds the lower-case names serde also accepts (`alias = "sasl_ssl"`) to
/// an enum of upper-case names, marked `x-alias` (the forms leave them out).
pub(super) fn lower_case_aliases(schema: &mut Schema) {
    let Some(Value::Array(variants)) = schema.get_mut("oneOf") else {
        return;
    };
    let aliases: Vec<Value> = variants
        .iter()
        .filter_map(|v| v.get("const").and_then(Value::as_str))
        .map(|name| serde_json::json!({ "const": name.to_ascii_lowercase(), "type": "string", "x-alias": true }))
        .collect();
    variants.extend(aliases);
}

/// Adds `x-order`: the struct's fields in the order it declares them.
pub(super) fn field_order<T: for<'de> Deserialize<'de>>(schema: &mut Schema) {
    let fields = super::unknown::fields_of::<T>();
    schema.insert("x-order".into(), fields.to_vec().into());
}

/// Takes out a default that the machine decides (the number of CPU cores):
/// `x-default` says it in words, so the schema is the same everywhere.
pub(super) fn no_fixed_default(schema: &mut Schema) {
    schema.remove("default");
}

/// The pattern of a duration (see [`parse_duration`](super::parse_duration)):
/// a whole number and a unit, `s`, `m`, `h` or `d`.
pub(super) const DURATION_PATTERN: &str = r"^\s*[0-9]+[smhd]\s*$";

/// A `target_engines` entry: an engine's name (any case), optionally with a
/// version requirement (`trino<480`, `duckdb>=1.5`, `trino=476`).
impl schemars::JsonSchema for EngineTarget {
    fn schema_name() -> Cow<'static, str> {
        "EngineTarget".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> Schema {
        let names: Vec<&str> = TargetEngine::ALL.iter().map(|e| e.as_str()).collect();
        schemars::json_schema!({
            "type": "string",
            "description": "An engine, optionally with the releases meant: `>=V`, `<V` or `=V` with V a release number such as 480 or 1.5.5.",
            "anyOf": [
                { "enum": names },
                { "pattern": r"^\s*[A-Za-z]+\s*((>=|==?|<)\s*[0-9]+(\.[0-9]+){0,2}\s*)?$" }
            ],
            "examples": ["trino", "trino<480", "clickhouse>=26.10"],
        })
    }
}

/// A stream's `value_format` or `key_format`.
impl schemars::JsonSchema for ValueFormat {
    fn schema_name() -> Cow<'static, str> {
        "ValueFormat".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> Schema {
        let names: Vec<&str> = ValueFormat::ALL.iter().map(|f| f.as_str()).collect();
        schemars::json_schema!({ "type": "string", "enum": names })
    }
}

/// A `partition_by` entry: an Iceberg transform of a column.
impl schemars::JsonSchema for PartitionField {
    fn schema_name() -> Cow<'static, str> {
        "PartitionField".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "An Iceberg transform of a column: identity(col), bucket(N, col), truncate(W, col), year(col), month(col), day(col) or hour(col).",
            "pattern": r"^\s*[A-Za-z]+\s*\(.+\)\s*$",
            "examples": ["day(_kafka_timestamp)", "bucket(16, id)"],
        })
    }
}

/// A `sort_by` entry: `column [asc|desc] [nulls first|nulls last]`.
impl schemars::JsonSchema for SortKey {
    fn schema_name() -> Cow<'static, str> {
        "SortKey".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A column, optionally followed by `asc` (the default) or `desc` and by `nulls first` or `nulls last`.",
            "pattern": r"^\s*\S+(\s+([Aa][Ss][Cc]|[Dd][Ee][Ss][Cc]))?(\s+[Nn][Uu][Ll][Ll][Ss]\s+([Ff][Ii][Rr][Ss][Tt]|[Ll][Aa][Ss][Tt]))?\s*$",
            "examples": ["id", "created_at desc", "region asc nulls last"],
        })
    }
}
