//! The web UI's forms, made from the job file's JSON Schema
//! ([`job_file_schema`]): every field of `[source]`, `[destination]`,
//! `[[streams]]`, `[sync]` and `[maintain]`, with its label, help, widget,
//! choices and what an empty input means, in the order and groups the
//! structs give. The scripts render these specs and hold no list of
//! fields (`GET /api/forms`).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use topicberg_core::config::job_file_schema;

/// One input of a form, as `forms.js` renders it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FieldSpec {
    /// The job file's name of the field (and the input id's suffix).
    pub key: String,
    /// What the user reads.
    pub label: String,
    /// One line under the input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
    /// `text`, `number`, `select`, `bool`, `secret`, `textarea` or `list`.
    #[serde(rename = "type")]
    pub widget: &'static str,
    /// A select's choices, `[value, text]`, the empty one first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<(String, String)>,
    /// What an empty input (or a select's empty choice) means.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unset: Option<String>,
    /// A select whose values are numbers.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub numeric: bool,
    /// The least number a number input takes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<i64>,
    /// A list's item separator, when not `,`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub separator: Option<String>,
    /// The value a new form starts with, when not the empty one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_default: Option<String>,
    /// A yes/no field's default, when it has one (the form shows a
    /// toggle); without one, a select whose empty choice says what unset
    /// means.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_on: Option<bool>,
    /// When the field applies (`x-when`): only while another field of the
    /// form holds one of some values; the form hides it otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub when: Option<When>,
}

/// The condition of a field that applies only with some values of
/// another field (the SASL user with a `SASL_*` protocol).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct When {
    /// The job file's name of the field that decides.
    pub key: String,
    /// Its values under which the field applies; `""` (the empty input)
    /// among them when the deciding field's default is.
    pub values: Vec<String>,
}

/// The fields of one heading of a form.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Group {
    /// The heading (`x-group`); empty for a table whose fields have none.
    pub title: String,
    /// Its fields, in the struct's order.
    pub fields: Vec<FieldSpec>,
}

/// One job-file table's form: its groups, and the fields the UI edits
/// elsewhere (`x-place`: `job`, the job form; `streams-table`, the
/// streams page's row), by place.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Form {
    /// The headings, in the order their first field comes.
    pub groups: Vec<Group>,
    /// Fields edited on another page, by place.
    pub placed: BTreeMap<String, Vec<FieldSpec>>,
}

/// Every form of the UI.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Forms {
    /// The top level of the job file (`name`, `target_engines`).
    pub job: Form,
    /// `[source]`.
    pub source: Form,
    /// `[destination]`.
    pub destination: Form,
    /// A `[[streams]]` entry.
    pub stream: Form,
    /// `[sync]`.
    pub sync: Form,
    /// `[maintain]`.
    pub maintain: Form,
}

/// The forms of the job file's schema.
pub fn forms() -> Forms {
    forms_of(&job_file_schema())
}

/// The forms of `schema` (a job file's schema as [`job_file_schema`]
/// makes it).
pub fn forms_of(schema: &Value) -> Forms {
    let table = |name: &str| {
        let field = &schema["properties"][name];
        let reference = field["$ref"]
            .as_str()
            .or(field["items"]["$ref"].as_str())
            .unwrap_or_default();
        form(schema, definition(schema, reference))
    };
    Forms {
        job: form(schema, schema),
        source: table("source"),
        destination: table("destination"),
        stream: table("streams"),
        sync: table("sync"),
        maintain: table("maintain"),
    }
}

/// The definition a `$ref` names.
fn definition<'a>(schema: &'a Value, reference: &str) -> &'a Value {
    &schema["$defs"][reference.trim_start_matches("#/$defs/")]
}

/// `value`, or the definition its `$ref` names.
fn resolve<'a>(schema: &'a Value, value: &'a Value) -> &'a Value {
    match value["$ref"].as_str() {
        Some(reference) => definition(schema, reference),
        None => value,
    }
}

/// The form of an object: its fields that are not tables themselves.
fn form(schema: &Value, object: &Value) -> Form {
    let mut groups: Vec<Group> = Vec::new();
    let mut placed: BTreeMap<String, Vec<FieldSpec>> = BTreeMap::new();
    let names = object["x-order"].as_array().cloned().unwrap_or_default();
    for name in names.iter().filter_map(Value::as_str) {
        let field = &object["properties"][name];
        let target = resolve(schema, field.get("items").unwrap_or(field));
        if target["type"] == "object" {
            continue;
        }
        let mut spec = field_spec(schema, name, field);
        spec.when = when(object, field);
        if let Some(place) = field["x-place"].as_str() {
            placed.entry(place.to_string()).or_default().push(spec);
            continue;
        }
        let title = field["x-group"].as_str().unwrap_or_default();
        match groups.iter_mut().find(|g| g.title == title) {
            Some(group) => group.fields.push(spec),
            None => groups.push(Group {
                title: title.to_string(),
                fields: vec![spec],
            }),
        }
    }
    Form { groups, placed }
}

