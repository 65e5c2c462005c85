//! The service's objects are job-file pieces (docs/serve.md): a source is
//! the `[source]` table, a destination the `[destination]` table, stored as
//! JSON objects with exactly the job file's field names. This module turns
//! pieces into a job TOML ([`assemble_job_toml`]) and back
//! ([`split_job_toml`]), and keeps secrets write-only ([`redact`],
//! [`merge_secrets`]).

use std::path::Path;

use serde_json::{Map, Value};
use topicberg_core::JobConfig;

/// A source or destination: the job file's table as a JSON object.
pub type Piece = Map<String, Value>;

/// Which job-file table a piece is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PieceKind {
    /// `[source]`.
    Source,
    /// `[destination]`.
    Destination,
}

impl PieceKind {
    /// The job file's table name.
    pub fn table(self) -> &'static str {
        match self {
            Self::Source => "source",
            Self::Destination => "destination",
        }
    }

    /// The fields that hold secrets (write-only in the API).
    pub fn secrets(self) -> &'static [&'static str] {
        match self {
            Self::Source => &["sasl_password", "schema_registry_password"],
            Self::Destination => &["credential", "token", "s3_secret_key", "azure_access_key"],
        }
    }

    /// The environment variable an exported job file reads `field` from:
    /// `TOPICBERG_SOURCE_SASL_PASSWORD`.
    pub fn secret_env_var(self, field: &str) -> String {
        format!(
            "TOPICBERG_{}_{}",
            self.table().to_ascii_uppercase(),
            field.to_ascii_uppercase()
        )
    }
}

/// A piece that the job file's parser refuses.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct PieceError {
    /// What is wrong (field names and how to fix it; never a secret).
    pub message: String,
    /// The single problems (`field: message`), when there are several.
    pub problems: Vec<String>,
}

impl PieceError {
    fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            problems: Vec::new(),
        }
    }
}

/// The piece with every set secret replaced by `{"set": true}`, and the
/// URLs (`uri`, `oauth2_server_uri`, `s3_endpoint`, `schema_registry_url`)
/// through
/// [`redact_urls`](topicberg_core::redact_urls): a password written into a
/// URL comes back as `***`.
pub fn redact(kind: PieceKind, piece: &Piece) -> Piece {
    let mut out = piece.clone();
    for field in kind.secrets() {
        if out.contains_key(*field) {
            out.insert(field.to_string(), serde_json::json!({ "set": true }));
        }
    }
    for field in URL_FIELDS {
        if let Some(Value::String(url)) = out.get(field) {
            let shown = topicberg_core::redact_urls(url);
            out.insert(field.to_string(), Value::String(shown));
        }
    }
    out
}

/// The fields of a piece that hold URLs.
const URL_FIELDS: [&str; 4] = [
    "uri",
    "oauth2_server_uri",
    "s3_endpoint",
    "schema_registry_url",
];

/// A URL sent back as [`redact`] showed it keeps the stored one (with its
/// password); any other value replaces it.
fn keep_redacted_urls(old: Option<&Piece>, new: &mut Piece) {
    for field in URL_FIELDS {
        let stored = old.and_then(|o| o.get(field)).and_then(Value::as_str);
        let sent = new.get(field).and_then(Value::as_str);
        if let (Some(stored), Some(sent)) = (stored, sent) {
            if sent != stored && sent == topicberg_core::redact_urls(stored) {
                new.insert(field.to_string(), Value::String(stored.to_string()));
            }
        }
    }
}

/// Whether a value sent for a secret means "keep the stored one": absent,
/// or the `{"set": true}` placeholder the API returns.
fn keeps_secret(value: Option<&Value>) -> bool {
    match value {
        None => true,
        Some(Value::Object(o)) => o.get("set") == Some(&Value::Bool(true)),
        Some(_) => false,
    }
}

/// The address each secret is sent to: when it changes, the stored secret
/// is not carried over (it would go to the new address); the caller must
/// send it again.
fn secret_endpoints(kind: PieceKind) -> &'static [(&'static str, &'static [&'static str])] {
    match kind {
        PieceKind::Source => &[
            ("bootstrap_servers", &["sasl_password"]),
            ("schema_registry_url", &["schema_registry_password"]),
        ],
        PieceKind::Destination => &[
            ("uri", &["credential", "token"]),
            ("oauth2_server_uri", &["credential"]),
            ("s3_endpoint", &["s3_secret_key"]),
        ],
    }
}

