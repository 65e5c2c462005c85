use super::*;

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (name, value) in pairs {
        h.append(
            axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    h
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn behind(proxies: &[&str]) -> Transport {
    Transport::new(proxies.iter().map(|p| p.parse().unwrap()).collect(), false)
}

#[test]
fn forwarding_headers_of_an_untrusted_peer_are_not_believed() {
    let h = headers(&[
        ("x-forwarded-proto", "https"),
        ("x-forwarded-for", "203.0.113.7"),
    ]);
    let arrival = behind(&[]).arrival(ip("10.0.0.5"), &h);
    assert_eq!(arrival.client, ip("10.0.0.5"));
    assert!(!arrival.https);
    assert_eq!(arrival.unbelieved_https_proxy, Some(ip("10.0.0.5")));
    let other = behind(&["10.1.0.0/16"]).arrival(ip("10.0.0.5"), &h);
    assert!(!other.https, "a peer outside the trusted network");
}

#[test]
fn a_trusted_proxy_names_the_scheme_and_the_client() {
    let h = headers(&[
        ("x-forwarded-proto", "HTTPS"),
        ("x-forwarded-for", "203.0.113.7"),
    ]);
    let arrival = behind(&["10.0.0.0/8"]).arrival(ip("10.0.0.5"), &h);
    assert_eq!(arrival.client, ip("203.0.113.7"));
    assert!(arrival.https);
    assert_eq!(arrival.unbelieved_https_proxy, None);
    let plain = behind(&["10.0.0.0/8"]).arrival(ip("10.0.0.5"), &headers(&[]));
    assert_eq!(plain.client, ip("10.0.0.5"), "no X-Forwarded-For: the peer");
    assert!(!plain.https, "no X-Forwarded-Proto: plain HTTP");
}

#[test]
fn the_client_is_the_last_forwarded_address_that_is_not_a_trusted_proxy() {
    let t = behind(&["10.0.0.0/8"]);
    // A client may put anything first; the trusted proxies append theirs.
    let h = headers(&[("x-forwarded-for", "1.1.1.1, 203.0.113.7, 10.0.0.9")]);
    assert_eq!(t.arrival(ip("10.0.0.5"), &h).client, ip("203.0.113.7"));
    let split = headers(&[
        ("x-forwarded-for", "1.1.1.1"),
        ("x-forwarded-for", "203.0.113.7"),
    ]);
    assert_eq!(t.arrival(ip("10.0.0.5"), &split).client, ip("203.0.113.7"));
    let all_trusted = headers(&[("x-forwarded-for", "10.2.2.2, 10.0.0.9")]);
    assert_eq!(
        t.arrival(ip("10.0.0.5"), &all_trusted).client,
        ip("10.2.2.2")
    );
    let garbage = headers(&[("x-forwarded-for", "203.0.113.7, not-an-address")]);
    assert_eq!(
        t.arrival(ip("10.0.0.5"), &garbage).client,
        ip("10.0.0.5"),
        "an unreadable list: the peer"
    );
}

#[test]
fn an_ipv4_mapped_peer_matches_an_ipv4_network() {
    let arrival = behind(&["127.0.0.1/32"]).arrival(
        ip("::ffff:127.0.0.1"),
        &headers(&[("x-forwarded-proto", "https")]),
    );
    assert!(arrival.https);
}

#[test]
fn the_session_cookie_is_secure_over_https_and_on_loopback_hosts() {
    let t = behind(&["10.0.0.0/8"]);
    let https = t.arrival(ip("10.0.0.5"), &headers(&[("x-forwarded-proto", "https")]));
    assert_eq!(
        t.session_cookie_secure(&https, "tb.example.com").ok(),
        Some(true)
    );
    let plain = t.arrival(ip("127.0.0.1"), &headers(&[]));
    for host in [
        "localhost:8000",
        "127.0.0.1:8000",
        "[::1]:8000",
        "ui.localhost",
        "127.0.0.2",
    ] {
        assert_eq!(
            t.session_cookie_secure(&plain, host).ok(),
            Some(true),
            "{host}"
        );
    }
}

#[test]
fn login_over_plain_http_elsewhere_is_refused_naming_both_fixes() {
    let t = behind(&[]);
    let plain = t.arrival(ip("192.168.1.20"), &headers(&[]));
    let refused = t
        .session_cookie_secure(&plain, "tb.lan:8000")
        .expect_err("plain HTTP at tb.lan");
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    for part in [
        "plain HTTP at tb.lan",
        "--trusted-proxy",
        "--allow-plain-http",
    ] {
        assert!(refused.message.contains(part), "{}", refused.message);
    }
    let claimed = t.arrival(
        ip("192.168.1.9"),
        &headers(&[("x-forwarded-proto", "https")]),
    );
    let refused = t.session_cookie_secure(&claimed, "tb.lan").unwrap_err();
    assert!(
        refused.message.contains("--trusted-proxy 192.168.1.9/32"),
        "{}",
        refused.message
    );
}

#[test]
fn allowed_plain_http_sets_the_cookie_without_secure() {
    let t = Transport::new(Vec::new(), true);
    let plain = t.arrival(ip("192.168.1.20"), &headers(&[]));
    assert_eq!(t.session_cookie_secure(&plain, "tb.lan").ok(), Some(false));
    assert_eq!(
        t.session_cookie_secure(&plain, "localhost").ok(),
        Some(true)
    );
}

#[test]
fn trusted_proxies_are_networks_or_single_addresses() {
    assert_eq!(
        parse_trusted_proxy("10.0.0.5").unwrap().to_string(),
        "10.0.0.5/32"
    );
    assert_eq!(
        parse_trusted_proxy("10.1.2.3/8").unwrap().to_string(),
        "10.0.0.0/8"
    );
    assert_eq!(
        parse_trusted_proxy("fd00::1").unwrap().to_string(),
        "fd00::1/128"
    );
    let bad = parse_trusted_proxy("proxy.local").unwrap_err().to_string();
    assert!(
        bad.contains("proxy.local") && bad.contains("10.0.0.0/8"),
        "{bad}"
    );
}
