//! How a request reached the service, and whether a browser keeps a
//! session cookie over it.
//!
//! `serve` speaks plain HTTP; TLS is a reverse proxy's job. The page's
//! scheme is what the browser says in `Origin` (it sends it with every
//! login, a same-origin `POST`), or `X-Forwarded-Proto` from a proxy the
//! operator named (`--trusted-proxy`). The client's address is the peer's,
//! or behind named proxies the one `X-Forwarded-For` gives. From any other
//! peer the forwarding headers are ignored, since any client can send them.
//!
//! The session cookie is `Secure` unless the operator allowed plain HTTP
//! (`--allow-plain-http`) and the page is not HTTPS at a name other than
//! loopback. `Secure` is always the safe choice, except where the browser
//! drops it: a page over plain HTTP at a name other than `localhost`,
//! `127.0.0.1` or `::1` (which Chromium and Firefox treat as secure). There
//! the user would be sent back to the login page without a word, so such a
//! login is refused with the reason and the fixes, and logged.

use std::net::{IpAddr, Ipv4Addr};

use axum::http::{header, HeaderMap, StatusCode};
pub use ipnet::IpNet;
use ipnet::Ipv4Net;

use crate::error::ApiError;

/// The proxies whose forwarding headers are believed, and whether a
/// session may start over plain HTTP on a host other than loopback.
#[derive(Debug, Clone, Default)]
pub struct Transport {
    trusted_proxies: Vec<IpNet>,
    allow_plain_http: bool,
}

/// The scheme of the page a request came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    /// HTTPS: the browser's `Origin`, or a trusted proxy, says so.
    Https,
    /// Plain HTTP: the browser's `Origin` says so.
    PlainHttp,
    /// Not said (no `Origin`: not a browser).
    Unknown,
}

/// How one request reached the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// The client's address: the peer's, or behind trusted proxies the
    /// one `X-Forwarded-For` names ([`Transport::arrival`]).
    pub client: IpAddr,
    /// The page's scheme.
    pub page: Page,
}

impl Transport {
    /// Believes forwarding headers from peers in `trusted_proxies`; with
    /// `allow_plain_http`, a session may start over plain HTTP anywhere.
    pub fn new(trusted_proxies: Vec<IpNet>, allow_plain_http: bool) -> Self {
        Self {
            trusted_proxies,
            allow_plain_http,
        }
    }

    /// What the service was started with, for its log.
    pub fn describe(&self) -> String {
        let proxies: Vec<String> = self.trusted_proxies.iter().map(|n| n.to_string()).collect();
        format!(
            "trusted proxies: {}; login over plain HTTP: {}",
            if proxies.is_empty() {
                "none".to_string()
            } else {
                proxies.join(", ")
            },
            if self.allow_plain_http {
                "allowed"
            } else {
                "refused"
            }
        )
    }

    fn trusted(&self, address: IpAddr) -> bool {
        let address = address.to_canonical();
        self.trusted_proxies.iter().any(|n| n.contains(&address))
    }

    /// How a request from `peer` with `headers` reached the service.
    pub fn arrival(&self, peer: IpAddr, headers: &HeaderMap) -> Arrival {
        let trusted = self.trusted(peer);
        let origin = headers
            .get(header::ORIGIN)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let proxy_https = trusted && forwarded_https(headers);
        let page = if proxy_https || origin.starts_with("https://") {
            Page::Https
        } else if origin.starts_with("http://") {
            Page::PlainHttp
        } else {
            Page::Unknown
        };
        let client = if trusted {
            self.forwarded_client(peer, headers)
        } else {
            peer
        };
        Arrival { client, page }
    }