/// The problems of keeping a stored secret whose address changed: each
/// secret the update keeps (leaves out or sends as `{"set": true}`) while
/// the field naming where it goes differs from the stored one.
fn moved_secrets(kind: PieceKind, old: &Piece, new: &Piece) -> Vec<String> {
    let mut problems = Vec::new();
    for (endpoint, secrets) in secret_endpoints(kind) {
        if old.get(*endpoint) == new.get(*endpoint) {
            continue;
        }
        for secret in *secrets {
            let stored = old.contains_key(*secret);
            if stored
                && keeps_secret(new.get(*secret))
                && !problems
                    .iter()
                    .any(|p: &String| p.starts_with(&format!("{}.{secret}:", kind.table())))
            {
                problems.push(format!(
                    "{}.{secret}: {endpoint} changed, so the stored {secret} is not sent to the new address; enter it again (or send null to remove it)",
                    kind.table()
                ));
            }
        }
    }
    problems
}

/// `new` with the secrets it leaves out (or sends as `{"set": true}`) taken
/// from `old`; a secret sent as `null` or `""` is removed. A URL sent back
/// redacted, as [`redact`] shows it, keeps the stored URL. A stored secret
/// whose address changed (`bootstrap_servers`, `schema_registry_url`,
/// `uri`, `oauth2_server_uri`, `s3_endpoint`) is not kept: the update must
/// send it again, else it is refused.
pub fn merge_secrets(
    kind: PieceKind,
    old: Option<&Piece>,
    mut new: Piece,
) -> Result<Piece, PieceError> {
    keep_redacted_urls(old, &mut new);
    if let Some(old) = old {
        let problems = moved_secrets(kind, old, &new);
        if !problems.is_empty() {
            return Err(PieceError {
                message: problems.join("; "),
                problems,
            });
        }
    }
    for field in kind.secrets() {
        if keeps_secret(new.get(*field)) {
            new.remove(*field);
            if let Some(value) = old.and_then(|o| o.get(*field)) {
                new.insert(field.to_string(), value.clone());
            }
        } else if matches!(new.get(*field), Some(Value::Null))
            || new.get(*field).and_then(Value::as_str) == Some("")
        {
            new.remove(*field);
        }
    }
    Ok(new)
}

/// How secrets (and paths) are written by [`assemble_job_toml`].
#[derive(Debug, Clone, Copy)]
pub enum Secrets<'a> {
    /// The stored values (escaped so `${` stays literal), for a run; relative
    /// paths and the default state folder are put under `data_dir`.
    Real {
        /// The service's data folder.
        data_dir: &'a Path,
    },
    /// `${TOPICBERG_<PIECE>_<FIELD>}` for each set secret, for an export.
    Placeholders,
}

/// A job's pieces, as the store holds them.
#[derive(Debug, Clone)]
pub struct JobPieces<'a> {
    /// The job's name.
    pub name: &'a str,
    /// `target_engines`.
    pub target_engines: &'a [String],
    /// The namespace override (written as `destination.namespace`).
    pub namespace: Option<&'a str>,
    /// The `[source]` piece.
    pub source: &'a Piece,
    /// The `[destination]` piece.
    pub destination: &'a Piece,
    /// The `[sync]` table.
    pub sync: &'a Piece,
    /// The `[[streams]]` entries.
    pub streams: &'a [Piece],
}

