//! The job file's schema against what it is made from: the committed
//! reference page and schema file are what the structs make (the drift
//! check), every field is documented and labelled, and where the schema
//! states a constraint (enum values, a minimum, a pattern) the parser and
//! the validation accept exactly that.

use std::path::PathBuf;

use serde_json::Value;

use crate::config::reference::{all_fields, choices};
use crate::config::{job_file_reference, job_file_schema, EngineTarget, JobConfig};
use crate::registry::ValueFormat;

/// `docs/` of the repository.
fn docs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs")
}

/// The files the schema makes, and their text.
fn generated() -> Vec<(PathBuf, String)> {
    let schema = job_file_schema();
    let intro = std::fs::read_to_string(docs().join("templates/job-file-intro.md"))
        .expect("docs/templates/job-file-intro.md");
    let reference = docs().join("src/reference");
    vec![
        (
            reference.join("job-file.md"),
            job_file_reference(&schema, &intro),
        ),
        (
            reference.join("job-file.schema.json"),
            serde_json::to_string_pretty(&schema).unwrap() + "\n",
        ),
    ]
}

/// The drift check. `TOPICBERG_WRITE_DOCS=1` writes the files instead.
#[test]
fn reference_page_and_schema_file_are_what_the_structs_make() {
    let write = std::env::var_os("TOPICBERG_WRITE_DOCS").is_some();
    for (path, text) in generated() {
        if write {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == text,
            "{} is not what the job file's structs make; run \
             `TOPICBERG_WRITE_DOCS=1 cargo test -p topicberg-core --lib reference` \
             and commit the result",
            path.display()
        );
    }
}

fn schema() -> Value {
    job_file_schema()
}

/// The schema of `table.field` (or a top-level `field`).
fn field<'a>(schema: &'a Value, path: &str) -> &'a Value {
    match path.split_once('.') {
        None => &schema["properties"][path],
        Some((table, name)) => {
            let top = &schema["properties"][table];
            let reference = top["$ref"]
                .as_str()
                .or(top["items"]["$ref"].as_str())
                .unwrap();
            let definition = reference.trim_start_matches("#/$defs/");
            &schema["$defs"][definition]["properties"][name]
        }
    }
}

#[test]
fn every_field_appears_in_the_reference_page_under_its_table() {
    let schema = schema();
    let page = job_file_reference(&schema, "intro");
    let fields = all_fields(&schema);
    assert!(fields.len() > 60, "{fields:?}");
    for path in fields {
        let (table, name) = path.split_once('.').unwrap_or(("", &path));
        let section = if table.is_empty() {
            page.split("\n## `[").next().unwrap().to_string()
        } else {
            let start = page
                .find(&format!("## `[{table}]`"))
                .or_else(|| page.find(&format!("## `[[{table}]]`")))
                .unwrap_or_else(|| panic!("no section for [{table}]"));
            page[start..].split("\n## ").next().unwrap().to_string()
        };
        assert!(
            section.contains(&format!("| `{name}` |")),
            "{path} is not in its table of the reference page"
        );
    }
}

#[test]
fn every_field_has_a_description_and_a_label() {
    let schema = schema();
    for path in all_fields(&schema) {
        let f = field(&schema, &path);
        let description = f["description"].as_str().unwrap_or_default();
        assert!(description.len() > 10, "{path} has no /// doc: {f}");
        assert!(
            !description.contains("](super::") && !description.contains("](crate::"),
            "{path}'s doc links to code, which users do not see: {description}"
        );
        assert!(f["x-label"].is_string(), "{path} has no x-label: {f}");
    }
}

#[test]
fn the_schema_is_the_same_on_every_machine() {
    // max_threads' default is the number of CPU cores: said in words only.
    let schema = schema();
    let threads = field(&schema, "source.max_threads");
    assert!(threads.get("default").is_none(), "{threads}");
    assert!(threads["x-default"].is_string());
}

#[test]
fn secrets_are_write_only_in_the_schema() {
    let schema = schema();
    let mut write_only: Vec<String> = all_fields(&schema)
        .into_iter()
        .filter(|path| field(&schema, path)["writeOnly"] == true)
        .map(|path| path.rsplit('.').next().unwrap().to_string())
        .collect();
    let mut secrets: Vec<String> = crate::secret::SECRET_FIELDS
        .iter()
        .map(|s| s.to_string())
        .collect();
    write_only.sort();
    secrets.sort();
    assert_eq!(write_only, secrets);
}

/// A valid job file with `line` added to `[table]` (`streams`: the one
/// `[[streams]]` entry).
fn job_with(table: &str, line: &str) -> String {
    let mut text = String::from(
        "name = \"j\"\n[source]\nbootstrap_servers = \"k:9092\"\ntopic_pattern = \"t\"\n",
    );
    match table {
        "source" => {}
        "streams" => text.push_str("[[streams]]\ntopic = \"t\"\n"),
        other => text.push_str(&format!("[{other}]\n")),
    }
    text + line + "\n"
}

/// The problems of [`job_with`] on `path`.
fn problems_on(table: &str, line: &str, path: &str) -> Vec<String> {
    match JobConfig::from_toml_str(&job_with(table, line), |_| None) {
        Ok(_) => Vec::new(),
        Err(e) => e
            .problems()
            .iter()
            .filter(|p| p.field == path)
            .map(ToString::to_string)
            .collect(),
    }
}

