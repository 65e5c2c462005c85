//! Login: one admin user (argon2 password hash, set from
//! `TOPICBERG_ADMIN_PASSWORD` at start or once through `POST /api/setup`),
//! sessions (a random 32-byte token in an `HttpOnly; Secure;
//! SameSite=Strict` cookie, stored as its SHA-256, 12 h), and a CSRF token
//! per session that every non-GET request must send as `X-CSRF-Token`.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::error::ApiError;
use crate::error_kind::ServeErrorKind;
use crate::guard::constant_time_eq;
use crate::state::AppState;
use crate::store::{Store, StoreError};

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "topicberg_session";
/// The CSRF header every non-GET API request carries.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// How long a session lasts.
pub const SESSION_TTL_MS: i64 = 12 * 3600 * 1000;
/// The admin user's name.
pub const ADMIN_USER: &str = "admin";
/// The environment variable that sets the admin password at start.
pub const ADMIN_PASSWORD_ENV: &str = "TOPICBERG_ADMIN_PASSWORD";
/// The shortest password `POST /api/setup` accepts.
pub const MIN_PASSWORD_LEN: usize = 8;

/// Why the admin password could not be hashed or kept.
#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    /// No salt could be made (`password_hash`'s error is no
    /// `std::error::Error` in this build: kept, not chained).
    #[error("{0}")]
    Salt(argon2::password_hash::Error),
    /// argon2 refused to hash it.
    #[error("hashing the password: {0}")]
    Hash(argon2::password_hash::Error),
    /// The store could not read or keep it.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl PasswordError {
    /// What kind of failure.
    pub fn kind(&self) -> ServeErrorKind {
        match self {
            Self::Salt(_) | Self::Hash(_) => ServeErrorKind::Internal,
            Self::Store(_) => ServeErrorKind::Store,
        }
    }
}

/// The argon2id hash (PHC string) of `password`.
pub fn hash_password(password: &str) -> Result<String, PasswordError> {
    let salt = SaltString::encode_b64(&rand::random::<[u8; 16]>()).map_err(PasswordError::Salt)?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(PasswordError::Hash)
}

/// Whether `password` matches the stored hash.
pub fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash)
        .map(|parsed| {
            Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok()
        })
        .unwrap_or(false)
}

/// 32 random bytes, URL-safe base64.
pub fn random_token() -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
}

/// The SHA-256 (hex) a session token is stored as.
pub fn token_hash(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The `Set-Cookie` value that starts a session; `secure` as
/// [`crate::forwarded::Transport::session_cookie_secure`] decides.
pub fn session_cookie(token: &str, secure: bool) -> String {
    format!(
        "{SESSION_COOKIE}={token}; HttpOnly;{} SameSite=Strict; Path=/; Max-Age={}",
        if secure { " Secure;" } else { "" },
        SESSION_TTL_MS / 1000
    )
}

/// The `Set-Cookie` value that ends it.
pub fn clear_cookie(secure: bool) -> String {
    format!(
        "{SESSION_COOKIE}=; HttpOnly;{} SameSite=Strict; Path=/; Max-Age=0",
        if secure { " Secure;" } else { "" }
    )
}

/// The session token from the request's cookies.
pub fn cookie_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == SESSION_COOKIE)
        .map(|(_, v)| v.to_string())
        .filter(|v| !v.is_empty())
}

/// The current session, put into the request's extensions by
/// [`require_session`].
#[derive(Debug, Clone)]
pub struct Session {
    /// The SHA-256 of the session token.
    pub token_hash: String,
    /// The session's CSRF token (for pages to put in their forms).
    pub csrf: String,
}

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Sets the admin password from `TOPICBERG_ADMIN_PASSWORD` when given
/// (replacing a stored one, which ends every session). Returns whether an
/// admin password is now set.
pub fn init_admin(store: &Store) -> Result<bool, PasswordError> {
    match std::env::var(ADMIN_PASSWORD_ENV) {
        Ok(password) if !password.is_empty() => {
            let unchanged = store
                .admin()?
                .is_some_and(|(_, hash)| verify_password(&password, &hash));
            if !unchanged {
                store.set_admin(ADMIN_USER, &hash_password(&password)?)?;
                tracing::info!("admin password set from {ADMIN_PASSWORD_ENV}");
            }
            Ok(true)
        }
        _ => Ok(store.admin()?.is_some()),
    }
}

