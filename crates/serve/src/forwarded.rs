//! How a request reached the service, and whether a browser keeps a
//! session cookie over it.
//!
//! `serve` speaks plain HTTP; TLS is a reverse proxy's job. A proxy's
//! `X-Forwarded-Proto` (the page's scheme) and `X-Forwarded-For` (the
//! client's address) are believed only from a peer inside a network the
//! operator named (`--trusted-proxy CIDR`); from anyone else they are
//! ignored, since any client can send them.
//!
//! The session cookie is `Secure` whenever the browser keeps it so: over
//! HTTPS, and on a loopback host (`localhost`, `127.0.0.1`, `::1`, which
//! browsers treat as secure). Over plain HTTP on any other host a browser
//! drops a `Secure` cookie and the user would be sent back to the login
//! page without a word; so login is refused there with the reason and
//! both fixes, unless the operator allowed plain HTTP (`--allow-plain-http`,
//! a trusted network), which sets the cookie without `Secure`.

use std::net::IpAddr;

use axum::http::{HeaderMap, StatusCode};
pub use ipnet::IpNet;

use crate::error::ApiError;

/// The proxies whose forwarding headers are believed, and whether a
/// session may start over plain HTTP on a host other than loopback.
#[derive(Debug, Clone, Default)]
pub struct Transport {
    trusted_proxies: Vec<IpNet>,
    allow_plain_http: bool,
}

/// How one request reached the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// The client's address: the peer's, or behind trusted proxies the
    /// last address of `X-Forwarded-For` that is not a trusted proxy.
    pub client: IpAddr,
    /// Whether the browser's page is HTTPS: a trusted proxy said so.
    pub https: bool,
    /// A peer that is not trusted but sent `X-Forwarded-Proto: https` (a
    /// TLS proxy the operator has not named yet).
    pub unbelieved_https_proxy: Option<IpAddr>,
}

/// The first value of header `name` (a list's items are comma-separated).
fn first_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let value = headers.get(name)?.to_str().ok()?;
    value.split(',').next().map(str::trim)
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

    fn trusted(&self, address: IpAddr) -> bool {
        let address = address.to_canonical();
        self.trusted_proxies.iter().any(|n| n.contains(&address))
    }

    /// How a request from `peer` with `headers` reached the service.
    pub fn arrival(&self, peer: IpAddr, headers: &HeaderMap) -> Arrival {
        let https_claimed = first_value(headers, "x-forwarded-proto")
            .is_some_and(|proto| proto.eq_ignore_ascii_case("https"));
        if !self.trusted(peer) {
            return Arrival {
                client: peer,
                https: false,
                unbelieved_https_proxy: https_claimed.then_some(peer),
            };
        }
        Arrival {
            client: self.forwarded_client(peer, headers),
            https: https_claimed,
            unbelieved_https_proxy: None,
        }
    }

    /// The client behind trusted proxies: `X-Forwarded-For` read from its
    /// end (each proxy appends the address it received from) back to the
    /// first address that is not a trusted proxy. A list of trusted
    /// proxies only gives its first; no valid list, the peer.
    fn forwarded_client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let hops: Option<Vec<IpAddr>> = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|hop| hop.trim().parse().ok())
            .collect();
        let Some(hops) = hops.filter(|h| !h.is_empty()) else {
            return peer;
        };
        hops.iter()
            .rev()
            .find(|hop| !self.trusted(**hop))
            .or(hops.first())
            .copied()
            .unwrap_or(peer)
    }

    /// Whether the session cookie set for `arrival` at `host` (the `Host`
    /// header) is `Secure`; an error saying why and how to fix it where
    /// the browser would drop the cookie (see the module docs).
    pub fn session_cookie_secure(&self, arrival: &Arrival, host: &str) -> Result<bool, ApiError> {
        if arrival.https || loopback_host(host) {
            return Ok(true);
        }
        if self.allow_plain_http {
            return Ok(false);
        }
        let name = host_name(host);
        let fix = match arrival.unbelieved_https_proxy {
            Some(proxy) => format!(
                "a proxy at {proxy} says the page is HTTPS, but serve does not trust it: start topicberg serve with --trusted-proxy {proxy}/{} (or its network)",
                if proxy.is_ipv4() { 32 } else { 128 }
            ),
            None => "put a TLS proxy in front and start topicberg serve with --trusted-proxy <its address>, or, on a trusted network only, with --allow-plain-http".to_string(),
        };
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "login over plain HTTP at {name} is refused: the browser would drop the session cookie (it is Secure) and send you back here; {fix}"
            ),
        ))
    }
}

/// The host part of a `Host` header (`name`, `1.2.3.4`, `[::1]` -> `::1`),
/// without the port, lower-cased.
pub(crate) fn host_name(host: &str) -> String {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// A `--trusted-proxy` value: a network (`10.0.0.0/8`, `fd00::/8`) or
/// one address (`10.0.0.5`, as `/32`).
pub fn parse_trusted_proxy(text: &str) -> Result<IpNet, TrustedProxyError> {
    let text = text.trim();
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
        .map(|net| net.trunc())
        .map_err(|_| TrustedProxyError {
            text: text.to_string(),
        })
}

/// A `--trusted-proxy` value that is neither an address nor a network.
#[derive(Debug, thiserror::Error)]
#[error("{text:?} is neither an address nor a network: write 10.0.0.5 or 10.0.0.0/8")]
pub struct TrustedProxyError {
    text: String,
}

/// Whether `host` (a `Host` header) names this machine's loopback, where
/// browsers keep `Secure` cookies over plain HTTP.
fn loopback_host(host: &str) -> bool {
    let name = host_name(host);
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests;
