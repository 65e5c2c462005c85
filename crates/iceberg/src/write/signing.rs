//! S3 requests signed by the catalog (the Iceberg REST remote signing
//! contract, as Nessie, Lakekeeper and others serve it): the client holds
//! no storage keys; for every S3 request it sends the method, URI and
//! headers to the catalog's signer and sends the request with exactly the
//! headers (and to the URI) the signer answers.
//!
//! A load-table answer asks for it with `s3.remote-signing-enabled=true`,
//! `s3.signer.uri` and `s3.signer.endpoint` (the signer URL is the two
//! joined; Nessie puts a per-table token in the endpoint). `object_store`
//! builds each request unsigned (`with_skip_signature`) and hands it to
//! [`SigningConnector`]'s HTTP client, which signs it remotely, then sends
//! it. The payload is never hashed by the signer: `UNSIGNED-PAYLOAD`.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::BoxFuture;
use object_store::client::{
    ClientOptions, HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse,
    HttpService, ReqwestConnector,
};
use serde::{Deserialize, Serialize};
use topicberg_core::Secret;

use crate::error::CatalogError;

/// The bearer token to send to the signer (the catalog's), if any.
pub type SignerToken =
    Arc<dyn Fn() -> BoxFuture<'static, Result<Option<Secret>, CatalogError>> + Send + Sync>;

/// A table config's remote-signing settings, if it asks for signing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSigning {
    /// The signer URL (`s3.signer.uri` + `s3.signer.endpoint`).
    pub signer_url: String,
    /// The region to sign for (`client.region` / `s3.region`).
    pub region: Option<String>,
    /// `s3.endpoint`, if the catalog named one.
    pub endpoint: Option<String>,
    /// `s3.path-style-access`, if the catalog said.
    pub path_style: Option<bool>,
}

/// The default signer endpoint of the Iceberg REST spec.
const DEFAULT_SIGNER_ENDPOINT: &str = "v1/aws/s3/sign";

impl RemoteSigning {
    /// The remote-signing settings of a table config (`catalog_uri` when
    /// the config names no `s3.signer.uri`), if signing is enabled.
    pub fn from_config(config: &HashMap<String, String>, catalog_uri: &str) -> Option<Self> {
        let enabled = config
            .get("s3.remote-signing-enabled")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        if !enabled {
            return None;
        }
        let base = config
            .get("s3.signer.uri")
            .map(String::as_str)
            .unwrap_or(catalog_uri);
        let endpoint = config
            .get("s3.signer.endpoint")
            .map(String::as_str)
            .unwrap_or(DEFAULT_SIGNER_ENDPOINT);
        let signer_url = if endpoint.starts_with("http://") || endpoint.starts_with("https://") {
            endpoint.to_string()
        } else {
            format!(
                "{}/{}",
                base.trim_end_matches('/'),
                endpoint.trim_start_matches('/')
            )
        };
        Some(Self {
            signer_url,
            region: config
                .get("client.region")
                .or_else(|| config.get("s3.region"))
                .cloned(),
            endpoint: config.get("s3.endpoint").cloned(),
            path_style: config
                .get("s3.path-style-access")
                .map(|v| v.eq_ignore_ascii_case("true")),
        })
    }

    /// The signer URL without its per-table token, safe to print.
    pub fn signer_shown(&self) -> String {
        match self.signer_url.rsplit_once('/') {
            Some((head, _)) => format!("{head}/..."),
            None => self.signer_url.clone(),
        }
    }
}

#[derive(Serialize)]
struct SignRequest<'a> {
    region: &'a str,
    uri: String,
    method: &'a str,
    headers: HashMap<String, Vec<String>>,
}

#[derive(Deserialize)]
struct SignResponse {
    uri: String,
    #[serde(default)]
    headers: HashMap<String, Vec<String>>,
}

/// Hands `object_store` an HTTP client that signs each request remotely.
#[derive(Clone)]
pub struct SigningConnector {
    signer: Arc<Signer>,
}

struct Signer {
    url: String,
    shown: String,
    region: String,
    http: reqwest::Client,
    token: SignerToken,
}

impl fmt::Debug for SigningConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningConnector")
            .field("signer", &self.signer.shown)
            .finish_non_exhaustive()
    }
}

impl SigningConnector {
    /// Requests signed by the signer of `signing`, for `region`, with the
    /// catalog's bearer token from `token`.
    pub fn new(
        signing: &RemoteSigning,
        region: &str,
        token: SignerToken,
        ca_pem: Option<&str>,
    ) -> Self {
        let mut http = reqwest::Client::builder();
        for certificate in ca_pem
            .and_then(|pem| reqwest::Certificate::from_pem_bundle(pem.as_bytes()).ok())
            .unwrap_or_default()
        {
            http = http.add_root_certificate(certificate);
        }
        Self {
            signer: Arc::new(Signer {
                url: signing.signer_url.clone(),
                shown: signing.signer_shown(),
                region: region.to_string(),
                http: http.build().unwrap_or_default(),
                token,
            }),
        }
    }
}

