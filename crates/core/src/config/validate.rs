//! Every check of a parsed job file. Each problem names its field and says
//! how to fix it; all are reported at once.

use regex::Regex;

use super::{
    control_character, defaults, is_identifier, CatalogKind, ConfigProblem, EngineTarget, JobConfig,
};

pub(super) fn problems(config: &JobConfig) -> Vec<ConfigProblem> {
    let mut out = Vec::new();
    job(config, &mut out);
    source(config, &mut out);
    schema_registry(config, &mut out);
    destination(config, &mut out);
    super::validate_streams::streams(config, &mut out);
    sync(config, &mut out);
    maintain(config, &mut out);
    out
}

fn push(out: &mut Vec<ConfigProblem>, field: impl Into<String>, message: impl Into<String>) {
    out.push(ConfigProblem::new(field, message));
}

fn job(config: &JobConfig, out: &mut Vec<ConfigProblem>) {
    if config.name.trim().is_empty() {
        push(
            out,
            "name",
            "is empty; name the job, e.g. name = \"kafka_to_iceberg\" (it names the namespace \
             and the consumer group)",
        );
    }
    if let Some(why) = control_character(&config.name) {
        push(out, "name", why);
    }
    if let Some(Err(e)) = config.serve.topic_pattern.as_deref().map(Regex::new) {
        push(
            out,
            "serve.topic_pattern",
            format!("is not a valid regex: {}; fix the pattern", regex_error(&e)),
        );
    }
    for (i, engine) in config.target_engines.iter().enumerate() {
        if let Err(why) = EngineTarget::parse(engine) {
            push(out, format!("target_engines[{i}]"), why.to_string());
        }
    }
}

fn source(config: &JobConfig, out: &mut Vec<ConfigProblem>) {
    let s = &config.source;
    if s.brokers().is_empty() {
        push(
            out,
            "source.bootstrap_servers",
            "is empty; list the brokers as comma-separated host:port, e.g. \
             bootstrap_servers = \"127.0.0.1:9092\"",
        );
    }
    for broker in s.brokers() {
        let port_ok = broker.rsplit_once(':').is_some_and(|(host, port)| {
            !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
        });
        if !port_ok {
            push(
                out,
                "source.bootstrap_servers",
                format!("\"{broker}\" is not host:port; write it as e.g. \"{broker}:9092\" with the broker's port"),
            );
        }
    }
    if s.consumer_group
        .as_deref()
        .is_some_and(|g| g.trim().is_empty())
    {
        push(
            out,
            "source.consumer_group",
            "is blank; remove it to use topicberg_<name>, or name a group",
        );
    }
    let serve = &config.serve;
    let named = [
        ("source.consumer_group", &s.consumer_group),
        ("source.topic_pattern", &s.topic_pattern),
        ("serve.topic_pattern", &serve.topic_pattern),
        ("serve.schedule", &serve.schedule),
        ("serve.maintain_schedule", &serve.maintain_schedule),
    ];
    for (field, value) in named {
        if let Some(why) = value.as_deref().and_then(control_character) {
            push(out, field, why);
        }
    }
    match &s.topic_pattern {
        // Said above, without the value.
        Some(pattern) if control_character(pattern).is_some() => {}
        Some(pattern) => {
            if let Err(e) = Regex::new(pattern) {
                push(
                    out,
                    "source.topic_pattern",
                    format!(
                        "\"{pattern}\" is not a valid regex: {}; fix the pattern, e.g. \"^(customers|orders)$\"",
                        regex_error(&e)
                    ),
                );
            }
        }
        None if config.streams.is_empty() => push(
            out,
            "source.topic_pattern",
            "is unset and there is no [[streams]] entry, so no topic would be synced; set \
             topic_pattern = \"^(customers|orders)$\" or add [[streams]] entries",
        ),
        None => {}
    }
    super::validate_security::security(s, out);
    if s.max_threads == 0 {
        push(
            out,
            "source.max_threads",
            "is 0; set at least 1 (partitions read in parallel)",
        );
    }
}