/// The job file of `job`.
pub fn assemble_job_toml(job: &JobPieces<'_>, secrets: Secrets<'_>) -> Result<String, PieceError> {
    let mut root = toml::Table::new();
    root.insert("name".into(), toml::Value::String(literal(job.name)));
    if !job.target_engines.is_empty() {
        root.insert(
            "target_engines".into(),
            toml::Value::Array(
                job.target_engines
                    .iter()
                    .map(|e| toml::Value::String(literal(e)))
                    .collect(),
            ),
        );
    }
    let mut source = piece_table(PieceKind::Source, job.source, secrets)?;
    if !job.streams.is_empty() {
        // The ticked streams are the job's topics (the job file's rule
        // without a pattern); the source's pattern only offers topics to
        // tick on the streams page.
        source.remove("topic_pattern");
    }
    let mut destination = piece_table(PieceKind::Destination, job.destination, secrets)?;
    if let Some(ns) = job.namespace.filter(|n| !n.is_empty()) {
        destination.insert("namespace".into(), toml::Value::String(literal(ns)));
    }
    let mut sync = object_table(job.sync, "sync")?;
    if let Secrets::Real { data_dir } = secrets {
        absolutize_paths(&mut source, &mut destination, &mut sync, job.name, data_dir);
    }
    root.insert("source".into(), toml::Value::Table(source));
    if !destination.is_empty() {
        root.insert("destination".into(), toml::Value::Table(destination));
    }
    if !sync.is_empty() {
        root.insert("sync".into(), toml::Value::Table(sync));
    }
    if !job.streams.is_empty() {
        let mut streams = Vec::new();
        for (i, s) in job.streams.iter().enumerate() {
            streams.push(toml::Value::Table(object_table(
                s,
                &format!("streams[{i}]"),
            )?));
        }
        root.insert("streams".into(), toml::Value::Array(streams));
    }
    toml::to_string(&root).map_err(|e| PieceError::new(format!("writing the job file: {e}")))
}

/// The piece as a TOML table, secrets per `secrets`.
fn piece_table(
    kind: PieceKind,
    piece: &Piece,
    secrets: Secrets<'_>,
) -> Result<toml::Table, PieceError> {
    let mut table = object_table(piece, kind.table())?;
    table.remove("name");
    for field in kind.secrets() {
        let Some(toml::Value::String(_)) = table.get(*field) else {
            continue;
        };
        // Real: already written literally (`literal`).
        if let Secrets::Placeholders = secrets {
            let written = format!("${{{}}}", kind.secret_env_var(field));
            table.insert(field.to_string(), toml::Value::String(written));
        }
    }
    Ok(table)
}

/// For a run inside the service: the embedded catalog's folder, the CA
/// file paths (Kafka's, the schema registry's, the destination's) and the
/// state folder are relative to the data folder (the service's
/// working directory is nobody's job-file folder).
fn absolutize_paths(
    source: &mut toml::Table,
    destination: &mut toml::Table,
    sync: &mut toml::Table,
    job_name: &str,
    data_dir: &Path,
) {
    let under = |value: &str| data_dir.join(value).display().to_string();
    for field in ["ssl_ca_pem", "schema_registry_ca_pem"] {
        if let Some(toml::Value::String(ca)) = source.get(field) {
            if !ca.contains("-----BEGIN") && Path::new(ca).is_relative() {
                let path = under(ca);
                source.insert(field.into(), toml::Value::String(path));
            }
        }
    }
    if let Some(toml::Value::String(ca)) = destination.get("ca_pem") {
        if !ca.contains("-----BEGIN") && Path::new(ca).is_relative() {
            let path = under(ca);
            destination.insert("ca_pem".into(), toml::Value::String(path));
        }
    }
    let sql = destination
        .get("catalog")
        .and_then(toml::Value::as_str)
        .is_none_or(|c| c == "sql");
    if sql {
        let path = match destination.get("path").and_then(toml::Value::as_str) {
            Some(p) if Path::new(p).is_absolute() => p.to_string(),
            Some(p) => under(p),
            None => under("warehouse"),
        };
        destination.insert("path".into(), toml::Value::String(path));
    }
    let state = match sync.get("state_dir").and_then(toml::Value::as_str) {
        Some(p) if Path::new(p).is_absolute() => p.to_string(),
        Some(p) => under(p),
        None => data_dir
            .join("state")
            .join(topicberg_core::config::sanitize_identifier(job_name))
            .display()
            .to_string(),
    };
    sync.insert("state_dir".into(), toml::Value::String(state));
}

/// A value from the API written into a job file as itself: `${` becomes
/// the job file's escape `$${`, so nothing the API is sent is filled in
/// from the service's environment (only the export's secret placeholders
/// are `${VAR}` references).
fn literal(text: &str) -> String {
    text.replace("${", "$${")
}

