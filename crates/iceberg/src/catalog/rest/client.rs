//! Connecting to a REST catalog: authenticate, `GET /v1/config`, then the
//! catalog routes under the prefix the server handed back.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use topicberg_core::config::{CatalogKind, DestinationConfig, CATALOG_REQUEST_TIMEOUT_SECS};
use topicberg_core::Secret;

use super::oauth::{exchange_client_credentials, AccessToken};
use super::retry::{describe_transport, status_retryable, tls_hint, transport_retryable, Retry};
use crate::{CatalogError, CatalogErrorKind};

/// How the client authenticates to the catalog.
#[derive(Debug, Clone)]
pub enum CatalogAuth {
    /// No authentication (a local reference catalog).
    None,
    /// A static bearer token (e.g. a Databricks personal access token).
    Token(Secret),
    /// OAuth2 client credentials, exchanged for a token at `token_uri`
    /// (default: `<uri>/v1/oauth/tokens`).
    ClientCredentials {
        /// The OAuth2 client id.
        client_id: String,
        /// The OAuth2 client secret; never printed.
        client_secret: Secret,
        /// The token endpoint; `None` means `<uri>/v1/oauth/tokens`.
        token_uri: Option<String>,
        /// The scope to ask for (Polaris: `PRINCIPAL_ROLE:ALL`).
        scope: Option<String>,
    },
}

/// Where the catalog is and how to talk to it.
#[derive(Debug, Clone)]
pub struct RestCatalogConfig {
    /// Base URI, without the `/v1` suffix (Polaris: `http://host:8181/api/catalog`).
    pub uri: String,
    /// The warehouse to ask `GET /v1/config` for (Polaris catalog name,
    /// Unity catalog name, SeaweedFS table bucket).
    pub warehouse: Option<String>,
    /// How to authenticate.
    pub auth: CatalogAuth,
    /// Deadline for each HTTP request.
    pub request_timeout: Duration,
    /// Ask for vended storage credentials (`X-Iceberg-Access-Delegation:
    /// vended-credentials`): set when the job file has no storage keys.
    pub vended_credentials: bool,
    /// PEM text of CA certificates to trust besides the system's.
    pub ca_pem: Option<String>,
}

impl RestCatalogConfig {
    /// The REST catalog a job file's `[destination]` describes. `None` when
    /// it is not `catalog = "rest"`, or lacks what validation requires (a
    /// `uri`, a `credential` with a `:`).
    pub fn from_destination(destination: &DestinationConfig) -> Option<Self> {
        if destination.catalog != CatalogKind::Rest {
            return None;
        }
        let auth = match (&destination.credential, &destination.token) {
            (Some(credential), _) => CatalogAuth::ClientCredentials {
                client_id: credential.client_id()?.to_string(),
                client_secret: credential.client_secret()?,
                token_uri: destination.oauth2_server_uri(),
                scope: destination.scope.clone(),
            },
            (None, Some(token)) => CatalogAuth::Token(token.clone()),
            (None, None) => CatalogAuth::None,
        };
        Some(Self {
            uri: destination.uri.clone()?,
            warehouse: destination.warehouse.clone(),
            auth,
            request_timeout: Duration::from_secs(CATALOG_REQUEST_TIMEOUT_SECS),
            vended_credentials: destination.s3_access_key.is_none()
                || destination.s3_secret_key.is_none(),
            ca_pem: destination.ca_pem.clone(),
        })
    }
}

/// The header that asks a catalog to vend storage credentials.
const ACCESS_DELEGATION: &str = "X-Iceberg-Access-Delegation";

/// An Iceberg namespace, one string per level.
pub type Namespace = Vec<String>;

/// A connected REST catalog.
#[derive(Debug)]
pub struct RestCatalog {
    http: reqwest::Client,
    uri: String,
    prefix: Option<String>,
    auth: CatalogAuth,
    token: std::sync::Mutex<Option<AccessToken>>,
    properties: HashMap<String, String>,
    vended_credentials: bool,
}

