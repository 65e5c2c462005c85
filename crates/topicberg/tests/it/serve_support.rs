//! Shared pieces of the `topicberg serve` tests: the real binary on a free
//! port with a temporary data folder, and a small HTTP client that logs in
//! and keeps the session cookie and the CSRF token.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The admin password the tests start the service with.
pub const ADMIN_PASSWORD: &str = "it-admin-password-Zq81";

/// A running `topicberg serve`; killed when dropped.
pub struct Server {
    child: Option<Child>,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// The service's stderr (its log).
    pub log_path: PathBuf,
}

/// A fresh temporary data folder.
pub fn temp_data_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(crate::testbed::unique_name("it_serve"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Server {
    /// Starts `topicberg serve --data-dir <data_dir>` on a free port, with
    /// `TOPICBERG_ADMIN_PASSWORD` set when `password` is given, and waits
    /// (polling `/healthz`, 60 s deadline) until it answers.
    pub fn start(data_dir: &Path, password: Option<&str>) -> Server {
        Self::start_with(data_dir, password, &[])
    }

    /// [`Server::start`] with more `serve` arguments.
    pub fn start_with(data_dir: &Path, password: Option<&str>, args: &[&str]) -> Server {
        Self::start_env(data_dir, password, args, &[])
    }

    /// [`Server::start_with`] with environment variables for the service.
    pub fn start_env(
        data_dir: &Path,
        password: Option<&str>,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let port = free_port();
        let log_path = data_dir.join(format!("serve-{port}.log"));
        let log = std::fs::File::create(&log_path).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_topicberg"));
        cmd.args(["serve", "--data-dir"])
            .arg(data_dir)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(args)
            .env("TOPICBERG_LOG", "info")
            .env_remove("TOPICBERG_ADMIN_PASSWORD")
            .stdout(Stdio::null())
            .stderr(log);
        if let Some(p) = password {
            cmd.env("TOPICBERG_ADMIN_PASSWORD", p);
        }
        cmd.env_remove("TOPICBERG_METRICS_TOKEN");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("starting topicberg serve");
        let mut server = Server {
            child: Some(child),
            base: format!("http://127.0.0.1:{port}"),
            log_path,
        };
        let client = server.client();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = server.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "topicberg serve exited ({status}) before answering:\n{}",
                    server.log()
                );
            }
            if client.try_get("/healthz").is_some_and(|r| r.status == 200) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "topicberg serve did not answer /healthz within 60 s:\n{}",
                server.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    /// The service's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Asserts the log holds `count` failed logins (the throttle's own
    /// refusals left out), each naming `client`.
    pub fn assert_failed_logins(&self, count: usize, client: &str) {
        let log = self.log();
        let failed: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("failed login") && !l.contains("too many"))
            .collect();
        assert_eq!(failed.len(), count, "{log}");
        let named = format!("client={client}");
        assert!(failed.iter().all(|l| l.contains(&named)), "{failed:?}");
    }

    /// The service's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// The one-time setup token the service printed in its log (started
    /// without an admin password).
    pub fn setup_token(&self) -> String {
        let log = self.log();
        let marker = "setup token ";
        let at = log
            .find(marker)
            .unwrap_or_else(|| panic!("no setup token in the log:\n{log}"));
        log[at + marker.len()..]
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    }

    /// A client that is not logged in.
    pub fn client(&self) -> Client {
        Client::new(&self.base)
    }

    /// Stops the service with SIGTERM and waits (30 s deadline) for it to exit.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // SAFETY: signalling our own child process by its id.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(
                    status.success(),
                    "serve exited with {status}:\n{}",
                    self.log()
                );
                return;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("serve did not stop within 30 s of SIGTERM:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One HTTP answer.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The body as text.
    pub body: String,
    /// The headers.
    pub headers: reqwest::header::HeaderMap,
}

impl Reply {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> String {
        self.headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Asserts the status, showing the body otherwise.
    pub fn expect(self, status: u16) -> Reply {
        assert_eq!(
            self.status, status,
            "unexpected status; body: {}",
            self.body
        );
        self
    }
}

/// A blocking HTTP client with the session cookie and CSRF token of its
/// login; every body it receives is kept (to check secrets never come back).
pub struct Client {
    rt: tokio::runtime::Runtime,
    http: reqwest::Client,
    base: String,
    cookie: Option<String>,
    /// The CSRF token from login.
    pub csrf: Option<String>,
    /// Every response body received.
    pub seen: RefCell<Vec<String>>,
}

impl Client {
    /// A client of `base` (`http://host:port`), not logged in.
    pub fn new(base: &str) -> Client {
        Client {
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(180))
                .build()
                .unwrap(),
            base: base.to_string(),
            cookie: None,
            csrf: None,
            seen: RefCell::new(Vec::new()),
        }
    }

    fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<(&str, String)>,
        csrf: bool,
    ) -> reqwest::Result<Reply> {
        self.send_headers(method, path, body, csrf, &[])
    }

    /// A request with `headers` added (`Host`, `Origin`, `Authorization`, ...).
    pub fn send_headers(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<(&str, String)>,
        csrf: bool,
        headers: &[(&str, &str)],
    ) -> reqwest::Result<Reply> {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(cookie) = &self.cookie {
            req = req.header("Cookie", cookie);
        }
        if let (true, Some(token)) = (csrf, &self.csrf) {
            req = req.header("X-CSRF-Token", token);
        }
        if let Some((content_type, text)) = body {
            req = req.header("Content-Type", content_type).body(text);
        }
        self.rt.block_on(async {
            let resp = req.send().await?;
            let status = resp.status().as_u16();
            let headers = resp.headers().clone();
            let body = resp.text().await?;
            self.seen.borrow_mut().push(body.clone());
            Ok(Reply {
                status,
                body,
                headers,
            })
        })
    }

    fn try_get(&self, path: &str) -> Option<Reply> {
        self.send(reqwest::Method::GET, path, None, false).ok()
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> Reply {
        self.send(reqwest::Method::GET, path, None, false).unwrap()
    }

    /// A request with a JSON body (`None`: no body), CSRF header included.
    pub fn json(&self, method: &str, path: &str, body: Option<&Value>) -> Reply {
        self.json_csrf(method, path, body, true)
    }

    /// Like [`Client::json`], with or without the CSRF header.
    pub fn json_csrf(&self, method: &str, path: &str, body: Option<&Value>, csrf: bool) -> Reply {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let body = body.map(|b| ("application/json", b.to_string()));
        self.send(method, path, body, csrf).unwrap()
    }

    /// `POST path` with a text body (a job file), CSRF header included.
    pub fn post_text(&self, path: &str, text: &str) -> Reply {
        self.send(
            reqwest::Method::POST,
            path,
            Some(("application/toml", text.to_string())),
            true,
        )
        .unwrap()
    }

    /// `POST path` with a url-encoded form body and no CSRF header (the
    /// form carries it, as the UI's forms do).
    pub fn post_form(&self, path: &str, form: &str) -> Reply {
        self.send(
            reqwest::Method::POST,
            path,
            Some(("application/x-www-form-urlencoded", form.to_string())),
            false,
        )
        .unwrap()
    }

    /// Logs in as admin; keeps the cookie and the CSRF token.
    pub fn login(&mut self, password: &str) -> Reply {
        let reply = self.json_csrf(
            "POST",
            "/api/login",
            Some(&serde_json::json!({"username": "admin", "password": password})),
            false,
        );
        if reply.status == 200 {
            let set_cookie = reply.header("set-cookie");
            let pair = set_cookie.split(';').next().unwrap().trim().to_string();
            assert!(pair.starts_with("topicberg_session="), "{set_cookie}");
            self.cookie = Some(pair);
            self.csrf = Some(reply.json()["csrf"].as_str().unwrap().to_string());
        }
        reply
    }

    /// Polls `GET path` until `done` holds for its JSON (deadline), returning it.
    pub fn poll(&self, path: &str, deadline: Duration, done: impl Fn(&Value) -> bool) -> Value {
        let until = Instant::now() + deadline;
        loop {
            let v = self.get(path).expect(200).json();
            if done(&v) {
                return v;
            }
            if Instant::now() > until {
                let text = v.to_string();
                let cut = text.char_indices().nth(3000).map_or(text.len(), |(i, _)| i);
                panic!(
                    "{path} did not reach the state within {deadline:?}: {}",
                    &text[..cut]
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// `POST path` (a connection test) must answer `ok` with exactly `steps`.
pub fn assert_test_green(client: &Client, path: &str, steps: &[&str]) -> Value {
    let r = client.json("POST", path, None).expect(200).json();
    assert_eq!(r["ok"], true, "{path}: {r}");
    let names: Vec<&str> = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    assert_eq!(names, steps, "{r}");
    r
}

/// Creates the source `plain`: the test bed's PLAINTEXT broker, selecting
/// exactly `topic`; the stored source.
pub fn plain_source(client: &Client, topic: &str) -> Value {
    client
        .json(
            "POST",
            "/api/sources",
            Some(&json!({
                "name": "plain",
                "bootstrap_servers": crate::testbed::get("TESTBED_KAFKA_BOOTSTRAP"),
                "topic_pattern": format!("^{topic}$"),
            })),
        )
        .expect(201)
        .json()
}

/// A destination named `embedded`: the embedded catalog in the data
/// folder's `wh`.
pub fn embedded_destination(client: &Client) -> Value {
    client
        .json(
            "POST",
            "/api/destinations",
            Some(&json!({"name": "embedded", "catalog": "sql", "path": "wh"})),
        )
        .expect(201)
        .json()
}

/// JSON messages `{"id", "name": "<prefix>-<i>", "score": i}` keyed by id.
pub fn messages(prefix: &str, ids: &[u32]) -> Vec<(String, String)> {
    ids.iter()
        .enumerate()
        .map(|(i, id)| {
            (
                id.to_string(),
                json!({"id": id, "name": format!("{prefix}-{i}"), "score": i}).to_string(),
            )
        })
        .collect()
}