/// `source.schema_registry_*`: an http(s) URL without credentials in it,
/// user and password together, a CA only for https, nothing without a URL.
fn schema_registry(config: &JobConfig, out: &mut Vec<ConfigProblem>) {
    let s = &config.source;
    let Some(url) = &s.schema_registry_url else {
        let set: Vec<&str> = [
            (
                "schema_registry_username",
                s.schema_registry_username.is_some(),
            ),
            (
                "schema_registry_password",
                s.schema_registry_password.is_some(),
            ),
            ("schema_registry_ca_pem", s.schema_registry_ca_pem.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, is_set)| is_set.then_some(name))
        .collect();
        if !set.is_empty() {
            push(
                out,
                "source.schema_registry_url",
                format!(
                    "is unset, so {} would not be used; set schema_registry_url = \
                     \"http://host:8081\", or remove them",
                    set.join(", ")
                ),
            );
        }
        return;
    };
    let field = "source.schema_registry_url";
    let https = url.starts_with("https://");
    if !(https || url.starts_with("http://")) {
        push(
            out,
            field,
            format!(
                "is not an http:// or https:// URL; write e.g. \"{}\"",
                crate::redact_urls(&format!("https://{}", without_scheme(url)))
            ),
        );
    }
    let authority = without_scheme(url)
        .split(['/', '?', '#'])
        .next()
        .unwrap_or("");
    if authority.contains('@') {
        push(
            out,
            field,
            "holds credentials (user:password@); write the URL without them, and set \
             schema_registry_username and schema_registry_password = \"${REGISTRY_PASSWORD}\"",
        );
    }
    match (&s.schema_registry_username, &s.schema_registry_password) {
        (Some(_), None) => push(
            out,
            "source.schema_registry_password",
            "is required with schema_registry_username; set schema_registry_password = \
             \"${REGISTRY_PASSWORD}\" and export REGISTRY_PASSWORD (Confluent Cloud: the API \
             secret), or remove the username",
        ),
        (None, Some(_)) => push(
            out,
            "source.schema_registry_username",
            "is required with schema_registry_password; set the registry user (Confluent \
             Cloud: the API key), or remove the password",
        ),
        _ => {}
    }
    if s.schema_registry_ca_pem.is_some() && url.starts_with("http://") {
        push(
            out,
            "source.schema_registry_ca_pem",
            "is set but schema_registry_url is http:// (no TLS); use an https:// URL, or \
             remove schema_registry_ca_pem",
        );
    }
}

/// `uri` without a leading `scheme://` (the value may hold a password, so
/// the message shows only the redacted suggestion).
fn without_scheme(uri: &str) -> &str {
    uri.split_once("://").map_or(uri, |(_, rest)| rest)
}

fn destination(config: &JobConfig, out: &mut Vec<ConfigProblem>) {
    let d = &config.destination;
    match d.catalog {
        CatalogKind::Rest => rest_destination(d, out),
        CatalogKind::Sql => sql_destination(d, out),
    }
    if let Some(namespace) = &d.namespace {
        if !is_identifier(namespace) {
            push(
                out,
                "destination.namespace",
                format!("\"{namespace}\" must be lower-case letters, digits and underscores (so every engine reads it unquoted); e.g. \"{}\"", super::sanitize_identifier(namespace)),
            );
        }
    }
    if let Some(v) = d.format_version {
        if v != 2 && v != 3 {
            push(
                out,
                "destination.format_version",
                format!("is {v}; Iceberg format version must be 2 or 3"),
            );
        }
    }
}

/// A REST catalog: its URI and warehouse, one kind of credential, S3 keys
/// in pairs, no SQL-only `path`.
fn rest_destination(d: &super::DestinationConfig, out: &mut Vec<ConfigProblem>) {
    match &d.uri {
        None => push(
            out,
            "destination.uri",
            "is required with catalog = \"rest\"; set the catalog's base URI, e.g. \
             uri = \"http://127.0.0.1:8181\" (Polaris: \"http://host:8181/api/catalog\")",
        ),
        Some(uri) if !(uri.starts_with("http://") || uri.starts_with("https://")) => push(
            out,
            "destination.uri",
            format!(
                "is not an http:// or https:// URI; write e.g. \"{}\"",
                crate::redact_urls(&format!("https://{}", without_scheme(uri)))
            ),
        ),
        Some(_) => {}
    }
    if d.warehouse.is_none() {
        push(
            out,
            "destination.warehouse",
            "is required with catalog = \"rest\"; set the warehouse (Polaris or Unity \
             catalog name, SeaweedFS table bucket), e.g. warehouse = \"lakehouse\"",
        );
    }
    rest_credential(d, out);
    if d.s3_access_key.is_some() != d.s3_secret_key.is_some() {
        push(
            out,
            "destination.s3_access_key",
            "s3_access_key and s3_secret_key go together; set both, or neither to use \
             the credentials the catalog or the environment provides",
        );
    }
    if d.path.is_some() {
        push(
            out,
            "destination.path",
            "is only used with catalog = \"sql\"; remove it (a REST catalog decides \
             where table files go)",
        );
    }
}

