//! The `trusted_proxies:` section: the load balancers and ingresses in front of seawall
//! whose word on the client's address is taken.

use std::net::IpAddr;

use ipnet::IpNet;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::locate::{FieldPath, Problem};

/// The proxies in front of seawall (a load balancer, an ingress) and how they name the
/// client they forward. A connection from one of `cidrs` has its client's address taken
/// from `source`; a connection from anywhere else keeps its own address and whatever it
/// says about another is ignored. That address is what the per-address session cap,
/// `addr:` rate-limit budgets, logs and traces use; `limits.max_connections_per_peer`
/// keeps counting TCP connections by the address they come from, the proxy's own.
/// Default: no proxy trusted (every client is the address it connects from).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TrustedProxiesConfig {
    /// The addresses of the trusted proxies: CIDRs (`10.0.0.0/8`, `2001:db8::/32`) or
    /// single addresses (`192.0.2.7`), IPv4 or IPv6; an IPv4 client reaching an IPv6
    /// listener (`::ffff:10.1.2.3`) is matched as the IPv4 address. Empty: no proxy is
    /// trusted and `source` and `hops` are not used. Default `[]`.
    pub cidrs: Vec<String>,
    /// Where a trusted proxy names the client: `x_forwarded_for` (the `X-Forwarded-For`
    /// request header), `forwarded` (the `for=` parameter of the `Forwarded` header,
    /// RFC 7239), or `proxy_protocol` (a PROXY protocol header, version 1 or 2, at the
    /// start of every connection from a trusted address, read within
    /// `limits.header_timeout`; a connection from a trusted address without one, or with
    /// a malformed one, is closed, and so is one from any other address that starts with
    /// one). Default `x_forwarded_for`.
    pub source: ProxySource,
    /// How many trusted proxies, one behind the other, add an entry to the header (count,
    /// at least 1): the client's address is the entry this many from the right end of the
    /// header's list (all its lines in order), whatever the entries to its right say.
    /// With one proxy, `1` takes the entry that proxy added. When the list is shorter, or
    /// that entry is not an address (`unknown`, an obfuscated `_name`, garbage), the
    /// connection's own address is used. Not used with `proxy_protocol`. Default `1`.
    pub hops: usize,
}

impl Default for TrustedProxiesConfig {
    fn default() -> Self {
        TrustedProxiesConfig { cidrs: Vec::new(), source: ProxySource::XForwardedFor, hops: 1 }
    }
}

/// Where a trusted proxy names the client it forwards.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ProxySource {
    /// The `X-Forwarded-For` request header: addresses separated by commas, each proxy
    /// adding the address it received the request from.
    XForwardedFor,
    /// The `Forwarded` request header (RFC 7239): one element per proxy, the client in
    /// its `for=` parameter.
    Forwarded,
    /// The PROXY protocol (HAProxy, version 1 or 2) header at the start of the connection.
    ProxyProtocol,
}

impl TrustedProxiesConfig {
    /// The networks `cidrs` names; `None` when one of them is not a CIDR or an address
    /// (`check-config` reports which).
    pub fn networks(&self) -> Option<Vec<IpNet>> {
        self.cidrs.iter().map(|c| parse_cidr(c).ok()).collect()
    }
}

/// A CIDR, or a single address as the network of just that address.
fn parse_cidr(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    if let Ok(net) = text.parse::<IpNet>() {
        return Ok(net.trunc());
    }
    text.parse::<IpAddr>()
        .map(IpNet::from)
        .map_err(|_| format!("{text:?} is not a CIDR (`10.0.0.0/8`, `2001:db8::/32`) or an IP address"))
}

/// Checks the `trusted_proxies:` section.
pub(crate) fn check_trusted_proxies(config: &TrustedProxiesConfig, out: &mut Vec<Problem>) {
    let at = FieldPath::root().key("trusted_proxies");
    for (i, cidr) in config.cidrs.iter().enumerate() {
        if let Err(why) = parse_cidr(cidr) {
            out.push(Problem::new(at.key("cidrs").index(i), why));
        }
    }
    if config.hops == 0 {
        out.push(Problem::new(at.key("hops"), "must be at least 1: the proxy next to seawall adds one entry"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::{assert_issue, issues, ok, with_upstream};

    #[test]
    fn cidrs_and_single_addresses_of_both_families_parse() {
        let config = TrustedProxiesConfig {
            cidrs: vec!["10.0.0.0/8".into(), "192.0.2.7".into(), "2001:db8::/32".into(), "::1".into()],
            ..TrustedProxiesConfig::default()
        };
        let nets = config.networks().unwrap();
        assert_eq!(nets[1], "192.0.2.7/32".parse::<IpNet>().unwrap());
        assert_eq!(nets[3], "::1/128".parse::<IpNet>().unwrap());
        // Host bits are dropped: 10.1.2.3/8 means 10.0.0.0/8.
        assert_eq!(parse_cidr("10.1.2.3/8").unwrap(), "10.0.0.0/8".parse::<IpNet>().unwrap());
    }

    #[test]
    fn a_malformed_cidr_or_no_hops_is_reported_at_its_line() {
        let found = issues(&with_upstream(&[
            "trusted_proxies:",
            "  cidrs:",
            "    - 10.0.0.0/8",
            "    - 10.0.0.0/33",
            "    - proxy.local",
            "  hops: 0",
        ]));
        assert_eq!(found.len(), 3, "{found:#?}");
        assert_issue(&found[0], 4, "trusted_proxies.cidrs[1]", "is not a CIDR");
        assert_issue(&found[1], 5, "trusted_proxies.cidrs[2]", "is not a CIDR");
        assert_issue(&found[2], 6, "trusted_proxies.hops", "must be at least 1");
        let config = ok(&with_upstream(&["trusted_proxies: { cidrs: ['10.0.0.0/8', '::1'], source: proxy_protocol }"]));
        assert_eq!(config.trusted_proxies.source, ProxySource::ProxyProtocol);
        assert_eq!(config.trusted_proxies.hops, 1);
        assert_eq!(ok(&with_upstream(&[])).trusted_proxies, TrustedProxiesConfig::default());
    }
}
