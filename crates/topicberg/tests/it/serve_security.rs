//! `topicberg serve`'s security review items against the real binary:
//! first-run setup (the logged one-time token, JSON from its own origin,
//! one winner of two at once), login throttling and the hashing cap, job
//! names and exported values, stored secrets never sent to a changed
//! address, no `${VAR}` filled in from the service's environment, security
//! headers, the Host allowlist, the `/metrics` token, and removed secrets
//! gone from the database files.

use std::io::ErrorKind;
use std::time::Duration;

use serde_json::{json, Value};

use crate::serve_support::{temp_data_dir, Client, Reply, Server, ADMIN_PASSWORD};
use crate::testbed::{get, unique_name};

fn post(
    client: &Client,
    path: &str,
    content_type: &str,
    body: &str,
    headers: &[(&str, &str)],
) -> Reply {
    client
        .send_headers(
            reqwest::Method::POST,
            path,
            Some((content_type, body.to_string())),
            false,
            headers,
        )
        .unwrap()
}

#[test]
fn serve_security_setup_needs_the_logged_token_json_and_its_own_origin() {
    let dir = temp_data_dir();
    let server = Server::start(&dir, None);
    let mut client = server.client();
    let token = server.setup_token();
    let body = json!({"password": ADMIN_PASSWORD, "setup_token": token}).to_string();
    // A page elsewhere can post text/plain without asking: refused.
    let plain = post(&client, "/api/setup", "text/plain", &body, &[]);
    assert_eq!(plain.status, 415, "{}", plain.body);
    let foreign = post(
        &client,
        "/api/setup",
        "application/json",
        &body,
        &[("Origin", "http://evil.example")],
    );
    assert_eq!(foreign.status, 403, "{}", foreign.body);
    for wrong in [
        json!({"password": ADMIN_PASSWORD}),
        json!({"password": ADMIN_PASSWORD, "setup_token": "guess"}),
    ] {
        let r = post(
            &client,
            "/api/setup",
            "application/json",
            &wrong.to_string(),
            &[],
        );
        assert_eq!(r.status, 403, "{}", r.body);
        assert!(r.body.contains("setup_token"), "{}", r.body);
    }
    client.login(ADMIN_PASSWORD).expect(503);
    // Two setups at once with the right token: one wins.
    let own_origin = server.base.clone();
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let handles: Vec<_> = ["first-password-1", "second-password-2"]
            .into_iter()
            .map(|password| {
                let (server, token, origin) = (&server, &token, &own_origin);
                scope.spawn(move || {
                    let body = json!({"password": password, "setup_token": token}).to_string();
                    post(
                        &server.client(),
                        "/api/setup",
                        "application/json",
                        &body,
                        &[("Origin", origin)],
                    )
                    .status
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut sorted = statuses.clone();
    sorted.sort();
    assert_eq!(sorted, [200, 409], "{statuses:?}");
    let winner = if statuses[0] == 200 {
        "first-password-1"
    } else {
        "second-password-2"
    };
    let loser = if statuses[0] == 200 {
        "second-password-2"
    } else {
        "first-password-1"
    };
    let mut c = server.client();
    c.login(loser).expect(401);
    // Login takes JSON from its own origin only, too.
    let login = json!({"username": "admin", "password": winner}).to_string();
    assert_eq!(
        post(&c, "/api/login", "text/plain", &login, &[]).status,
        415
    );
    assert_eq!(
        post(
            &c,
            "/api/login",
            "application/json",
            &login,
            &[("Origin", "http://evil.example")]
        )
        .status,
        403
    );
    c.login(winner).expect(200);
    // The token was for one setup only.
    let again = json!({"password": "third-password-3", "setup_token": token}).to_string();
    assert_eq!(
        post(&c, "/api/setup", "application/json", &again, &[]).status,
        409
    );
}

#[test]
fn serve_security_failed_logins_back_off_per_client_and_are_logged_with_its_address() {
    let dir = temp_data_dir();
    let server = Server::start(&dir, Some(ADMIN_PASSWORD));
    let mut client = server.client();
    for _ in 0..5 {
        client.login("not-the-password").expect(401);
    }
    // Now even the right password waits.
    let throttled = client.login(ADMIN_PASSWORD);
    assert_eq!(throttled.status, 429, "{}", throttled.body);
    let retry: u64 = throttled.header("retry-after").parse().unwrap();
    assert!((1..=2).contains(&retry), "Retry-After: {retry}");
    server.assert_failed_logins(5, "127.0.0.1");
    let log = server.log();
    assert!(!log.contains(ADMIN_PASSWORD));
    // After the wait, the right password works (polled, deadline).
    let until = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = client.login(ADMIN_PASSWORD);
        if r.status == 200 {
            break;
        }
        assert_eq!(r.status, 429, "{}", r.body);
        assert!(std::time::Instant::now() < until, "still throttled");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The peak resident memory of a process (`VmHWM`, KiB).
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn serve_security_concurrent_logins_hash_on_two_threads() {
    let dir = temp_data_dir();
    let server = Server::start(&dir, Some(ADMIN_PASSWORD));
    server.client().login(ADMIN_PASSWORD).expect(200);
    let before = peak_rss_kib(server.pid());
    // Argon2id takes ~19 MiB per hash: 16 at once grew the service by
    // ~270 MB before the cap.
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..16)
            .map(|_| scope.spawn(|| server.client().login(ADMIN_PASSWORD).status))
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap(), 200);
        }
    });
    let grown_mb = (peak_rss_kib(server.pid()) - before) / 1024;
    // Measured, not asserted: uncapped +285 MB; on the 2 hashing threads
    // still +150..210 MB here, so the peak is not (only) the hashes at
    // once (open in issue 16's report).
    eprintln!("16 concurrent logins grew the peak memory by {grown_mb} MB");
    let hashing_threads = std::fs::read_dir(format!("/proc/{}/task", server.pid()))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.unwrap().path().join("comm")).ok())
        .filter(|name| name.starts_with("password-hash"))
        .count();
    assert_eq!(hashing_threads, 2);
}

