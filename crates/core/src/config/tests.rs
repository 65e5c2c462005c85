//! The job file end to end: parsing, interpolation, errors, validation.

use std::path::PathBuf;

use super::*;

mod change_events;
mod engines;
mod errors;
mod registry;
mod schema;
mod security;

/// A full job file, every section filled in.
pub(super) const ISSUE_EXAMPLE: &str = r#"
name = "kafka_to_iceberg"          # job name; Iceberg namespace = "<name>_topics"
target_engines = ["spark", "duckdb", "trino"]   # used by the upsert issue; accept it now

[source]
bootstrap_servers = "127.0.0.1:9092"     # comma-separated host:port
consumer_group = "topicberg_kafka_to_iceberg"   # one group per job
topic_pattern = "^(customers|orders)$"   # a full regex; the user anchors it
security_protocol = "PLAINTEXT"          # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
sasl_mechanism = "SCRAM-SHA-512"         # PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
sasl_username = "..."
sasl_password = "${KAFKA_PASSWORD}"      # ${VAR} is read from the environment
ssl_ca_pem = "..."                       # optional, PEM text or a path
max_threads = 4                          # partitions read in parallel

[destination]
catalog = "rest"                         # rest | sql (embedded; the default)
uri = "http://127.0.0.1:8181"            # REST base URI (Polaris: http://host:8181/api/catalog)
warehouse = "lakehouse"                  # Polaris catalog name / Unity catalog name
credential = "client_id:client_secret"   # OAuth2 client credentials, or
token = "..."                            # a static bearer token (Unity personal access token)
oauth2_server_uri = "..."                # default: <uri>/v1/oauth/tokens
scope = "PRINCIPAL_ROLE:ALL"
s3_endpoint = "http://127.0.0.1:8333"    # empty for AWS S3
s3_region = "us-east-1"
s3_access_key = "..."
s3_secret_key = "${S3_SECRET}"
s3_path_style = true
# catalog = "sql": path = "./warehouse" (a SQLite catalog file and the table files beside it)

[[streams]]
topic = "orders"
mode = "append"                          # append | upsert (upsert: next issue)
"#;

pub(super) const MINIMAL: &str = r#"
name = "job"
[source]
bootstrap_servers = "127.0.0.1:9092"
topic_pattern = "^(customers|orders)$"
"#;

pub(super) fn env(name: &str) -> Option<String> {
    match name {
        "KAFKA_PASSWORD" => Some("kafka-pw-7731".into()),
        "S3_SECRET" => Some("s3-secret-5519".into()),
        "CLIENT_SECRET" => Some("client-secret-8842".into()),
        "TOKEN" => Some("token-3310".into()),
        "EMPTY" => Some(String::new()),
        "TOPIC" => Some("orders".into()),
        _ => None,
    }
}

pub(super) fn job(c: &JobConfig) -> crate::Job {
    crate::Job::resolve(c).unwrap()
}

pub(super) fn load(text: &str) -> Result<JobConfig, ConfigError> {
    JobConfig::from_toml_str(text, env)
}

/// MINIMAL plus `extra` lines appended to the end of the file.
pub(super) fn with(extra: &str) -> String {
    format!("{MINIMAL}{extra}")
}

/// The problems of an invalid file as "field: message" lines.
pub(super) fn problems(text: &str) -> Vec<String> {
    match load(text) {
        Err(ConfigError::Invalid { problems, .. }) => {
            problems.iter().map(ToString::to_string).collect()
        }
        Err(other) => panic!("expected validation problems, got: {other}"),
        Ok(_) => panic!("expected validation problems, the file loaded"),
    }
}

/// Asserts exactly one problem, on `field`, whose message contains `needle`.
#[track_caller]
pub(super) fn one_problem(text: &str, field: &str, needle: &str) {
    let found = problems(text);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].starts_with(&format!("{field}: ")) && found[0].contains(needle),
        "{found:#?} should be on {field} and mention {needle:?}"
    );
}

pub(super) fn parse_message(text: &str) -> (Option<usize>, String) {
    match load(text) {
        Err(ConfigError::Parse { line, message, .. }) => (line, message),
        Err(other) => panic!("expected a parse error, got: {other}"),
        Ok(_) => panic!("expected a parse error, the file loaded"),
    }
}

