//! The guard on every request payd sends out: webhook deliveries, remote processor calls, and
//! anything added later. These requests go to URLs that merchants give.
//!
//! Invariant: an outgoing connection is made only to an address the policy permits, and only
//! to the address that was checked. The connector resolves the host itself: a numeric host is
//! read in every spelling `inet_aton` accepts, a pinned name is looked up in the operator's
//! list, and any other name goes through the system resolver. It drops every refused address
//! and hands the TCP connector the remaining ones. Nothing is looked up a second time between
//! the check and the connect. A host with no permitted address fails with [`Blocked`].

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    rc::Rc,
    sync::Arc,
};

use actix_service::Service;
use actix_tls::connect::{tcp::TcpConnectorService, ConnectError, ConnectInfo, Connection};
use awc::http::Uri;
use futures_util::future::LocalBoxFuture;
use ipnet::IpNet;

use crate::settings::SecuritySettings;

/// Which addresses outgoing requests may reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Any address at all (the sandbox and tests).
    pub allow_private: bool,
    /// Reachable although inside a refused range: the operator's allow-list.
    pub allowed: Vec<IpNet>,
    /// Host names pinned to an address (like `curl --resolve`); the guard still applies.
    pub pinned: Vec<(String, IpAddr)>,
}

/// Why a connection was refused: the first address the host had, none of them permitted.
#[derive(Debug, thiserror::Error)]
#[error("{0} is not a public address, and no allowed_outbound_cidrs entry holds it")]
pub struct Blocked(pub IpAddr);

impl Policy {
    /// The policy of one kind of outgoing request: `allow_private` is that kind's setting
    /// (`webhooks.allow_private_urls`, `processors.allow_private_urls`); the allow-list and the
    /// pinned names are the operator's, checked at start-up.
    pub fn from_settings(allow_private: bool, security: &SecuritySettings) -> Self {
        Self {
            allow_private,
            allowed: security.allowed_outbound().unwrap_or_default(),
            pinned: security.pinned_hosts().unwrap_or_default(),
        }
    }

    pub fn permits(&self, ip: IpAddr) -> bool {
        self.allow_private || is_public(ip) || self.allowed.iter().any(|net| net.contains(&ip))
    }

    /// Whether a host, as written in a URL, is refused before any lookup: a numeric address
    /// the policy does not permit, or a `localhost` name.
    pub fn refuses_host(&self, host: &str) -> bool {
        if self.allow_private {
            return false;
        }
        match numeric_host(host) {
            Some(ip) => !self.permits(ip),
            None => {
                let name = host.trim_end_matches('.').to_ascii_lowercase();
                name == "localhost" || name.ends_with(".localhost")
            }
        }
    }

    /// The addresses to connect to for `host`: those it has that the policy permits.
    async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, ConnectError> {
        let pinned = self
            .pinned
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(host.trim_end_matches('.')))
            .map(|(_, ip)| *ip);
        let ips: Vec<IpAddr> = match (numeric_host(host), pinned) {
            (Some(ip), _) | (None, Some(ip)) => vec![ip],
            (None, None) => tokio::net::lookup_host((host, port))
                .await
                .map_err(ConnectError::Io)?
                .map(|a| a.ip())
                .collect(),
        };
        let permitted: Vec<SocketAddr> = ips
            .iter()
            .filter(|ip| self.permits(**ip))
            .map(|ip| SocketAddr::new(*ip, port))
            .collect();
        match ips.first() {
            _ if !permitted.is_empty() => Ok(permitted),
            Some(ip) => Err(ConnectError::Resolver(Box::new(Blocked(*ip)))),
            None => Err(ConnectError::NoRecords),
        }
    }
}

