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
    let nets = proxies.iter().map(|p| parse_trusted_proxy(p).unwrap());
    Transport::new(nets.collect(), false)
}

const PLAIN_PAGE: (&str, &str) = ("origin", "http://tb.lan:8000");

#[test]
fn forwarding_headers_of_an_untrusted_peer_are_not_believed() {
    let h = headers(&[
        ("x-forwarded-proto", "https"),
        ("x-forwarded-for", "203.0.113.7"),
    ]);
    let arrival = behind(&[]).arrival(ip("10.0.0.5"), &h);
    assert_eq!(arrival.client, ip("10.0.0.5"));
    assert_eq!(arrival.page, Page::Unknown);
    let other = behind(&["10.1.0.0/16"]).arrival(ip("10.0.0.5"), &h);
    assert_eq!(
        other.page,
        Page::Unknown,
        "a peer outside the trusted network"
    );
}

#[test]
fn the_page_scheme_comes_from_the_browsers_origin_or_a_trusted_proxy() {
    let t = behind(&["10.0.0.0/8"]);
    let page = |pairs: &[(&str, &str)]| t.arrival(ip("10.0.0.5"), &headers(pairs)).page;
    assert_eq!(page(&[("origin", "https://tb.example.com")]), Page::Https);
    assert_eq!(page(&[PLAIN_PAGE]), Page::PlainHttp);
    assert_eq!(page(&[]), Page::Unknown);
    assert_eq!(page(&[("x-forwarded-proto", "HTTPS")]), Page::Https);
    // A proxy that adds its line after the client's.
    let added = [
        ("x-forwarded-proto", "http"),
        ("x-forwarded-proto", "https"),
    ];
    assert_eq!(page(&added), Page::Https);
    assert_eq!(
        page(&[("x-forwarded-proto", "http"), PLAIN_PAGE]),
        Page::PlainHttp
    );
}

#[test]
fn the_client_is_the_last_forwarded_address_that_is_not_a_trusted_proxy() {
    let t = behind(&["10.0.0.0/8"]);
    let client = |xff: &[&str]| {
        let pairs: Vec<(&str, &str)> = xff.iter().map(|v| ("x-forwarded-for", *v)).collect();
        t.arrival(ip("10.0.0.5"), &headers(&pairs)).client
    };
    // A client may put anything first; the trusted proxies append theirs.
    assert_eq!(
        client(&["1.1.1.1, 203.0.113.7, 10.0.0.9"]),
        ip("203.0.113.7")
    );
    assert_eq!(client(&["junk, 203.0.113.7"]), ip("203.0.113.7"));
    assert_eq!(client(&["1.1.1.1", "203.0.113.7"]), ip("203.0.113.7"));
    assert_eq!(client(&["203.0.113.7:5555"]), ip("203.0.113.7"));
    assert_eq!(client(&["[2001:db8::1]:443"]), ip("2001:db8::1"));
    assert_eq!(client(&["2001:db8::1,"]), ip("2001:db8::1"));
    assert_eq!(client(&[]), ip("10.0.0.5"), "no X-Forwarded-For: the peer");
    // Every entry a trusted proxy: the rest is the client's own words.
    assert_eq!(client(&["10.2.2.2, 10.0.0.9"]), ip("10.0.0.5"));
    // An entry a trusted proxy added that cannot be read: the peer.
    assert_eq!(client(&["203.0.113.7, unknown"]), ip("10.0.0.5"));
}

#[test]
fn an_ipv4_mapped_peer_or_network_matches_its_ipv4_network() {
    let https = headers(&[("x-forwarded-proto", "https")]);
    for flag in ["127.0.0.1/32", "::ffff:127.0.0.1", "::ffff:127.0.0.0/104"] {
        let t = behind(&[flag]);
        for peer in ["127.0.0.1", "::ffff:127.0.0.1"] {
            assert_eq!(
                t.arrival(ip(peer), &https).page,
                Page::Https,
                "{flag} {peer}"
            );
        }
    }
}

