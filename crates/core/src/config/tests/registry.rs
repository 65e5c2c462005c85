//! The schema registry settings of `[source]` and the formats of
//! `[[streams]]`: parsing, files, validation with fixes, no secret shown.

use super::*;
use crate::registry::ValueFormat;

const BASE: &str = r#"
name = "job"
[source]
bootstrap_servers = "127.0.0.1:9092"
topic_pattern = "^(customers|orders)$"
"#;

fn env(name: &str) -> Option<String> {
    (name == "SR_SECRET").then(|| "sr-secret-4417".to_string())
}

fn load(text: &str) -> Result<JobConfig, ConfigError> {
    JobConfig::from_toml_str(text, env)
}

/// BASE with `source` lines in `[source]`, then `rest`.
fn file(source: &str, rest: &str) -> String {
    format!("{BASE}{source}\n{rest}")
}

fn problems(text: &str) -> Vec<String> {
    match load(text) {
        Err(ConfigError::Invalid { problems, .. }) => {
            problems.iter().map(ToString::to_string).collect()
        }
        Err(other) => panic!("expected validation problems, got: {other}"),
        Ok(_) => panic!("expected validation problems, the file loaded"),
    }
}

#[track_caller]
fn one_problem(text: &str, field: &str, needle: &str) {
    let found = problems(text);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].starts_with(&format!("{field}: ")) && found[0].contains(needle),
        "{found:#?} should be on {field} and mention {needle:?}"
    );
    assert!(!found[0].contains("sr-secret-4417"), "{found:#?}");
}

#[test]
fn registry_settings_load_with_a_secret_from_the_environment() {
    let text = file(
        "schema_registry_url = \"https://psrc-1.confluent.cloud\"\n\
         schema_registry_username = \"APIKEY\"\n\
         schema_registry_password = \"${SR_SECRET}\"\n\
         schema_registry_ca_pem = \"-----BEGIN CERTIFICATE-----\"\n",
        "[[streams]]\ntopic = \"orders\"\nvalue_format = \"avro\"\nkey_format = \"auto\"\n\
         [[streams]]\ntopic = \"customers\"\nvalue_format = \"\"\n",
    );
    let c = load(&text).unwrap();
    let s = &c.source;
    assert_eq!(
        s.schema_registry_url.as_deref(),
        Some("https://psrc-1.confluent.cloud")
    );
    assert_eq!(s.schema_registry_username.as_deref(), Some("APIKEY"));
    let password = s.schema_registry_password.as_ref().unwrap();
    assert_eq!(password.expose(), "sr-secret-4417");
    assert!(!format!("{c:?}").contains("sr-secret-4417"));
    let orders = c.stream_for("orders");
    assert_eq!(orders.value_format, Some(ValueFormat::Avro));
    assert_eq!(orders.key_format, Some(ValueFormat::Auto));
    assert_eq!(
        c.stream_for("customers").value_format,
        None,
        "\"\" is unset"
    );
}

#[test]
fn an_unknown_format_names_the_accepted_ones() {
    let text = file(
        "",
        "[[streams]]\ntopic = \"orders\"\nvalue_format = \"xml\"\n",
    );
    match load(&text) {
        Err(ConfigError::Parse { line, message, .. }) => {
            assert_eq!(line, Some(9), "{message}");
            assert!(
                message.contains("json, avro, protobuf or auto"),
                "{message}"
            );
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
}

#[test]
fn registry_url_problems_say_how_to_fix_them() {
    one_problem(
        &file("schema_registry_url = \"ftp://sr:8081\"\n", ""),
        "source.schema_registry_url",
        "write e.g. \"https://sr:8081\"",
    );
    one_problem(
        &file("schema_registry_url = \"sr:8081\"\n", ""),
        "source.schema_registry_url",
        "is not an http:// or https:// URL",
    );
    let with_password = file(
        "schema_registry_url = \"https://key:sr-secret-4417@sr:8081\"\n",
        "",
    );
    one_problem(
        &with_password,
        "source.schema_registry_url",
        "set schema_registry_username and schema_registry_password",
    );
}

#[test]
fn user_and_password_go_together_and_need_a_url() {
    one_problem(
        &file(
            "schema_registry_url = \"http://sr:8081\"\nschema_registry_username = \"k\"\n",
            "",
        ),
        "source.schema_registry_password",
        "is required with schema_registry_username",
    );
    one_problem(
        &file(
            "schema_registry_url = \"http://sr:8081\"\nschema_registry_password = \"${SR_SECRET}\"\n",
            "",
        ),
        "source.schema_registry_username",
        "is required with schema_registry_password",
    );
    one_problem(
        &file(
            "schema_registry_username = \"k\"\nschema_registry_password = \"${SR_SECRET}\"\n",
            "",
        ),
        "source.schema_registry_url",
        "schema_registry_username, schema_registry_password would not be used",
    );
    one_problem(
        &file(
            "schema_registry_url = \"http://sr:8081\"\n\
             schema_registry_ca_pem = \"-----BEGIN CERTIFICATE-----\"\n",
            "",
        ),
        "source.schema_registry_ca_pem",
        "use an https:// URL",
    );
}

#[test]
fn a_registry_format_without_a_registry_is_refused_with_the_fix() {
    let found = problems(&file(
        "",
        "[[streams]]\ntopic = \"orders\"\nvalue_format = \"protobuf\"\nkey_format = \"avro\"\n\
         [[streams]]\ntopic = \"customers\"\nvalue_format = \"json\"\nkey_format = \"json\"\n",
    ));
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found[0].starts_with("streams[0].value_format: is \"protobuf\"")
            && found[0].contains("set source.schema_registry_url"),
        "{found:#?}"
    );
    assert!(
        found[1].starts_with("streams[0].key_format: is \"avro\""),
        "{found:#?}"
    );
}

#[test]
fn the_registry_ca_is_read_relative_to_the_job_file() {
    let dir = std::env::temp_dir().join(format!("topicberg-config-sr-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    std::fs::write(dir.join("sr-ca.pem"), pem).unwrap();
    let job = dir.join("job.toml");
    let text = file(
        "schema_registry_url = \"https://sr:8081\"\nschema_registry_ca_pem = \"sr-ca.pem\"\n",
        "",
    );
    std::fs::write(&job, &text).unwrap();
    let c = JobConfig::load(&job).unwrap();
    assert_eq!(c.source.schema_registry_ca_pem.as_deref(), Some(pem));

    std::fs::write(&job, text.replace("sr-ca.pem", "missing.pem")).unwrap();
    let err = JobConfig::load(&job).unwrap_err().to_string();
    assert!(
        err.contains("source.schema_registry_ca_pem: is neither PEM text nor a readable file"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_registry_password_of_the_wrong_type_is_not_echoed() {
    let text = file(
        "schema_registry_url = \"http://sr:8081\"\nschema_registry_username = \"k\"\n\
         schema_registry_password = 73915286\n",
        "",
    );
    let err = load(&text).unwrap_err().to_string();
    assert!(!err.contains("73915286"), "{err}");
    assert!(err.contains("quoted string"), "{err}");
}