/// A source and an embedded-catalog destination that need no network.
fn offline_pieces(client: &Client) -> (i64, i64) {
    let s = client
        .json(
            "POST",
            "/api/sources",
            Some(&json!({"name": unique_name("src"), "bootstrap_servers": "127.0.0.1:9", "topic_pattern": "^x$",
                "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                "sasl_username": "user\nwith a newline", "sasl_password": "pw-4Kq9-secret"})),
        )
        .expect(201)
        .json();
    let d = client
        .json(
            "POST",
            "/api/destinations",
            Some(&json!({"name": unique_name("dst"), "path": "wh"})),
        )
        .expect(201)
        .json();
    (s["id"].as_i64().unwrap(), d["id"].as_i64().unwrap())
}

#[test]
fn serve_security_names_are_validated_and_exports_escape_every_value() {
    let dir = temp_data_dir();
    let server = Server::start(&dir, Some(ADMIN_PASSWORD));
    let mut client = server.client();
    client.login(ADMIN_PASSWORD).expect(200);
    let (sid, did) = offline_pieces(&client);
    let job = |name: &str| json!({"name": name, "source_id": sid, "destination_id": did});
    for bad in [
        "a\n[source]\nbootstrap_servers = \"evil:1\"",
        "tab\there",
        &"x".repeat(101),
        "  ",
    ] {
        let r = client.json("POST", "/api/jobs", Some(&job(bad)));
        assert_eq!(r.status, 400, "{bad:?}: {}", r.body);
        assert!(
            r.json()["error"].as_str().unwrap().starts_with("name:"),
            "{}",
            r.body
        );
    }
    let r = client.json(
        "POST",
        "/api/sources",
        Some(&json!({"name": "s\nx", "bootstrap_servers": "b:1"})),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    let imported =
        "name = \"imp\\n[source]\"\n[source]\nbootstrap_servers = \"b:1\"\ntopic_pattern = \"x\"\n";
    let r = client.post_text("/api/jobs/import", imported);
    assert_eq!(r.status, 400, "{}", r.body);

    // The longest name, with every TOML-special character but controls.
    let name = format!("q\"uote ]bracket #hash \\back 'single {}", "y".repeat(64));
    assert_eq!(name.chars().count(), 100);
    let mut body = job(&name);
    body["schedule"] = json!("every 5 minutes");
    let id = client
        .json("POST", "/api/jobs", Some(&body))
        .expect(201)
        .json()["id"]
        .as_i64()
        .unwrap();
    let text = client
        .get(&format!("/api/jobs/{id}/export"))
        .expect(200)
        .body;
    let parsed: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}:\n{text}"));
    assert_eq!(parsed["name"].as_str(), Some(name.as_str()), "{text}");
    assert_eq!(
        parsed["source"]["sasl_username"].as_str(),
        Some("user\nwith a newline")
    );
    let mut keys: Vec<&String> = parsed.keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        ["destination", "name", "serve", "source"],
        "nothing injected: {text}"
    );
    assert_eq!(
        parsed["serve"]["schedule"].as_str(),
        Some("every 5 minutes"),
        "{text}"
    );
    for line in text.lines().take_while(|l| !l.is_empty()) {
        assert!(
            line.starts_with("# "),
            "the head is comments only: {line:?}\n{text}"
        );
    }
}

#[test]
fn serve_security_a_stored_secret_is_never_sent_to_a_changed_address() {
    let dir = temp_data_dir();
    let server = Server::start(&dir, Some(ADMIN_PASSWORD));
    let mut client = server.client();
    client.login(ADMIN_PASSWORD).expect(200);
    // The new address: anything connecting to it would be seen.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let new_uri = format!("http://{}/catalog", listener.local_addr().unwrap());
    let secret = "client-id:cred-7Rz0-secret";
    let stored = json!({"name": "dest", "catalog": "rest", "uri": "http://127.0.0.1:9/catalog",
        "warehouse": "w", "credential": secret, "s3_endpoint": "http://127.0.0.1:9",
        "s3_access_key": "ak", "s3_secret_key": "s3-5Tt1-secret"});
    let d = client
        .json("POST", "/api/destinations", Some(&stored))
        .expect(201)
        .json();
    let did = d["id"].as_i64().unwrap();
    let mut moved = d.clone();
    moved["uri"] = json!(new_uri);
    // Saving, and testing what a form shows, both refuse to carry the secret over.
    let r = client
        .json("PUT", &format!("/api/destinations/{did}"), Some(&moved))
        .expect(400)
        .json();
    let error = r["error"].as_str().unwrap();
    assert!(error.contains("destination.credential: uri changed"), "{r}");
    assert!(
        !error.contains("s3_secret_key"),
        "its address did not change: {r}"
    );
    let r = client
        .json("POST", "/api/destinations/test", Some(&moved))
        .expect(400)
        .json();
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("destination.credential"),
        "{r}"
    );
    let mut left_out = moved.clone();
    left_out.as_object_mut().unwrap().remove("credential");
    client
        .json("PUT", &format!("/api/destinations/{did}"), Some(&left_out))
        .expect(400);
    match listener.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("something connected to the new address: {other:?}"),
    }
    let kept = client
        .get(&format!("/api/destinations/{did}"))
        .expect(200)
        .json();
    assert_eq!(kept["uri"], "http://127.0.0.1:9/catalog");
    // Given again, it is taken.
    moved["credential"] = json!("client-id:new-secret");
    client
        .json("PUT", &format!("/api/destinations/{did}"), Some(&moved))
        .expect(200);

    // A source's brokers.
    let (sid, _) = offline_pieces(&client);
    let mut source = client
        .get(&format!("/api/sources/{sid}"))
        .expect(200)
        .json();
    source["bootstrap_servers"] = json!(listener.local_addr().unwrap().to_string());
    let r = client
        .json("POST", "/api/sources/test", Some(&source))
        .expect(400)
        .json();
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("source.sasl_password: bootstrap_servers changed"),
        "{r}"
    );
    client
        .json("PUT", &format!("/api/sources/{sid}"), Some(&source))
        .expect(400);
    match listener.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("something connected to the new brokers: {other:?}"),
    }
    for body in client.seen.borrow().iter() {
        assert!(
            !body.contains("cred-7Rz0") && !body.contains("pw-4Kq9"),
            "{body}"
        );
    }
}

