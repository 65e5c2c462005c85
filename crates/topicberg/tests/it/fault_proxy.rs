//! A small programmable HTTP/1.1 proxy for fault injection: it sits in
//! front of a catalog or an S3 endpoint, forwards every request, and fails
//! the ones its rules match.
//!
//! - Faults: answer a status without forwarding ([`Fault::Status`]),
//!   forward and then lose the answer ([`Fault::LoseAnswer`], 503), close
//!   the connection without answering, before or after forwarding
//!   ([`Fault::Close`], [`Fault::ForwardThenClose`]), or run a hook first
//!   ([`Fault::RunFirst`], e.g. another writer commits).
//! - Rules match by method and a path predicate, for the next N matches
//!   ([`Rule::times`]), every k-th match ([`Rule::every`]) or until
//!   [`FaultProxy::reset`].
//! - [`FaultProxy::refuse`] closes the listener (connection refused) until
//!   [`FaultProxy::accept_again`] reopens it on the same port.
//! - [`FaultProxy::random`]: each request fails with probability `p`, the
//!   fault drawn from a list, from a seeded generator (reproducible).
//!
//! The `Host` header is forwarded as the client sent it (the proxy's own
//! `host:port`), so S3 SigV4 signatures, which sign `host`, stay valid:
//! SeaweedFS checks the signature against the `Host` it receives.
//! Keep-alive connections are served; chunked request bodies are decoded
//! and forwarded with a `Content-Length`.
//!
//! The proxy runs on its own thread and runtime, so plain `#[test]`s
//! (which run the `topicberg` binary) and `#[tokio::test]`s can both use
//! it; dropping it stops it.

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use std::process::Output;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use topicberg_iceberg::Destination;

use crate::iceberg_append::{catalog_config, storage_config};
use crate::support::{Catalog, Job};
use crate::testbed::get;
use wire::{forward, injected, read_request, write_answer};

mod wire;

type Hook = Arc<dyn Fn() + Send + Sync>;
type PathMatch = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// What the proxy does to a request a rule matched.
#[derive(Clone)]
pub enum Fault {
    /// Answer this status without forwarding (503, 500, 401, 409, 403...).
    Status(u16),
    /// Forward the request, then answer 503 instead of the upstream's
    /// answer: the request took effect, the client cannot know.
    LoseAnswer,
    /// Close the connection without forwarding or answering.
    Close,
    /// Forward the request, then close the connection without answering.
    ForwardThenClose,
    /// Run the hook (blocking, on a worker thread), then forward normally.
    RunFirst(Hook),
}

impl fmt::Debug for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Status(s) => write!(f, "Status({s})"),
            Fault::LoseAnswer => f.write_str("LoseAnswer"),
            Fault::Close => f.write_str("Close"),
            Fault::ForwardThenClose => f.write_str("ForwardThenClose"),
            Fault::RunFirst(_) => f.write_str("RunFirst"),
        }
    }
}

/// Which requests get a [`Fault`], and how many times.
#[derive(Clone)]
pub struct Rule {
    method: Option<String>,
    path: PathMatch,
    fault: Fault,
    every: u32,
    remaining: Option<u32>,
    matched: u32,
}

impl Rule {
    /// Every request, until [`FaultProxy::reset`].
    pub fn new(fault: Fault) -> Self {
        Self {
            method: None,
            path: Arc::new(|_| true),
            fault,
            every: 1,
            remaining: None,
            matched: 0,
        }
    }

    /// Only requests with this method (`PUT`, `POST`...).
    pub fn method(mut self, method: &str) -> Self {
        self.method = Some(method.to_ascii_uppercase());
        self
    }

    /// Only requests whose path (with the query) satisfies `matches`.
    pub fn path(mut self, matches: impl Fn(&str) -> bool + Send + Sync + 'static) -> Self {
        self.path = Arc::new(matches);
        self
    }

    /// Only requests whose path (with the query) contains `text`.
    pub fn path_contains(self, text: &str) -> Self {
        let text = text.to_string();
        self.path(move |p| p.contains(&text))
    }

    /// Fault only the next `n` requests it applies to, then step aside.
    pub fn times(mut self, n: u32) -> Self {
        self.remaining = Some(n);
        self
    }