/// A REST catalog's `credential` (`client_id:client_secret`, not with
/// `token`), and the OAuth2 settings only it uses.
fn rest_credential(d: &super::DestinationConfig, out: &mut Vec<ConfigProblem>) {
    if let Some(credential) = &d.credential {
        match (credential.client_id(), credential.client_secret()) {
            (Some(id), Some(secret)) if !id.is_empty() && !secret.expose().is_empty() => {}
            (Some(_), Some(_)) => push(
                out,
                "destination.credential",
                "has an empty client id or secret; write \"client_id:client_secret\"",
            ),
            _ => push(
                out,
                "destination.credential",
                "has no ':'; write OAuth2 client credentials as \"client_id:client_secret\", \
                 or use token = \"...\" for a bearer token",
            ),
        }
        if d.token.is_some() {
            push(
                out,
                "destination.token",
                "is set together with credential; keep one: credential for OAuth2 client \
                 credentials, token for a static bearer token",
            );
        }
    } else {
        for (field, is_set) in [
            ("oauth2_server_uri", d.oauth2_server_uri.is_some()),
            ("scope", d.scope.is_some()),
        ] {
            if is_set {
                push(
                    out,
                    format!("destination.{field}"),
                    "is only used with credential (OAuth2 client credentials); set \
                     credential = \"client_id:client_secret\" or remove it",
                );
            }
        }
    }
}

/// The URI schemes of a SQL catalog's remote warehouse, by store.
const S3_SCHEMES: [&str; 3] = ["s3", "s3a", "s3n"];
const AZURE_SCHEMES: [&str; 6] = ["abfss", "abfs", "wasbs", "wasb", "az", "azure"];
const GCS_SCHEMES: [&str; 2] = ["gs", "gcs"];