#[test]
fn the_issue_example_parses_and_only_its_alternatives_conflict() {
    let found = problems(ISSUE_EXAMPLE);
    assert_eq!(found.len(), 4, "{found:#?}");
    assert!(found[0].starts_with("source.ssl_ca_pem: is neither PEM text nor a readable file"));
    assert!(found[1].starts_with("source.security_protocol: is \"PLAINTEXT\", which does not use sasl_mechanism, sasl_username, sasl_password"));
    assert!(found[2].starts_with("source.ssl_ca_pem: is set but security_protocol = \"PLAINTEXT\""));
    assert!(found[3].starts_with("destination.token: is set together with credential"));
}

#[test]
fn the_issue_example_with_one_of_each_alternative_loads() {
    let text = ISSUE_EXAMPLE
        .replace("\"PLAINTEXT\"          #", "\"SASL_PLAINTEXT\"     #")
        .replace("ssl_ca_pem = \"...\"", "")
        .replace("token = \"...\"", "");
    let c = load(&text).unwrap();
    assert_eq!(c.name, "kafka_to_iceberg");
    assert_eq!(
        c.engines(),
        [
            TargetEngine::Spark,
            TargetEngine::Trino,
            TargetEngine::Duckdb
        ]
        .map(EngineTarget::from)
    );
    let s = &c.source;
    assert_eq!(s.brokers(), ["127.0.0.1:9092"]);
    assert_eq!(c.consumer_group(), "topicberg_kafka_to_iceberg");
    assert_eq!(s.security_protocol, SecurityProtocol::SaslPlaintext);
    assert_eq!(s.sasl_mechanism, Some(SaslMechanism::ScramSha512));
    assert_eq!(s.sasl_username.as_deref(), Some("..."));
    assert_eq!(s.sasl_password.as_ref().unwrap().expose(), "kafka-pw-7731");
    assert_eq!(s.max_threads, 4);
    let d = &c.destination;
    assert_eq!(d.catalog, CatalogKind::Rest);
    assert_eq!(d.uri.as_deref(), Some("http://127.0.0.1:8181"));
    assert_eq!(d.warehouse.as_deref(), Some("lakehouse"));
    let credential = d.credential.as_ref().unwrap();
    assert_eq!(credential.client_id(), Some("client_id"));
    assert_eq!(
        credential.client_secret().unwrap().expose(),
        "client_secret"
    );
    assert_eq!(d.oauth2_server_uri().as_deref(), Some("..."));
    assert_eq!(d.scope.as_deref(), Some("PRINCIPAL_ROLE:ALL"));
    assert_eq!(d.s3_endpoint.as_deref(), Some("http://127.0.0.1:8333"));
    assert_eq!(d.s3_region.as_deref(), Some("us-east-1"));
    assert_eq!(d.s3_secret_key.as_ref().unwrap().expose(), "s3-secret-5519");
    assert!(d.s3_path_style());
    assert_eq!(d.path, None);
    assert_eq!(c.namespace(), "kafka_to_iceberg_topics");
    assert_eq!(d.format_version(), FormatVersion::V2);
    assert_eq!(c.streams.len(), 1);
    assert!(
        job(&c).selects("orders") && job(&c).selects("customers") && !job(&c).selects("orders_v2")
    );
    assert_eq!(c.stream_for("orders").mode, StreamMode::Append);
    assert!(c.stream_for("orders").configured);
}

#[test]
fn a_minimal_file_gets_every_default() {
    let c = load(MINIMAL).unwrap();
    assert_eq!(c.consumer_group(), "topicberg_job");
    assert_eq!(c.source.consumer_group.as_deref(), Some("topicberg_job"));
    assert_eq!(c.source.security_protocol, SecurityProtocol::Plaintext);
    let cores = std::thread::available_parallelism().unwrap().get();
    assert_eq!(
        c.source.max_threads,
        cores.clamp(1, 8),
        "one drain thread per core"
    );
    assert_eq!(c.source.fetch, FetchMethod::Auto);
    assert_eq!(c.destination.catalog, CatalogKind::Sql);
    assert_eq!(c.destination.path, Some(PathBuf::from("warehouse")));
    assert_eq!(c.destination.format_version(), FormatVersion::V2);
    assert!(!c.destination.s3_path_style());
    assert_eq!(c.namespace(), "job_topics");
    assert_eq!(c.sync, SyncConfig::default());
    assert_eq!(c.sync.target_file_size_mb, 128);
    assert_eq!(c.sync.batch_rows, 65_536);
    assert_eq!(c.sync.max_columns, 1_000);
    assert!(c.target_engines.is_empty());
    let orders = c.stream_for("orders");
    assert_eq!(orders, StreamSettings::defaults_for("orders"));
    assert_eq!(orders.mode, StreamMode::Append);
    assert_eq!(orders.on_invalid, OnInvalid::Fail);
    assert!(!orders.configured);
}