/// How long an idle connection to the catalog is kept for reuse: well
/// below the idle timeouts servers use (Jetty 30 s, nginx 75 s).
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(5);

/// A token is exchanged anew when it has less than this left, so a long
/// sync never sends one that expires in flight.
const TOKEN_REFRESH_MARGIN: Duration = Duration::from_secs(60);

#[derive(Deserialize)]
struct ConfigResponse {
    #[serde(default)]
    defaults: HashMap<String, String>,
    #[serde(default)]
    overrides: HashMap<String, String>,
}

#[derive(Deserialize)]
struct ListNamespacesResponse {
    namespaces: Vec<Namespace>,
    #[serde(default, rename = "next-page-token")]
    next_page_token: Option<String>,
}

#[derive(Deserialize)]
struct ErrorModel {
    error: ErrorBody,
}

#[derive(Deserialize)]
struct ErrorBody {
    message: String,
    #[serde(default, rename = "type")]
    kind: Option<String>,
}

impl RestCatalog {
    /// Authenticates and reads the catalog's configuration for the warehouse.
    pub async fn connect(config: &RestCatalogConfig) -> Result<Self, CatalogError> {
        let uri = config.uri.trim_end_matches('/').to_string();
        let mut builder = reqwest::Client::builder()
            .timeout(config.request_timeout)
            // Servers close idle keep-alive connections (Jetty after 30 s);
            // a request sent on one they just closed fails with "connection
            // closed before message completed". Drop ours first.
            .pool_idle_timeout(POOL_IDLE_TIMEOUT);
        if let Some(pem) = &config.ca_pem {
            let certificates =
                reqwest::Certificate::from_pem_bundle(pem.as_bytes()).map_err(|e| {
                    CatalogError::new(
                        CatalogErrorKind::Protocol,
                        "reading destination.ca_pem",
                        format!("not PEM certificates: {e}"),
                    )
                    .with_source(e)
                })?;
            for certificate in certificates {
                builder = builder.add_root_certificate(certificate);
            }
        }
        let http = builder.build().map_err(|e| {
            CatalogError::new(
                CatalogErrorKind::Protocol,
                "building the HTTP client",
                e.to_string(),
            )
            .with_source(e)
        })?;
        let auth = match &config.auth {
            CatalogAuth::ClientCredentials {
                client_id,
                client_secret,
                token_uri,
                scope,
            } => CatalogAuth::ClientCredentials {
                client_id: client_id.clone(),
                client_secret: client_secret.clone(),
                token_uri: Some(
                    token_uri
                        .clone()
                        .unwrap_or_else(|| format!("{uri}/v1/oauth/tokens")),
                ),
                scope: scope.clone(),
            },
            other => other.clone(),
        };
        let mut catalog = Self {
            http,
            uri,
            prefix: None,
            auth,
            token: std::sync::Mutex::new(None),
            properties: HashMap::new(),
            vended_credentials: config.vended_credentials,
        };
        // The first token exchange, so a wrong credential fails here.
        catalog.bearer(false).await?;
        let query: Vec<(&str, &str)> = config
            .warehouse
            .iter()
            .map(|w| ("warehouse", w.as_str()))
            .collect();
        let response: ConfigResponse = catalog
            .request_json(
                Method::GET,
                "v1/config",
                &query,
                "reading the catalog configuration",
            )
            .await?;
        let mut properties = response.defaults;
        properties.extend(response.overrides);
        catalog.prefix = properties.get("prefix").filter(|p| !p.is_empty()).cloned();
        catalog.properties = properties;
        Ok(catalog)
    }

    /// The catalog's base URI (without `/v1`).
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The properties `GET /v1/config` returned (defaults, then overrides).
    pub fn properties(&self) -> &HashMap<String, String> {
        &self.properties
    }