impl HttpConnector for SigningConnector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let inner = ReqwestConnector::default().connect(options)?;
        Ok(HttpClient::new(SigningService {
            inner,
            signer: self.signer.clone(),
        }))
    }
}

#[derive(Debug)]
struct SigningService {
    inner: HttpClient,
    signer: Arc<Signer>,
}

impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signer")
            .field("url", &self.shown)
            .finish_non_exhaustive()
    }
}

/// Why the signer did not sign a request.
#[derive(Debug, thiserror::Error)]
#[error("the catalog's S3 signer at {signer} {reason}")]
struct SignerRefused {
    signer: String,
    reason: String,
}

#[async_trait]
impl HttpService for SigningService {
    async fn call(&self, mut request: HttpRequest) -> Result<HttpResponse, HttpError> {
        let signed = self.signer.sign(&request).await?;
        let uri = signed.uri.parse().map_err(|e: http::uri::InvalidUri| {
            self.signer
                .refused(HttpErrorKind::Decode, format!("answered a bad uri: {e}"))
        })?;
        *request.uri_mut() = uri;
        let headers = request.headers_mut();
        for (name, values) in signed.headers {
            let Ok(name) = http::HeaderName::from_bytes(name.as_bytes()) else {
                continue;
            };
            headers.remove(&name);
            for value in values {
                if let Ok(value) = http::HeaderValue::from_str(&value) {
                    headers.append(name.clone(), value);
                }
            }
        }
        self.inner.execute(request).await
    }
}

impl Signer {
    fn refused(&self, kind: HttpErrorKind, reason: String) -> HttpError {
        HttpError::new(
            kind,
            SignerRefused {
                signer: self.shown.clone(),
                reason,
            },
        )
    }

    async fn sign(&self, request: &HttpRequest) -> Result<SignResponse, HttpError> {
        let mut headers: HashMap<String, Vec<String>> = HashMap::new();
        for (name, value) in request.headers() {
            if name == http::header::AUTHORIZATION {
                continue;
            }
            if let Ok(value) = value.to_str() {
                headers
                    .entry(name.as_str().to_string())
                    .or_default()
                    .push(value.to_string());
            }
        }
        let body = SignRequest {
            region: &self.region,
            uri: request.uri().to_string(),
            method: request.method().as_str(),
            headers,
        };
        let token = (self.token)().await.map_err(|e| {
            self.refused(HttpErrorKind::Request, format!("could not be asked: {e}"))
        })?;
        let mut call = self.http.post(&self.url).json(&body);
        if let Some(token) = token {
            call = call.bearer_auth(token.expose());
        }
        let response = call.send().await.map_err(|e| {
            let kind = if e.is_connect() {
                HttpErrorKind::Connect
            } else {
                HttpErrorKind::Request
            };
            self.refused(kind, format!("could not be reached: {e}"))
        })?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        if !status.is_success() {
            let kind = if status.is_server_error() {
                HttpErrorKind::Request
            } else {
                HttpErrorKind::Unknown
            };
            let detail: String = text.chars().take(300).collect();
            return Err(self.refused(kind, format!("refused to sign: HTTP {status}: {detail}")));
        }
        serde_json::from_str(&text).map_err(|e| {
            self.refused(
                HttpErrorKind::Decode,
                format!("answered what is not a signature: {e}"),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signing_settings_join_the_signer_uri_and_endpoint_and_hide_the_token() {
        let config = HashMap::from([
            ("s3.remote-signing-enabled".to_string(), "true".to_string()),
            (
                "s3.signer.uri".to_string(),
                "http://127.0.0.1:19120/iceberg/".to_string(),
            ),
            (
                "s3.signer.endpoint".to_string(),
                "v1/main%7Cw/s3sign/SECRET-TOKEN".to_string(),
            ),
            ("client.region".to_string(), "eu-west-1".to_string()),
        ]);
        let s = RemoteSigning::from_config(&config, "http://catalog").unwrap();
        assert_eq!(
            s.signer_url,
            "http://127.0.0.1:19120/iceberg/v1/main%7Cw/s3sign/SECRET-TOKEN"
        );
        assert_eq!(s.region.as_deref(), Some("eu-west-1"));
        assert!(!s.signer_shown().contains("SECRET"), "{}", s.signer_shown());
        let defaults =
            HashMap::from([("s3.remote-signing-enabled".to_string(), "true".to_string())]);
        let s = RemoteSigning::from_config(&defaults, "http://catalog/api").unwrap();
        assert_eq!(s.signer_url, "http://catalog/api/v1/aws/s3/sign");
        assert!(RemoteSigning::from_config(&HashMap::new(), "http://c").is_none());
    }
}
