//! OAuth2 client-credentials token exchange (RFC 6749 section 4.4), the way
//! Iceberg REST catalogs (Polaris, Unity, SeaweedFS, the reference server)
//! take it: a form POST to the token endpoint.

use std::time::{Duration, Instant};

use serde::Deserialize;
use topicberg_core::Secret;

use super::retry::{describe_transport, status_retryable, tls_hint, transport_retryable, Retry};
use crate::{CatalogError, CatalogErrorKind};

/// A bearer token and when it stops being valid.
#[derive(Debug, Clone)]
pub struct AccessToken {
    /// The bearer token; never printed.
    pub token: Secret,
    /// When the token expires, if the endpoint said (`expires_in`).
    pub expires_at: Option<Instant>,
    /// How long the token was issued for (`expires_in`; zero if unknown).
    pub lifetime: Duration,
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

#[derive(Deserialize)]
struct OAuthErrorBody {
    error: Option<String>,
    error_description: Option<String>,
}

/// Exchanges a client id and secret for a bearer token at `token_uri`.
pub async fn exchange_client_credentials(
    http: &reqwest::Client,
    token_uri: &str,
    client_id: &str,
    client_secret: &Secret,
    scope: Option<&str>,
) -> Result<AccessToken, CatalogError> {
    let step = format!("token exchange at {token_uri}");
    let mut form = vec![
        ("grant_type", "client_credentials"),
        ("client_id", client_id),
        ("client_secret", client_secret.expose()),
    ];
    if let Some(scope) = scope {
        form.push(("scope", scope));
    }
    // Asking for a token twice is harmless: transient failures are retried.
    let mut retry = Retry::new();
    let (started, status, body) = loop {
        retry.attempt();
        let started = Instant::now();
        let answer = match http.post(token_uri).form(&form).send().await {
            Ok(response) => {
                let status = response.status();
                response.bytes().await.map(|body| (status, body))
            }
            Err(e) => Err(e),
        };
        match answer {
            Ok((status, _)) if status_retryable(status, true) && retry.again().await => {}
            Ok((status, body)) => break (started, status, body),
            Err(e) if transport_retryable(&e, true) && retry.again().await => {}
            Err(e) => {
                return Err(CatalogError::new(
                    CatalogErrorKind::Unreachable,
                    &step,
                    format!(
                        "the catalog's token endpoint is unreachable: {}{}{}",
                        describe_transport(&e),
                        retry.note(),
                        tls_hint(&describe_transport(&e))
                    ),
                )
                .with_source(e))
            }
        }
    };
    if !status.is_success() {
        let said = serde_json::from_slice::<OAuthErrorBody>(&body)
            .ok()
            .and_then(|b| match (b.error, b.error_description) {
                (Some(e), Some(d)) => Some(format!("{e}: {d}")),
                (Some(e), None) => Some(e),
                (None, d) => d,
            })
            .unwrap_or_else(|| String::from_utf8_lossy(&body).chars().take(300).collect());
        let kind = match status.as_u16() {
            400 | 401 => CatalogErrorKind::Unauthorized,
            403 => CatalogErrorKind::Forbidden,
            404 => CatalogErrorKind::NotFound,
            s if s >= 500 => CatalogErrorKind::Server,
            _ => CatalogErrorKind::Protocol,
        };
        let hint = match kind {
            CatalogErrorKind::Unauthorized => " (check the client id and secret)",
            CatalogErrorKind::NotFound => " (check the token endpoint URI)",
            _ => "",
        };
        return Err(CatalogError::new(
            kind,
            step,
            format!("HTTP {status}: {said}{hint}{}", retry.note()),
        ));
    }
    let parsed: TokenResponse = serde_json::from_slice(&body).map_err(|e| {
        CatalogError::new(
            CatalogErrorKind::Protocol,
            &step,
            format!("unexpected token response: {e}"),
        )
        .with_source(e)
    })?;
    Ok(AccessToken {
        token: Secret::new(parsed.access_token),
        expires_at: parsed.expires_in.map(|s| started + Duration::from_secs(s)),
        lifetime: Duration::from_secs(parsed.expires_in.unwrap_or(0)),
    })
}