    /// Lists every namespace (all pages); `parent` limits to its children.
    pub async fn list_namespaces(
        &self,
        parent: Option<&Namespace>,
    ) -> Result<Vec<Namespace>, CatalogError> {
        let path = self.route("namespaces");
        let parent = parent.map(|p| p.join("\u{1f}"));
        let mut all = Vec::new();
        let mut page_token: Option<String> = None;
        loop {
            let mut query: Vec<(&str, &str)> = Vec::new();
            if let Some(p) = &parent {
                query.push(("parent", p));
            }
            if let Some(t) = &page_token {
                query.push(("pageToken", t));
            }
            let page: ListNamespacesResponse = self
                .request_json(Method::GET, &path, &query, "listing namespaces")
                .await?;
            all.extend(page.namespaces);
            match page.next_page_token {
                Some(t) if !t.is_empty() => page_token = Some(t),
                _ => return Ok(all),
            }
        }
    }

    /// Creates a namespace; an existing one is a [`CatalogErrorKind::Conflict`].
    pub async fn create_namespace(&self, namespace: &Namespace) -> Result<(), CatalogError> {
        self.post_namespace(namespace, false).await
    }

    /// Creates a namespace; with `resend`, a 5xx or a broken connection is
    /// sent again like a `GET` (for a caller that takes a conflict as
    /// "exists": a resent create whose first attempt took effect meets one).
    pub(super) async fn post_namespace(
        &self,
        namespace: &Namespace,
        resend: bool,
    ) -> Result<(), CatalogError> {
        let body = serde_json::json!({ "namespace": namespace, "properties": {} });
        let what = format!("creating namespace {}", namespace.join("."));
        let path = self.route("namespaces");
        self.send_resending(Method::POST, &path, &[], Some(&body), &what, resend)
            .await?;
        Ok(())
    }

    /// Drops an empty namespace.
    pub async fn drop_namespace(&self, namespace: &Namespace) -> Result<(), CatalogError> {
        let path = self.route(&format!("namespaces/{}", namespace_path(namespace)));
        let what = format!("dropping namespace {}", namespace.join("."));
        self.send(Method::DELETE, &path, &[], None, &what).await?;
        Ok(())
    }

    pub(super) fn route(&self, rest: &str) -> String {
        match &self.prefix {
            Some(prefix) => format!("v1/{prefix}/{rest}"),
            None => format!("v1/{rest}"),
        }
    }

