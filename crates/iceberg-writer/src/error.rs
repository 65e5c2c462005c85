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
/// The message names the step, the URL (never a secret) and what the
/// catalog said, so that a user can fix it.
#[derive(Debug, thiserror::Error)]
#[error("{step}: {detail}")]
pub struct CatalogError {
    /// What kind of failure this is.
    pub kind: CatalogErrorKind,
    /// The step that failed, e.g. `token exchange at http://host/v1/oauth/tokens`.
    pub step: String,
    /// What went wrong, with the catalog's own message when it sent one.
    pub detail: String,
}

impl CatalogError {
    pub(crate) fn new(
        kind: CatalogErrorKind,
        step: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            step: step.into(),
            detail: detail.into(),
        }
    }

    /// Whether the same request may succeed if sent again unchanged.
    pub fn retryable(&self) -> bool {
        matches!(
            self.kind,
            CatalogErrorKind::Unreachable | CatalogErrorKind::Server
        )
    }
}