#[test]
fn stream_entries_override_defaults_and_table_names_are_sanitised() {
    let c = load(&with(
        r#"
[[streams]]
topic = "customers"
mode = "upsert"
dedup_keys = ["id", "_kafka_key"]
delete_format = "dv"
on_invalid = "dlq"
columns = ["id", "name"]
table = "crm_customers"
allow_data_loss = true
"#,
    ))
    .unwrap();
    let s = c.stream_for("customers");
    assert_eq!(s.table, "crm_customers");
    assert_eq!(s.mode, StreamMode::Upsert);
    assert_eq!(s.dedup_keys, ["id", "_kafka_key"]);
    assert_eq!(s.delete_format, Some(DeleteFormat::Dv));
    assert_eq!(s.on_invalid, OnInvalid::Dlq);
    assert_eq!(
        s.columns.as_deref(),
        Some(&["id".to_string(), "name".into()][..])
    );
    assert!(s.allow_data_loss && s.configured);
    assert_eq!(job(&c).table_for("Orders.EU-West").table, "orders_eu_west");
    assert_eq!(sanitize_identifier("Kafka To Iceberg"), "kafka_to_iceberg");
}

#[test]
fn without_a_pattern_exactly_the_stream_topics_are_selected() {
    let text = r#"
name = "job"
[source]
bootstrap_servers = "b:9092"
[[streams]]
topic = "orders"
"#;
    let c = load(text).unwrap();
    assert!(job(&c).selects("orders"));
    assert!(!job(&c).selects("customers"));
}

#[test]
fn an_unknown_key_is_an_error_naming_the_key_its_table_and_line() {
    let found = problems(&with("sasl_pasword = \"x\"\n"));
    assert_eq!(
        found,
        [
            r#"[source]: unknown field "sasl_pasword", did you mean "sasl_password"? (line 6; rename or remove it)"#
        ]
    );
    let found = problems(&format!("colour = \"blue\"\n{MINIMAL}"));
    assert!(
        found[0].starts_with(
            r#"(top level): unknown field "colour" (line 1); remove it, or use one of: name, "#
        ),
        "{found:?}"
    );
    let found = problems(&with("[sync]\nbatch_row = 5\n"));
    assert!(
        found[0].starts_with(r#"[sync]: unknown field "batch_row", did you mean "batch_rows"?"#)
    );
    let err = load(&with("[destination]\nfoo = 1\n"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("  - [destination]: unknown field \"foo\" (line 7)"),
        "{err}"
    );
}

#[test]
fn wrong_values_name_what_is_accepted() {
    let (_, message) = parse_message(&with("[[streams]]\ntopic = \"o\"\nmode = \"upsrt\"\n"));
    assert!(message.contains("unknown variant `upsrt`, expected `append` or `upsert`"));
    let (_, message) = parse_message(&with("[destination]\ncatalog = \"glue\"\n"));
    assert!(message.contains("expected `rest` or `sql`"), "{message}");
    let (_, message) = parse_message(&MINIMAL.replace("\"^(customers|orders)$\"", "3"));
    assert!(
        message.contains("invalid type: integer `3`, expected a string"),
        "{message}"
    );
    let (_, message) = parse_message("name = \"job\"\n");
    assert!(message.contains("missing field `source`"), "{message}");
}

#[test]
fn a_syntax_error_gives_the_position_without_quoting_the_line() {
    let text = with("sasl_password = \"hunter2\" trailing\n");
    let (line, message) = parse_message(&text);
    assert_eq!(line, Some(6));
    let shown = load(&text).unwrap_err().to_string();
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(!message.is_empty());
}

#[test]
fn environment_variables_fill_any_string_value() {
    let c = load(&with(
        r#"consumer_group = "group-${TOPIC}"
[[streams]]
topic = "${TOPIC}"
dedup_keys = []
columns = ["a_${TOPIC}", "cost$$", "$${TOPIC}"]
"#,
    ))
    .unwrap();
    assert_eq!(c.consumer_group(), "group-orders");
    assert_eq!(c.streams[0].topic, "orders");
    assert_eq!(
        c.streams[0].columns.as_deref().unwrap(),
        ["a_orders", "cost$$", "${TOPIC}"]
    );
}

#[test]
fn an_empty_variable_leaves_an_optional_field_unset() {
    let c = load(&with("consumer_group = \"${EMPTY}\"\n")).unwrap();
    assert_eq!(c.consumer_group(), "topicberg_job");
}

#[test]
fn a_missing_variable_names_the_variable_and_the_field() {
    let text = with(
        "sasl_password = \"${NO_SUCH_PASSWORD}\"\n[[streams]]\ntopic = \"${NO_SUCH_TOPIC}\"\n",
    );
    let found = problems(&text);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].starts_with(
        "source.sasl_password: environment variable NO_SUCH_PASSWORD is not set (line 6)"
    ));
    assert!(found[1]
        .starts_with("streams[0].topic: environment variable NO_SUCH_TOPIC is not set (line 8)"));
    let found = problems(&with("sasl_username = \"${bad name}\"\n"));
    assert!(found[0].starts_with("source.sasl_username: malformed ${bad name}"));
}

