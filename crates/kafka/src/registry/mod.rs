//! The schema registry client: a Confluent-compatible registry (Confluent,
//! Karapace, Apicurio's ccompat API) is part of the Kafka source.
//!
//! [`RegistryClient`] lists subjects, reads a subject's latest version, and
//! fetches schemas by id with their references resolved (dependencies
//! first), cached for the process. It is async inside (reqwest) and holds
//! a tokio runtime [`Handle`]: async code (`check`, `discover`, the sync's
//! stages) awaits its methods; drain threads, plain std threads outside the
//! runtime, ask through [`SchemaSource::schema_by_id`], which blocks on the
//! runtime (inside `block_in_place`, so a multi-threaded runtime's worker
//! may call it too). One client, one connection pool, one cache, whoever
//! asks.
//!
//! Requests are retried while the registry is transiently unavailable
//! (see `http.rs`); errors name the registry (its URL made safe to print)
//! and what was asked (`schema id 7`, `subject orders-value`).

mod http;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use reqwest::Url;
use serde::Deserialize;
use tokio::runtime::Handle;
use topicberg_core::{
    redact_urls, RegisteredSchema, RegistryError, RegistryErrorKind, RegistrySettings, SchemaKind,
    SchemaReference, SchemaSource,
};

use http::Endpoint;
pub use http::RetryPolicy;

/// A subject's version as the registry lists it (without references
/// resolved: ask [`RegistryClient::schema`] with its id for those).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectVersion {
    /// The subject.
    pub subject: String,
    /// The version number within the subject.
    pub version: i32,
    /// The global schema id (what framed messages carry).
    pub id: u32,
    /// The schema's kind (`schemaType`; absent means Avro).
    pub kind: SchemaKind,
}

/// References deeper than this are refused (a cycle the registry let in).
const MAX_REFERENCE_DEPTH: usize = 32;

/// A connected schema registry; cheap to share behind an `Arc`.
pub struct RegistryClient {
    endpoint: Endpoint,
    runtime: Handle,
    cache: Mutex<HashMap<u32, Arc<RegisteredSchema>>>,
}

impl fmt::Debug for RegistryClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryClient")
            .field("url", &self.endpoint.shown)
            .finish_non_exhaustive()
    }
}

/// A `schemaType` other than `AVRO`, `PROTOBUF` and `JSON` (a
/// [`RegistryErrorKind::Invalid`] answer).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown schemaType {name:?}")]
struct UnknownSchemaType {
    name: String,
}

/// `schemaType` as the registry writes it; absent is Avro.
fn schema_kind(name: Option<&str>) -> Result<SchemaKind, UnknownSchemaType> {
    match name.unwrap_or("AVRO") {
        "AVRO" => Ok(SchemaKind::Avro),
        "PROTOBUF" => Ok(SchemaKind::Protobuf),
        "JSON" => Ok(SchemaKind::Json),
        other => Err(UnknownSchemaType {
            name: other.to_owned(),
        }),
    }
}

/// A reference as the registry lists it.
#[derive(Debug, Clone, Deserialize)]
struct RawReference {
    name: String,
    subject: String,
    version: i32,
}

/// `GET /schemas/ids/{id}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SchemaAnswer {
    schema: String,
    #[serde(default)]
    schema_type: Option<String>,
    #[serde(default)]
    references: Vec<RawReference>,
}

/// `GET /subjects/{subject}/versions/{version}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct VersionAnswer {
    subject: String,
    version: i32,
    id: u32,
    #[serde(default)]
    schema_type: Option<String>,
    #[serde(default)]
    schema: String,
    #[serde(default)]
    references: Vec<RawReference>,
}

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

impl RegistryClient {
    /// A client for `settings` whose blocking calls run on `runtime`. No
    /// request is sent yet; fails only on settings the HTTP client refuses
    /// (a CA that is not PEM).
    pub fn new(settings: &RegistrySettings, runtime: Handle) -> Result<Self, RegistryError> {
        let shown = redact_urls(&settings.url);
        let invalid = |message: String| RegistryError {
            kind: RegistryErrorKind::Invalid,
            registry: shown.clone(),
            what: "connecting".into(),
            message,
        };
        let base = Url::parse(&settings.url)
            .map_err(|e| invalid(format!("schema_registry_url is not a URL: {e}")))?;
        let mut builder = reqwest::Client::builder()
            .timeout(settings.request_timeout)
            .connect_timeout(settings.request_timeout);
        if let Some(pem) = &settings.ca_pem {
            let certificates =
                reqwest::Certificate::from_pem_bundle(pem.as_bytes()).map_err(|e| {
                    invalid(format!(
                        "schema_registry_ca_pem is not a PEM certificate: {e}"
                    ))
                })?;
            for certificate in certificates {
                builder = builder.add_root_certificate(certificate);
            }
        }
        let http = builder
            .build()
            .map_err(|e| invalid(format!("HTTP client: {e}")))?;
        Ok(Self {
            endpoint: Endpoint {
                http,
                base,
                shown,
                credentials: settings.credentials.clone(),
                retry: RetryPolicy::default(),
            },
            runtime,
            cache: Mutex::default(),
        })
    }

