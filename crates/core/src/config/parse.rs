//! From text to a [`JobConfig`]: parse with spans, interpolate `${VAR}` in
//! string values, deserialise, resolve files, validate.

use std::path::{Component, Path, PathBuf};

use serde::Deserialize;
use toml::de::{DeTable, DeValue, Deserializer};

use super::error::line_column;
use super::interpolate::{interpolate, InterpolationError};
use super::{defaults, unknown, validate, CatalogKind, ConfigError, ConfigProblem, JobConfig};
use crate::Secret;

type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The whole pipeline; `base` is the job file's folder (`None`: relative
/// paths stay relative to the current folder).
pub(super) fn load_text(
    text: &str,
    file: &str,
    env: Env<'_>,
    base: Option<&Path>,
) -> Result<JobConfig, ConfigError> {
    let mut root = DeTable::parse(text).map_err(|e| parse_error(file, text, &e))?;

    let mut found = Vec::new();
    interpolate_table(root.get_mut(), "", text, env, &mut found);
    let unknown = unknown::take_unknown_keys(root.get_mut(), text);
    if !found.is_empty() {
        found.extend(unknown);
        found.sort_by_key(|(at, _)| *at);
        return Err(ConfigError::Invalid {
            file: file.to_string(),
            problems: found.into_iter().map(|(_, p)| p).collect(),
        });
    }

    let mut config = JobConfig::deserialize(Deserializer::from(root))
        .map_err(|e| parse_error(file, text, &e))?;

    let mut problems: Vec<ConfigProblem> = unknown.into_iter().map(|(_, p)| p).collect();
    problems.extend(resolve(&mut config, base));
    problems.extend(validate::problems(&config));
    if problems.is_empty() {
        Ok(config)
    } else {
        Err(ConfigError::Invalid {
            file: file.to_string(),
            problems,
        })
    }
}

/// A TOML or shape error with its line and column, and the table it is in.
/// Rendered from the message and span only: toml's own rendering quotes the
/// source line, which may hold a secret.
fn parse_error(file: &str, text: &str, err: &toml::de::Error) -> ConfigError {
    let (line, column) = match err.span() {
        Some(span) => {
            let (l, c) = line_column(text, span.start);
            (Some(l), Some(c))
        }
        None => (None, None),
    };
    let mut message = err.message().trim_end().to_string();
    // Without the input attached, toml's Display ends with "in `a.b`", the
    // table holding the offending key.
    if let Some(keys) = err.to_string().lines().find_map(|l| l.strip_prefix("in `")) {
        let keys = keys.trim_end_matches('`');
        message.push_str(&format!(" (in [{keys}])"));
    }
    ConfigError::Parse {
        file: file.to_string(),
        line,
        column,
        message,
    }
}

/// Whether the dotted `path` (`source.sasl_password`, `a.b[0]`) ends in a
/// secret field.
fn is_secret_path(path: &str) -> bool {
    let last = path.rsplit('.').next().unwrap_or(path);
    let last = last.split('[').next().unwrap_or(last);
    crate::SECRET_FIELDS.contains(&last)
}

fn interpolate_table(
    table: &mut DeTable<'_>,
    prefix: &str,
    text: &str,
    env: Env<'_>,
    found: &mut Vec<(usize, ConfigProblem)>,
) {
    for (key, value) in table.iter_mut() {
        let path = if prefix.is_empty() {
            key.get_ref().to_string()
        } else {
            format!("{prefix}.{}", key.get_ref())
        };
        let start = value.span().start;
        interpolate_value(value.get_mut(), &path, start, text, env, found);
    }
}

fn interpolate_value(
    value: &mut DeValue<'_>,
    path: &str,
    start: usize,
    text: &str,
    env: Env<'_>,
    found: &mut Vec<(usize, ConfigProblem)>,
) {
    match value {
        DeValue::String(s) => match interpolate(s, env) {
            Ok(None) => {}
            Ok(Some(expanded)) => *s = expanded.into(),
            Err(errors) => {
                let (line, _) = line_column(text, start);
                for error in errors {
                    let message = match error {
                        InterpolationError::Missing(var) => format!(
                            "environment variable {var} is not set (line {line}); \
                             export {var}, or write $${{ for a literal ${{"
                        ),
                        InterpolationError::Malformed(what) => format!(
                            "malformed {} (line {line}); write ${{NAME}} with letters, \
                             digits and underscores, or $${{ for a literal ${{",
                            if is_secret_path(path) {
                                "${...} (not shown: the field holds a secret)".to_string()
                            } else {
                                what
                            }
                        ),
                    };
                    found.push((start, ConfigProblem::new(path, message)));
                }
            }
        },
        DeValue::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                let start = item.span().start;
                let path = format!("{path}[{i}]");
                interpolate_value(item.get_mut(), &path, start, text, env, found);
            }
        }
        DeValue::Table(table) => interpolate_table(table, path, text, env, found),
        DeValue::Integer(_) | DeValue::Float(_) | DeValue::Boolean(_) | DeValue::Datetime(_) => {}
    }
}

