//! OAuth2 refresh against a tiny scripted catalog on loopback (a unit test
//! of the client alone; the real catalogs are exercised in tests/it).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::{CatalogAuth, RestCatalog, RestCatalogConfig};

/// A catalog that issues tokens `t1`, `t2`, ... with `expires_in` seconds,
/// and answers 401 to any token but the newest (or to every token while
/// `reject_all` is set).
struct ScriptedCatalog {
    issued: AtomicUsize,
    expires_in: u64,
    valid: Mutex<String>,
    requests: Mutex<Vec<String>>,
    /// Answers to `POST /v1/namespaces`, first to last (then 200).
    namespace_answers: Mutex<Vec<&'static str>>,
}

async fn serve(script: Arc<ScriptedCatalog>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let script = Arc::clone(&script);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16384];
                let mut len = 0;
                // Read the head (and a small body) of one request.
                loop {
                    let n = socket.read(&mut buf[len..]).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    len += n;
                    let text = String::from_utf8_lossy(&buf[..len]).to_string();
                    if let Some(head_end) = text.find("\r\n\r\n") {
                        let body_len = text
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length: ")
                                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if len >= head_end + 4 + body_len {
                            break;
                        }
                    }
                }
                let text = String::from_utf8_lossy(&buf[..len]).to_string();
                let line = text.lines().next().unwrap_or_default().to_string();
                let auth = text
                    .lines()
                    .find_map(|l| {
                        l.strip_prefix("authorization: Bearer ")
                            .or_else(|| l.strip_prefix("Authorization: Bearer "))
                    })
                    .unwrap_or_default()
                    .trim()
                    .to_string();
                script
                    .requests
                    .lock()
                    .unwrap()
                    .push(format!("{line} [{auth}]"));
                let (status, body) = if line.starts_with("POST /v1/oauth/tokens") {
                    let n = script.issued.fetch_add(1, Ordering::SeqCst) + 1;
                    let token = format!("t{n}");
                    *script.valid.lock().unwrap() = token.clone();
                    (
                        "200 OK",
                        format!(
                            r#"{{"access_token":"{token}","token_type":"bearer","expires_in":{}}}"#,
                            script.expires_in
                        ),
                    )
                } else if line.starts_with("POST /v1/namespaces ")
                    && auth == *script.valid.lock().unwrap()
                {
                    let mut answers = script.namespace_answers.lock().unwrap();
                    let status = if answers.is_empty() {
                        "200 OK"
                    } else {
                        answers.remove(0)
                    };
                    (
                        status,
                        r#"{"error":{"message":"scripted","type":"X","code":0}}"#.to_string(),
                    )
                } else if auth == *script.valid.lock().unwrap() {
                    (
                        "200 OK",
                        r#"{"defaults":{},"overrides":{},"namespaces":[]}"#.to_string(),
                    )
                } else {
                    ("401 Unauthorized", r#"{"error":{"message":"expired","type":"NotAuthorizedException","code":401}}"#.to_string())
                };
                let response = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}")
}

fn config(uri: String) -> RestCatalogConfig {
    RestCatalogConfig {
        uri,
        warehouse: None,
        auth: CatalogAuth::ClientCredentials {
            client_id: "id".into(),
            client_secret: "secret".into(),
            token_uri: None,
            scope: None,
        },
        request_timeout: Duration::from_secs(5),
        vended_credentials: false,
        ca_pem: None,
    }
}

#[tokio::test]
async fn token_close_to_expiry_is_exchanged_before_the_request() {
    // A token issued with `expires_in: 0` is already at its expiry, so the
    // client must exchange a new one before every request, never send it.
    let script = Arc::new(ScriptedCatalog {
        issued: AtomicUsize::new(0),
        expires_in: 0,
        valid: Mutex::new(String::new()),
        requests: Mutex::new(Vec::new()),
        namespace_answers: Mutex::new(Vec::new()),
    });
    let catalog = RestCatalog::connect(&config(serve(Arc::clone(&script)).await))
        .await
        .unwrap();
    let issued_after_connect = script.issued.load(Ordering::SeqCst);
    catalog
        .list_namespaces(None)
        .await
        .expect("refreshed before sending");
    assert_eq!(
        script.issued.load(Ordering::SeqCst),
        issued_after_connect + 1
    );
    let requests = script.requests.lock().unwrap().clone();
    assert!(
        !requests.iter().any(|r| r.contains("401")),
        "no request should have been refused: {requests:?}"
    );
}