    pub(super) async fn request_json<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        what: &str,
    ) -> Result<T, CatalogError> {
        let (step, body) = self.send(method, path, query, None, what).await?;
        serde_json::from_slice(&body).map_err(|e| {
            CatalogError::new(
                CatalogErrorKind::Protocol,
                step,
                format!("unexpected response body: {e}"),
            )
            .with_source(e)
        })
    }

    /// Sends one request; returns the step description and the body of a
    /// 2xx answer, or the catalog's error.
    /// The bearer token to send: the static token, or the OAuth2 token,
    /// exchanged anew when missing, close to expiry, or `refresh` is set
    /// (the catalog answered 401).
    pub(crate) async fn bearer(&self, refresh: bool) -> Result<Option<Secret>, CatalogError> {
        let CatalogAuth::ClientCredentials {
            client_id,
            client_secret,
            token_uri,
            scope,
        } = &self.auth
        else {
            return Ok(match &self.auth {
                CatalogAuth::Token(t) => Some(t.clone()),
                _ => None,
            });
        };
        if !refresh {
            let cached = self.token.lock().expect("token lock").clone();
            if let Some(token) = cached.filter(|t| !expiring_at(t, Instant::now())) {
                return Ok(Some(token.token));
            }
        }
        let token_uri = token_uri.as_deref().expect("set in connect");
        let fresh = exchange_client_credentials(
            &self.http,
            token_uri,
            client_id,
            client_secret,
            scope.as_deref(),
        )
        .await?;
        let secret = fresh.token.clone();
        *self.token.lock().expect("token lock") = Some(fresh);
        Ok(Some(secret))
    }

    pub(super) async fn send(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        json: Option<&serde_json::Value>,
        what: &str,
    ) -> Result<(String, bytes::Bytes), CatalogError> {
        self.send_resending(method, path, query, json, what, false)
            .await
    }

    /// [`Self::send`]; `resend` lets a request that changes something be
    /// sent again after a 5xx or a broken connection, as a `GET` is.
    async fn send_resending(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        json: Option<&serde_json::Value>,
        what: &str,
        resend: bool,
    ) -> Result<(String, bytes::Bytes), CatalogError> {
        let url = format!("{}/{}", self.uri, path);
        let step = format!("{what} ({method} {url})");
        let can_refresh = matches!(self.auth, CatalogAuth::ClientCredentials { .. });
        let idempotent = resend || matches!(method, Method::GET | Method::HEAD);
        let mut refreshed = false;
        let mut retry = Retry::new();
        loop {
            retry.attempt();
            let mut request = self.http.request(method.clone(), &url).query(query);
            if let Some(token) = self.bearer(refreshed).await? {
                request = request.bearer_auth(token.expose());
            }
            if let Some(json) = json {
                request = request.json(json);
            }
            if self.vended_credentials {
                request = request.header(ACCESS_DELEGATION, "vended-credentials,remote-signing");
            }
            let answer = match request.send().await {
                Ok(response) => {
                    let status = response.status();
                    response.bytes().await.map(|body| (status, body))
                }
                Err(e) => Err(e),
            };
            let (status, body) = match answer {
                Ok(answer) => answer,
                Err(e) if transport_retryable(&e, idempotent) && retry.again().await => continue,
                Err(e) => {
                    return Err(CatalogError::new(
                        CatalogErrorKind::Unreachable,
                        &step,
                        format!(
                            "the catalog at {} is unreachable: {}{}{}",
                            self.uri,
                            describe_transport(&e),
                            retry.note(),
                            tls_hint(&describe_transport(&e))
                        ),
                    )
                    .with_source(e))
                }
            };
            // A 401 was refused before the catalog acted on the request, so
            // sending it again with a fresh token is safe.
            if status == StatusCode::UNAUTHORIZED && can_refresh && !refreshed {
                refreshed = true;
                retry.uncount();
                continue;
            }
            if status_retryable(status, idempotent) && retry.again().await {
                continue;
            }
            if !status.is_success() {
                let mut err = status_error(status, &body, step);
                err.detail.push_str(&retry.note());
                return Err(err);
            }
            return Ok((step, body));
        }
    }
}

/// Whether a token is within [`TOKEN_REFRESH_MARGIN`] of its expiry (or
/// half its lifetime, for tokens that live less than two margins).
pub(super) fn expiring_at(token: &AccessToken, now: Instant) -> bool {
    match token.expires_at {
        None => false,
        Some(at) => {
            let left = at.saturating_duration_since(now);
            let margin = TOKEN_REFRESH_MARGIN.min(token.lifetime / 2);
            left <= margin
        }
    }
}

