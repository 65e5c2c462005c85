//! The service's objects are job-file pieces (docs/src/how-to/serve.md): a source is
//! the `[source]` table, a destination the `[destination]` table, stored as
//! JSON objects with exactly the job file's field names. This module turns
//! pieces into a job TOML ([`assemble_job_toml`]) and back
//! ([`split_job_toml`]), and keeps secrets write-only ([`redact`],
//! [`merge_secrets`]).

use serde_json::{Map, Value};

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
            Self::Source => &[
                "sasl_password",
                "ssl_key_pem",
                "oauth_client_secret",
                "schema_registry_password",
            ],
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
            ("bootstrap_servers", &["sasl_password", "ssl_key_pem"]),
            ("oauth_token_endpoint", &["oauth_client_secret"]),
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

mod job_toml;
pub use job_toml::{
    assemble_job_toml, check_job_toml, export_serve, lenient_env, serve_toml, split_job_toml,
    validate_piece, JobPieces, Secrets, SplitJob,
};

#[cfg(test)]
mod tests;
