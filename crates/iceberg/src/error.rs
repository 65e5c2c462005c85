use std::fmt;

use topicberg_core::redact_urls;

/// The error behind a [`CatalogError`] or an [`IcebergError`] (an I/O,
/// HTTP, JSON, Parquet or `iceberg` crate error), whose type varies.
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What kind of failure a [`CatalogError`] is; decides whether a retry can help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogErrorKind {
    /// The catalog could not be reached (connection refused, timeout, TLS).
    Unreachable,
    /// The credential was refused (HTTP 401, or the token endpoint said no).
    Unauthorized,
    /// Authenticated, but not allowed (HTTP 403): a missing privilege.
    Forbidden,
    /// The warehouse, namespace or table does not exist (HTTP 404).
    NotFound,
    /// The catalog's state changed under us (HTTP 409).
    Conflict,
    /// The catalog failed (HTTP 5xx).
    Server,
    /// The catalog answered something we could not understand.
    Protocol,
}

/// An error talking to an Iceberg REST catalog.
///
/// The message names the step, the URL and what the catalog said, so that
/// a user can fix it. Every URL in it has gone through
/// [`redact_urls`] when the error was made: no userinfo password, no
/// `token=`-like query value. The error it wraps, if any, is its
/// [`source`](std::error::Error::source); the message already says what it
/// said (redacted), so print the message, not the chain.
#[derive(thiserror::Error)]
#[error("{step}: {detail}")]
pub struct CatalogError {
    /// What kind of failure this is.
    pub kind: CatalogErrorKind,
    /// The step that failed, e.g. `token exchange at http://host/v1/oauth/tokens`.
    pub step: String,
    /// What went wrong, with the catalog's own message when it sent one.
    pub detail: String,
    #[source]
    source: Option<Cause>,
}

impl CatalogError {
    pub(crate) fn new(
        kind: CatalogErrorKind,
        step: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            step: redact_urls(&step.into()),
            detail: redact_urls(&detail.into()),
            source: None,
        }
    }

    /// This error, caused by `source` (its text is in the detail already).
    pub(crate) fn with_source(mut self, source: impl Into<Cause>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// Whether the same request may succeed if sent again unchanged.
    pub fn retryable(&self) -> bool {
        matches!(
            self.kind,
            CatalogErrorKind::Unreachable | CatalogErrorKind::Server
        )
    }
}

/// What kind of failure an [`IcebergError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcebergErrorKind {
    /// A catalog request failed; the inner kind says how (a commit that met
    /// a concurrent change is [`CatalogErrorKind::Conflict`]).
    Catalog(CatalogErrorKind),
    /// A commit was sent, the catalog did not confirm it (HTTP 500/502/503/504
    /// or a lost connection) and reloading the table to look for it failed
    /// too. Sending it again could commit the data twice: reconcile first by
    /// reading the `topicberg.*` properties of the table's snapshots.
    CommitStateUnknown,
    /// Reading or writing an object in storage failed.
    Storage,
    /// The data does not fit the table (schema mismatch) or could not be
    /// encoded; the same data will fail again.
    Data,
    /// The configuration cannot work (bad endpoint, unsupported location).
    Config,
    /// Another writer changed the table's schema while this commit's data
    /// files were written with columns it adds: nothing was committed (the
    /// files' field ids may be another column's now); the next sync
    /// starts from the new schema.
    SchemaMoved,
    /// Another writer committed the offsets this commit started from first
    /// (another sync of the same job ran at once): the commit did not land,
    /// since landing it would write the same messages twice. Not retryable
    /// as is; the next sync plans from the new offsets.
    Superseded,
}

/// An error on topicberg's Iceberg write path: the catalog, storage, the
/// data, or the commit.
///
/// Like [`CatalogError`], the message names the step and the object (a URL
/// or file location, passed through [`redact_urls`]), and the error it
/// wraps, if any, is its [`source`](std::error::Error::source).
#[derive(thiserror::Error)]
#[error("{step}: {detail}")]
pub struct IcebergError {
    /// What kind of failure this is.
    pub kind: IcebergErrorKind,
    /// The step that failed, e.g. `writing data file s3://b/t/data/x.parquet`.
    pub step: String,
    /// What went wrong.
    pub detail: String,
    transient: bool,
    #[source]
    source: Option<Cause>,
}

impl IcebergError {
    pub(crate) fn new(
        kind: IcebergErrorKind,
        step: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        let transient = match kind {
            IcebergErrorKind::Catalog(k) => {
                matches!(k, CatalogErrorKind::Unreachable | CatalogErrorKind::Server)
            }
            IcebergErrorKind::Storage => true,
            _ => false,
        };
        Self {
            kind,
            step: redact_urls(&step.into()),
            detail: redact_urls(&detail.into()),
            transient,
            source: None,
        }
    }