/// Whether an address is public: outside loopback, private (RFC 1918), link-local,
/// unique-local, CGNAT, unspecified, multicast, broadcast, reserved, benchmarking and
/// documentation ranges. IPv4-mapped, IPv4-compatible and NAT64 IPv6 forms are judged by the
/// IPv4 address inside them.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => embedded_v4(v6).map_or_else(|| public_v6(v6), public_v4),
    }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let refused = a == 0 // "this network", 0.0.0.0
        || a == 10
        || a == 127
        || (a == 100 && (64..128).contains(&b)) // CGNAT 100.64/10
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 168)
        || (a == 192 && b == 0 && (c == 0 || c == 2)) // IETF assignments, TEST-NET-1
        || (a == 198 && (b == 18 || b == 19)) // benchmarking 198.18/15
        || (a == 198 && b == 51 && c == 100) // TEST-NET-2
        || (a == 203 && b == 0 && c == 113) // TEST-NET-3
        || a >= 224; // multicast 224/4, reserved 240/4, broadcast
    !refused
}

fn public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let refused = ip.is_unspecified()
        || ip.is_loopback()
        || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (s[0] & 0xffc0) == 0xfec0 // site-local fec0::/10 (deprecated)
        || (s[0] & 0xff00) == 0xff00 // multicast
        || (s[0] == 0x2001 && s[1] == 0x0db8); // documentation 2001:db8::/32
    !refused
}

/// The IPv4 address inside an IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`)
/// or NAT64 (`64:ff9b::a.b.c.d`) address.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let tail = Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7]));
    match s {
        [0, 0, 0, 0, 0, 0xffff, ..] | [0x64, 0xff9b, 0, 0, 0, 0, ..] => Some(tail),
        [0, 0, 0, 0, 0, 0, ..] if !ip.is_unspecified() && !ip.is_loopback() => Some(tail),
        _ => None,
    }
}

/// The address a numeric host means, in every spelling `inet_aton` (and so the system
/// resolver) accepts: `127.1`, `2130706433`, `0x7f.1`, `0177.0.0.1`, a trailing dot, and
/// bracketed IPv6. `None` for a host name.
pub fn numeric_host(host: &str) -> Option<IpAddr> {
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6.parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Some(ip);
    }
    let host = host.strip_suffix('.').unwrap_or(host);
    let parts = host.split('.').map(number).collect::<Option<Vec<u64>>>()?;
    let (last, head) = parts.split_last()?;
    if head.len() > 3 || head.iter().any(|n| *n > 255) || *last >= 1 << (8 * (4 - head.len())) {
        return None;
    }
    let high = head
        .iter()
        .enumerate()
        .fold(0u64, |v, (i, n)| v | (n << (24 - 8 * i)));
    Some(IpAddr::V4(Ipv4Addr::from((high | last) as u32)))
}

/// One part of a numeric IPv4 host: decimal, octal (`0…`) or hexadecimal (`0x…`).
fn number(part: &str) -> Option<u64> {
    if part.is_empty() || part.len() > 12 {
        return None;
    }
    let lower = part.to_ascii_lowercase();
    if let Some(hex) = lower.strip_prefix("0x") {
        return if hex.is_empty() {
            Some(0)
        } else {
            u64::from_str_radix(hex, 16).ok()
        };
    }
    if lower.len() > 1 && lower.starts_with('0') {
        return u64::from_str_radix(&lower[1..], 8).ok();
    }
    lower.parse().ok()
}

/// The TCP connector of every outgoing client: resolves under the policy, then connects to
/// the permitted addresses.
#[derive(Clone)]
pub struct Guarded {
    policy: Rc<Policy>,
}

impl Service<ConnectInfo<Uri>> for Guarded {
    type Response = Connection<Uri, tokio::net::TcpStream>;
    type Error = ConnectError;
    type Future = LocalBoxFuture<'static, Result<Self::Response, Self::Error>>;

    actix_service::always_ready!();

    fn call(&self, req: ConnectInfo<Uri>) -> Self::Future {
        let policy = self.policy.clone();
        Box::pin(async move {
            let port = req.port();
            let addrs = policy.resolve(req.hostname(), port).await?;
            TcpConnectorService::default()
                .call(req.set_addrs(addrs))
                .await
        })
    }
}