/// A job file's string read back as the literal text the job file means:
/// `$${` is `${`. `Err` with the variable's name when it holds a `${VAR}`
/// reference (its value would come from an environment).
fn unescape_literal(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
        } else if let Some(after) = rest.strip_prefix("${") {
            let name = after.split('}').next().unwrap_or_default();
            return Err(name.to_string());
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    Ok(out)
}

/// Every string in `value` made literal ([`unescape_literal`]); each
/// `${VAR}` reference is a problem naming its field.
fn literal_strings(value: &mut Value, at: &str, problems: &mut Vec<String>) {
    match value {
        Value::String(s) => match unescape_literal(s) {
            Ok(text) => *s = text,
            Err(var) => problems.push(format!(
                "{at}: ${{{var}}} would be read from the service's environment, which the service does not do for settings; write the value itself (only secrets may be given as ${{VAR}}, and are then set later)"
            )),
        },
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                literal_strings(item, &format!("{at}[{i}]"), problems);
            }
        }
        Value::Object(o) => {
            for (k, v) in o.iter_mut() {
                literal_strings(v, &format!("{at}.{k}"), problems);
            }
        }
        _ => {}
    }
}

fn object_table(object: &Piece, at: &str) -> Result<toml::Table, PieceError> {
    let mut table = toml::Table::new();
    for (key, value) in object {
        if let Some(v) = json_to_toml(value, &format!("{at}.{key}"))? {
            table.insert(key.clone(), v);
        }
    }
    Ok(table)
}

/// A JSON value as TOML; `null` is "unset" (`None`).
fn json_to_toml(value: &Value, at: &str) -> Result<Option<toml::Value>, PieceError> {
    Ok(Some(match value {
        Value::Null => return Ok(None),
        Value::Bool(b) => toml::Value::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => toml::Value::Integer(i),
            None => toml::Value::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => toml::Value::String(literal(s)),
        Value::Array(items) => {
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                if let Some(v) = json_to_toml(item, &format!("{at}[{i}]"))? {
                    out.push(v);
                }
            }
            toml::Value::Array(out)
        }
        Value::Object(o) if o.get("set") == Some(&Value::Bool(true)) => {
            return Err(PieceError::new(format!(
                "{at}: {{\"set\": true}} stands for a stored secret, and none is stored; send the value"
            )))
        }
        Value::Object(o) => toml::Value::Table(object_table(o, at)?),
    }))
}

/// A TOML value as JSON (datetimes as their text).
fn toml_to_json(value: &toml::Value) -> Value {
    match value {
        toml::Value::String(s) => Value::String(s.clone()),
        toml::Value::Integer(i) => Value::from(*i),
        toml::Value::Float(f) => Value::from(*f),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(items) => Value::Array(items.iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.clone(), toml_to_json(v)))
                .collect(),
        ),
    }
}

/// The environment a job file is checked with before it is stored: the
/// process environment, and a stand-in value for any variable it lacks (a
/// secret placeholder is filled in only when the job runs).
pub fn lenient_env(name: &str) -> Option<String> {
    Some(std::env::var(name).unwrap_or_else(|_| "topicberg:placeholder".to_string()))
}

/// Parses and validates `text` as a job file with [`lenient_env`]; the
/// error lists every problem (never a secret: the parser quotes none).
pub fn check_job_toml(text: &str) -> Result<JobConfig, PieceError> {
    JobConfig::from_toml_str(text, lenient_env).map_err(|e| PieceError {
        message: e.to_string().replace("<inline>", "job"),
        problems: e.problems().iter().map(ToString::to_string).collect(),
    })
}

