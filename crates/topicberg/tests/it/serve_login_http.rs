//! Login over plain HTTP never loops silently (issue 37, item 3): where
//! the browser's page is plain HTTP at a host other than loopback (it
//! drops a `Secure` cookie there), login is refused naming the fixes; an
//! HTTPS page keeps its `Secure` cookie behind any proxy; a proxy named
//! with `--trusted-proxy` is believed (`X-Forwarded-Proto: https`,
//! `X-Forwarded-For` the client the login throttle counts), any other
//! peer's forwarding headers are not; `--allow-plain-http` sets the cookie
//! without `Secure`. The same in headless Chromium at `tb-lan.test`
//! (mapped to 127.0.0.1): the refusal on the login page, a dropped cookie
//! said instead of a loop, and a working login with `--allow-plain-http`.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::serve_browser::{browser_with, start_chromedriver, Page};
use crate::serve_support::{temp_data_dir, Client, Reply, Server, ADMIN_PASSWORD};

/// The name the tests reach the service by (not a loopback name).
const LAN_HOST: &str = "tb-lan.test";

fn port(server: &Server) -> &str {
    server.base.rsplit(':').next().unwrap()
}

/// `POST /api/login` with `password` and extra `headers`.
fn login(client: &Client, password: &str, headers: &[(&str, &str)]) -> Reply {
    let body = json!({"username": "admin", "password": password}).to_string();
    client
        .send_headers(
            reqwest::Method::POST,
            "/api/login",
            Some(("application/json", body)),
            false,
            headers,
        )
        .unwrap()
}

fn start(dir: &std::path::Path, args: &[&str]) -> Server {
    let mut all = vec!["--allowed-host", LAN_HOST];
    all.extend_from_slice(args);
    Server::start_with(dir, Some(ADMIN_PASSWORD), &all)
}

#[test]
fn serve_login_over_plain_http_is_refused_or_allowed_and_only_trusted_proxies_are_believed() {
    // No proxy trusted, plain HTTP not allowed.
    let server = start(&temp_data_dir(), &[]);
    let client = server.client();
    let host = format!("{LAN_HOST}:{}", port(&server));
    let plain_page = format!("http://{host}");
    let refused = login(
        &client,
        ADMIN_PASSWORD,
        &[("Host", &host), ("Origin", &plain_page)],
    )
    .expect(403);
    for part in [
        "plain HTTP at tb-lan.test",
        "--trusted-proxy",
        "--allow-plain-http",
    ] {
        assert!(refused.body.contains(part), "{}", refused.body);
    }
    assert!(refused.header("set-cookie").is_empty());
    assert!(server.log().contains("login over plain HTTP refused"));
    // A TLS proxy nobody named that passes the Host on: the browser's
    // Origin says https, so the Secure cookie is kept.
    let https_page = format!("https://{host}");
    let secure = [("Host", host.as_str()), ("Origin", https_page.as_str())];
    let kept = login(&client, ADMIN_PASSWORD, &secure).expect(200);
    assert!(kept.header("set-cookie").contains("; Secure;"));
    // Not a browser (no Origin), and a loopback name: Secure, as before.
    let script = login(&client, ADMIN_PASSWORD, &[("Host", &host)]).expect(200);
    assert!(script.header("set-cookie").contains("; Secure;"));
    let local = login(&client, ADMIN_PASSWORD, &[]).expect(200);
    assert!(local.header("set-cookie").contains("; Secure;"));
    // An untrusted peer's X-Forwarded-For is not the client.
    for _ in 0..5 {
        let forged = [("X-Forwarded-For", "203.0.113.99")];
        login(&client, "not-the-password", &forged).expect(401);
    }
    login(
        &client,
        ADMIN_PASSWORD,
        &[("X-Forwarded-For", "203.0.113.98")],
    )
    .expect(429);
    drop(server);

    // The proxy on 127.0.0.1 trusted.
    let server = start(&temp_data_dir(), &["--trusted-proxy", "127.0.0.1"]);
    let client = server.client();
    let host = format!("{LAN_HOST}:{}", port(&server));
    let https = [("Host", host.as_str()), ("X-Forwarded-Proto", "https")];
    let secure = login(&client, ADMIN_PASSWORD, &https).expect(200);
    assert!(secure.header("set-cookie").contains("; Secure;"));
    let plain_page = format!("http://{host}");
    login(
        &client,
        ADMIN_PASSWORD,
        &[("Host", &host), ("Origin", &plain_page)],
    )
    .expect(403);
    // The throttle counts the forwarded client, not the proxy.
    let from = |client_ip: &'static str| {
        let mut h = https.to_vec();
        h.push(("X-Forwarded-For", client_ip));
        h
    };
    for _ in 0..5 {
        login(&client, "not-the-password", &from("203.0.113.7")).expect(401);
    }
    login(&client, ADMIN_PASSWORD, &from("203.0.113.7")).expect(429);
    login(&client, ADMIN_PASSWORD, &from("203.0.113.8")).expect(200);
    server.assert_failed_logins(5, "203.0.113.7");
    let log = server.log();
    assert!(log.contains("trusted proxies: 127.0.0.1/32"), "{log}");
    drop(server);

    // Plain HTTP allowed: the cookie without Secure, also when cleared.
    let server = start(&temp_data_dir(), &["--allow-plain-http"]);
    let mut client = server.client();
    let host = format!("{LAN_HOST}:{}", port(&server));
    let plain_page = format!("http://{host}");
    let plain = login(
        &client,
        ADMIN_PASSWORD,
        &[("Host", &host), ("Origin", &plain_page)],
    )
    .expect(200);
    let cookie = plain.header("set-cookie");
    assert!(cookie.starts_with("topicberg_session=") && !cookie.contains("Secure"));
    client.login(ADMIN_PASSWORD).expect(200);
    let out = client
        .send_headers(
            reqwest::Method::POST,
            "/api/logout",
            None,
            true,
            &[("Host", &host)],
        )
        .unwrap()
        .expect(200);
    let cleared = out.header("set-cookie");
    assert!(
        cleared.contains("Max-Age=0") && !cleared.contains("Secure"),
        "{cleared}"
    );
}