/// A store's URI schemes, its name in a message, and its settings (name,
/// whether set).
type StoreFields<'a> = (&'a [&'a str], &'a str, Vec<(&'a str, bool)>);

fn sql_destination(d: &super::DestinationConfig, out: &mut Vec<ConfigProblem>) {
    let rest_only: Vec<&str> = [
        ("uri", d.uri.is_some()),
        ("credential", d.credential.is_some()),
        ("token", d.token.is_some()),
        ("oauth2_server_uri", d.oauth2_server_uri.is_some()),
        ("scope", d.scope.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, is_set)| is_set.then_some(name))
    .collect();
    if !rest_only.is_empty() {
        push(
            out,
            "destination.catalog",
            format!(
                "is \"sql\" (the embedded catalog, the default) but {} only apply to \
                 catalog = \"rest\"; add catalog = \"rest\", or remove them",
                rest_only.join(", ")
            ),
        );
    }
    let scheme = d.sql_warehouse_scheme().unwrap_or("");
    if let Some(warehouse) = &d.warehouse {
        let known = S3_SCHEMES
            .iter()
            .chain(&AZURE_SCHEMES)
            .chain(&GCS_SCHEMES)
            .any(|s| *s == scheme);
        if !known && !warehouse.starts_with("file://") {
            push(
                out,
                "destination.warehouse",
                format!(
                    "\"{}\" is not a storage URI; with catalog = \"sql\" the warehouse is where \
                     the tables go: s3://bucket/prefix, gs://bucket/prefix or \
                     abfss://container@account.dfs.core.windows.net/prefix (unset: the local path)",
                    crate::redact_urls(warehouse)
                ),
            );
        }
    }
    let stores: [StoreFields; 3] = [
        (
            &S3_SCHEMES,
            "an s3:// warehouse",
            vec![
                ("s3_endpoint", d.s3_endpoint.is_some()),
                ("s3_region", d.s3_region.is_some()),
                ("s3_access_key", d.s3_access_key.is_some()),
                ("s3_secret_key", d.s3_secret_key.is_some()),
                ("s3_path_style", d.s3_path_style.is_some()),
                ("ca_pem", d.ca_pem.is_some()),
            ],
        ),
        (
            &AZURE_SCHEMES,
            "an abfss:// or wasbs:// warehouse",
            vec![
                ("azure_account", d.azure_account.is_some()),
                ("azure_access_key", d.azure_access_key.is_some()),
                ("azure_endpoint", d.azure_endpoint.is_some()),
            ],
        ),
        (
            &GCS_SCHEMES,
            "a gs:// warehouse",
            vec![(
                "gcs_service_account_path",
                d.gcs_service_account_path.is_some(),
            )],
        ),
    ];
    for (schemes, store, fields) in stores {
        let unused: Vec<&str> = fields
            .into_iter()
            .filter_map(|(name, is_set)| is_set.then_some(name))
            .collect();
        if !unused.is_empty() && !schemes.contains(&scheme) {
            push(
                out,
                format!("destination.{}", unused[0]),
                format!(
                    "{} only apply to catalog = \"rest\" or to {store}; set \
                     destination.warehouse to such a URI, or remove them",
                    unused.join(", ")
                ),
            );
        }
    }
    if d.s3_access_key.is_some() != d.s3_secret_key.is_some() {
        push(
            out,
            "destination.s3_access_key",
            "s3_access_key and s3_secret_key go together; set both, or neither to use \
             the environment's credentials",
        );
    }
}

/// The regex crate's error on one line: its syntax errors span several
/// lines (pattern, caret, "error: ..."); keep the last.
fn regex_error(e: &regex::Error) -> String {
    let text = e.to_string();
    let last = text.lines().map(str::trim).rfind(|l| !l.is_empty());
    last.map_or(text.clone(), |l| {
        l.trim_start_matches("error: ").to_string()
    })
}

fn sync(config: &JobConfig, out: &mut Vec<ConfigProblem>) {
    if config.sync.target_file_size_mb == 0 {
        push(
            out,
            "sync.target_file_size_mb",
            "is 0; set the data file size in MiB, e.g. 128",
        );
    }
    if !(1..=22).contains(&config.sync.zstd_level) {
        push(
            out,
            "sync.zstd_level",
            format!(
                "{} is not a zstd level; use 1 (fastest, the default) to 22 (smallest files)",
                config.sync.zstd_level
            ),
        );
    }
    if config.sync.batch_rows == 0 {
        push(
            out,
            "sync.batch_rows",
            "is 0; set the rows per batch, e.g. 65536",
        );
    }
    if config.sync.commit_mb == 0 {
        push(
            out,
            "sync.commit_mb",
            "is 0; set how many megabytes of a table's messages a follower commits at most at once, e.g. 256",
        );
    }
    if config.sync.commit_records == 0 {
        push(
            out,
            "sync.commit_records",
            "is 0; set how many messages per table a follower commits at most at once, e.g. 1000000",
        );
    }
    if config.sync.max_columns < defaults::MIN_MAX_COLUMNS {
        push(
            out,
            "sync.max_columns",
            format!(
                "{} is too few: a table has 8 metadata columns; set at least {} (default {})",
                config.sync.max_columns,
                defaults::MIN_MAX_COLUMNS,
                defaults::max_columns()
            ),
        );
    }
}

fn maintain(config: &JobConfig, out: &mut Vec<ConfigProblem>) {
    let m = &config.maintain;
    if m.target_file_size_mb == 0 {
        push(
            out,
            "maintain.target_file_size_mb",
            "is 0; set the size compaction writes in MiB, e.g. 128",
        );
    }
    if m.min_input_files == 0 {
        push(
            out,
            "maintain.min_input_files",
            "is 0; set how many small files make a rewrite worth it, e.g. 5",
        );
    }
    if m.min_deleted_percent > 100 {
        push(
            out,
            "maintain.min_deleted_percent",
            format!(
                "is {}; set a percentage from 0 (any delete) to 100",
                m.min_deleted_percent
            ),
        );
    }
    if m.keep_snapshots == 0 {
        push(
            out,
            "maintain.keep_snapshots",
            "is 0; a table keeps at least its current snapshot: set 1 or more (default 10)",
        );
    }
    if m.max_manifests == 0 {
        push(
            out,
            "maintain.max_manifests",
            "is 0; set how many manifests a snapshot may have before they are rewritten, e.g. 100",
        );
    }
    for (field, text) in [
        ("maintain.max_snapshot_age", &m.max_snapshot_age),
        ("maintain.orphan_min_age", &m.orphan_min_age),
    ] {
        if let Err(why) = super::parse_duration(text) {
            push(out, field, why.to_string());
        }
    }
}