    /// This error, caused by `source` (its text is in the detail already).
    pub(crate) fn with_source(mut self, source: impl Into<Cause>) -> Self {
        self.source = Some(source.into());
        self
    }

    pub(crate) fn with_retryable(mut self, retryable: bool) -> Self {
        self.transient = retryable;
        self
    }

    pub(crate) fn with_detail_suffix(mut self, suffix: &str) -> Self {
        self.detail.push_str(&redact_urls(suffix));
        self
    }

    /// Whether the same operation may succeed if run again unchanged:
    /// an unreachable or failing catalog, a transient storage failure, or a
    /// commit conflict (a fresh load and a new attempt can land it). Never
    /// for [`IcebergErrorKind::CommitStateUnknown`].
    pub fn retryable(&self) -> bool {
        match self.kind {
            IcebergErrorKind::Catalog(CatalogErrorKind::Conflict)
            | IcebergErrorKind::SchemaMoved => true,
            _ => self.transient,
        }
    }
}

impl From<CatalogError> for IcebergError {
    fn from(e: CatalogError) -> Self {
        let mut error = Self::new(IcebergErrorKind::Catalog(e.kind), e.step, e.detail);
        error.source = e.source;
        error
    }
}

/// The source as its message, redacted: a wrapped HTTP error's own form
/// may show a URL's password.
fn cause_text(source: &Option<Cause>) -> Option<String> {
    source.as_ref().map(|s| redact_urls(&s.to_string()))
}

impl fmt::Debug for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CatalogError")
            .field("kind", &self.kind)
            .field("step", &self.step)
            .field("detail", &self.detail)
            .field("source", &cause_text(&self.source))
            .finish()
    }
}

impl fmt::Debug for IcebergError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IcebergError")
            .field("kind", &self.kind)
            .field("step", &self.step)
            .field("detail", &self.detail)
            .field("transient", &self.transient)
            .field("source", &cause_text(&self.source))
            .finish()
    }
}

/// An `iceberg` crate error as an [`IcebergError`]: a storage failure
/// anywhere in its source chain makes it [`IcebergErrorKind::Storage`]
/// (retryable as the storage said), anything else is `otherwise`.
pub(crate) fn from_iceberg(
    step: impl Into<String>,
    err: iceberg::Error,
    otherwise: IcebergErrorKind,
) -> IcebergError {
    let mut parts: Vec<String> = vec![err.message().to_string()];
    let mut storage: Option<bool> = None;
    let mut cause = std::error::Error::source(&err);
    while let Some(c) = cause {
        if let Some(fault) = c.downcast_ref::<crate::write::storage_fault::StorageFault>() {
            storage.get_or_insert(fault.retryable);
        }
        let text = match c.downcast_ref::<iceberg::Error>() {
            Some(inner) => inner.message().to_string(),
            None => c.to_string().lines().next().unwrap_or_default().to_string(),
        };
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cause = c.source();
    }
    let detail = parts.join(": ");
    let error = match storage {
        Some(retryable) => {
            IcebergError::new(IcebergErrorKind::Storage, step, detail).with_retryable(retryable)
        }
        None => IcebergError::new(otherwise, step, detail),
    };
    error.with_source(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_url_in_an_error_is_redacted_when_it_is_made() {
        let err = CatalogError::new(
            CatalogErrorKind::Unreachable,
            "token exchange at http://user:secretpass@h:9/v1/oauth/tokens",
            "error sending request for url (http://user:secretpass@h:9/v1/oauth/tokens?token=t0k)",
        );
        let text = err.to_string();
        assert!(
            !text.contains("secretpass") && !text.contains("t0k"),
            "{text}"
        );
        assert!(text.starts_with("token exchange at http://user:***@h:9/v1/oauth/tokens: "));
        let err = IcebergError::from(err).with_detail_suffix(" (see https://a:pw2@h/)");
        let text = err.to_string();
        assert!(
            !text.contains("secretpass") && !text.contains("pw2"),
            "{text}"
        );
        let err = IcebergError::new(IcebergErrorKind::Storage, "https://k:pw3@s3/b", "x");
        assert_eq!(err.step, "https://k:***@s3/b");
    }

    #[test]
    fn the_cause_is_kept_through_the_catalog_and_never_printed_with_its_password() {
        let io = std::io::Error::other("refused by http://u:pw4@h:9/v1/config");
        let err = CatalogError::new(CatalogErrorKind::Unreachable, "GET http://h:9", "refused")
            .with_source(io);
        let err = IcebergError::from(err);
        assert_eq!(err.to_string(), "GET http://h:9: refused");
        let cause = std::error::Error::source(&err).expect("the cause is kept");
        assert!(cause.to_string().contains("pw4"));
        let debug = format!("{err:?}");
        assert!(
            debug.contains("u:***@h:9") && !debug.contains("pw4"),
            "{debug}"
        );
    }
}