#[test]
fn secrets_never_show_in_debug_or_errors() {
    let text = with(
        r#"security_protocol = "SASL_PLAINTEXT"
sasl_mechanism = "PLAIN"
sasl_username = "u"
sasl_password = "${KAFKA_PASSWORD}"
[destination]
catalog = "rest"
uri = "http://127.0.0.1:8181"
warehouse = "lakehouse"
credential = "topicberg:${CLIENT_SECRET}"
s3_access_key = "topicberg"
s3_secret_key = "${S3_SECRET}"
"#,
    );
    let c = load(&text).unwrap();
    let debug = format!("{c:?} {:#?}", c);
    for secret in ["kafka-pw-7731", "client-secret-8842", "s3-secret-5519"] {
        assert!(!debug.contains(secret), "{secret} leaked: {debug}");
    }
    assert!(debug.contains("Credential(topicberg:***)"));

    // Token: shown nowhere either, including in the problem list it causes.
    let both = text.replace("s3_access_key", "token = \"${TOKEN}\"\ns3_access_key");
    let err = load(&both).unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(err.problems()[0].field == "destination.token");
    for secret in ["token-3310", "client-secret-8842", "kafka-pw-7731"] {
        assert!(!shown.contains(secret), "{secret} leaked: {shown}");
    }
    let broken = text.replace("topicberg:${CLIENT_SECRET}", "${CLIENT_SECRET}");
    let shown = load(&broken).unwrap_err().to_string();
    assert!(shown.contains("has no ':'") && !shown.contains("client-secret-8842"));
}

#[test]
fn source_problems() {
    one_problem(
        &MINIMAL.replace("127.0.0.1:9092", " , "),
        "source.bootstrap_servers",
        "is empty; list the brokers as comma-separated host:port",
    );
    one_problem(
        &MINIMAL.replace("127.0.0.1:9092", "kafka"),
        "source.bootstrap_servers",
        "\"kafka\" is not host:port",
    );
    one_problem(
        &MINIMAL.replace("^(customers|orders)$", "^(customers"),
        "source.topic_pattern",
        "\"^(customers\" is not a valid regex: unclosed group; fix the pattern",
    );
    one_problem(
        &with("max_threads = 0\n"),
        "source.max_threads",
        "is 0; set at least 1",
    );
    let found = problems(&with("security_protocol = \"SASL_SSL\"\n"));
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found[0]
        .starts_with("source.sasl_mechanism: is required with security_protocol = \"SASL_SSL\""));
    assert!(found[1].starts_with("source.sasl_username: is required"));
    assert!(
        found[2].starts_with("source.sasl_password: is required")
            && found[2].contains("KAFKA_PASSWORD")
    );
    one_problem(
        &with("ssl_ca_pem = \"-----BEGIN CERTIFICATE-----\"\n"),
        "source.ssl_ca_pem",
        "does not use TLS",
    );
    let no_pattern = "name = \"job\"\n[source]\nbootstrap_servers = \"b:9092\"\n";
    one_problem(
        no_pattern,
        "source.topic_pattern",
        "no topic would be synced",
    );
    one_problem(
        "name = \" \"\n[source]\nbootstrap_servers = \"b:1\"\ntopic_pattern = \"x\"\n",
        "name",
        "is empty",
    );
}

#[test]
fn an_unknown_engine_lists_the_known_ones() {
    let text = format!("target_engines = [\"Spark\", \"presto\"]\n{MINIMAL}");
    one_problem(
        &text,
        "target_engines[1]",
        "unknown engine \"presto\"; use any of spark, trino, duckdb, databricks, snowflake, athena, pyiceberg, flink, clickhouse, polars, datafusion, daft, optionally with a version",
    );
}

