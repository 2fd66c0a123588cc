//! The client's address behind a trusted proxy (`trusted_proxies:`).
//!
//! A connection's trust is decided once, when it is accepted, from the address it comes
//! from: a connection from anywhere but a trusted proxy is its own address, and its
//! requests are never searched for a header naming another (with nothing trusted, the
//! default, no connection is). From a trusted proxy, the client is named either in each
//! request's `X-Forwarded-For` or `Forwarded` header ([`headers`]) or once, in the PROXY
//! protocol header the connection starts with ([`proxy_protocol`]).
//!
//! The address found is what each request carries as its [`PeerAddr`]: the per-address
//! session cap, `addr:` rate-limit budgets, logs and traces all read it. The listener's
//! per-address connection cap does not: it counts TCP connections, which come from the
//! proxy, so that it still bounds what the proxy itself may hold open.
//!
//! [`PeerAddr`]: super::connection::PeerAddr

mod headers;
pub(super) mod proxy_protocol;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http::HeaderMap;
use http::header::FORWARDED;
use ipnet::IpNet;

use crate::config::{ProxySource, TrustedProxiesConfig};

/// The `X-Forwarded-For` header (not among `http`'s constants).
const X_FORWARDED_FOR: &str = "x-forwarded-for";

/// The trusted proxies and how they name their clients.
#[derive(Debug)]
pub(crate) struct TrustedProxies {
    networks: Vec<IpNet>,
    source: ProxySource,
    hops: usize,
}

impl TrustedProxies {
    /// The proxies `config` trusts; `None` when it trusts none, so that connections never
    /// look for them.
    pub(crate) fn new(config: &TrustedProxiesConfig) -> Option<Arc<TrustedProxies>> {
        // Validation has refused a malformed CIDR already.
        let networks = config.networks()?;
        if networks.is_empty() {
            return None;
        }
        Some(Arc::new(TrustedProxies { networks, source: config.source, hops: config.hops.max(1) }))
    }

    /// Whether `ip` is one of the trusted proxies; an IPv4 address reaching an IPv6
    /// socket (`::ffff:a.b.c.d`) is matched as the IPv4 address it is.
    fn trusts(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.networks.iter().any(|net| net.contains(&ip))
    }

    /// The client `headers` name, for a request that came through the trusted proxy at
    /// `peer`; `peer` itself when they name none.
    fn client_in(&self, peer: SocketAddr, headers: &HeaderMap) -> SocketAddr {
        let named = match self.source {
            ProxySource::XForwardedFor => headers::x_forwarded_for(headers.get_all(X_FORWARDED_FOR), self.hops),
            ProxySource::Forwarded => headers::forwarded(headers.get_all(FORWARDED), self.hops),
            ProxySource::ProxyProtocol => None,
        };
        named.unwrap_or(peer)
    }
}

/// What a connection from one address makes of what it says about its client.
#[derive(Debug, Clone)]
pub(super) enum Trust {
    /// Its requests come from its own address (nothing is trusted, or it is not from a
    /// trusted proxy and may not claim to be).
    Own,
    /// It is a trusted proxy naming each request's client in a header.
    Headers(Arc<TrustedProxies>),
    /// It is a trusted proxy and starts with a PROXY protocol header.
    ProxyHeader,
    /// It is not a trusted proxy, where proxies speak the PROXY protocol: starting with
    /// a PROXY header is a protocol error.
    NoProxyHeader,
}

impl Trust {
    /// The trust of a connection from `peer`.
    pub(super) fn of(proxies: Option<&Arc<TrustedProxies>>, peer: IpAddr) -> Trust {
        let Some(proxies) = proxies else { return Trust::Own };
        match (proxies.trusts(peer), proxies.source) {
            (true, ProxySource::ProxyProtocol) => Trust::ProxyHeader,
            (true, _) => Trust::Headers(Arc::clone(proxies)),
            (false, ProxySource::ProxyProtocol) => Trust::NoProxyHeader,
            (false, _) => Trust::Own,
        }
    }
}

/// Where a connection's requests come from: one address for all of them, or the client
/// a trusted proxy names in each.
#[derive(Debug, Clone)]
pub(super) struct ClientOf {
    peer: SocketAddr,
    named_by: Option<Arc<TrustedProxies>>,
}

impl ClientOf {
    /// Every request comes from `addr`.
    pub(super) fn fixed(addr: SocketAddr) -> ClientOf {
        ClientOf { peer: addr, named_by: None }
    }

    /// Each request comes from the client its headers name, or from `peer`, the
    /// trusted proxy, when they name none.
    pub(super) fn named(peer: SocketAddr, proxies: Arc<TrustedProxies>) -> ClientOf {
        ClientOf { peer, named_by: Some(proxies) }
    }

    /// The address of the request with `headers`. Without a trusted proxy this is the
    /// connection's own, and no header is looked at.
    pub(super) fn address(&self, headers: &HeaderMap) -> SocketAddr {
        match &self.named_by {
            None => self.peer,
            Some(proxies) => proxies.client_in(self.peer, headers),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxies(cidrs: &[&str], source: ProxySource, hops: usize) -> Arc<TrustedProxies> {
        let config = TrustedProxiesConfig { cidrs: cidrs.iter().map(|c| (*c).to_owned()).collect(), source, hops };
        TrustedProxies::new(&config).unwrap()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn nothing_trusted_is_no_proxies_at_all() {
        assert!(TrustedProxies::new(&TrustedProxiesConfig::default()).is_none());
        assert!(matches!(Trust::of(None, "10.0.0.1".parse().unwrap()), Trust::Own));
    }

    #[test]
    fn trust_follows_the_networks_and_the_source() {
        let xff = proxies(&["10.0.0.0/8", "2001:db8::/32"], ProxySource::XForwardedFor, 1);
        assert!(matches!(Trust::of(Some(&xff), "10.9.8.7".parse().unwrap()), Trust::Headers(_)));
        assert!(matches!(Trust::of(Some(&xff), "2001:db8::5".parse().unwrap()), Trust::Headers(_)));
        assert!(matches!(Trust::of(Some(&xff), "::ffff:10.1.1.1".parse().unwrap()), Trust::Headers(_)));
        assert!(matches!(Trust::of(Some(&xff), "11.0.0.1".parse().unwrap()), Trust::Own));
        let pp = proxies(&["10.0.0.0/8"], ProxySource::ProxyProtocol, 1);
        assert!(matches!(Trust::of(Some(&pp), "10.0.0.1".parse().unwrap()), Trust::ProxyHeader));
        assert!(matches!(Trust::of(Some(&pp), "192.0.2.1".parse().unwrap()), Trust::NoProxyHeader));
    }

    #[test]
    fn a_trusted_proxy_names_the_client_and_an_empty_header_names_none() {
        let peer: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        let client = ClientOf::named(peer, proxies(&["10.0.0.0/8"], ProxySource::XForwardedFor, 1));
        assert_eq!(client.address(&headers(&[("x-forwarded-for", "192.0.2.9")])), "192.0.2.9:0".parse().unwrap());
        assert_eq!(client.address(&HeaderMap::new()), peer);
        let forwarded = ClientOf::named(peer, proxies(&["10.0.0.0/8"], ProxySource::Forwarded, 1));
        let both = headers(&[("x-forwarded-for", "192.0.2.9"), ("forwarded", "for=198.51.100.4")]);
        assert_eq!(forwarded.address(&both), "198.51.100.4:0".parse().unwrap(), "only the configured header");
        assert_eq!(ClientOf::fixed(peer).address(&both), peer);
    }
}
