//! The forms cover the job file: every field of the schema is rendered by
//! exactly one form (or placed on the page that edits it), with a label
//! and the widget its type calls for, and no script lists a field itself.

use std::collections::BTreeSet;

use serde_json::Value;
use topicberg_core::config::job_file_schema;

use super::{forms, FieldSpec, Form};

/// The fields of the schema's table `name` (`streams`: an entry's).
fn schema_fields(schema: &Value, name: &str) -> Vec<String> {
    let field = &schema["properties"][name];
    let reference = field["$ref"]
        .as_str()
        .or(field["items"]["$ref"].as_str())
        .unwrap();
    let definition = &schema["$defs"][reference.trim_start_matches("#/$defs/")];
    definition["x-order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect()
}

fn specs(form: &Form) -> Vec<&FieldSpec> {
    form.groups
        .iter()
        .flat_map(|g| g.fields.iter())
        .chain(form.placed.values().flatten())
        .collect()
}

fn spec<'a>(form: &'a Form, key: &str) -> &'a FieldSpec {
    specs(form)
        .into_iter()
        .find(|s| s.key == key)
        .unwrap_or_else(|| panic!("no {key}"))
}

#[test]
fn every_field_of_the_schema_is_rendered_by_exactly_one_form() {
    let schema = job_file_schema();
    let forms = forms();
    for (table, form) in [
        ("source", &forms.source),
        ("destination", &forms.destination),
        ("streams", &forms.stream),
        ("sync", &forms.sync),
        ("maintain", &forms.maintain),
    ] {
        let rendered: Vec<&str> = specs(form).iter().map(|s| s.key.as_str()).collect();
        let unique: BTreeSet<&str> = rendered.iter().copied().collect();
        assert_eq!(
            unique.len(),
            rendered.len(),
            "[{table}]: a field twice: {rendered:?}"
        );
        let expected: BTreeSet<String> = schema_fields(&schema, table).into_iter().collect();
        let rendered: BTreeSet<String> = unique.into_iter().map(str::to_string).collect();
        assert_eq!(rendered, expected, "[{table}]");
        for s in specs(form) {
            assert!(
                !s.label.is_empty() && s.label != s.key,
                "[{table}] {} has no label",
                s.key
            );
        }
    }
    let top: Vec<&str> = specs(&forms.job).iter().map(|s| s.key.as_str()).collect();
    assert_eq!(top, ["name", "target_engines"]);
}

#[test]
fn widgets_come_from_the_types() {
    let forms = forms();
    let password = spec(&forms.source, "sasl_password");
    assert_eq!(password.widget, "secret");
    assert_eq!(
        spec(&forms.source, "ssl_key_pem").widget,
        "secret",
        "a secret PEM is never shown"
    );
    assert_eq!(spec(&forms.source, "ssl_ca_pem").widget, "textarea");
    let threads = spec(&forms.source, "max_threads");
    assert_eq!((threads.widget, threads.min), ("number", Some(1)));
    assert_eq!(spec(&forms.sync, "max_columns").min, Some(9));
    let protocol = spec(&forms.source, "security_protocol");
    assert_eq!(protocol.widget, "select");
    let values: Vec<&str> = protocol.options.iter().map(|(v, _)| v.as_str()).collect();
    assert_eq!(
        values,
        ["", "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"],
        "no aliases"
    );
    assert_eq!(protocol.options[0].1, "(default: PLAINTEXT)");
    let hostname = spec(&forms.source, "ssl_verify_hostname");
    assert_eq!(
        (hostname.widget, hostname.unset.as_deref()),
        ("bool", Some("(default: yes)"))
    );
    let catalog = spec(&forms.destination, "catalog");
    assert_eq!(catalog.new_default.as_deref(), Some("rest"));
    assert!(catalog
        .options
        .iter()
        .any(|(v, text)| v == "sql" && text.contains("embedded")));
    let version = spec(&forms.destination, "format_version");
    assert!(version.numeric);
    assert_eq!(
        version.options[1..],
        [("2".into(), "2".into()), ("3".into(), "3".into())]
    );
    let invalid = spec(&forms.stream, "on_invalid");
    assert_eq!(invalid.options[0].1, "(default: fail the sync)");
    let partitions = spec(&forms.stream, "partition_by");
    assert_eq!(
        (partitions.widget, partitions.separator.as_deref()),
        ("list", Some(";"))
    );
    let engines = spec(&forms.job, "target_engines");
    assert!(engines.options.iter().any(|(v, _)| v == "trino"));
    assert_eq!(forms.destination.placed["job"][0].key, "namespace");
    assert_eq!(spec(&forms.source, "bootstrap_servers").label, "Brokers");
}

#[test]
fn no_script_lists_a_field_of_the_job_file() {
    let schema = job_file_schema();
    let mut keys: Vec<String> = ["source", "destination", "streams", "sync", "maintain"]
        .iter()
        .flat_map(|t| schema_fields(&schema, t))
        .collect();
    keys.push("target_engines".into());
    for (file, text) in super::super::SCRIPTS {
        for key in &keys {
            assert!(
                !text.contains(&format!("key: \"{key}\"")),
                "{file} describes the field {key} itself; it belongs on the struct"
            );
        }
    }
}

#[test]
fn the_write_only_pieces_fields_are_the_schemas_secrets() {
    use crate::pieces::PieceKind;
    let forms = forms();
    for (kind, form) in [
        (PieceKind::Source, &forms.source),
        (PieceKind::Destination, &forms.destination),
    ] {
        let mut secret: Vec<&str> = specs(form)
            .into_iter()
            .filter(|s| s.widget == "secret")
            .map(|s| s.key.as_str())
            .collect();
        let mut kept: Vec<&str> = kind.secrets().to_vec();
        secret.sort_unstable();
        kept.sort_unstable();
        assert_eq!(secret, kept, "{kind:?}");
    }
}

#[test]
fn fields_that_apply_to_one_protocol_or_catalog_say_when() {
    let forms = forms();
    let when = |form: &Form, key: &str| {
        let w = spec(form, key)
            .when
            .clone()
            .unwrap_or_else(|| panic!("{key} has no when"));
        (w.key, w.values)
    };
    let sasl = (
        "security_protocol".to_string(),
        vec!["SASL_PLAINTEXT".to_string(), "SASL_SSL".to_string()],
    );
    assert_eq!(when(&forms.source, "sasl_username"), sasl);
    assert_eq!(when(&forms.source, "ssl_ca_pem").1, ["SSL", "SASL_SSL"]);
    assert_eq!(
        when(&forms.source, "oauth_client_secret"),
        (
            "sasl_mechanism".to_string(),
            vec!["OAUTHBEARER".to_string()]
        )
    );
    // The embedded catalog is the default: an empty choice is `sql`.
    assert_eq!(when(&forms.destination, "path").1, ["sql", ""]);
    assert_eq!(when(&forms.destination, "uri").1, ["rest"]);
    for always in [
        "bootstrap_servers",
        "security_protocol",
        "schema_registry_url",
    ] {
        assert_eq!(spec(&forms.source, always).when, None, "{always}");
    }
}