#[test]
fn engine_versions_load_and_a_malformed_one_says_how_to_write_it() {
    let c = load(&format!(
        "target_engines = [\"trino<480\", \"clickhouse>=26.10\", \"daft\"]\n{MINIMAL}"
    ))
    .unwrap();
    let shown: Vec<String> = c.engines().iter().map(ToString::to_string).collect();
    assert_eq!(shown, ["trino<480", "clickhouse>=26.10", "daft"]);
    one_problem(
        &format!("target_engines = [\"trino>480\"]\n{MINIMAL}"),
        "target_engines[0]",
        "write a version requirement as trino>=V, trino<V or trino=V",
    );
}

pub(super) const REST: &str = "[destination]\ncatalog = \"rest\"\nuri = \"http://127.0.0.1:8181\"\nwarehouse = \"lakehouse\"\n";

#[test]
fn destination_problems() {
    load(&with(REST)).unwrap();
    let found = problems(&with("[destination]\ncatalog = \"rest\"\n"));
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].starts_with("destination.uri: is required with catalog = \"rest\""));
    assert!(found[1].starts_with("destination.warehouse: is required with catalog = \"rest\""));
    one_problem(
        &with(&REST.replace("http://", "")),
        "destination.uri",
        "is not an http:// or https:// URI",
    );
    one_problem(
        &with(&format!("{REST}credential = \"just-a-secret\"\n")),
        "destination.credential",
        "has no ':'; write OAuth2 client credentials as \"client_id:client_secret\"",
    );
    one_problem(
        &with(&format!("{REST}credential = \":s\"\n")),
        "destination.credential",
        "has an empty client id or secret",
    );
    one_problem(
        &with(&format!("{REST}credential = \"a:b\"\ntoken = \"t\"\n")),
        "destination.token",
        "is set together with credential; keep one",
    );
    one_problem(
        &with(&format!("{REST}scope = \"PRINCIPAL_ROLE:ALL\"\n")),
        "destination.scope",
        "is only used with credential",
    );
    one_problem(
        &with(&format!("{REST}s3_secret_key = \"k\"\n")),
        "destination.s3_access_key",
        "go together",
    );
    one_problem(
        &with(&format!("{REST}path = \"./warehouse\"\n")),
        "destination.path",
        "is only used with catalog = \"sql\"",
    );
    one_problem(
        &with("[destination]\nuri = \"http://127.0.0.1:8181\"\ntoken = \"t\"\n"),
        "destination.catalog",
        "but uri, token only apply to catalog = \"rest\"; add catalog = \"rest\"",
    );
    one_problem(
        &with("[destination]\nwarehouse = \"lakehouse\"\n"),
        "destination.warehouse",
        "is not a storage URI; with catalog = \"sql\" the warehouse is where the tables go",
    );
    one_problem(
        &with("[destination]\nwarehouse = \"gs://b/w\"\ns3_region = \"eu\"\n"),
        "destination.s3_region",
        "s3_region only apply to catalog = \"rest\" or to an s3:// warehouse",
    );
    one_problem(
        &with("[destination]\nazure_access_key = \"k\"\n"),
        "destination.azure_access_key",
        "azure_access_key only apply to catalog = \"rest\" or to an abfss:// or wasbs:// warehouse",
    );
    one_problem(
        &with("[destination]\nformat_version = 4\n"),
        "destination.format_version",
        "is 4; Iceberg format version must be 2 or 3",
    );
    one_problem(
        &with("[destination]\nnamespace = \"My.Namespace\"\n"),
        "destination.namespace",
        "e.g. \"my_namespace\"",
    );
    let c = load(&with(
        "[destination]\nnamespace = \"analytics\"\nformat_version = 3\n",
    ))
    .unwrap();
    assert_eq!(c.namespace(), "analytics");
    assert_eq!(c.destination.format_version(), FormatVersion::V3);
}

#[test]
fn the_token_endpoint_defaults_to_the_catalog_uri() {
    let c = load(&with(&format!("{REST}credential = \"a:b\"\n"))).unwrap();
    assert_eq!(
        c.destination.oauth2_server_uri().as_deref(),
        Some("http://127.0.0.1:8181/v1/oauth/tokens")
    );
}

fn stream(body: &str) -> String {
    with(&format!("[[streams]]\ntopic = \"orders\"\n{body}"))
}