    /// The client behind trusted proxies: `X-Forwarded-For` read from its
    /// end (each proxy appends the address it received from) back to the
    /// first address that is not a trusted proxy. The peer when an entry a
    /// trusted proxy added cannot be read, or when every entry is a
    /// trusted proxy (the rest of the list is the client's own words).
    fn forwarded_client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let hops: Vec<&str> = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|hop| !hop.is_empty())
            .collect();
        for hop in hops.iter().rev() {
            match hop_address(hop) {
                Some(address) if self.trusted(address) => continue,
                Some(address) => return address.to_canonical(),
                None => return peer,
            }
        }
        peer
    }

    /// Whether the session cookie set for `arrival` at `host` (the `Host`
    /// header) is `Secure`; an error saying why and how to fix it where
    /// the browser would drop it (see the module docs).
    pub fn session_cookie_secure(&self, arrival: &Arrival, host: &str) -> Result<bool, ApiError> {
        if arrival.page == Page::Https || loopback_host(host) {
            return Ok(true);
        }
        if self.allow_plain_http {
            return Ok(false);
        }
        if arrival.page == Page::Unknown {
            // Not a browser: `Secure` as always; its client decides.
            return Ok(true);
        }
        let name = host_name(host);
        tracing::warn!(
            host = %name,
            client = %arrival.client,
            "login over plain HTTP refused: a browser drops the Secure session cookie there; put a TLS proxy in front (--trusted-proxy) or start serve with --allow-plain-http on a trusted network"
        );
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "login over plain HTTP at {name} is refused: the browser would drop the session cookie (it is Secure) and send you back here. Open this page over HTTPS (a TLS proxy in front; name it with --trusted-proxy if it does not pass the page's scheme on), or at localhost, or on a trusted network start topicberg serve with --allow-plain-http"
            ),
        ))
    }
}

/// Whether a (trusted) proxy says the page is HTTPS: any value of any
/// `X-Forwarded-Proto` header.
fn forwarded_https(headers: &HeaderMap) -> bool {
    headers
        .get_all("x-forwarded-proto")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|proto| proto.trim().eq_ignore_ascii_case("https"))
}

/// An `X-Forwarded-For` entry's address: `203.0.113.7`, `2001:db8::1`,
/// and with a port as some proxies write it, `203.0.113.7:5555` or
/// `[2001:db8::1]:443`; `None` for anything else (`unknown`, a name).
fn hop_address(hop: &str) -> Option<IpAddr> {
    if let Ok(address) = hop.parse() {
        return Some(address);
    }
    if let Some(rest) = hop.strip_prefix('[') {
        return rest.split(']').next()?.parse().ok();
    }
    let (address, port) = hop.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    address.parse::<Ipv4Addr>().ok().map(IpAddr::V4)
}

/// Whether `host` (a `Host` header) names this machine's loopback, where
/// browsers keep `Secure` cookies over plain HTTP.
fn loopback_host(host: &str) -> bool {
    let name = host_name(host);
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The host part of a `Host` header (`name`, `1.2.3.4`, `[::1]` -> `::1`,
/// a bare IPv6 address as it is), without the port, lower-cased.
pub(crate) fn host_name(host: &str) -> String {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else if host.matches(':').count() > 1 {
        host
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// A `--trusted-proxy` value: a network (`10.0.0.0/8`, `fd00::/8`) or
/// one address (`10.0.0.5`, as `/32`). An IPv4-mapped IPv6 network
/// (`::ffff:10.0.0.5`, as a dual-stack listener sees an IPv4 peer) is
/// taken as the IPv4 network it maps.
pub fn parse_trusted_proxy(text: &str) -> Result<IpNet, TrustedProxyError> {
    let text = text.trim();
    let net = text
        .parse::<IpNet>()
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| TrustedProxyError {
            text: text.to_string(),
        })?;
    let mapped = match net {
        IpNet::V6(v6) if v6.prefix_len() >= 96 => v6
            .addr()
            .to_ipv4_mapped()
            .and_then(|v4| Ipv4Net::new(v4, v6.prefix_len() - 96).ok())
            .map(IpNet::V4),
        _ => None,
    };
    Ok(mapped.unwrap_or(net).trunc())
}

/// A `--trusted-proxy` value that is neither an address nor a network.
#[derive(Debug, thiserror::Error)]
#[error("{text:?} is neither an address nor a network: write 10.0.0.5 or 10.0.0.0/8")]
pub struct TrustedProxyError {
    text: String,
}

#[cfg(test)]
mod tests;
