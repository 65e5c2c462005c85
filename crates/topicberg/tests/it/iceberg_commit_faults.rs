//! Commits whose answer is lost. A small HTTP proxy in front of the
//! reference catalog forwards every request, except that it can answer a
//! table commit with 503 (after or instead of forwarding it) and then fail
//! the reloads too; the writer must neither lose nor duplicate an append.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use topicberg_iceberg::{FormatVersion, IcebergErrorKind, IcebergTarget};

use crate::iceberg_append::{
    append, canonical, catalog_config, columns, offsets, read, rows, storage_config, Row,
};
use crate::testbed::unique_name;

/// Forward everything.
const PASS: u8 = 0;
/// Forward the next commit, answer it 503 (the commit lands, the answer is lost).
const LOSE_ANSWER: u8 = 1;
/// Answer the next commit 503 without forwarding it (the commit fails).
const FAIL_COMMIT: u8 = 2;
/// Forward the next commit, then answer it and every later request 503.
const LOSE_EVERYTHING: u8 = 3;

struct Proxy {
    uri: String,
    mode: Arc<AtomicU8>,
}

async fn start_proxy(upstream: String) -> Proxy {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
    let uri = format!("http://{}", listener.local_addr().unwrap());
    let mode = Arc::new(AtomicU8::new(PASS));
    let shared = mode.clone();
    let http = reqwest::Client::new();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (mode, http, upstream) = (shared.clone(), http.clone(), upstream.clone());
            tokio::spawn(async move {
                let _ = serve(stream, &mode, &http, &upstream).await;
            });
        }
    });
    Proxy { uri, mode }
}

/// One request per connection (`Connection: close`).
async fn serve(
    stream: TcpStream,
    mode: &AtomicU8,
    http: &reqwest::Client,
    upstream: &str,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).await?;
    let mut parts = line.split_whitespace();
    let (method, path) = (
        parts.next().unwrap_or_default().to_string(),
        parts.next().unwrap_or_default().to_string(),
    );
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        line.clear();
        reader.read_line(&mut line).await?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim().to_string());
            if name == "content-length" {
                length = value.parse().unwrap_or(0);
            } else if !matches!(name.as_str(), "host" | "connection") {
                headers.push((name, value));
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await?;

    let commit = method == "POST" && path.split('?').next().unwrap_or("").contains("/tables/");
    let current = mode.load(Ordering::SeqCst);
    let (forward, lose) = match current {
        LOSE_ANSWER if commit => {
            mode.store(PASS, Ordering::SeqCst);
            (true, true)
        }
        FAIL_COMMIT if commit => {
            mode.store(PASS, Ordering::SeqCst);
            (false, true)
        }
        LOSE_EVERYTHING => (commit, true),
        _ => (true, false),
    };
    let mut answer = (503, "text/plain".to_string(), b"injected: busy".to_vec());
    if forward {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut request = http.request(method, format!("{upstream}{path}")).body(body);
        for (name, value) in &headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let response = request.send().await.expect("upstream catalog");
        let status = response.status().as_u16();
        let kind = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/json")
            .to_string();
        let bytes = response.bytes().await.expect("upstream body").to_vec();
        if !lose {
            answer = (status, kind, bytes);
        }
    }
    let (status, kind, bytes) = answer;
    let head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        bytes.len()
    );
    let mut stream = reader.into_inner();
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(&bytes).await?;
    stream.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iceberg_append_commit_with_lost_answer_lands_exactly_once() {
    let upstream = catalog_config("FIXTURE");
    let proxy = start_proxy(upstream.uri.clone()).await;
    let mut config = upstream.clone();
    config.uri = proxy.uri.clone();
    config.auth = topicberg_iceberg::rest::CatalogAuth::None;
    let target = IcebergTarget::connect(&config, storage_config())
        .await
        .expect("connect through the proxy");
    let namespace = vec![unique_name("it_faults")];
    let name = "orders";
    let mut handle = target
        .ensure_table(&namespace, name, &columns(), FormatVersion::V2)
        .await
        .expect("create table");

    // The commit lands but its answer is lost: found on reload, not resent.
    proxy.mode.store(LOSE_ANSWER, Ordering::SeqCst);
    let a = rows(0, 100);
    let one = append(&target, &mut handle, &a, offsets(100)).await;
    assert_eq!(one.attempts, 1, "found after the reload, not sent again");
    assert_eq!(one.summary["total-records"], "100");

    // The commit fails before reaching the catalog: not found, sent again.
    proxy.mode.store(FAIL_COMMIT, Ordering::SeqCst);
    let b = rows(100, 60);
    let two = append(&target, &mut handle, &b, offsets(160)).await;
    assert_eq!(two.attempts, 2, "not found after the reload, so retried");
    assert_eq!(two.parent_snapshot_id, Some(one.snapshot_id));
    assert_eq!(two.summary["total-records"], "160");

    // The commit lands and every answer after it is lost: unknown state.
    proxy.mode.store(LOSE_EVERYTHING, Ordering::SeqCst);
    let c = rows(160, 40);
    let files = target
        .write_data_files(&handle, [crate::iceberg_append::batch(&handle, &c)])
        .await
        .expect("write");
    let err = target
        .commit_append(&mut handle, files, offsets(200))
        .await
        .expect_err("the outcome cannot be known");
    assert_eq!(err.kind, IcebergErrorKind::CommitStateUnknown, "{err}");
    assert!(!err.retryable(), "{err}");
    proxy.mode.store(PASS, Ordering::SeqCst);

    // Reconciling from the snapshot summary: the third commit did land.
    let reloaded = target.load_table(&namespace, name).await.expect("reload");
    assert_eq!(
        reloaded.current_summary().unwrap()["topicberg.offsets"],
        r#"{"orders":{"0":200}}"#
    );
    assert_eq!(reloaded.snapshot_summaries().len(), 3);
    let table = format!("{}.{name}", namespace[0]);
    let all: Vec<Row> = a.into_iter().chain(b).chain(c).collect();
    assert_eq!(read("duckdb", "FIXTURE", &table), canonical(&all));

    target
        .drop_table(&namespace, name, true)
        .await
        .expect("drop");
    target
        .catalog()
        .drop_namespace(&namespace)
        .await
        .expect("drop ns");
}