    /// The same client with another retry policy (tests shorten it).
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.endpoint.retry = retry;
        self
    }

    /// The registry's URL, safe to print.
    pub fn url(&self) -> &str {
        &self.endpoint.shown
    }

    /// `GET /subjects`: every subject (proves the registry answers and
    /// takes the credentials).
    pub async fn subjects(&self) -> Result<Vec<String>, RegistryError> {
        self.endpoint.get(&["subjects"], "GET /subjects").await
    }

    /// The latest version of `subject`; `NotFound` when there is no such
    /// subject.
    pub async fn latest_version(&self, subject: &str) -> Result<SubjectVersion, RegistryError> {
        let what = format!("subject {subject}");
        let answer: VersionAnswer = self
            .endpoint
            .get(&["subjects", subject, "versions", "latest"], &what)
            .await?;
        let kind = schema_kind(answer.schema_type.as_deref()).map_err(|e| {
            self.endpoint
                .error(RegistryErrorKind::Invalid, &what, e.to_string())
        })?;
        Ok(SubjectVersion {
            subject: answer.subject,
            version: answer.version,
            id: answer.id,
            kind,
        })
    }

    /// [`latest_version`](Self::latest_version), with a missing subject as
    /// `None`.
    pub async fn latest_version_if_any(
        &self,
        subject: &str,
    ) -> Result<Option<SubjectVersion>, RegistryError> {
        match self.latest_version(subject).await {
            Ok(version) => Ok(Some(version)),
            Err(e) if e.kind == RegistryErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The schema with global id `id`, its references resolved
    /// (dependencies first); cached for the process, asked again on a miss.
    pub async fn schema(&self, id: u32) -> Result<Arc<RegisteredSchema>, RegistryError> {
        if let Some(schema) = self.cached(id) {
            return Ok(schema);
        }
        let what = format!("schema id {id}");
        let id_text = id.to_string();
        let answer: SchemaAnswer = self
            .endpoint
            .get(&["schemas", "ids", &id_text], &what)
            .await?;
        let kind = schema_kind(answer.schema_type.as_deref()).map_err(|e| {
            self.endpoint
                .error(RegistryErrorKind::Invalid, &what, e.to_string())
        })?;
        let mut references = Vec::new();
        let mut seen = HashSet::new();
        for reference in answer.references {
            self.resolve(reference, &what, 1, &mut seen, &mut references)
                .await?;
        }
        let schema = Arc::new(RegisteredSchema {
            id,
            kind,
            schema: answer.schema,
            references,
        });
        self.cache
            .lock()
            .expect("schema cache")
            .insert(id, Arc::clone(&schema));
        tracing::debug!(registry = %self.endpoint.shown, id, kind = kind.as_str(), "schema fetched");
        Ok(schema)
    }

    fn cached(&self, id: u32) -> Option<Arc<RegisteredSchema>> {
        self.cache.lock().expect("schema cache").get(&id).cloned()
    }

    /// Appends `reference` to `out` after everything it refers to; each
    /// subject version once.
    fn resolve<'a>(
        &'a self,
        reference: RawReference,
        what: &'a str,
        depth: usize,
        seen: &'a mut HashSet<(String, i32)>,
        out: &'a mut Vec<SchemaReference>,
    ) -> BoxFuture<'a, Result<(), RegistryError>> {
        Box::pin(async move {
            if !seen.insert((reference.subject.clone(), reference.version)) {
                return Ok(());
            }
            let context = format!(
                "{what}, reference {:?} (subject {} version {})",
                reference.name, reference.subject, reference.version
            );
            if depth > MAX_REFERENCE_DEPTH {
                let message = format!("references nest deeper than {MAX_REFERENCE_DEPTH}");
                return Err(self
                    .endpoint
                    .error(RegistryErrorKind::Invalid, &context, message));
            }
            let version = reference.version.to_string();
            let answer: VersionAnswer = self
                .endpoint
                .get(
                    &["subjects", &reference.subject, "versions", &version],
                    &context,
                )
                .await?;
            for child in answer.references {
                self.resolve(child, what, depth + 1, seen, out).await?;
            }
            out.push(SchemaReference {
                name: reference.name,
                subject: answer.subject,
                version: answer.version,
                schema: answer.schema,
            });
            Ok(())
        })
    }
}

impl SchemaSource for RegistryClient {
    /// Blocks the calling thread on the client's runtime; for drain
    /// threads (and blocking tasks). Not on a current-thread runtime's
    /// thread (tokio refuses to block there).
    fn schema_by_id(&self, id: u32) -> Result<Arc<RegisteredSchema>, RegistryError> {
        if let Some(schema) = self.cached(id) {
            return Ok(schema);
        }
        tokio::task::block_in_place(|| self.runtime.block_on(self.schema(id)))
    }
}
