//! Job-file pieces -> a job TOML ([`assemble_job_toml`]) and back
//! ([`split_job_toml`]); every string written literally, checked by the
//! job file's own parser ([`check_job_toml`], [`validate_piece`]).

use std::path::Path;

use serde_json::Value;
use topicberg_core::config::{JobMode, ServeSection};
use topicberg_core::JobConfig;

use super::{Piece, PieceError, PieceKind};

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
    /// The `[maintain]` table.
    pub maintain: &'a Piece,
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
    let maintain = object_table(job.maintain, "maintain")?;
    if !maintain.is_empty() {
        root.insert("maintain".into(), toml::Value::Table(maintain));
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
    for field in [
        "ssl_ca_pem",
        "ssl_certificate_pem",
        "ssl_key_pem",
        "schema_registry_ca_pem",
    ] {
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

/// A setting that holds a `${VAR}` reference: its value would come from an
/// environment, which the service does not read for settings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "${{{variable}}} would be read from the service's environment, which the service does not \
     do for settings; write the value itself (only secrets may be given as ${{VAR}}, and are \
     then set later)"
)]
pub(super) struct EnvironmentReference {
    /// The variable's name.
    pub(super) variable: String,
}

/// A job file's string read back as the literal text the job file means:
/// `$${` is `${`. `Err` naming the variable when it holds a `${VAR}`
/// reference (its value would come from an environment).
pub(super) fn unescape_literal(text: &str) -> Result<String, EnvironmentReference> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
        } else if let Some(after) = rest.strip_prefix("${") {
            let name = after.split('}').next().unwrap_or_default();
            return Err(EnvironmentReference {
                variable: name.to_string(),
            });
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
            Err(e) => problems.push(format!("{at}: {e}")),
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
    Some(std::env::var(name).unwrap_or_else(|_| {
        if name.ends_with("_KEY_PEM") {
            // A private key is checked for its PEM shape: the stand-in has it.
            "-----BEGIN PRIVATE KEY-----\ntopicberg:placeholder\n-----END PRIVATE KEY-----\n"
                .to_string()
        } else {
            "topicberg:placeholder".to_string()
        }
    }))
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
        maintain: &empty,
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

/// The `[serve]` settings of a job an export writes: its schedules and
/// mode, and the source's pattern when the job's streams name its topics
/// (the job file's `[source]` leaves the pattern out then).
pub fn export_serve(
    schedule: &str,
    maintain_schedule: &str,
    mode: JobMode,
    source: &Piece,
    has_streams: bool,
) -> ServeSection {
    let text = |s: &str| (!s.is_empty()).then(|| s.to_string());
    let offered = source.get("topic_pattern").and_then(|p| p.as_str());
    ServeSection {
        schedule: text(schedule),
        maintain_schedule: text(maintain_schedule),
        mode,
        topic_pattern: offered.filter(|_| has_streams).map(str::to_string),
    }
}

/// The `[serve]` table an export appends to the job file (nothing when
/// `serve` sets nothing).
pub fn serve_toml(serve: &ServeSection) -> Result<String, PieceError> {
    if serve.is_empty() {
        return Ok(String::new());
    }
    let table =
        toml::to_string(serve).map_err(|e| PieceError::new(format!("writing [serve]: {e}")))?;
    Ok(format!(
        "\n# The service's own settings (topicberg sync ignores them).\n[serve]\n{table}"
    ))
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
    /// `[maintain]`.
    pub maintain: Piece,
    /// `[serve]`: the schedules and the mode (its `topic_pattern` is put
    /// back into `source`).
    pub serve: ServeSection,
    /// The secrets written as `${VAR}` (`source.sasl_password`, ...), left
    /// unset.
    pub unset_secrets: Vec<String>,
}

/// Removes the secrets of `piece` written as `${VAR}` references (as an
/// export writes them); returns their names (`source.sasl_password`).
fn take_env_secrets(kind: PieceKind, piece: &mut Piece) -> Vec<String> {
    let mut taken = Vec::new();
    for field in kind.secrets() {
        if let Some(Value::String(s)) = piece.get(*field) {
            if is_env_reference(s) {
                piece.remove(*field);
                taken.push(format!("{}.{field}", kind.table()));
            }
        }
    }
    taken
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
    let mut unset_secrets = take_env_secrets(PieceKind::Source, &mut source);
    unset_secrets.extend(take_env_secrets(PieceKind::Destination, &mut destination));
    // Every other value is kept as the text it stands for; a `${VAR}` in
    // it is refused (the service fills nothing from its environment).
    let mut problems = Vec::new();
    let mut whole = Value::Object(Piece::from_iter([
        ("source".to_string(), Value::Object(source)),
        ("destination".to_string(), Value::Object(destination)),
        ("sync".to_string(), Value::Object(table("sync"))),
        ("maintain".to_string(), Value::Object(table("maintain"))),
        ("serve".to_string(), Value::Object(table("serve"))),
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
    let mut source = object(take("source"));
    let mut destination = object(take("destination"));
    let sync = object(take("sync"));
    let maintain = object(take("maintain"));
    // check_job_toml read it as the job file's [serve] already.
    let mut serve: ServeSection = serde_json::from_value(take("serve")).unwrap_or_default();
    // The pattern the service's streams page offers topics from is the
    // source's (the job file's [source] leaves it out when streams name
    // the topics).
    if let Some(pattern) = serve.topic_pattern.take() {
        source
            .entry("topic_pattern")
            .or_insert(Value::String(pattern));
    }
    let streams = match take("streams") {
        Value::Array(items) => items.into_iter().map(object).collect(),
        _ => Vec::new(),
    };
    let name = take("name").as_str().unwrap_or_default().to_string();
    let target_engines = strings(take("target_engines"));
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
        maintain,
        serve,
        unset_secrets,
    })
}

/// The strings of a JSON array (nothing for another value).
fn strings(value: Value) -> Vec<String> {
    match value {
        Value::Array(items) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
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
