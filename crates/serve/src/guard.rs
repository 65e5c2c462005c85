//! What protects every request and response: security headers on every
//! answer (`nosniff`, no framing), the `Host` allowlist (against DNS
//! rebinding), the optional `/metrics` token, the same-origin rule of
//! setup and login, and the login throttle (per-client backoff, a cap on
//! concurrent password hashing).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::mpsc;
use std::sync::Arc;

use crate::error::ApiError;
use crate::forwarded::{host_name, Transport};

/// The hosts a request may name in `Host` when none are configured.
pub const DEFAULT_ALLOWED_HOSTS: [&str; 3] = ["127.0.0.1", "localhost", "::1"];

/// The environment variable holding the token `/metrics` then requires
/// (`Authorization: Bearer <token>`).
pub const METRICS_TOKEN_ENV: &str = "TOPICBERG_METRICS_TOKEN";

/// Adds `X-Content-Type-Options: nosniff`, `X-Frame-Options: DENY`,
/// `Referrer-Policy: no-referrer` and (unless the answer has its own
/// policy) `Content-Security-Policy: frame-ancestors 'none'` to every answer.
pub async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("frame-ancestors 'none'"),
        );
    }
    response
}

/// Whether `host` (a `Host` header) names an allowed host.
pub fn host_allowed(allowed: &[String], host: &str) -> bool {
    let name = host_name(host);
    allowed.iter().any(|a| a.eq_ignore_ascii_case(&name))
}

/// Refuses (`421`) a request whose `Host` is not in the allowlist: a page
/// on another site whose name was re-pointed at this address (DNS
/// rebinding) names its own host. `/healthz` answers any host.
pub async fn require_allowed_host(
    State(guard): State<Arc<Guard>>,
    request: Request,
    next: Next,
) -> Response {
    if request.uri().path() == "/healthz" {
        return next.run(request).await;
    }
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()))
        .unwrap_or_default()
        .to_string();
    if host_allowed(&guard.allowed_hosts, &host) {
        return next.run(request).await;
    }
    tracing::warn!(host = %host_name(&host), "request for a host not in --allowed-host refused");
    ApiError::new(
        StatusCode::MISDIRECTED_REQUEST,
        "this host name is not allowed: start topicberg serve with --allowed-host <name> to serve it",
    )
    .into_response()
}

/// Setup and login take only `application/json` bodies (a page elsewhere
/// can post a form or `text/plain` without asking; JSON needs a CORS
/// preflight this service never grants) and, when the browser names the
/// page's origin, only this service's own (`Origin` = `http[s]://<Host>`).
pub fn require_same_origin_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the body as JSON (Content-Type: application/json)",
        ));
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let same = origin.to_str().ok().is_some_and(|o| {
        let authority = o
            .strip_prefix("http://")
            .or_else(|| o.strip_prefix("https://"));
        !host.is_empty() && authority.is_some_and(|a| a.eq_ignore_ascii_case(host))
    });
    if same {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "cross-origin request refused: use this service's own page",
        ))
    }
}

/// Failed logins allowed from one client before it has to wait.
pub const FREE_FAILURES: u32 = 5;
/// The longest wait after failed logins.
pub const MAX_BACKOFF: Duration = Duration::from_secs(15 * 60);
/// Password hashes computed at once (argon2id takes ~19 MiB each).
pub const MAX_CONCURRENT_HASHES: usize = 2;
/// Clients remembered at most (the oldest are forgotten first).
const MAX_CLIENTS: usize = 10_000;

/// A client's failed logins.
#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    last: Instant,
}

impl Failures {
    /// When the client may try again: nothing for the first
    /// [`FREE_FAILURES`], then 1 s, 2 s, 4 s, ... up to [`MAX_BACKOFF`].
    fn retry_at(&self) -> Instant {
        if self.count < FREE_FAILURES {
            return self.last;
        }
        let doublings = (self.count - FREE_FAILURES).min(20);
        let wait = Duration::from_secs(1u64 << doublings).min(MAX_BACKOFF);
        self.last + wait
    }
}

/// A password hash to compute.
type HashJob = Box<dyn FnOnce() + Send>;

/// Login attempts per client address, and the hashing cap: passwords are
/// hashed on [`MAX_CONCURRENT_HASHES`] threads of their own, others wait
/// in line (the same few threads, so the allocator's per-thread arenas
/// keep no more than their share of argon2's memory either).
pub struct LoginThrottle {
    failures: Mutex<HashMap<IpAddr, Failures>>,
    hashing: Mutex<mpsc::Sender<HashJob>>,
}

impl Default for LoginThrottle {
    fn default() -> Self {
        let (tx, rx) = mpsc::channel::<HashJob>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..MAX_CONCURRENT_HASHES {
            let rx = Arc::clone(&rx);
            let spawned = std::thread::Builder::new()
                .name(format!("password-hash-{i}"))
                .spawn(move || loop {
                    let job = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    match job {
                        Ok(job) => job(),
                        Err(_) => break,
                    }
                });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "starting a password hashing thread");
            }
        }
        Self {
            failures: Mutex::new(HashMap::new()),
            hashing: Mutex::new(tx),
        }
    }
}