#[test]
fn serve_security_api_input_is_never_filled_in_from_the_environment() {
    let dir = temp_data_dir();
    let server = Server::start_env(
        &dir,
        Some(ADMIN_PASSWORD),
        &[],
        &[("TOPICBERG_IT_PROBE", "abc")],
    );
    let mut client = server.client();
    client.login(ADMIN_PASSWORD).expect(200);
    // A valid pattern either way: filled in, it would read `[abc]`.
    let pattern = "^it_never_[${TOPICBERG_IT_PROBE}]$";
    let s = client
        .json("POST", "/api/sources", Some(&json!({"name": "s", "bootstrap_servers": get("TESTBED_KAFKA_BOOTSTRAP"), "topic_pattern": pattern})))
        .expect(201)
        .json();
    assert_eq!(s["topic_pattern"], pattern);
    let d = client
        .json(
            "POST",
            "/api/destinations",
            Some(&json!({"name": "d", "path": "wh"})),
        )
        .expect(201)
        .json();
    let job = client
        .json(
            "POST",
            "/api/jobs",
            Some(&json!({"name": "envjob", "source_id": s["id"], "destination_id": d["id"]})),
        )
        .expect(201)
        .json();
    let streams = client
        .get(&format!("/api/jobs/{}/streams", job["id"]))
        .expect(200)
        .json();
    assert_eq!(streams["topic_pattern"], pattern, "{streams}");
    assert_eq!(
        streams["topics"],
        json!([]),
        "the pattern is literal text: {streams}"
    );
    let export = client
        .get(&format!("/api/jobs/{}/export", job["id"]))
        .expect(200)
        .body;
    assert!(export.contains("$${TOPICBERG_IT_PROBE}"), "{export}");
    // A job file's ${VAR} outside secrets is refused on import.
    let imported = "name = \"imp\"\n[source]\nbootstrap_servers = \"${TOPICBERG_IT_PROBE}:9092\"\ntopic_pattern = \"x\"\n";
    let r = client
        .post_text("/api/jobs/import", imported)
        .expect(400)
        .json();
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("source.bootstrap_servers: ${TOPICBERG_IT_PROBE}"),
        "{r}"
    );
}