    /// Fault every request it applies to until [`FaultProxy::reset`] (the
    /// default; undoes [`Self::times`]).
    pub fn until_reset(mut self) -> Self {
        self.remaining = None;
        self
    }

    /// Apply to every `k`-th matching request (the k-th, 2k-th...).
    pub fn every(mut self, k: u32) -> Self {
        self.every = k.max(1);
        self
    }

    fn matches(&self, method: &str, path: &str) -> bool {
        self.method.as_deref().is_none_or(|m| m == method) && (self.path)(path)
    }
}

/// A table commit of the REST catalog spec:
/// `POST .../namespaces/<ns>/tables/<table>` (not a create, which posts to
/// `.../tables`).
pub fn is_table_commit(method: &str, path: &str) -> bool {
    let path = path.split('?').next().unwrap_or("");
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    method == "POST"
        && segments.len() >= 4
        && segments[segments.len() - 2] == "tables"
        && segments[segments.len() - 4] == "namespaces"
}

/// An S3 request for a data file (`.../data/<name>.parquet`, single `PUT`
/// or a multipart step).
pub fn is_data_file(path: &str) -> bool {
    let path = path.split('?').next().unwrap_or("");
    path.contains("/data/") && path.ends_with(".parquet")
}

/// One request the proxy saw.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The method.
    pub method: String,
    /// The path with the query.
    pub path: String,
    /// The fault applied, if any.
    pub fault: Option<String>,
    /// The status answered (`None`: the connection was closed instead).
    pub status: Option<u16>,
    /// Whether the upstream received the request.
    pub forwarded: bool,
}

/// Seeded random faults: each matching request fails with probability
/// `p`, with a fault drawn uniformly from `faults`.
struct RandomFaults {
    state: u64,
    p: f64,
    faults: Vec<Fault>,
    method: Option<String>,
    path: PathMatch,
}

impl RandomFaults {
    /// SplitMix64.
    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn draw(&mut self, method: &str, path: &str) -> Option<Fault> {
        if self.faults.is_empty()
            || self.method.as_deref().is_some_and(|m| m != method)
            || !(self.path)(path)
        {
            return None;
        }
        let roll = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        if roll >= self.p {
            return None;
        }
        let pick = (self.next() % self.faults.len() as u64) as usize;
        Some(self.faults[pick].clone())
    }
}

struct State {
    upstream: String,
    preserve_host: bool,
    rules: Mutex<Vec<Rule>>,
    random: Mutex<Option<RandomFaults>>,
    log: Mutex<Vec<Seen>>,
    refusing: watch::Sender<bool>,
    listening: AtomicBool,
    http: reqwest::Client,
}

impl State {
    fn decide(&self, method: &str, path: &str) -> Option<Fault> {
        let mut rules = self.rules.lock().unwrap();
        for rule in rules.iter_mut() {
            if rule.remaining == Some(0) || !rule.matches(method, path) {
                continue;
            }
            rule.matched += 1;
            if rule.matched % rule.every != 0 {
                continue;
            }
            if let Some(left) = rule.remaining.as_mut() {
                *left -= 1;
            }
            return Some(rule.fault.clone());
        }
        drop(rules);
        self.random.lock().unwrap().as_mut()?.draw(method, path)
    }

    fn record(&self, seen: Seen) {
        self.log.lock().unwrap().push(seen);
    }
}