#[test]
fn stream_problems() {
    one_problem(
        &stream("mode = \"upsert\"\n"),
        "streams[0].dedup_keys",
        "upsert stream \"orders\" needs dedup_keys",
    );
    one_problem(
        &stream("dedup_keys = [\"id\"]\n"),
        "streams[0].dedup_keys",
        "only applies to upsert streams",
    );
    one_problem(
        &stream("delete_format = \"position\"\n"),
        "streams[0].delete_format",
        "only applies to upsert streams",
    );
    one_problem(
        &stream("mode = \"upsert\"\ndedup_keys = [\"id\", \"id\"]\n"),
        "streams[0].dedup_keys",
        "\"id\" is listed twice",
    );
    one_problem(
        &stream("mode = \"upsert\"\ndedup_keys = [\"_kafka_offset\"]\n"),
        "streams[0].dedup_keys",
        "only \"_kafka_key\" and payload fields can be dedup keys",
    );
    one_problem(
        &stream("mode = \"upsert\"\ndedup_keys = [\"id\"]\ncolumns = [\"name\"]\n"),
        "streams[0].dedup_keys",
        "\"id\" is not among columns",
    );
    one_problem(
        &stream("mode = \"upsert\"\ndedup_keys = [\"id\"]\ndelete_format = \"dv\"\n[destination]\nformat_version = 2\n"),
        "streams[0].delete_format",
        "needs format_version = 3",
    );
    one_problem(
        &stream("mode = \"upsert\"\ndedup_keys = [\"id\"]\ndelete_format = \"position\"\n[destination]\nformat_version = 3\n"),
        "streams[0].delete_format",
        "cannot be added to format v3 tables",
    );
    one_problem(
        &stream("columns = [\"_kafka_offset\"]\n"),
        "streams[0].columns",
        "is a metadata column, always present",
    );
    one_problem(&stream("columns = []\n"), "streams[0].columns", "is empty");
    one_problem(
        &stream("table = \"Orders\"\n"),
        "streams[0].table",
        "e.g. \"orders\"",
    );
    one_problem(
        &with("[[streams]]\ntopic = \"payments\"\n"),
        "streams[0].topic",
        "does not match topic_pattern",
    );
    one_problem(
        &with("[[streams]]\ntopic = \"orders\"\n[[streams]]\ntopic = \"orders\"\n"),
        "streams[1].topic",
        "\"orders\" already has an entry (streams[0]); merge",
    );
    one_problem(
        &with("[[streams]]\ntopic = \"orders\"\n[[streams]]\ntopic = \"customers\"\ntable = \"orders\"\n"),
        "streams[1].table",
        "table \"orders\" is also written by streams[0]",
    );
    // A composite key may mix the message key and payload fields.
    load(&stream(
        "mode = \"upsert\"\ndedup_keys = [\"_kafka_key\", \"region\"]\n",
    ))
    .unwrap();
}

#[test]
fn sync_problems() {
    one_problem(
        &with("[sync]\ntarget_file_size_mb = 0\n"),
        "sync.target_file_size_mb",
        "is 0",
    );
    one_problem(&with("[sync]\nbatch_rows = 0\n"), "sync.batch_rows", "is 0");
    let c = load(&with("[sync]\nbatch_rows = 1000\n")).unwrap();
    assert_eq!(c.sync.batch_rows, 1000);
    let c = load(&with("[sync]\nmax_columns = 20000\n")).unwrap();
    assert_eq!(c.sync.max_columns, 20_000);
    one_problem(
        &with("[sync]\nmax_columns = 8\n"),
        "sync.max_columns",
        "8 is too few",
    );
    assert_eq!(c.sync.target_file_size_mb, 128);
}

#[test]
fn every_problem_is_reported_at_once() {
    let text = r#"
name = ""
target_engines = ["nope"]
[source]
bootstrap_servers = ""
topic_pattern = "("
max_threads = 0
[destination]
catalog = "rest"
format_version = 1
[[streams]]
topic = "x"
mode = "upsert"
"#;
    let err = load(text).unwrap_err();
    assert!(err.problems().len() >= 8, "{err}");
    assert!(err
        .to_string()
        .starts_with("<inline> is not a valid job file ("));
}

/// A fresh folder under the system temp folder, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("topicberg-config-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn load_resolves_files_relative_to_the_job_file_and_names_it() {
    let dir = TempDir::new("load");
    let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    std::fs::write(dir.0.join("ca.pem"), pem).unwrap();
    let job = dir.0.join("job.toml");
    std::fs::write(
        &job,
        with("security_protocol = \"SSL\"\nssl_ca_pem = \"ca.pem\"\n[destination]\npath = \"./lake\"\n"),
    )
    .unwrap();
    let c = JobConfig::load(&job).unwrap();
    assert_eq!(c.source.ssl_ca_pem.as_deref(), Some(pem));
    assert_eq!(c.destination.path, Some(dir.0.join("lake")));

    std::fs::write(
        &job,
        with("security_protocol = \"SSL\"\nssl_ca_pem = \"missing.pem\"\n"),
    )
    .unwrap();
    let err = JobConfig::load(&job).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("{} is not a valid job file", job.display())),
        "{err}"
    );
    assert!(err.contains("missing.pem"), "{err}");

    std::fs::write(&job, "name = 1\n").unwrap();
    let err = JobConfig::load(&job).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("{}: line 1, column 8:", job.display())),
        "{err}"
    );

    let gone = dir.0.join("gone.toml");
    let err = JobConfig::load(&gone).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("cannot read job file {}:", gone.display())),
        "{err}"
    );
}