/// A client builder whose connections go through the guard. It has no connection limit of
/// its own: its callers bound their requests in flight (each merchant's delivery actor).
pub fn client(policy: &Arc<Policy>) -> awc::ClientBuilder<Guarded> {
    let guarded = Guarded {
        policy: Rc::new(Policy::clone(policy)),
    };
    awc::Client::builder().connector(awc::Connector::new().limit(0).connector(guarded))
}

/// Whether a request failed because the guard refused its address.
pub fn blocked(e: &awc::error::SendRequestError) -> Option<IpAddr> {
    match e {
        awc::error::SendRequestError::Connect(awc::error::ConnectError::Resolver(source)) => {
            source.downcast_ref::<Blocked>().map(|b| b.0)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn every_numeric_spelling_of_loopback_reads_as_loopback() {
        for spelling in [
            "127.0.0.1",
            "127.1",
            "2130706433",
            "0x7f.1",
            "0177.0.0.1",
            "0x7f000001",
            "127.0.0.1.",
            "[::ffff:127.0.0.1]",
            "[::ffff:7f00:1]",
        ] {
            let read = numeric_host(spelling).unwrap_or_else(|| panic!("{spelling}"));
            assert!(!is_public(read), "{spelling} read as {read}");
        }
        assert_eq!(numeric_host("example.com"), None);
        assert_eq!(numeric_host("1.2.3.4.5"), None);
        assert_eq!(numeric_host("256.1.1.1"), None);
        assert_eq!(numeric_host("1.2.65536"), None);
        assert_eq!(numeric_host("1.2.3.4"), Some(ip("1.2.3.4")));
    }

    #[test]
    fn the_refused_ranges_are_refused_and_public_addresses_are_not() {
        for refused in [
            "0.0.0.0",
            "10.1.2.3",
            "100.64.0.1",
            "127.0.0.1",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "192.0.2.1",
            "198.18.0.1",
            "198.51.100.1",
            "203.0.113.1",
            "224.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "ff02::1",
            "2001:db8::1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::7f00:1",
        ] {
            assert!(!is_public(ip(refused)), "{refused}");
        }
        for public in [
            "1.1.1.1",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
        ] {
            assert!(is_public(ip(public)), "{public}");
        }
    }

    /// `https` URLs are spoken to over TLS (webpki roots): the client does not answer "SSL is
    /// not supported". A listener that never answers the handshake makes it time out.
    #[actix_rt::test]
    async fn https_urls_are_spoken_to_over_tls() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let sandbox = Arc::new(Policy {
            allow_private: true,
            ..Policy::default()
        });
        let sent = client(&sandbox)
            .timeout(std::time::Duration::from_millis(500))
            .finish()
            .get(format!("https://127.0.0.1:{port}/"))
            .send()
            .await;
        let err = sent.expect_err("nothing answers");
        assert!(
            !matches!(
                err,
                awc::error::SendRequestError::Connect(awc::error::ConnectError::SslIsNotSupported)
            ),
            "{err}"
        );
    }

    #[test]
    fn the_allow_list_and_the_sandbox_setting_permit_what_they_name() {
        let listed = Policy {
            allowed: vec!["10.1.2.0/24".parse().unwrap()],
            ..Policy::default()
        };
        assert!(listed.permits(ip("10.1.2.7")));
        assert!(!listed.permits(ip("10.1.3.7")));
        assert!(listed.refuses_host("LOCALHOST."));
        assert!(listed.refuses_host("0x7f.1"));
        assert!(!listed.refuses_host("hooks.example.com"));
        let sandbox = Policy {
            allow_private: true,
            ..Policy::default()
        };
        assert!(sandbox.permits(ip("127.0.0.1")));
        assert!(!sandbox.refuses_host("localhost"));
    }
}