#[tokio::test]
async fn a_401_gets_one_fresh_token_and_the_request_again() {
    let script = Arc::new(ScriptedCatalog {
        issued: AtomicUsize::new(0),
        expires_in: 3600,
        valid: Mutex::new(String::new()),
        requests: Mutex::new(Vec::new()),
        namespace_answers: Mutex::new(Vec::new()),
    });
    let catalog = RestCatalog::connect(&config(serve(Arc::clone(&script)).await))
        .await
        .unwrap();
    // The catalog revokes the token it issued.
    *script.valid.lock().unwrap() = "revoked".into();
    let before = script.issued.load(Ordering::SeqCst);
    catalog
        .list_namespaces(None)
        .await
        .expect("retried with a fresh token");
    assert_eq!(script.issued.load(Ordering::SeqCst), before + 1);
    let requests = script.requests.lock().unwrap().clone();
    let listings: Vec<&String> = requests
        .iter()
        .filter(|r| r.starts_with("GET /v1/namespaces"))
        .collect();
    assert_eq!(listings.len(), 2, "{requests:?}");
    assert!(
        listings[0].ends_with(&format!("[t{before}]"))
            && listings[1].ends_with(&format!("[t{}]", before + 1)),
        "{listings:?}"
    );
}

#[test]
fn expiry_margin_is_a_minute_or_half_a_short_lifetime() {
    use super::client::expiring_at;
    use std::time::Instant;
    let now = Instant::now();
    let token = |lifetime: u64| super::AccessToken {
        token: "t".into(),
        expires_at: Some(now + Duration::from_secs(lifetime)),
        lifetime: Duration::from_secs(lifetime),
    };
    let hour = token(3600);
    assert!(!expiring_at(&hour, now));
    assert!(!expiring_at(&hour, now + Duration::from_secs(3600 - 61)));
    assert!(expiring_at(&hour, now + Duration::from_secs(3600 - 60)));
    let short = token(10);
    assert!(!expiring_at(&short, now + Duration::from_secs(4)));
    assert!(expiring_at(&short, now + Duration::from_secs(5)));
    let forever = super::AccessToken {
        token: "t".into(),
        expires_at: None,
        lifetime: Duration::ZERO,
    };
    assert!(!expiring_at(&forever, now + Duration::from_secs(1 << 30)));
}

#[tokio::test]
async fn ensure_namespace_resends_a_create_the_catalog_failed_and_takes_the_conflict_as_exists() {
    // Two syncs creating one namespace at once: the catalog fails the
    // loser's create with a 500, its resent create meets the namespace.
    let script = Arc::new(ScriptedCatalog {
        issued: AtomicUsize::new(0),
        expires_in: 3600,
        valid: Mutex::new(String::new()),
        requests: Mutex::new(Vec::new()),
        namespace_answers: Mutex::new(vec!["500 Internal Server Error", "409 Conflict"]),
    });
    let catalog = RestCatalog::connect(&config(serve(Arc::clone(&script)).await))
        .await
        .unwrap();
    let ns = vec!["raced".to_string()];
    catalog
        .ensure_namespace(&ns)
        .await
        .expect("the resent create meets the namespace the other made");
    let creates = |s: &ScriptedCatalog| {
        let requests = s.requests.lock().unwrap();
        requests
            .iter()
            .filter(|r| r.starts_with("POST /v1/namespaces "))
            .count()
    };
    assert_eq!(creates(&script), 2);
    // A plain create is never resent: its 500 is the caller's to judge.
    script
        .namespace_answers
        .lock()
        .unwrap()
        .push("500 Internal Server Error");
    let err = catalog.create_namespace(&ns).await.unwrap_err();
    assert!(err.to_string().contains("500"), "{err}");
    assert_eq!(creates(&script), 3);
}