#[test]
fn the_example_job_files_are_valid() {
    let testbed = |name: &str| match name {
        "TESTBED_SEAWEED_CREDENTIAL" => Some("topicberg:topicberg-secret-key".to_string()),
        "TESTBED_S3_SECRET_KEY" => Some("topicberg-secret-key".to_string()),
        _ => None,
    };
    let rest =
        JobConfig::from_toml_str(include_str!("../../../../examples/job.toml"), testbed).unwrap();
    assert_eq!(rest.destination.catalog, CatalogKind::Rest);
    assert_eq!(rest.stream_for("customers").mode, StreamMode::Upsert);
    assert!(!format!("{rest:?}").contains("topicberg-secret-key"));

    let embedded = JobConfig::from_toml_str(
        include_str!("../../../../examples/job-embedded.toml"),
        |_| None,
    )
    .unwrap();
    assert_eq!(embedded.destination.catalog, CatalogKind::Sql);
    assert_eq!(embedded.destination.path, Some(PathBuf::from("warehouse")));
    assert_eq!(embedded.stream_for("orders").mode, StreamMode::Append);
}

#[test]
fn sql_catalog_with_a_remote_warehouse_takes_that_stores_settings() {
    let s3 = load(&with(
        "[destination]\nwarehouse = \"s3://bucket/tables\"\ns3_endpoint = \"http://127.0.0.1:8333\"\n\
         s3_access_key = \"a\"\ns3_secret_key = \"s\"\n",
    ))
    .expect("an s3 warehouse with S3 settings loads");
    assert_eq!(s3.destination.sql_warehouse_scheme(), Some("s3"));
    let azure = load(&with(
        "[destination]\nwarehouse = \"abfss://c@acct.dfs.core.windows.net/w\"\n\
         azure_access_key = \"k\"\nazure_endpoint = \"http://127.0.0.1:10000/acct\"\n",
    ))
    .expect("an abfss warehouse with Azure settings loads");
    assert!(!format!("{:?}", azure.destination).contains("\"k\""));
    let gcs = load(&with(
        "[destination]\nwarehouse = \"gs://b/w\"\ngcs_service_account_path = \"/keys/sa.json\"\n",
    ))
    .expect("a gs warehouse with a key file loads");
    assert_eq!(gcs.destination.sql_warehouse_scheme(), Some("gs"));
    let local = load(&with("[destination]\nwarehouse = \"file:///tmp/w\"\n")).unwrap();
    assert_eq!(local.destination.sql_warehouse_scheme(), None);
}

#[test]
fn maintain_settings_have_defaults_are_checked_and_resolve_once() {
    let c = load(MINIMAL).unwrap();
    assert_eq!(c.maintain, super::MaintainConfig::default());
    let job = crate::Job::resolve(&c).unwrap();
    assert_eq!(job.maintain.keep_snapshots, 10);
    assert_eq!(job.maintain.max_snapshot_age.as_secs(), 5 * 86_400);
    assert_eq!(job.maintain.orphan_min_age.as_secs(), 86_400);
    assert_eq!(job.maintain.target_file_size_bytes, 128 * 1024 * 1024);
    // A follower maintains every 5 minutes, expiring past 30 minutes.
    assert_eq!(
        job.maintain.follow_every,
        Some(std::time::Duration::from_secs(300))
    );
    assert_eq!(job.maintain.follow_max_snapshot_age.as_secs(), 1_800);
    // A follower's pass rewrites at most 256 MiB of large files with deletes.
    assert_eq!(job.maintain.follow_rewrite_bytes, Some(256 << 20));

    let c = load(&with(
        "[maintain]\nkeep_snapshots = 2\nmax_snapshot_age = \"0s\"\norphan_min_age = \"30m\"\nmin_input_files = 2\nfollow_every = \"0s\"\nfollow_rewrite_mb = 0\n",
    ))
    .unwrap();
    let job = crate::Job::resolve(&c).unwrap();
    assert_eq!(job.maintain.follow_every, None, "0s turns it off");
    assert_eq!(job.maintain.follow_rewrite_bytes, None, "0: no bound");
    assert_eq!(job.maintain.keep_snapshots, 2);
    assert_eq!(job.maintain.max_snapshot_age.as_secs(), 0);
    assert_eq!(job.maintain.orphan_min_age.as_secs(), 1_800);
    assert_eq!(job.maintain.min_input_files, 2);

    one_problem(
        &with("[maintain]\nkeep_snapshots = 0\n"),
        "maintain.keep_snapshots",
        "at least its current snapshot",
    );
    one_problem(
        &with("[maintain]\norphan_min_age = \"1 week\"\n"),
        "maintain.orphan_min_age",
        "use s, m, h or d",
    );
    let found = problems(&with("[maintain]\nkeep_snapshot = 3\n"));
    assert!(
        found[0].starts_with(
            r#"[maintain]: unknown field "keep_snapshot", did you mean "keep_snapshots"?"#
        ),
        "{found:#?}"
    );
}