/// The input of one field: its widget from its type (`writeOnly`: a
/// password; PEM text: a text area; an enum: a select; a boolean: a
/// yes/no/default select; an integer: a number; a list: comma-separated
/// text), its label and help from the field's extensions and doc.
fn field_spec(schema: &Value, key: &str, field: &Value) -> FieldSpec {
    let text = |name: &str| field[name].as_str().map(str::to_string);
    let choices = choices(schema, field.get("items").unwrap_or(field));
    let widget = if field["writeOnly"] == true {
        "secret"
    } else if field["x-widget"] == "pem" {
        "textarea"
    } else if field["type"] == "array" {
        "list"
    } else if !choices.is_empty() {
        "select"
    } else if field["type"] == "boolean" {
        "bool"
    } else if field["type"] == "integer" {
        "number"
    } else {
        "text"
    };
    let unset = unset_text(field, &choices);
    let options = match widget {
        "select" => std::iter::once((String::new(), unset.clone()))
            .chain(choices.iter().cloned())
            .collect(),
        // A list of names (target_engines): the names, for check boxes.
        "list" => choices.clone(),
        _ => Vec::new(),
    };
    FieldSpec {
        key: key.to_string(),
        label: text("x-label").unwrap_or_else(|| key.to_string()),
        help: text("x-help").or_else(|| text("description").map(|d| first_sentence(&d))),
        widget,
        options,
        // Selects show it as their empty choice, inputs as a placeholder.
        unset: (widget != "secret").then_some(unset),
        numeric: widget == "select" && field["type"] == "integer",
        min: field["minimum"].as_i64().filter(|_| widget == "number"),
        separator: text("x-separator"),
        new_default: field.get("x-new-default").map(plain),
        default_on: field["default"].as_bool().filter(|_| widget == "bool"),
        when: None,
    }
}

/// A field's `x-when` (`{"security_protocol": ["SSL", "SASL_SSL"]}`) of
/// `object`'s fields, with `""` added when the deciding field's default is
/// one of the values (an empty input means the default).
fn when(object: &Value, field: &Value) -> Option<When> {
    let (key, values) = field["x-when"].as_object()?.iter().next()?;
    let mut values: Vec<String> = values.as_array()?.iter().map(plain).collect();
    let default = object["properties"][key].get("default").map(plain);
    if default.is_some_and(|d| values.contains(&d)) {
        values.push(String::new());
    }
    Some(When {
        key: key.clone(),
        values,
    })
}

/// An enum's values and the texts of its choices (`x-label`, else the
/// value), aliases left out; empty when the field is no enum.
fn choices(schema: &Value, field: &Value) -> Vec<(String, String)> {
    let target = resolve(schema, field);
    let labelled = |v: &Value| (plain(v), plain(v));
    if let Some(values) = target["enum"].as_array() {
        return values.iter().map(labelled).collect();
    }
    if let Some(values) = target["anyOf"]
        .as_array()
        .and_then(|a| a[0]["enum"].as_array())
    {
        return values.iter().map(labelled).collect();
    }
    let variants = target["oneOf"].as_array().cloned().unwrap_or_default();
    variants
        .iter()
        .filter(|v| v["x-alias"] != true)
        .filter_map(|v| {
            let value = plain(v.get("const")?);
            let label = v["x-label"]
                .as_str()
                .map_or_else(|| value.clone(), str::to_string);
            Some((value, label))
        })
        .collect()
}

/// What leaving the field empty means: `(default: ...)` with the default
/// choice's text, `yes`/`no`, or the default in words; `(none)` without a
/// default.
fn unset_text(field: &Value, choices: &[(String, String)]) -> String {
    let words = match field.get("default") {
        Some(Value::Bool(true)) => Some("yes".to_string()),
        Some(Value::Bool(false)) => Some("no".to_string()),
        // An empty list or table: nothing, said as "(none)".
        Some(Value::Array(a)) if a.is_empty() => None,
        Some(Value::Object(o)) if o.is_empty() => None,
        Some(value) => {
            let value = plain(value);
            let label = choices
                .iter()
                .find(|(v, _)| *v == value)
                .map(|(_, l)| l.clone());
            Some(label.unwrap_or(value))
        }
        None => field["x-default"].as_str().map(|w| w.replace('`', "")),
    };
    match words {
        Some(words) => format!("(default: {words})"),
        None => "(none)".to_string(),
    }
}

/// A JSON value as the form sends it: strings unquoted.
fn plain(value: &Value) -> String {
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_string)
}

/// The first sentence of a description.
fn first_sentence(text: &str) -> String {
    match text.find(". ") {
        Some(end) => text[..=end].to_string(),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests;