/// Encodes one namespace for a URL path: levels joined by the unit
/// separator (0x1F), everything but unreserved characters percent-encoded.
pub(super) fn namespace_path(namespace: &[String]) -> String {
    let joined = namespace.join("\u{1f}");
    let mut out = String::with_capacity(joined.len());
    for byte in joined.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn status_error(status: StatusCode, body: &[u8], step: String) -> CatalogError {
    let said = serde_json::from_slice::<ErrorModel>(body)
        .map(|m| match m.error.kind {
            Some(kind) => format!("{kind}: {}", m.error.message),
            None => m.error.message,
        })
        .unwrap_or_else(|_| String::from_utf8_lossy(body).chars().take(300).collect());
    let (kind, hint) = match status.as_u16() {
        401 => (
            CatalogErrorKind::Unauthorized,
            " (the credential or token was refused)",
        ),
        403 => (
            CatalogErrorKind::Forbidden,
            " (the principal lacks a privilege on this catalog)",
        ),
        404 => (
            CatalogErrorKind::NotFound,
            " (check the catalog URI and warehouse name)",
        ),
        409 => (CatalogErrorKind::Conflict, ""),
        s if s >= 500 => (CatalogErrorKind::Server, ""),
        _ => (CatalogErrorKind::Protocol, ""),
    };
    CatalogError::new(kind, step, format!("HTTP {status}: {said}{hint}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_levels_are_joined_by_unit_separator_and_encoded() {
        assert_eq!(namespace_path(&["a".into(), "b c".into()]), "a%1Fb%20c");
        assert_eq!(namespace_path(&["orders_topics".into()]), "orders_topics");
    }

    #[test]
    fn catalog_error_body_is_quoted_with_a_hint() {
        let body = br#"{"error":{"message":"Namespace does not exist: x","type":"NoSuchNamespaceException","code":404}}"#;
        let err = status_error(StatusCode::NOT_FOUND, body, "listing".into());
        assert_eq!(err.kind, CatalogErrorKind::NotFound);
        assert!(err
            .to_string()
            .contains("NoSuchNamespaceException: Namespace does not exist: x"));
        assert!(!err.retryable());
        let err = status_error(StatusCode::SERVICE_UNAVAILABLE, b"busy", "listing".into());
        assert!(err.retryable());
    }

    #[tokio::test]
    async fn unreachable_catalog_is_retryable_and_names_the_url() {
        let config = RestCatalogConfig {
            uri: "http://127.0.0.1:9/".into(),
            warehouse: None,
            auth: CatalogAuth::None,
            request_timeout: Duration::from_secs(2),
            vended_credentials: false,
            ca_pem: None,
        };
        let err = RestCatalog::connect(&config).await.unwrap_err();
        assert_eq!(err.kind, CatalogErrorKind::Unreachable);
        assert!(err.retryable());
        assert!(
            err.to_string().contains("http://127.0.0.1:9/v1/config"),
            "{err}"
        );
    }

    #[test]
    fn from_destination_maps_a_job_files_destination() {
        let text = r#"
name = "job"
[source]
bootstrap_servers = "h:9092"
topic_pattern = "^orders$"
[destination]
catalog = "rest"
uri = "http://127.0.0.1:8181"
warehouse = "lakehouse"
credential = "topicberg:${SECRET}"
scope = "PRINCIPAL_ROLE:ALL"
"#;
        let job = topicberg_core::JobConfig::from_toml_str(text, |v| {
            (v == "SECRET").then(|| "s3cr3t".to_string())
        })
        .unwrap();
        let config = RestCatalogConfig::from_destination(&job.destination).unwrap();
        assert_eq!(config.uri, "http://127.0.0.1:8181");
        assert_eq!(config.warehouse.as_deref(), Some("lakehouse"));
        match &config.auth {
            CatalogAuth::ClientCredentials {
                client_id,
                client_secret,
                token_uri,
                scope,
            } => {
                assert_eq!(client_id, "topicberg");
                assert_eq!(client_secret.expose(), "s3cr3t");
                assert_eq!(
                    token_uri.as_deref(),
                    Some("http://127.0.0.1:8181/v1/oauth/tokens")
                );
                assert_eq!(scope.as_deref(), Some("PRINCIPAL_ROLE:ALL"));
            }
            other => panic!("expected client credentials, got {other:?}"),
        }
        assert!(!format!("{config:?}").contains("s3cr3t"));

        let mut token = job.destination.clone();
        token.credential = None;
        token.token = Some(Secret::new("t"));
        let config = RestCatalogConfig::from_destination(&token).unwrap();
        assert!(matches!(config.auth, CatalogAuth::Token(ref t) if t.expose() == "t"));

        let embedded = DestinationConfig::default();
        assert!(RestCatalogConfig::from_destination(&embedded).is_none());
    }
}