#[test]
fn fetch_picks_the_batch_reader_only_on_plaintext() {
    let c = load(&with("fetch = \"librdkafka\"\n")).unwrap();
    assert_eq!(c.source.fetch, FetchMethod::Librdkafka);
    assert!(!FetchMethod::Librdkafka.reads_batches(SecurityProtocol::Plaintext));
    assert!(FetchMethod::Auto.reads_batches(SecurityProtocol::Plaintext));
    for tls_or_sasl in [
        SecurityProtocol::Ssl,
        SecurityProtocol::SaslPlaintext,
        SecurityProtocol::SaslSsl,
    ] {
        assert!(!FetchMethod::Auto.reads_batches(tls_or_sasl));
    }
    let err = load(&with("fetch = \"native\"\n")).unwrap_err().to_string();
    assert!(err.contains("fetch") && err.contains("librdkafka"), "{err}");
}

#[test]
fn follow_intervals_default_parse_and_refuse_zero_with_the_line() {
    let c = load(&with("[sync]\ncommit_interval = \"2s\"\n")).unwrap();
    assert_eq!(
        c.sync.commit_interval.get(),
        std::time::Duration::from_secs(2)
    );
    assert_eq!(
        c.sync.stop_timeout.get(),
        std::time::Duration::from_secs(20)
    );
    let resolved = job(&c);
    assert_eq!(
        resolved.tuning.commit_interval,
        std::time::Duration::from_secs(2)
    );
    assert_eq!(
        load(MINIMAL).unwrap().sync.commit_interval.to_string(),
        "5s"
    );
    let err = load(&with("[sync]\ncommit_interval = \"0s\"\n")).unwrap_err();
    let shown = err.to_string();
    assert!(
        shown.contains("at least \"1s\"") && shown.contains("commit_interval"),
        "{shown}"
    );
}

#[test]
fn names_with_control_characters_are_refused_naming_the_field() {
    one_problem(
        &MINIMAL.replace("^(customers|orders)$", "^orders\\n$"),
        "source.topic_pattern",
        "control character (U+000A, character 8 of 9)",
    );
    // Also an invalid regex: one problem, the value not echoed.
    one_problem(
        &MINIMAL.replace("^(customers|orders)$", "^(orders\\n"),
        "source.topic_pattern",
        "control character (U+000A",
    );
    one_problem(
        &with("[serve]\nschedule = \"every 5 minutes\\n\"\n"),
        "serve.schedule",
        "control character (U+000A",
    );
    one_problem(
        &with("consumer_group = \"g\\u001b[31m\"\n"),
        "source.consumer_group",
        "control character (U+001B, character 2 of 6)",
    );
    let forged = "2026-12-07T10:00:00Z  INFO sync done";
    let found = problems(&with(&format!(
        "[[streams]]\ntopic = \"orders\\n{forged}\"\n"
    )));
    assert!(
        found
            .iter()
            .any(|p| p.starts_with("streams[0].topic: holds a control character (U+000A")),
        "{found:#?}"
    );
    assert!(
        found.iter().all(|p| !p.contains('\n')),
        "no problem echoes the newline: {found:#?}"
    );
    let found = problems(&MINIMAL.replace("name = \"job\"", "name = \"job\\t2\""));
    assert!(
        found
            .iter()
            .any(|p| p.starts_with("name: holds a control character (U+0009")),
        "{found:#?}"
    );
    assert_eq!(control_character("orders.v2-eu_1"), None);
}