/// Checks a source or destination on its own: the job file's parser on a
/// file holding just this piece; problems of other tables are left out.
pub fn validate_piece(kind: PieceKind, piece: &Piece) -> Result<(), PieceError> {
    let empty = Piece::new();
    let stand_in: Piece = serde_json::from_value(serde_json::json!({
        "bootstrap_servers": "127.0.0.1:9092",
        "topic_pattern": ".*",
    }))
    .expect("stand-in source");
    let (source, destination) = match kind {
        PieceKind::Source => (piece, &empty),
        PieceKind::Destination => (&stand_in, piece),
    };
    let job = JobPieces {
        name: "piece_check",
        target_engines: &[],
        namespace: None,
        source,
        destination,
        sync: &empty,
        streams: &[],
    };
    let text = assemble_job_toml(&job, Secrets::Placeholders)?;
    match JobConfig::from_toml_str(&text, lenient_env) {
        Ok(_) => Ok(()),
        Err(e) if e.problems().is_empty() => Err(PieceError::new(
            e.to_string()
                .replace("<inline>: ", "")
                .replace("<inline>", ""),
        )),
        Err(e) => {
            let prefix = format!("{}.", kind.table());
            // Unknown keys are reported on the table: `[source]`.
            let table = format!("[{}]", kind.table());
            let no_pattern = !piece.contains_key("topic_pattern");
            let problems: Vec<String> = e
                .problems()
                .iter()
                .filter(|p| p.field.starts_with(&prefix) || p.field == table)
                // Without a pattern the job's [[streams]] select the topics.
                .filter(|p| !(no_pattern && p.field == "source.topic_pattern"))
                .map(ToString::to_string)
                .collect();
            if problems.is_empty() {
                Ok(())
            } else {
                Err(PieceError {
                    message: problems.join("; "),
                    problems,
                })
            }
        }
    }
}

/// A job file split into pieces (for import).
#[derive(Debug, Clone)]
pub struct SplitJob {
    /// The job's name.
    pub name: String,
    /// `target_engines`.
    pub target_engines: Vec<String>,
    /// `destination.namespace`, moved to the job.
    pub namespace: Option<String>,
    /// `[source]`, secrets given as `${VAR}` left out.
    pub source: Piece,
    /// `[destination]` without `namespace`, secrets given as `${VAR}` left out.
    pub destination: Piece,
    /// `[sync]`.
    pub sync: Piece,
    /// `[[streams]]`.
    pub streams: Vec<Piece>,
}

/// Splits a job file into pieces after checking it with the job file's
/// parser ([`check_job_toml`]). A secret written as a `${VAR}` reference
/// (as an export writes it) is left unset; set it with an update.
pub fn split_job_toml(text: &str) -> Result<SplitJob, PieceError> {
    check_job_toml(text)?;
    let root: toml::Table =
        toml::from_str(text).map_err(|e| PieceError::new(format!("job file: {}", e.message())))?;
    let table = |key: &str| -> Piece {
        match root.get(key) {
            Some(toml::Value::Table(t)) => match toml_to_json(&toml::Value::Table(t.clone())) {
                Value::Object(o) => o,
                _ => Piece::new(),
            },
            _ => Piece::new(),
        }
    };
    let mut source = table("source");
    let mut destination = table("destination");
    for (kind, piece) in [
        (PieceKind::Source, &mut source),
        (PieceKind::Destination, &mut destination),
    ] {
        for field in kind.secrets() {
            if let Some(Value::String(s)) = piece.get(*field) {
                if is_env_reference(s) {
                    piece.remove(*field);
                }
            }
        }
    }
    // Every other value is kept as the text it stands for; a `${VAR}` in
    // it is refused (the service fills nothing from its environment).
    let mut problems = Vec::new();
    let mut whole = Value::Object(Piece::from_iter([
        ("source".to_string(), Value::Object(source)),
        ("destination".to_string(), Value::Object(destination)),
        ("sync".to_string(), Value::Object(table("sync"))),
        (
            "streams".to_string(),
            match root.get("streams") {
                Some(streams @ toml::Value::Array(_)) => toml_to_json(streams),
                _ => Value::Array(Vec::new()),
            },
        ),
        (
            "name".to_string(),
            root.get("name").map(toml_to_json).unwrap_or_default(),
        ),
        (
            "target_engines".to_string(),
            root.get("target_engines")
                .map(toml_to_json)
                .unwrap_or_default(),
        ),
    ]));
    if let Value::Object(o) = &mut whole {
        for (key, value) in o.iter_mut() {
            literal_strings(value, key, &mut problems);
        }
    }
    if !problems.is_empty() {
        return Err(PieceError {
            message: problems.join("; "),
            problems,
        });
    }
    let mut take = |key: &str| whole.get_mut(key).map(Value::take).unwrap_or_default();
    let object = |v: Value| match v {
        Value::Object(o) => o,
        _ => Piece::new(),
    };
    let source = object(take("source"));
    let mut destination = object(take("destination"));
    let sync = object(take("sync"));
    let streams = match take("streams") {
        Value::Array(items) => items.into_iter().map(object).collect(),
        _ => Vec::new(),
    };
    let name = take("name").as_str().unwrap_or_default().to_string();
    let target_engines = match take("target_engines") {
        Value::Array(items) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    };
    let namespace = destination
        .remove("namespace")
        .and_then(|v| v.as_str().map(str::to_string));
    Ok(SplitJob {
        name,
        target_engines,
        namespace,
        source,
        destination,
        sync,
        streams,
    })
}

