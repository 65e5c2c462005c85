//! The job file's reference page of the book, made from its JSON Schema
//! ([`job_file_schema`](super::job_file_schema)): one table per job-file
//! table, a row per field in the order the struct declares them, with its
//! type, default and meaning (the field's `///` doc).

use serde_json::Value;

/// The page: `intro` (hand-written prose that is not about one field),
/// then the top-level fields and a section per table.
pub fn job_file_reference(schema: &Value, intro: &str) -> String {
    let mut page = String::from(
        "<!-- Made from the job file's config structs (crates/core/src/config/): \
         edit their /// docs, or docs/templates/job-file-intro.md for the text \
         above the tables, then run \
         `TOPICBERG_WRITE_DOCS=1 cargo test -p topicberg-core --lib reference`. -->\n\n",
    );
    page.push_str(intro.trim_end());
    page.push_str("\n\n## Top level\n\n");
    page.push_str(&table(schema, schema));
    for name in order(schema) {
        let field = &schema["properties"][name.as_str()];
        let Some(definition) = object_definition(schema, field) else {
            continue;
        };
        page.push_str(&format!("\n## {}\n\n", heading(&name, field)));
        if let Some(text) = definition["description"].as_str() {
            page.push_str(text);
            page.push_str("\n\n");
        }
        page.push_str(&table(schema, definition));
    }
    page
}

/// A table's heading: `` `[source]`: the Kafka cluster ``.
fn heading(name: &str, field: &Value) -> String {
    let label = field["x-label"].as_str().unwrap_or_default();
    if field["type"] == "array" {
        format!("`[[{name}]]`: {label}")
    } else {
        format!("`[{name}]`: {label}")
    }
}

/// The anchor mdBook gives a table's heading: lower case, letters,
/// digits, `-` and `_` kept, spaces as `-`.
fn section_id(name: &str, field: &Value) -> String {
    heading(name, field)
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The object's fields in declaration order (`x-order`).
fn order(object: &Value) -> Vec<String> {
    object["x-order"]
        .as_array()
        .map(|names| {
            names
                .iter()
                .filter_map(|n| n.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The definition `$ref` (or an array's items' `$ref`) points to, when it
/// is an object: a job-file table.
fn object_definition<'a>(schema: &'a Value, field: &'a Value) -> Option<&'a Value> {
    let target = resolve(schema, field.get("items").unwrap_or(field));
    (target["type"] == "object").then_some(target)
}

/// `value`, or the definition its `$ref` names.
fn resolve<'a>(schema: &'a Value, value: &'a Value) -> &'a Value {
    match value["$ref"].as_str() {
        Some(path) => {
            let name = path.trim_start_matches("#/$defs/");
            &schema["$defs"][name]
        }
        None => value,
    }
}

/// The rows of `object`'s fields; a table field points to its section.
fn table(schema: &Value, object: &Value) -> String {
    let required: Vec<&str> = object["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = String::from("| field | type | default | meaning |\n|---|---|---|---|\n");
    for name in order(object) {
        let field = &object["properties"][name.as_str()];
        let is_required = required.contains(&name.as_str());
        let (kind, default, meaning) = match object_definition(schema, field) {
            Some(_) if field["type"] == "array" => (
                "list of tables".to_string(),
                "none".to_string(),
                format!(
                    "{} See [below](#{}).",
                    text(field),
                    section_id(&name, field)
                ),
            ),
            Some(_) => (
                "table".to_string(),
                if is_required {
                    "required"
                } else {
                    "every default"
                }
                .to_string(),
                format!(
                    "{} See [below](#{}).",
                    text(field),
                    section_id(&name, field)
                ),
            ),
            None => (
                kind_of(schema, field),
                default_of(field, is_required),
                meaning_of(schema, field),
            ),
        };
        out.push_str(&format!(
            "| `{name}` | {} | {} | {} |\n",
            cell(&kind),
            cell(&default),
            cell(&meaning)
        ));
    }
    out
}

fn text(field: &Value) -> &str {
    field["description"].as_str().unwrap_or_default()
}

/// The field's type in words.
fn kind_of(schema: &Value, field: &Value) -> String {
    if field["writeOnly"] == true {
        return "secret string".into();
    }
    if let Some(kind) = field["x-type"].as_str() {
        return kind.into();
    }
    if let Some(names) = choices(schema, field) {
        return names
            .iter()
            .map(|(name, _)| format!("`{name}`"))
            .collect::<Vec<_>>()
            .join(" | ");
    }
    match field["type"].as_str() {
        Some("integer") => match (field["minimum"].as_i64(), field["maximum"].as_i64()) {
            (Some(min), Some(max)) => format!("integer {min}..={max}"),
            (Some(min), None) => format!("integer >= {min}"),
            _ => "integer".into(),
        },
        Some("array") => "list of strings".into(),
        Some(other) => other.into(),
        None => "string".into(),
    }
}

/// The values of an enum field and their descriptions, aliases left out.
pub(crate) fn choices(schema: &Value, field: &Value) -> Option<Vec<(String, String)>> {
    let target = resolve(schema, field);
    if let Some(values) = target["enum"].as_array() {
        return Some(values.iter().map(|v| (plain(v), String::new())).collect());
    }
    let variants = target["oneOf"].as_array()?;
    Some(
        variants
            .iter()
            .filter(|v| v["x-alias"] != true)
            .filter_map(|v| Some((plain(v.get("const")?), text(v).to_string())))
            .collect(),
    )
}

/// A JSON value as written in the job file, strings unquoted.
fn plain(value: &Value) -> String {
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_string)
}

/// The default: in words (`x-default`) when the field has them, else its
/// value as the job file writes it.
fn default_of(field: &Value, required: bool) -> String {
    if let Some(words) = field["x-default"].as_str() {
        return words.into();
    }
    if let Some(value) = field.get("default") {
        return match value {
            Value::String(s) => format!("`\"{s}\"`"),
            other => format!("`{other}`"),
        };
    }
    if required { "required" } else { "none" }.into()
}

/// The description, the enum values' meanings and, for a list, what each
/// entry must look like.
fn meaning_of(schema: &Value, field: &Value) -> String {
    let mut meaning = text(field).to_string();
    if let Some(values) = choices(schema, field) {
        for (name, what) in values.iter().filter(|(_, what)| !what.is_empty()) {
            meaning.push_str(&format!(" `{name}`: {what}"));
        }
    }
    if field["type"] == "array" {
        let items = resolve(schema, &field["items"]);
        if let Some(what) = items["description"].as_str() {
            meaning.push_str(&format!(" Each entry: {what}"));
        }
    }
    meaning
}

/// Text fit for a Markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
        .replace("\n\n", "<br><br>")
        .replace('\n', " ")
}

/// Every field of every object of the schema, as `table.field` (`name`
/// for the top level), for tests that each appears where it must.
#[cfg(test)]
pub(crate) fn all_fields(schema: &Value) -> Vec<String> {
    let mut out: Vec<String> = order(schema);
    for name in order(schema) {
        let field = &schema["properties"][name.as_str()];
        if let Some(definition) = object_definition(schema, field) {
            out.extend(order(definition).into_iter().map(|f| format!("{name}.{f}")));
        }
    }
    out
}