impl LoginThrottle {
    /// `Err(wait)` while `client` must wait after its failed logins.
    pub fn check(&self, client: IpAddr) -> Result<(), Duration> {
        let map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(&client) {
            Some(f) => {
                let now = Instant::now();
                let at = f.retry_at();
                if at > now {
                    Err(at - now)
                } else {
                    Ok(())
                }
            }
            None => Ok(()),
        }
    }

    /// Records a failed login of `client`.
    pub fn failed(&self, client: IpAddr) {
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if map.len() >= MAX_CLIENTS && !map.contains_key(&client) {
            if let Some(oldest) = map.iter().min_by_key(|(_, f)| f.last).map(|(k, _)| *k) {
                map.remove(&oldest);
            }
        }
        let entry = map.entry(client).or_insert(Failures {
            count: 0,
            last: now,
        });
        entry.count += 1;
        entry.last = now;
    }

    /// A successful login of `client` forgets its failures.
    pub fn succeeded(&self, client: IpAddr) {
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        map.remove(&client);
    }

    /// Runs `hash` (a password hash or check) on the hashing threads,
    /// after those queued before it; `None` if it could not run.
    pub async fn hash<T: Send + 'static>(
        &self,
        hash: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: HashJob = Box::new(move || {
            let _ = tx.send(hash());
        });
        self.hashing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(job)
            .ok()?;
        rx.await.ok()
    }
}

/// Equal, in time that does not depend on where they differ.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The request-guard settings and state every handler shares.
pub struct Guard {
    /// Host names a request may name in `Host`.
    pub allowed_hosts: Vec<String>,
    /// The token `/metrics` requires, when set.
    pub metrics_token: Option<String>,
    /// Failed logins and the hashing cap.
    pub login: LoginThrottle,
    /// The one-time first-run setup token (printed in the log at start),
    /// while no admin password is set.
    pub setup_token: Mutex<Option<String>>,
    /// The proxies believed, and whether login may happen over plain HTTP.
    pub transport: Transport,
}

impl Guard {
    /// The guard allowing [`DEFAULT_ALLOWED_HOSTS`] and `allowed_hosts`.
    pub fn new(
        allowed_hosts: &[String],
        metrics_token: Option<String>,
        transport: Transport,
    ) -> Self {
        let allowed_hosts = DEFAULT_ALLOWED_HOSTS
            .iter()
            .map(|h| h.to_string())
            .chain(allowed_hosts.iter().map(|h| host_name(h)))
            .collect();
        Self {
            allowed_hosts,
            metrics_token: metrics_token.filter(|t| !t.is_empty()),
            login: LoginThrottle::default(),
            setup_token: Mutex::new(None),
            transport,
        }
    }

    /// Whether the request may read `/metrics`: no token configured, or
    /// `Authorization: Bearer <token>`.
    pub fn metrics_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.metrics_token else {
            return true;
        };
        headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|sent| constant_time_eq(sent.as_bytes(), token.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_matched_without_their_port() {
        let allowed = Guard::new(&[], None, Transport::default()).allowed_hosts;
        assert!(host_allowed(&allowed, "127.0.0.1:8000"));
        assert!(host_allowed(&allowed, "LOCALHOST:1"));
        assert!(host_allowed(&allowed, "[::1]:8000"));
        assert!(!host_allowed(&allowed, "evil.example:8000"));
        assert!(!host_allowed(&allowed, ""));
        let mine =
            Guard::new(&["Topicberg.internal".into()], None, Transport::default()).allowed_hosts;
        assert!(host_allowed(&mine, "topicberg.internal:443"));
        assert!(
            host_allowed(&mine, "127.0.0.1:8000"),
            "loopback stays allowed"
        );
        assert!(!host_allowed(&mine, "other.internal"));
    }

    #[test]
    fn failed_logins_back_off_and_success_forgets_them() {
        let t = LoginThrottle::default();
        let ip: IpAddr = "10.0.0.7".parse().unwrap();
        for _ in 0..FREE_FAILURES {
            assert!(t.check(ip).is_ok());
            t.failed(ip);
        }
        let wait = t.check(ip).unwrap_err();
        assert!(wait > Duration::from_millis(500) && wait <= Duration::from_secs(1));
        assert!(t.check("10.0.0.8".parse().unwrap()).is_ok(), "per client");
        t.failed(ip);
        assert!(t.check(ip).unwrap_err() > Duration::from_millis(1500));
        t.succeeded(ip);
        assert!(t.check(ip).is_ok());
    }

    #[test]
    fn setup_and_login_want_json_from_their_own_origin() {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, "127.0.0.1:8000".parse().unwrap());
        h.insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
        assert_eq!(
            require_same_origin_json(&h).unwrap_err().status,
            StatusCode::UNSUPPORTED_MEDIA_TYPE
        );
        h.insert(
            header::CONTENT_TYPE,
            "application/json; charset=utf-8".parse().unwrap(),
        );
        assert!(
            require_same_origin_json(&h).is_ok(),
            "no Origin: not a browser"
        );
        h.insert(header::ORIGIN, "http://127.0.0.1:8000".parse().unwrap());
        assert!(require_same_origin_json(&h).is_ok());
        h.insert(header::ORIGIN, "http://evil.example".parse().unwrap());
        assert_eq!(
            require_same_origin_json(&h).unwrap_err().status,
            StatusCode::FORBIDDEN
        );
        h.insert(header::ORIGIN, "null".parse().unwrap());
        assert!(require_same_origin_json(&h).is_err());
    }
}