/// A running proxy; dropping it stops it.
pub struct FaultProxy {
    /// `http://127.0.0.1:<port>`.
    pub uri: String,
    state: Arc<State>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FaultProxy {
    /// A proxy to `upstream` (`http://host:port`, no trailing path) that
    /// forwards the client's `Host` header unchanged (what S3 signatures
    /// need; a REST catalog does not care).
    pub fn start(upstream: &str) -> FaultProxy {
        Self::start_with(upstream, true)
    }

    /// A proxy to `upstream`; `preserve_host = false` sends the upstream's
    /// own `host:port` instead of the client's.
    pub fn start_with(upstream: &str, preserve_host: bool) -> FaultProxy {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .pool_idle_timeout(Duration::from_secs(2))
            .build()
            .expect("proxy HTTP client");
        let (refusing, _) = watch::channel(false);
        let state = Arc::new(State {
            upstream: upstream.trim_end_matches('/').to_string(),
            preserve_host,
            rules: Mutex::new(Vec::new()),
            random: Mutex::new(None),
            log: Mutex::new(Vec::new()),
            refusing,
            listening: AtomicBool::new(false),
            http,
        });
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (shutdown, stop) = tokio::sync::oneshot::channel();
        let shared = Arc::clone(&state);
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("proxy runtime");
            runtime.block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
                let addr = listener.local_addr().expect("proxy address");
                addr_tx.send(addr).expect("proxy address sent");
                tokio::select! {
                    _ = accept_loop(listener, addr, shared) => {}
                    _ = stop => {}
                }
            });
            runtime.shutdown_timeout(Duration::from_secs(1));
        });
        let addr = addr_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("proxy started");
        FaultProxy {
            uri: format!("http://{addr}"),
            state,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    /// Adds a rule after the existing ones (the first rule that applies to
    /// a request wins).
    pub fn add(&self, rule: Rule) {
        self.state.rules.lock().unwrap().push(rule);
    }

    /// Drops every rule and the random mode: forward everything.
    pub fn reset(&self) {
        self.state.rules.lock().unwrap().clear();
        *self.state.random.lock().unwrap() = None;
    }

    /// Seeded random faults for requests with `method` (any if `None`) whose
    /// path satisfies `path`: each fails with probability `p`, the fault
    /// drawn uniformly from `faults`. Rules still come first.
    pub fn random(
        &self,
        seed: u64,
        p: f64,
        faults: Vec<Fault>,
        method: Option<&str>,
        path: impl Fn(&str) -> bool + Send + Sync + 'static,
    ) {
        *self.state.random.lock().unwrap() = Some(RandomFaults {
            state: seed,
            p,
            faults,
            method: method.map(str::to_ascii_uppercase),
            path: Arc::new(path),
        });
    }

    /// Closes the listener (and every open connection at its next
    /// request): connections are refused until [`Self::accept_again`].
    /// Returns once the port no longer accepts.
    pub fn refuse(&self) {
        self.state.refusing.send_replace(true);
        self.wait_listening(false);
    }

    /// Reopens the listener on the same port.
    pub fn accept_again(&self) {
        self.state.refusing.send_replace(false);
        self.wait_listening(true);
    }

    fn wait_listening(&self, want: bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.state.listening.load(Ordering::SeqCst) != want {
            assert!(Instant::now() < deadline, "proxy listener did not switch");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Every request seen so far, in order.
    pub fn log(&self) -> Vec<Seen> {
        self.state.log.lock().unwrap().clone()
    }

    /// How many requests seen so far satisfy `pred`.
    pub fn count(&self, pred: impl Fn(&Seen) -> bool) -> usize {
        self.state
            .log
            .lock()
            .unwrap()
            .iter()
            .filter(|s| pred(s))
            .count()
    }

    /// How many faults were injected so far.
    pub fn faults_injected(&self) -> usize {
        self.count(|s| s.fault.is_some())
    }
}

/// Helpers for jobs run through the binary.
impl FaultProxy {
    /// Points the job's `s3_endpoint` at this proxy.
    pub fn point_s3(&self, job: &Job) {
        replace_in_job(
            job,
            &format!("s3_endpoint = \"{}\"", get("TESTBED_S3_ENDPOINT")),
            &format!("s3_endpoint = \"{}\"", self.uri),
        );
    }

    /// Points the job's catalog `uri` (and so its token endpoint, which
    /// defaults to `<uri>/v1/oauth/tokens`) at this proxy.
    pub fn point_catalog(&self, job: &Job, catalog: Catalog) {
        let uri = get(&format!("TESTBED_{}_URI", catalog.prefix()));
        replace_in_job(
            job,
            &format!("uri = \"{uri}\""),
            &format!("uri = \"{}\"", self.uri),
        );
    }
}

fn replace_in_job(job: &Job, old: &str, new: &str) {
    let text = std::fs::read_to_string(&job.path).unwrap();
    assert!(text.contains(old), "{old} not in {text}");
    std::fs::write(&job.path, text.replacen(old, new, 1)).unwrap();
}

/// A `topicberg sync` that may fail: its output and its JSON report.
pub struct SyncRun {
    /// The process output.
    pub output: Output,
    /// The `--report-json` report (`Null` when the sync stopped before
    /// writing one).
    pub report: Value,
}

impl SyncRun {
    /// Runs `topicberg sync` with `env` set.
    pub fn new(job: &Job, env: &[(&str, &str)]) -> SyncRun {
        let path = job.scratch_file("report.json");
        let output = job.run("sync", &["--report-json", path.to_str().unwrap()], env);
        let report = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null);
        SyncRun { output, report }
    }

    /// Stdout and stderr.
    pub fn text(&self) -> String {
        format!(
            "stdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&self.output.stdout),
            String::from_utf8_lossy(&self.output.stderr)
        )
    }

    /// A table's entry in the report.
    pub fn table(&self, table: &str) -> &Value {
        crate::support::table_report(&self.report, table)
    }
}

/// The snapshots of a job's table on `main`, read with the library (0
/// for a table without any).
pub fn snapshot_count(catalog: Catalog, job: &Job, topic: &str) -> usize {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let destination = Destination::connect(&catalog_config(catalog.prefix()), storage_config())
            .await
            .expect("connect");
        let namespace = vec![format!("{}_topics", job.name)];
        let handle = destination
            .load_table(&namespace, &topic.to_lowercase())
            .await
            .expect("load table");
        handle.snapshot_summaries().len()
    })
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.shutdown.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(mut listener: TcpListener, addr: SocketAddr, state: Arc<State>) {
    let mut refusing = state.refusing.subscribe();
    state.listening.store(true, Ordering::SeqCst);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let state = Arc::clone(&state);
                tokio::spawn(async move {
                    let _ = serve(stream, &state).await;
                });
            }
            changed = refusing.changed() => {
                if changed.is_err() {
                    return;
                }
                if !*refusing.borrow_and_update() {
                    continue;
                }
                drop(listener);
                state.listening.store(false, Ordering::SeqCst);
                while *refusing.borrow_and_update() {
                    if refusing.changed().await.is_err() {
                        return;
                    }
                }
                listener = rebind(addr).await;
                state.listening.store(true, Ordering::SeqCst);
            }
        }
    }
}

