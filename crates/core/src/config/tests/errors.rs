//! Errors of a job file that must hold every problem and no secret:
//! secrets of the wrong type or malformed, several unknown keys at once.

use super::*;

const REST: &str = r#"
name = "job"
[source]
bootstrap_servers = "127.0.0.1:9093"
topic_pattern = "^orders$"
security_protocol = "SASL_PLAINTEXT"
sasl_mechanism = "PLAIN"
sasl_username = "u"
sasl_password = "pw"
[destination]
catalog = "rest"
uri = "http://127.0.0.1:8181"
warehouse = "lakehouse"
token = "tok"
s3_access_key = "k"
s3_secret_key = "sk"
"#;

/// The distinctive part of every secret value below.
const MARK: &str = "98765432";

/// Values of a secret that are not a valid string, each holding [`MARK`]
/// (a boolean cannot; it is checked not to be echoed as `true`).
fn bad_values() -> Vec<String> {
    vec![
        format!("{MARK}1"),                // a number
        format!("-{MARK}.5"),              // a float
        "true".to_string(),                // a boolean
        format!("[\"s-{MARK}\", 1]"),      // an array
        format!("{{ a = \"s-{MARK}\" }}"), // an inline table
        format!("\"s-{MARK}"),             // a string without its closing quote
        format!("\"s-\\q{MARK}\""),        // a string with an invalid escape
        format!("s-{MARK}"),               // a string without quotes
        format!("\"s-${{{MARK} x}}\""),    // a malformed ${...} inside
        format!("\"s-{MARK}\" x"),         // trailing garbage
    ]
}

#[test]
fn a_secret_of_the_wrong_type_or_malformed_is_never_echoed() {
    for field in ["sasl_password", "credential", "token", "s3_secret_key"] {
        for value in bad_values() {
            let line = match field {
                "sasl_password" => "sasl_password = \"pw\"".to_string(),
                "token" => "token = \"tok\"".to_string(),
                "s3_secret_key" => "s3_secret_key = \"sk\"".to_string(),
                _ => "token = \"tok\"".to_string(),
            };
            let text = REST.replace(&line, &format!("{field} = {value}"));
            assert_ne!(text, REST);
            let err = JobConfig::from_toml_str(&text, |_| None).unwrap_err();
            let shown = format!("{err}\n{err:?}");
            assert!(!shown.contains(MARK), "{field} = {value} leaked: {shown}");
            assert!(!shown.contains("`true`"), "{field} = {value}: {shown}");
        }
    }
}

#[test]
fn a_secret_that_is_not_a_string_names_the_field_and_the_fix() {
    let text = REST.replace("sasl_password = \"pw\"", &format!("sasl_password = {MARK}"));
    let err = JobConfig::from_toml_str(&text, |_| None).unwrap_err();
    let ConfigError::Parse { line, message, .. } = &err else {
        panic!("expected a parse error: {err}");
    };
    assert_eq!(*line, Some(9));
    assert!(message.contains("must be a quoted string"), "{message}");
    assert!(message.contains("source"), "{message}");
}

fn unknown_problems(text: &str) -> Vec<String> {
    let err = JobConfig::from_toml_str(text, |_| None).unwrap_err();
    err.problems().iter().map(ToString::to_string).collect()
}

#[test]
fn two_unknown_keys_in_different_tables_are_both_reported_with_validation_problems() {
    let text = r#"
name = "job"
[source]
bootstrap_servers = "127.0.0.1:9092"
topic_pattern = "^orders$"
sasl_pasword = "x"
max_threads = 0
[[streams]]
topic = "orders"
[[streams]]
topic = "customers"
mode = "upsert"
dedup_key = ["id"]
"#;
    let found = unknown_problems(text);
    assert!(
        found[0].starts_with(
            r#"[source]: unknown field "sasl_pasword", did you mean "sasl_password"? (line 6"#
        ),
        "{found:#?}"
    );
    assert!(
        found[1].starts_with(
            r#"[[streams]] #2: unknown field "dedup_key", did you mean "dedup_keys"? (line 13"#
        ),
        "{found:#?}"
    );
    // The validation problems come with them.
    assert!(
        found.iter().any(|p| p.starts_with("source.max_threads")),
        "{found:#?}"
    );
    assert!(
        found.iter().any(|p| p.starts_with("streams[1].dedup_keys")),
        "{found:#?}"
    );
}

#[test]
fn three_unknown_keys_in_three_tables_are_all_reported_in_file_order() {
    let text = r#"
name = "job"
colour = "blue"
[source]
bootstrap_servers = "127.0.0.1:9092"
topic_pattern = "^orders$"
[destination]
catalg = "sql"
[sync]
batch_row = 5
"#;
    let found = unknown_problems(text);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(
        found[0].starts_with(r#"(top level): unknown field "colour" (line 3)"#),
        "{found:#?}"
    );
    assert!(
        found[1].starts_with(
            r#"[destination]: unknown field "catalg", did you mean "catalog"? (line 8"#
        ),
        "{found:#?}"
    );
    assert!(
        found[2].starts_with(
            r#"[sync]: unknown field "batch_row", did you mean "batch_rows"? (line 10"#
        ),
        "{found:#?}"
    );
    let shown = JobConfig::from_toml_str(text, |_| None)
        .unwrap_err()
        .to_string();
    assert!(
        shown.starts_with("<inline> is not a valid job file (3 problems):"),
        "{shown}"
    );
}

#[test]
fn unknown_keys_are_reported_with_missing_variables() {
    let text = r#"
name = "job"
[source]
bootstrap_servers = "${NO_SUCH_BROKERS}"
topic_pattern = "^orders$"
sasl_pasword = "x"
"#;
    let found = unknown_problems(text);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].starts_with("source.bootstrap_servers: environment variable NO_SUCH_BROKERS"));
    assert!(found[1].starts_with("[source]: unknown field \"sasl_pasword\""));
}

#[test]
fn a_uri_without_scheme_is_refused_without_its_password() {
    let text = REST.replace("http://127.0.0.1:8181", "user:secretpass@127.0.0.1:8181");
    let shown = JobConfig::from_toml_str(&text, |_| None)
        .unwrap_err()
        .to_string();
    assert!(!shown.contains("secretpass"), "{shown}");
    assert!(
        shown.contains("destination.uri: is not an http:// or https:// URI; write e.g. \"https://user:***@127.0.0.1:8181\""),
        "{shown}"
    );
}