/// 503 until an admin password exists (`POST /api/setup`).
pub fn setup_needed() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "set the admin password: POST /api/setup",
    )
}

/// Middleware of every `/api/` route but login and setup: 503 before setup,
/// 401 without a valid session, 403 on a non-GET without its CSRF token
/// (the `X-CSRF-Token` header, or a `csrf` field of a url-encoded form).
pub async fn require_session(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let session = match session_of(&state, request.headers()) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    if !matches!(*request.method(), Method::GET | Method::HEAD) {
        let header = request
            .headers()
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let sent = match header {
            Some(h) => h,
            None if is_form(request.headers()) => {
                let (parts, body) = request.into_parts();
                let waits = crate::body::waits_to_send(&parts.headers);
                let bytes = match crate::body::read_limited(body, MAX_FORM_BYTES, waits).await {
                    Ok(b) => b,
                    Err(e @ crate::body::BodyError::Broken(_)) => {
                        return ApiError::bad_request(e.to_string()).into_response()
                    }
                    Err(crate::body::BodyError::TooLarge { .. }) => {
                        return ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "form too large")
                            .into_response()
                    }
                };
                let token = form_field(&bytes, "csrf").unwrap_or_default();
                request = Request::from_parts(parts, axum::body::Body::from(bytes));
                token
            }
            None => String::new(),
        };
        if !constant_time_eq(sent.as_bytes(), session.csrf.as_bytes()) {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "missing or wrong X-CSRF-Token header (the csrf value login returned)",
            )
            .into_response();
        }
    }
    request.extensions_mut().insert(session);
    next.run(request).await
}

/// The largest url-encoded form the CSRF check reads.
const MAX_FORM_BYTES: usize = 1 << 20;

fn is_form(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"))
}

/// A url-encoded form's field whose value needs no decoding (tokens are
/// URL-safe base64).
fn form_field(body: &[u8], name: &str) -> Option<String> {
    std::str::from_utf8(body)
        .ok()?
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

/// The request's session (no CSRF check): 503 before setup, 401 without a
/// valid, unexpired session. For pages that need the login too.
pub fn session_of(state: &AppState, headers: &HeaderMap) -> Result<Session, ApiError> {
    let store = &state.store;
    if store.admin()?.is_none() {
        return Err(setup_needed());
    }
    let unauthorized = || ApiError::new(StatusCode::UNAUTHORIZED, "log in first: POST /api/login");
    let token = cookie_token(headers).ok_or_else(unauthorized)?;
    let hash = token_hash(&token);
    let (csrf, expires_ms) = store.session(&hash)?.ok_or_else(unauthorized)?;
    if expires_ms <= now_ms() {
        store.delete_session(&hash)?;
        return Err(unauthorized());
    }
    Ok(Session {
        token_hash: hash,
        csrf,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_and_tokens() {
        let hash = hash_password("correct horse").unwrap();
        assert!(hash.starts_with("$argon2"));
        assert!(verify_password("correct horse", &hash));
        assert!(!verify_password("wrong horse", &hash));
        let (a, b) = (random_token(), random_token());
        assert_ne!(a, b);
        assert_eq!(a.len(), 43);
        assert_eq!(token_hash("x").len(), 64);
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            "a=1; topicberg_session=tok; b=2".parse().unwrap(),
        );
        assert_eq!(cookie_token(&headers).as_deref(), Some("tok"));
        assert_eq!(
            form_field(b"a=1&csrf=abc-_9&b=2", "csrf").as_deref(),
            Some("abc-_9")
        );
        assert_eq!(form_field(b"a=1", "csrf"), None);
    }
}