#[test]
fn serve_browser_login_over_plain_http_says_why_instead_of_looping() {
    let dir = temp_data_dir();
    let refusing = start(&temp_data_dir(), &[]);
    let believing = start(&temp_data_dir(), &["--trusted-proxy", "127.0.0.1"]);
    let allowing = start(&temp_data_dir(), &["--allow-plain-http"]);
    let bases: Vec<String> = [&refusing, &believing, &allowing]
        .iter()
        .map(|s| format!("http://{LAN_HOST}:{}", port(s)))
        .collect();
    crate::serve_browser::drive(browse(&dir, &bases));
}

async fn browse(dir: &std::path::Path, bases: &[String]) {
    let (_driver, webdriver) = start_chromedriver();
    let rules = format!("--host-resolver-rules=MAP {LAN_HOST} 127.0.0.1");
    let client = browser_with(&webdriver, &dir.join("chromium-profile"), &[rules]).await;
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let mut page = Page {
        client,
        base: bases[0].clone(),
        shots,
        shot: 0,
    };
    let says = |text: &str, part: &str| text.contains(part);

    // Refused: the reason and the fixes on the login page.
    page.go("").await;
    page.fill("#password", ADMIN_PASSWORD).await;
    page.click("#login").await;
    let text = page
        .text_until("#login-result", Duration::from_secs(30), |t| !t.is_empty())
        .await;
    assert!(says(&text, "plain HTTP at tb-lan.test"), "{text}");
    assert!(says(&text, "--allow-plain-http"), "{text}");
    page.screenshot("login-plain-http-refused").await;

    // A proxy that says HTTPS while the page is not: the service sets a
    // Secure cookie the browser drops; the page says so.
    page.base = bases[1].clone();
    page.go("").await;
    page.client
        .execute(
            "const f = window.fetch; window.fetch = (u, o = {}) => \
             f(u, { ...o, headers: { ...(o.headers || {}), 'X-Forwarded-Proto': 'https' } });",
            vec![],
        )
        .await
        .unwrap();
    page.fill("#password", ADMIN_PASSWORD).await;
    page.click("#login").await;
    let text = page
        .text_until("#login-result", Duration::from_secs(30), |t| !t.is_empty())
        .await;
    assert!(says(&text, "did not keep the session cookie"), "{text}");

    // Plain HTTP allowed: logged in.
    page.base = bases[2].clone();
    page.go("").await;
    page.fill("#password", ADMIN_PASSWORD).await;
    page.click("#login").await;
    page.wait("#new-job").await;
    page.client.close().await.unwrap();
}