/// Fills in what depends on the job or the file's folder: the consumer
/// group, the CA files' text, the embedded catalog's folder, the compiled
/// topic pattern. Returns the files it could not read.
fn resolve(config: &mut JobConfig, base: Option<&Path>) -> Vec<ConfigProblem> {
    let mut problems = Vec::new();
    if config.source.consumer_group.is_none() {
        config.source.consumer_group = Some(defaults::consumer_group(&config.name));
    }
    for (field, value) in [
        ("source.ssl_ca_pem", &mut config.source.ssl_ca_pem),
        (
            "source.schema_registry_ca_pem",
            &mut config.source.schema_registry_ca_pem,
        ),
        ("destination.ca_pem", &mut config.destination.ca_pem),
    ] {
        if let Some(text) = value.as_deref() {
            match pem_text(text, base, "CA certificate") {
                Ok(pem) => *value = Some(pem),
                Err(e) => problems.push(ConfigProblem::new(field, e.to_string())),
            }
        }
    }
    if let Some(text) = config.source.ssl_certificate_pem.as_deref() {
        match pem_text(text, base, "client certificate") {
            Ok(pem) => config.source.ssl_certificate_pem = Some(pem),
            Err(e) => problems.push(ConfigProblem::new(
                "source.ssl_certificate_pem",
                e.to_string(),
            )),
        }
    }
    if let Some(key) = &config.source.ssl_key_pem {
        // The message never quotes the value: it may be the key itself.
        match pem_text(key.expose(), base, "private key") {
            Ok(pem) => config.source.ssl_key_pem = Some(Secret::from(pem)),
            Err(_) => problems.push(ConfigProblem::new(
                "source.ssl_key_pem",
                "is neither PEM text (a -----BEGIN PRIVATE KEY----- block) nor a readable PEM \
                 file (its value is not shown); give the key's PEM text or fix the path \
                 (relative to the job file's folder)",
            )),
        }
    }
    if config.destination.catalog == CatalogKind::Sql {
        let path = config.destination.sql_path();
        config.destination.path = Some(relative_to(base, &path));
    }
    if let Some(path) = &config.destination.gcs_service_account_path {
        config.destination.gcs_service_account_path = Some(relative_to(base, path));
    }
    config.sync.state_dir = relative_to(base, &config.sync.state_dir);
    problems
}

/// Why a PEM setting (`ssl_ca_pem`, ...) gives no PEM text; the message
/// names the path it read and how to fix the setting.
#[derive(Debug, thiserror::Error)]
enum PemError {
    /// The file holds no `-----BEGIN` line.
    #[error(
        "{} holds no PEM {what} (no -----BEGIN line); \
         give the {what}'s PEM text or the path of its .pem file",
        path.display()
    )]
    NoPem { path: PathBuf, what: &'static str },
    /// The value is no PEM text and names no readable file.
    #[error(
        "is neither PEM text nor a readable file: {}: {source}; \
         give the PEM text or fix the path (relative to the job file's folder)",
        path.display()
    )]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A CA setting's PEM text: the value itself when it holds a `-----BEGIN`
/// line, else the text of the file it names (relative to `base`).
fn pem_text(value: &str, base: Option<&Path>, what: &'static str) -> Result<String, PemError> {
    if value.contains("-----BEGIN") {
        return Ok(value.to_string());
    }
    let path = relative_to(base, Path::new(value));
    match std::fs::read_to_string(&path) {
        Ok(pem) if pem.contains("-----BEGIN") => Ok(pem),
        Ok(_) => Err(PemError::NoPem { path, what }),
        Err(source) => Err(PemError::Unreadable { path, source }),
    }
}

/// `path` joined to `base` when relative, without `.` components.
fn relative_to(base: Option<&Path>, path: &Path) -> PathBuf {
    let joined = match base {
        Some(base) if path.is_relative() => base.join(path),
        _ => path.to_path_buf(),
    };
    let clean: PathBuf = joined
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    if clean.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        clean
    }
}