/// Binds the same address again (it was ours a moment ago).
async fn rebind(addr: SocketAddr) -> TcpListener {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match TcpListener::bind(addr).await {
            Ok(listener) => return listener,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("rebinding the proxy on {addr}: {e}"),
        }
    }
}

async fn serve(stream: TcpStream, state: &State) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    loop {
        let Some(request) = read_request(&mut reader).await? else {
            return Ok(());
        };
        if *state.refusing.borrow() {
            return Ok(());
        }
        let fault = state.decide(&request.method, &request.path);
        let mut seen = Seen {
            method: request.method.clone(),
            path: request.path.clone(),
            fault: fault.as_ref().map(|f| format!("{f:?}")),
            status: None,
            forwarded: false,
        };
        let answer = match fault {
            Some(Fault::Status(status)) => Some(injected(status)),
            Some(Fault::Close) => None,
            Some(Fault::LoseAnswer) => {
                forward(state, &request).await;
                seen.forwarded = true;
                Some(injected(503))
            }
            Some(Fault::ForwardThenClose) => {
                forward(state, &request).await;
                seen.forwarded = true;
                None
            }
            Some(Fault::RunFirst(hook)) => {
                tokio::task::spawn_blocking(move || hook())
                    .await
                    .expect("proxy hook panicked");
                seen.forwarded = true;
                Some(forward(state, &request).await)
            }
            None => {
                seen.forwarded = true;
                Some(forward(state, &request).await)
            }
        };
        seen.status = answer.as_ref().map(|a| a.status);
        state.record(seen);
        let Some(answer) = answer else {
            let mut stream = reader.into_inner();
            return stream.shutdown().await;
        };
        write_answer(reader.get_mut(), &request.method, &answer, request.close).await?;
        if request.close {
            return reader.into_inner().shutdown().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An upstream that answers each request with
    /// `<method> <path> host=<Host> body=<body>`.
    async fn echo_upstream() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut reader = BufReader::new(stream);
                    while let Ok(Some(r)) = read_request(&mut reader).await {
                        let host = r
                            .headers
                            .iter()
                            .find(|(n, _)| n.eq_ignore_ascii_case("host"))
                            .map(|(_, v)| v.clone())
                            .unwrap_or_default();
                        let body = String::from_utf8_lossy(&r.body.unwrap_or_default()).to_string();
                        let answer = wire::Answer {
                            status: 200,
                            headers: vec![],
                            body: format!("{} {} host={host} body={body}", r.method, r.path)
                                .into_bytes(),
                        };
                        let stream = reader.get_mut();
                        if write_answer(stream, &r.method, &answer, false)
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        uri
    }

    /// Sends raw bytes to the proxy, returns everything it answers until
    /// it closes the connection.
    async fn raw(addr: &str, request: &str) -> std::io::Result<String> {
        use tokio::io::AsyncReadExt;
        let mut stream = TcpStream::connect(addr).await?;
        stream.write_all(request.as_bytes()).await?;
        let mut out = Vec::new();
        stream.read_to_end(&mut out).await?;
        Ok(String::from_utf8_lossy(&out).to_string())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn forwards_chunked_bodies_with_the_clients_host_and_injects_faults() {
        let proxy = FaultProxy::start(&echo_upstream().await);
        let addr = proxy.uri.trim_start_matches("http://").to_string();
        // A chunked body, the client's Host kept, two requests on one
        // connection (the second closes it).
        let answer = raw(
            &addr,
            &format!(
                "PUT /b/k HTTP/1.1\r\nHost: {addr}\r\nTransfer-Encoding: chunked\r\n\r\n\
                 5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n\
                 GET /b/k?x=1 HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
            ),
        )
        .await
        .unwrap();
        assert!(
            answer.contains(&format!("PUT /b/k host={addr} body=hello world")),
            "{answer}"
        );
        assert!(
            answer.contains(&format!("GET /b/k?x=1 host={addr} body=")),
            "{answer}"
        );

        // A status without forwarding, then a dropped connection.
        proxy.add(Rule::new(Fault::Status(503)).method("GET").times(1));
        proxy.add(Rule::new(Fault::Close).method("GET").times(1));
        let get = format!("GET /x HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        let first = raw(&addr, &get).await.unwrap();
        assert!(first.starts_with("HTTP/1.1 503"), "{first}");
        assert_eq!(
            raw(&addr, &get).await.unwrap(),
            "",
            "closed without an answer"
        );
        assert!(raw(&addr, &get).await.unwrap().starts_with("HTTP/1.1 200"));
        let log = proxy.log();
        assert_eq!(log.len(), 5);
        assert!(!log[2].forwarded && !log[3].forwarded && log[4].forwarded);

        // Refused while refusing, served again afterwards.
        proxy.refuse();
        let refused = TcpStream::connect(&addr).await.unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
        proxy.accept_again();
        assert!(raw(&addr, &get).await.unwrap().starts_with("HTTP/1.1 200"));
    }

    #[test]
    fn commit_and_data_file_paths_are_recognised() {
        assert!(is_table_commit("POST", "/v1/namespaces/ns/tables/orders"));
        assert!(is_table_commit(
            "POST",
            "/v1/pfx/namespaces/a%1Fb/tables/t?x=1"
        ));
        assert!(!is_table_commit("POST", "/v1/namespaces/ns/tables"));
        assert!(!is_table_commit("GET", "/v1/namespaces/ns/tables/orders"));
        assert!(is_data_file(
            "/bucket/ns/t/data/0-1.parquet?partNumber=2&uploadId=x"
        ));
        assert!(!is_data_file("/bucket/ns/t/metadata/snap-1.avro"));
    }

    #[test]
    fn seeded_random_faults_are_reproducible() {
        let draw = |seed| {
            let mut r = RandomFaults {
                state: seed,
                p: 0.3,
                faults: vec![Fault::Status(503), Fault::Close],
                method: None,
                path: Arc::new(|_| true),
            };
            (0..200)
                .map(|_| r.draw("GET", "/").map(|f| format!("{f:?}")))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        let failed = draw(7).iter().filter(|f| f.is_some()).count();
        assert!((30..90).contains(&failed), "{failed} of 200 at p = 0.3");
    }
}