#[test]
fn the_session_cookie_is_secure_over_https_on_loopback_hosts_and_without_a_browser() {
    let t = behind(&["10.0.0.0/8"]);
    let secure = |pairs: &[(&str, &str)], host: &str| {
        let arrival = t.arrival(ip("10.0.0.5"), &headers(pairs));
        t.session_cookie_secure(&arrival, host).ok()
    };
    assert_eq!(
        secure(&[("x-forwarded-proto", "https")], "tb.example.com"),
        Some(true)
    );
    // An untrusted TLS proxy that passes the Host on: the browser says https.
    let untrusted = behind(&[]);
    let https_page = untrusted.arrival(
        ip("192.0.2.1"),
        &headers(&[("origin", "https://tb.example.com")]),
    );
    assert_eq!(
        untrusted
            .session_cookie_secure(&https_page, "tb.example.com")
            .ok(),
        Some(true)
    );
    for host in [
        "localhost:8000",
        "127.0.0.1:8000",
        "[::1]:8000",
        "ui.localhost",
        "127.0.0.2",
    ] {
        assert_eq!(
            secure(&[("origin", "http://x")], host),
            Some(true),
            "{host}"
        );
    }
    assert_eq!(
        secure(&[], "tb.lan"),
        Some(true),
        "no Origin: not a browser"
    );
}

#[test]
fn login_over_plain_http_elsewhere_is_refused_naming_the_fixes() {
    let t = behind(&[]);
    let plain = t.arrival(ip("192.168.1.20"), &headers(&[PLAIN_PAGE]));
    let refused = t
        .session_cookie_secure(&plain, "tb.lan:8000")
        .expect_err("plain HTTP at tb.lan");
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    for part in [
        "plain HTTP at tb.lan",
        "--trusted-proxy",
        "--allow-plain-http",
        "localhost",
    ] {
        assert!(refused.message.contains(part), "{}", refused.message);
    }
    assert!(!refused.message.contains("192.168"), "no address disclosed");
}

#[test]
fn allowed_plain_http_sets_the_cookie_without_secure_but_never_over_https() {
    let t = Transport::new(Vec::new(), true);
    let arrival = |pairs: &[(&str, &str)]| t.arrival(ip("192.168.1.20"), &headers(pairs));
    let secure = |pairs: &[(&str, &str)], host| t.session_cookie_secure(&arrival(pairs), host).ok();
    assert_eq!(secure(&[PLAIN_PAGE], "tb.lan"), Some(false));
    assert_eq!(secure(&[], "tb.lan"), Some(false));
    assert_eq!(secure(&[PLAIN_PAGE], "localhost"), Some(true));
    assert_eq!(
        secure(&[("origin", "https://tb.lan")], "tb.lan"),
        Some(true)
    );
}

#[test]
fn trusted_proxies_are_networks_or_single_addresses() {
    let net = |text| parse_trusted_proxy(text).unwrap().to_string();
    assert_eq!(net("10.0.0.5"), "10.0.0.5/32");
    assert_eq!(net("10.1.2.3/8"), "10.0.0.0/8");
    assert_eq!(net("fd00::1"), "fd00::1/128");
    assert_eq!(net("::ffff:10.0.0.5"), "10.0.0.5/32");
    assert_eq!(net("::ffff:10.0.0.0/104"), "10.0.0.0/8");
    let bad = parse_trusted_proxy("proxy.local").unwrap_err().to_string();
    assert!(
        bad.contains("proxy.local") && bad.contains("10.0.0.0/8"),
        "{bad}"
    );
}

#[test]
fn host_names_drop_the_port_but_keep_a_bare_ipv6_address() {
    assert_eq!(host_name("Tb.Example.com:8000"), "tb.example.com");
    assert_eq!(host_name("[::1]:8000"), "::1");
    assert_eq!(host_name("fd00::5"), "fd00::5");
    assert_eq!(host_name("10.0.0.5"), "10.0.0.5");
}
