//! The client against a tiny local HTTP server answering canned
//! responses: caching, retries, 404, 401, references, basic auth, and the
//! blocking path a drain thread takes.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use topicberg_core::{RegistryCredentials, Secret};

use super::*;

/// A request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    authorization: Option<String>,
}

type Answer = (u16, String);
type Handler = dyn Fn(&Seen, usize) -> Answer + Send + Sync;

/// A server on 127.0.0.1 answering every request with `handler(request,
/// n)` (n: the request's number, from 0), one connection per request.
struct CannedRegistry {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl CannedRegistry {
    fn start(handler: impl Fn(&Seen, usize) -> Answer + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let handler: Arc<Handler> = Arc::new(handler);
        let count = Arc::new(AtomicUsize::new(0));
        let log = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let n = count.fetch_add(1, Ordering::SeqCst);
                answer(stream, &*handler, n, &log);
            }
        });
        Self { url, seen }
    }

    fn paths(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.path.clone())
            .collect()
    }
}

fn answer(stream: TcpStream, handler: &Handler, n: usize, log: &Mutex<Vec<Seen>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let mut authorization = None;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("authorization") {
                authorization = Some(value.trim().to_string());
            }
        }
    }
    let request = Seen {
        path,
        authorization,
    };
    log.lock().unwrap().push(request.clone());
    let (status, body) = handler(&request, n);
    let mut stream = stream;
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\nContent-Type: application/vnd.schemaregistry.v1+json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

fn settings(url: &str) -> RegistrySettings {
    RegistrySettings {
        url: url.to_string(),
        credentials: None,
        ca_pem: None,
        request_timeout: Duration::from_secs(5),
    }
}

const FAST: RetryPolicy = RetryPolicy {
    attempts: 3,
    first_backoff: Duration::from_millis(10),
    window: Duration::from_secs(10),
};

fn client(settings: &RegistrySettings) -> RegistryClient {
    RegistryClient::new(settings, Handle::current())
        .unwrap()
        .with_retry(FAST)
}