#[test]
fn every_minimum_and_maximum_in_the_schema_is_what_validation_accepts() {
    let schema = schema();
    let mut checked = 0;
    for path in all_fields(&schema) {
        let f = field(&schema, &path);
        let Some((table, name)) = path.split_once('.') else {
            continue;
        };
        if f["type"] != "integer" || f.get("enum").is_some() {
            continue;
        }
        if let Some(min) = f["minimum"].as_i64() {
            let ok = problems_on(table, &format!("{name} = {min}"), &path);
            assert!(
                ok.is_empty(),
                "{path} = {min} (the schema's minimum): {ok:?}"
            );
            if min > 0 {
                let below = problems_on(table, &format!("{name} = {}", min - 1), &path);
                assert!(!below.is_empty(), "{path} = {} passed validation", min - 1);
            }
            checked += 1;
        }
        if let Some(max) = f["maximum"].as_i64().filter(|m| *m < 1_000_000) {
            assert!(problems_on(table, &format!("{name} = {max}"), &path).is_empty());
            let above = problems_on(table, &format!("{name} = {}", max + 1), &path);
            assert!(!above.is_empty(), "{path} = {} passed validation", max + 1);
        }
    }
    assert!(checked >= 9, "{checked} minimums checked");
}

#[test]
fn the_format_versions_in_the_schema_are_the_ones_validation_accepts() {
    let schema = schema();
    let f = field(&schema, "destination.format_version");
    let versions: Vec<i64> = f["enum"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_i64)
        .collect();
    assert_eq!(versions, [2, 3]);
    for v in 0..=5 {
        let problems = problems_on(
            "destination",
            &format!("format_version = {v}"),
            "destination.format_version",
        );
        assert_eq!(
            problems.is_empty(),
            versions.contains(&v),
            "format_version = {v}: {problems:?}"
        );
    }
}

/// Whether [`job_with`] parses (a value that is not one of an enum's is
/// a parse error, reported alone; validation problems may follow).
fn parses(table: &str, line: &str) -> bool {
    match JobConfig::from_toml_str(&job_with(table, line), |_| None) {
        Ok(_) => true,
        Err(e) => !e.problems().is_empty(),
    }
}

#[test]
fn every_enum_value_in_the_schema_parses_and_others_do_not() {
    let schema = schema();
    let mut checked = 0;
    for path in all_fields(&schema) {
        let Some((table, name)) = path.split_once('.') else {
            continue;
        };
        let f = field(&schema, &path);
        let Some(values) = choices(&schema, f) else {
            continue;
        };
        if f["type"] == "integer" {
            continue;
        }
        for (value, _) in values {
            assert!(
                parses(table, &format!("{name} = \"{value}\"")),
                "{path} = {value:?} does not parse"
            );
            checked += 1;
        }
        assert!(
            !parses(table, &format!("{name} = \"nonsense\"")),
            "{path} took nonsense"
        );
    }
    assert!(checked >= 20, "{checked} values checked");
    // The lower-case names serde also takes are in the schema, as aliases.
    let protocol = &schema["$defs"]["SecurityProtocol"]["oneOf"];
    assert!(protocol
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v["const"] == "sasl_ssl" && v["x-alias"] == true));
    assert!(parses("source", "security_protocol = \"sasl_ssl\""));
}

#[test]
fn the_engines_and_formats_in_the_schema_are_the_ones_parsed() {
    let schema = schema();
    let engines = &schema["$defs"]["EngineTarget"]["anyOf"];
    let names = engines[0]["enum"].as_array().unwrap();
    for name in names {
        assert!(
            EngineTarget::parse(name.as_str().unwrap()).is_ok(),
            "{name}"
        );
    }
    let pattern = regex::Regex::new(engines[1]["pattern"].as_str().unwrap()).unwrap();
    for text in [
        "trino<480",
        "duckdb>=1.5",
        "trino=476",
        "Spark",
        "clickhouse >= 26.10",
        "trino<=480",
        "trino>480",
        "trino<4.8.0.1",
        "trino<",
    ] {
        let named = pattern.is_match(text);
        // The pattern checks the form; the name is checked by the enum.
        assert_eq!(named, EngineTarget::parse(text).is_ok(), "{text}");
    }
    for name in schema["$defs"]["ValueFormat"]["enum"].as_array().unwrap() {
        assert!(
            name.as_str().unwrap().parse::<ValueFormat>().is_ok(),
            "{name}"
        );
    }
}

#[test]
fn the_duration_pattern_matches_what_parse_duration_takes() {
    let schema = schema();
    let f = field(&schema, "maintain.max_snapshot_age");
    let pattern = regex::Regex::new(f["pattern"].as_str().unwrap()).unwrap();
    for text in [
        "90s", "30m", " 12h", "7d", "0s", "7", "7w", "d", "5 d", "-1d", "1.5h",
    ] {
        assert_eq!(
            pattern.is_match(text),
            crate::config::parse_duration(text).is_ok(),
            "{text:?}"
        );
    }
}