#[test]
fn serve_security_headers_allowed_hosts_and_the_metrics_token() {
    let dir = temp_data_dir();
    let token = "metrics-token-Lw3";
    let server = Server::start_env(
        &dir,
        Some(ADMIN_PASSWORD),
        &["--allowed-host", "topicberg.example"],
        &[("TOPICBERG_METRICS_TOKEN", token)],
    );
    let client = server.client();
    let get_with = |path: &str, headers: &[(&str, &str)]| {
        client
            .send_headers(reqwest::Method::GET, path, None, false, headers)
            .unwrap()
    };
    for (path, status) in [
        ("/", 200),
        ("/ui/app.js", 200),
        ("/healthz", 200),
        ("/api/jobs", 401),
        ("/nope", 404),
        ("/metrics", 401),
    ] {
        let r = get_with(path, &[]);
        assert_eq!(r.status, status, "{path}: {}", r.body);
        assert_eq!(r.header("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(r.header("x-frame-options"), "DENY", "{path}");
        assert!(
            r.header("content-security-policy")
                .contains("frame-ancestors 'none'"),
            "{path}"
        );
    }
    // DNS rebinding: a page on another name that now points here.
    for path in ["/", "/api/session", "/metrics"] {
        let r = get_with(path, &[("Host", "evil.example:8000")]);
        assert_eq!(r.status, 421, "{path}: {}", r.body);
        assert_eq!(r.header("x-frame-options"), "DENY");
    }
    let r = post(
        &client,
        "/api/login",
        "application/json",
        "{}",
        &[("Host", "evil.example")],
    );
    assert_eq!(r.status, 421);
    for host in [
        "localhost:8000",
        "topicberg.example",
        "TOPICBERG.example:443",
    ] {
        assert_eq!(get_with("/", &[("Host", host)]).status, 200, "{host}");
    }
    assert_eq!(
        get_with("/healthz", &[("Host", "10.1.2.3:8000")]).status,
        200,
        "health checks by any name"
    );
    // /metrics wants the token.
    assert_eq!(
        get_with("/metrics", &[("Authorization", "Bearer wrong")]).status,
        401
    );
    let bearer = format!("Bearer {token}");
    let m = get_with("/metrics", &[("Authorization", &bearer)]);
    assert_eq!(m.status, 200);
    assert!(m.body.contains("topicberg_"), "{}", m.body);
    assert!(!server.log().contains(token));
}

#[test]
fn serve_security_a_removed_secret_is_gone_from_the_database_files() {
    let dir = temp_data_dir();
    let server = Server::start(&dir, Some(ADMIN_PASSWORD));
    let mut client = server.client();
    client.login(ADMIN_PASSWORD).expect(200);
    let (sid, _) = offline_pieces(&client);
    let mut source: Value = client
        .get(&format!("/api/sources/{sid}"))
        .expect(200)
        .json();
    let files = || -> Vec<u8> {
        ["topicberg.db", "topicberg.db-wal"]
            .iter()
            .filter_map(|f| std::fs::read(dir.join(f)).ok())
            .flatten()
            .collect()
    };
    let has = |needle: &str| {
        files()
            .windows(needle.len())
            .any(|w| w == needle.as_bytes())
    };
    assert!(has("pw-4Kq9-secret"));
    source["security_protocol"] = json!("PLAINTEXT");
    source["sasl_mechanism"] = Value::Null;
    source["sasl_username"] = Value::Null;
    source["sasl_password"] = Value::Null;
    client
        .json("PUT", &format!("/api/sources/{sid}"), Some(&source))
        .expect(200);
    assert!(
        !has("pw-4Kq9-secret"),
        "the removed password is still in the database or its WAL"
    );
}

#[test]
fn serve_security_bodies_over_the_limit_get_413_and_errors_cut_what_they_echo() {
    let dir = temp_data_dir();
    let server = Server::start(&dir, Some(ADMIN_PASSWORD));
    let mut client = server.client();
    client.login(ADMIN_PASSWORD).expect(200);
    let huge = "z".repeat(3 << 20);
    let json_body = json!({"name": "big", "bootstrap_servers": huge}).to_string();
    let over = client
        .send_headers(
            reqwest::Method::POST,
            "/api/sources",
            Some(("application/json", json_body)),
            true,
            &[],
        )
        .unwrap()
        .expect(413);
    assert!(
        over.json()["error"]
            .as_str()
            .unwrap()
            .contains("over the limit"),
        "{}",
        over.body
    );
    // The answer must arrive, not a reset connection: the server reads
    // the rest of an over-limit body before answering (before `body.rs`
    // this failed 3 times in 12 under load with a broken pipe). A few
    // tries, since the reset was a race.
    for _ in 0..3 {
        let over = client.post_text("/api/jobs/import", &huge).expect(413);
        assert!(over.json()["error"].is_string(), "{}", over.body);
    }
    // A value that is wrong and long: the field named, the value cut.
    let long_broker = "b".repeat(200_000);
    let file = format!(
        "name = \"cut_echo\"\n[source]\nbootstrap_servers = \"{long_broker}\"\n\
         topic_pattern = \"^a$\"\n[destination]\ncatalog = \"sql\"\npath = \"wh\"\n"
    );
    let refused = client.post_text("/api/jobs/import", &file).expect(400);
    assert!(
        refused.body.len() < 4_000,
        "{} bytes echoed",
        refused.body.len()
    );
    assert!(
        refused.body.contains("source.bootstrap_servers") && refused.body.contains("characters)"),
        "{}",
        refused.body
    );
}