/// `${NAME}` and nothing else.
fn is_env_reference(text: &str) -> bool {
    text.strip_prefix("${")
        .and_then(|t| t.strip_suffix('}'))
        .is_some_and(|name| {
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn piece(v: Value) -> Piece {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn redact_and_merge_keep_secrets_write_only() {
        let stored = piece(json!({"bootstrap_servers": "b:1", "sasl_password": "s3cr3t"}));
        let shown = redact(PieceKind::Source, &stored);
        assert_eq!(shown["sasl_password"], json!({"set": true}));
        assert!(!serde_json::to_string(&shown).unwrap().contains("s3cr3t"));
        let kept = merge_secrets(PieceKind::Source, Some(&stored), shown.clone()).unwrap();
        assert_eq!(kept["sasl_password"], "s3cr3t");
        let left_out = piece(json!({"bootstrap_servers": "b:1", "sasl_username": "u"}));
        let kept = merge_secrets(PieceKind::Source, Some(&stored), left_out).unwrap();
        assert_eq!(kept["sasl_password"], "s3cr3t");
        let cleared = piece(json!({"bootstrap_servers": "b:2", "sasl_password": null}));
        let cleared = merge_secrets(PieceKind::Source, Some(&stored), cleared).unwrap();
        assert!(!cleared.contains_key("sasl_password"));
    }

    #[test]
    fn a_password_in_a_url_is_shown_redacted_and_kept_on_update() {
        let stored = piece(json!({"catalog": "rest", "uri": "http://u:pw9@h/c", "warehouse": "w"}));
        let shown = redact(PieceKind::Destination, &stored);
        assert_eq!(shown["uri"], "http://u:***@h/c");
        let kept = merge_secrets(PieceKind::Destination, Some(&stored), shown.clone()).unwrap();
        assert_eq!(kept["uri"], "http://u:pw9@h/c");
        let changed = piece(json!({"catalog": "rest", "uri": "http://h2/c", "warehouse": "w"}));
        let changed = merge_secrets(PieceKind::Destination, Some(&stored), changed).unwrap();
        assert_eq!(changed["uri"], "http://h2/c");
    }

    #[test]
    fn assemble_split_round_trip_with_placeholders() {
        let source = piece(json!({
            "bootstrap_servers": "b:1", "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN", "sasl_username": "u", "sasl_password": "p${x}",
            "topic_pattern": "^(a|b)$"
        }));
        let destination = piece(json!({"catalog": "sql", "path": "wh"}));
        let streams = vec![piece(
            json!({"topic": "a", "mode": "upsert", "dedup_keys": ["id"]}),
        )];
        let engines = vec!["spark".to_string()];
        let job = JobPieces {
            name: "j1",
            target_engines: &engines,
            namespace: Some("ns1"),
            source: &source,
            destination: &destination,
            sync: &Piece::new(),
            streams: &streams,
        };
        let exported = assemble_job_toml(&job, Secrets::Placeholders).unwrap();
        assert!(
            exported.contains("${TOPICBERG_SOURCE_SASL_PASSWORD}"),
            "{exported}"
        );
        assert!(!exported.contains("p${x}"));
        let split = split_job_toml(&exported).unwrap();
        assert!(!split.source.contains_key("sasl_password"));
        assert_eq!(split.namespace.as_deref(), Some("ns1"));
        assert_eq!(split.streams, streams);

        let dir = Path::new("/data");
        let real = assemble_job_toml(&job, Secrets::Real { data_dir: dir }).unwrap();
        let config = JobConfig::from_toml_str(&real, |_| None).unwrap();
        assert_eq!(
            config.source.sasl_password.as_ref().unwrap().expose(),
            "p${x}"
        );
        assert_eq!(config.namespace(), "ns1");
        assert_eq!(
            config.destination.path.as_deref(),
            Some(Path::new("/data/wh"))
        );
        assert_eq!(config.sync.state_dir, Path::new("/data/state/j1"));
    }

    #[test]
    fn a_stored_secret_is_not_kept_when_its_address_changes() {
        let stored = piece(
            json!({"catalog": "rest", "uri": "http://a/c", "warehouse": "w",
            "credential": "id:s3cr3t", "s3_endpoint": "http://s3", "s3_secret_key": "k"}),
        );
        let mut moved = redact(PieceKind::Destination, &stored);
        moved.insert("uri".into(), json!("http://evil/c"));
        let e = merge_secrets(PieceKind::Destination, Some(&stored), moved.clone()).unwrap_err();
        assert_eq!(e.problems.len(), 1, "{e:?}");
        assert!(
            e.message.contains("destination.credential: uri changed"),
            "{}",
            e.message
        );
        moved.insert("credential".into(), json!("id:new"));
        let merged = merge_secrets(PieceKind::Destination, Some(&stored), moved).unwrap();
        assert_eq!(merged["credential"], "id:new");
        assert_eq!(
            merged["s3_secret_key"], "k",
            "its own address did not change"
        );
        let mut left_out = stored.clone();
        left_out.remove("s3_secret_key");
        left_out.insert("s3_endpoint".into(), json!("http://other"));
        let e = merge_secrets(PieceKind::Destination, Some(&stored), left_out).unwrap_err();
        assert!(
            e.message
                .contains("destination.s3_secret_key: s3_endpoint changed"),
            "{}",
            e.message
        );
        assert!(!format!("{e:?}").contains("s3cr3t"));
    }

    #[test]
    fn strings_are_written_literally_and_references_refused_on_import() {
        let source = piece(json!({"bootstrap_servers": "${HOME}:9092", "topic_pattern": "^a$"}));
        let job = JobPieces {
            name: "j${X}",
            target_engines: &[],
            namespace: Some("n1"),
            source: &source,
            destination: &Piece::new(),
            sync: &Piece::new(),
            streams: &[],
        };
        let text = assemble_job_toml(&job, Secrets::Placeholders).unwrap();
        let config = JobConfig::from_toml_str(&text, |_| Some("FILLED".into())).unwrap();
        assert_eq!(config.source.bootstrap_servers, "${HOME}:9092");
        assert_eq!(config.name, "j${X}");
        let split = split_job_toml(&text).unwrap();
        assert_eq!(split.source["bootstrap_servers"], "${HOME}:9092");
        assert_eq!(split.name, "j${X}");
        assert_eq!(split.namespace.as_deref(), Some("n1"));
        let e = split_job_toml(
            "name = \"j\"\n[source]\nbootstrap_servers = \"${KAFKA}:9092\"\ntopic_pattern = \"a\"\n",
        )
        .unwrap_err();
        assert!(
            e.message.contains("source.bootstrap_servers: ${KAFKA}"),
            "{}",
            e.message
        );
        assert_eq!(unescape_literal("a$${b$$${c").unwrap(), "a${b$${c");
    }

    #[test]
    fn validate_piece_reports_only_its_own_fields() {
        let ok = piece(json!({"bootstrap_servers": "b:1"}));
        validate_piece(PieceKind::Source, &ok).unwrap();
        let bad = piece(json!({"bootstrap_servers": "b:1", "sasl_pasword": "x"}));
        let e = validate_piece(PieceKind::Source, &bad).unwrap_err();
        assert!(e.message.contains("sasl_pasword"), "{}", e.message);
        assert!(!e.message.contains("x\""), "{}", e.message);
        let sasl =
            piece(json!({"bootstrap_servers": "b:1", "security_protocol": "SASL_PLAINTEXT"}));
        let e = validate_piece(PieceKind::Source, &sasl).unwrap_err();
        assert!(e.message.contains("source.sasl_mechanism"), "{}", e.message);
        let dest = piece(json!({"catalog": "rest"}));
        let e = validate_piece(PieceKind::Destination, &dest).unwrap_err();
        assert!(e.message.contains("destination.uri"), "{}", e.message);
    }

    #[test]
    fn a_secret_of_the_wrong_type_is_refused_without_its_value() {
        for value in [
            json!(739152864),
            json!(["a739152864"]),
            json!({"x": "739152864"}),
        ] {
            let source = piece(json!({"bootstrap_servers": "b:1", "sasl_password": value}));
            let e = validate_piece(PieceKind::Source, &source).unwrap_err();
            assert!(!format!("{e:?}").contains("739152864"), "{e:?}");
            assert!(
                e.message.contains("must be a quoted string"),
                "{}",
                e.message
            );
            let dest = piece(
                json!({"catalog": "rest", "uri": "http://h", "warehouse": "w",
                "s3_secret_key": value}),
            );
            let e = validate_piece(PieceKind::Destination, &dest).unwrap_err();
            assert!(!format!("{e:?}").contains("739152864"), "{e:?}");
        }
    }

    #[test]
    fn the_registry_password_is_write_only_and_exported_as_a_placeholder() {
        let stored = piece(json!({
            "bootstrap_servers": "b:1", "topic_pattern": "^orders$",
            "schema_registry_url": "https://sr:8081",
            "schema_registry_username": "APIKEY",
            "schema_registry_password": "sr-s3cr3t",
            "schema_registry_ca_pem": "-----BEGIN CERTIFICATE-----\nMIIB\n",
        }));
        validate_piece(PieceKind::Source, &stored).unwrap();
        let shown = redact(PieceKind::Source, &stored);
        assert_eq!(shown["schema_registry_password"], json!({"set": true}));
        assert_eq!(shown["schema_registry_username"], "APIKEY");
        assert!(!serde_json::to_string(&shown).unwrap().contains("sr-s3cr3t"));
        let kept = merge_secrets(PieceKind::Source, Some(&stored), shown).unwrap();
        assert_eq!(
            kept, stored,
            "a form sending back what it was shown keeps it all"
        );

        let streams = vec![piece(
            json!({"topic": "orders", "value_format": "avro", "key_format": "json"}),
        )];
        let job = JobPieces {
            name: "j",
            target_engines: &[],
            namespace: None,
            source: &stored,
            destination: &Piece::new(),
            sync: &Piece::new(),
            streams: &streams,
        };
        let exported = assemble_job_toml(&job, Secrets::Placeholders).unwrap();
        assert!(!exported.contains("sr-s3cr3t"), "{exported}");
        assert!(
            exported.contains("${TOPICBERG_SOURCE_SCHEMA_REGISTRY_PASSWORD}"),
            "{exported}"
        );
        let split = split_job_toml(&exported).unwrap();
        assert!(!split.source.contains_key("schema_registry_password"));
        assert_eq!(split.source["schema_registry_url"], "https://sr:8081");
        assert_eq!(
            split.source["schema_registry_ca_pem"],
            stored["schema_registry_ca_pem"]
        );
        assert_eq!(split.streams, streams, "the formats survive export/import");

        let mut by_path = stored.clone();
        by_path.insert("schema_registry_ca_pem".into(), json!("certs/sr.pem"));
        let job = JobPieces {
            source: &by_path,
            ..job
        };
        let real = assemble_job_toml(
            &job,
            Secrets::Real {
                data_dir: Path::new("/data"),
            },
        );
        let real = real.unwrap();
        assert!(
            real.contains("schema_registry_ca_pem = \"/data/certs/sr.pem\""),
            "{real}"
        );
        assert!(
            real.contains("schema_registry_password = \"sr-s3cr3t\""),
            "{real}"
        );
    }

    #[test]
    fn a_registry_url_with_a_password_is_refused_and_shown_redacted() {
        let source = piece(json!({
            "bootstrap_servers": "b:1",
            "schema_registry_url": "https://key:pw77@sr:8081",
        }));
        let e = validate_piece(PieceKind::Source, &source).unwrap_err();
        assert!(
            e.message.contains("source.schema_registry_url"),
            "{}",
            e.message
        );
        assert!(!e.message.contains("pw77"), "{}", e.message);
        let shown = redact(PieceKind::Source, &source);
        assert_eq!(shown["schema_registry_url"], "https://key:***@sr:8081");
    }
}