const AVRO: &str = r#"{\"type\":\"record\",\"name\":\"Order\",\"fields\":[]}"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_schema_is_fetched_once_and_then_cached() {
    let server = CannedRegistry::start(|seen, _| match seen.path.as_str() {
        "/schemas/ids/7" => (200, format!(r#"{{"schema":"{AVRO}"}}"#)),
        _ => (
            404,
            r#"{"error_code":40403,"message":"Schema not found"}"#.into(),
        ),
    });
    let registry = client(&settings(&server.url));
    let first = registry.schema(7).await.unwrap();
    assert_eq!(first.id, 7);
    assert_eq!(first.kind, SchemaKind::Avro, "no schemaType is Avro");
    assert!(first.schema.contains("\"Order\""), "{}", first.schema);
    assert!(first.references.is_empty());
    let again = registry.schema(7).await.unwrap();
    assert!(Arc::ptr_eq(&first, &again));
    assert_eq!(server.paths(), ["/schemas/ids/7"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_id_is_not_found_at_once_and_asked_again_later() {
    let server = CannedRegistry::start(|_, _| {
        (
            404,
            r#"{"error_code":40403,"message":"Schema 9 not found"}"#.into(),
        )
    });
    let registry = client(&settings(&server.url));
    let e = registry.schema(9).await.unwrap_err();
    assert_eq!(e.kind, RegistryErrorKind::NotFound);
    assert!(!e.is_retryable());
    assert_eq!(e.what, "schema id 9");
    assert!(e.to_string().contains(&server.url), "{e}");
    assert!(e.message.contains("40403"), "{e}");
    registry.schema(9).await.unwrap_err();
    assert_eq!(
        server.paths().len(),
        2,
        "a miss is not cached, never retried"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn five_hundreds_and_no_leader_are_retried_then_answered() {
    let server = CannedRegistry::start(|_, n| match n {
        0 => (503, "busy".into()),
        1 => (
            500,
            r#"{"error_code":50003,"message":"master not available"}"#.into(),
        ),
        _ => (200, format!(r#"{{"schema":"{AVRO}","schemaType":"AVRO"}}"#)),
    });
    let registry = client(&settings(&server.url));
    let schema = registry.schema(3).await.unwrap();
    assert_eq!(schema.id, 3);
    assert_eq!(server.paths().len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_registry_that_stays_down_is_unavailable_naming_it_and_the_id() {
    let server = CannedRegistry::start(|_, _| (503, "down".into()));
    let registry = client(&settings(&server.url));
    let e = registry.schema(42).await.unwrap_err();
    assert_eq!(e.kind, RegistryErrorKind::Unavailable);
    assert!(e.is_retryable());
    assert_eq!(server.paths().len(), FAST.attempts as usize);
    let text = e.to_string();
    assert!(
        text.contains(&server.url) && text.contains("schema id 42"),
        "{text}"
    );
    assert!(text.contains("gave up after 3 attempt(s)"), "{text}");

    // Nothing listening: connection refused, retried, then the same.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let closed = format!("http://user:pw@127.0.0.1:{port}");
    let registry = client(&settings(&closed));
    let e = registry.schema(5).await.unwrap_err();
    assert_eq!(e.kind, RegistryErrorKind::Unavailable);
    let text = e.to_string();
    assert!(!text.contains(":pw@"), "the URL is shown redacted: {text}");
    assert!(text.contains("schema id 5"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn credentials_are_sent_and_a_refusal_is_unauthorized_without_retries() {
    let server = CannedRegistry::start(|seen, _| {
        match seen.authorization.as_deref() {
            // base64("KEY:s3cr3t")
            Some("Basic S0VZOnMzY3IzdA==") => (200, r#"["orders-value"]"#.into()),
            _ => (
                401,
                r#"{"error_code":40101,"message":"Unauthorized"}"#.into(),
            ),
        }
    });
    let mut with_key = settings(&server.url);
    with_key.credentials = Some(RegistryCredentials {
        username: "KEY".into(),
        password: Secret::new("s3cr3t"),
    });
    assert_eq!(
        client(&with_key).subjects().await.unwrap(),
        ["orders-value"]
    );

    with_key.credentials = Some(RegistryCredentials {
        username: "KEY".into(),
        password: Secret::new("wrong-one"),
    });
    let e = client(&with_key).subjects().await.unwrap_err();
    assert_eq!(e.kind, RegistryErrorKind::Unauthorized);
    assert_eq!(e.what, "GET /subjects");
    assert!(!format!("{e:?}{e}").contains("wrong-one"));
    assert!(!format!("{:?}", client(&with_key)).contains("wrong-one"));
    assert_eq!(server.paths().len(), 2, "401 is never retried");
}

#[tokio::test(flavor = "multi_thread")]
async fn latest_versions_and_missing_subjects() {
    let server = CannedRegistry::start(|seen, _| match seen.path.as_str() {
        "/prefix/subjects/shop.orders-value/versions/latest" => (
            200,
            r#"{"subject":"shop.orders-value","version":3,"id":12,"schemaType":"PROTOBUF",
               "schema":"syntax = \"proto3\";"}"#
                .into(),
        ),
        _ => (
            404,
            r#"{"error_code":40401,"message":"Subject not found."}"#.into(),
        ),
    });
    let registry = client(&settings(&format!("{}/prefix", server.url)));
    let latest = registry.latest_version("shop.orders-value").await.unwrap();
    assert_eq!(
        latest,
        SubjectVersion {
            subject: "shop.orders-value".into(),
            version: 3,
            id: 12,
            kind: SchemaKind::Protobuf,
        }
    );
    let none = registry
        .latest_version_if_any("customers-value")
        .await
        .unwrap();
    assert_eq!(none, None);
    let e = registry
        .latest_version("customers-value")
        .await
        .unwrap_err();
    assert_eq!(e.kind, RegistryErrorKind::NotFound);
    assert_eq!(e.what, "subject customers-value");
}

#[tokio::test(flavor = "multi_thread")]
async fn references_are_resolved_recursively_dependencies_first_once_each() {
    // id 20 refers to b (v1) and c (v2); b refers to c (v2) too.
    let server = CannedRegistry::start(|seen, _| match seen.path.as_str() {
        "/schemas/ids/20" => (
            200,
            r#"{"schemaType":"PROTOBUF","schema":"import \"b.proto\"; import \"c.proto\";",
                "references":[{"name":"b.proto","subject":"b","version":1},
                              {"name":"c.proto","subject":"c","version":2}]}"#
                .into(),
        ),
        "/subjects/b/versions/1" => (
            200,
            r#"{"subject":"b","version":1,"id":21,"schemaType":"PROTOBUF","schema":"B",
                "references":[{"name":"c.proto","subject":"c","version":2}]}"#
                .into(),
        ),
        "/subjects/c/versions/2" => (
            200,
            r#"{"subject":"c","version":2,"id":22,"schemaType":"PROTOBUF","schema":"C"}"#.into(),
        ),
        _ => (
            404,
            r#"{"error_code":40402,"message":"Version not found."}"#.into(),
        ),
    });
    let registry = client(&settings(&server.url));
    let schema = registry.schema(20).await.unwrap();
    assert_eq!(schema.kind, SchemaKind::Protobuf);
    let order: Vec<(&str, &str, i32, &str)> = schema
        .references
        .iter()
        .map(|r| {
            (
                r.name.as_str(),
                r.subject.as_str(),
                r.version,
                r.schema.as_str(),
            )
        })
        .collect();
    assert_eq!(order, [("c.proto", "c", 2, "C"), ("b.proto", "b", 1, "B")]);
    assert_eq!(
        server.paths(),
        [
            "/schemas/ids/20",
            "/subjects/b/versions/1",
            "/subjects/c/versions/2"
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_reference_names_the_schema_and_the_reference() {
    let server = CannedRegistry::start(|seen, _| match seen.path.as_str() {
        "/schemas/ids/30" => (
            200,
            r#"{"schema":"{}","references":[{"name":"com.x.Y","subject":"y","version":4}]}"#.into(),
        ),
        _ => (
            404,
            r#"{"error_code":40402,"message":"Version 4 not found."}"#.into(),
        ),
    });
    let e = client(&settings(&server.url)).schema(30).await.unwrap_err();
    assert_eq!(e.kind, RegistryErrorKind::NotFound);
    assert!(
        e.what
            .starts_with("schema id 30, reference \"com.x.Y\" (subject y version 4)"),
        "{e}"
    );
}

#[test]
fn a_drain_thread_blocks_on_the_clients_runtime_and_shares_its_cache() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = CannedRegistry::start(|_, _| (200, format!(r#"{{"schema":"{AVRO}"}}"#)));
    let registry = RegistryClient::new(&settings(&server.url), runtime.handle().clone())
        .unwrap()
        .with_retry(FAST);
    let source: Arc<dyn SchemaSource> = Arc::new(registry);
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let source = Arc::clone(&source);
            std::thread::spawn(move || source.schema_by_id(8).unwrap().id)
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), 8);
    }
    assert_eq!(source.schema_by_id(8).unwrap().id, 8);
    // Concurrent misses may each ask; once cached, nobody does.
    let asked = server.paths().len();
    assert!((1..=3).contains(&asked), "{asked}");
    // Also from inside the runtime (a worker thread), through block_in_place.
    let inside = runtime.block_on(async {
        let source = Arc::clone(&source);
        tokio::spawn(async move { source.schema_by_id(8).map(|s| s.id) })
            .await
            .unwrap()
    });
    assert_eq!(inside.unwrap(), 8);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_ca_that_is_not_pem_is_refused_naming_the_field() {
    let mut bad = settings("https://sr.example:8081");
    bad.ca_pem =
        Some("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n".into());
    let e = RegistryClient::new(&bad, Handle::current()).unwrap_err();
    assert_eq!(e.kind, RegistryErrorKind::Invalid);
    assert!(e.message.contains("schema_registry_ca_pem"), "{e}");
}
