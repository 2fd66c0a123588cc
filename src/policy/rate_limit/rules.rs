//! Which limits apply to a request, and under which key each counts it.

use crate::client::ClientRequest;
use crate::config::{LimitConfig, LimitKey, Rate};
use crate::policy::glob::glob;
use crate::session::Scope;

/// The key unauthenticated clients share under `per: principal` when their transport
/// has no address (stdio).
pub(crate) const ANONYMOUS: &str = "anonymous";

/// One configured limit, parsed.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    /// What it counts separately.
    pub(crate) per: LimitKey,
    /// Tool name patterns; `None`: every request.
    tools: Option<Vec<String>>,
    /// The sustained rate.
    pub(crate) rate: Rate,
    /// Requests admitted at once after a quiet spell (at least 1).
    pub(crate) burst: u32,
}

impl Rule {
    /// The rule of one validated `limits` entry.
    pub(crate) fn new(limit: &LimitConfig) -> Result<Rule, String> {
        let (rate, burst) = limit.quota()?;
        if burst == 0 {
            return Err("burst must be at least 1".into());
        }
        Ok(Rule { per: limit.per, tools: limit.tools.clone(), rate, burst })
    }

    /// The `scope` label of this rule's refusals.
    pub(crate) fn scope(&self) -> &'static str {
        match self.per {
            LimitKey::Principal => "principal",
            LimitKey::Tool => "tool",
            LimitKey::Upstream => "upstream",
            LimitKey::Global => "global",
        }
    }

    /// The key under which this rule counts `req`, or `None` when it does not apply.
    pub(crate) fn key_for(&self, req: &ClientRequest, separator: &str) -> Option<String> {
        if let Some(patterns) = &self.tools {
            let tool = req.tool.as_deref()?;
            if !patterns.iter().any(|p| glob(p, tool)) {
                return None;
            }
        }
        match self.per {
            LimitKey::Principal => Some(principal_key(req)),
            LimitKey::Tool => req.tool.as_deref().map(str::to_owned),
            LimitKey::Upstream => upstream_of(req, separator).map(str::to_owned),
            LimitKey::Global => Some(String::new()),
        }
    }
}

/// Who a request counts as under `per: principal`: the principal's label
/// (`key:<name>`, `sub:<subject>`), or for unauthenticated clients their address
/// (`addr:<ip>`), so that one anonymous client cannot spend everyone's budget.
fn principal_key(req: &ClientRequest) -> String {
    match (&req.principal, req.peer) {
        (Some(principal), _) => principal.label(),
        (None, Some(ip)) => format!("addr:{ip}"),
        (None, None) => ANONYMOUS.to_owned(),
    }
}

/// The upstream a request is for, when the request says: the session's own upstream on
/// `/mcp/<upstream>`, else the prefix of a `tools/call`'s tool name.
fn upstream_of<'a>(req: &'a ClientRequest, separator: &str) -> Option<&'a str> {
    match &req.session.scope {
        Scope::Single(name) => Some(name),
        Scope::Aggregate => req.tool.as_deref()?.split_once(separator).map(|(upstream, _)| upstream),
    }
}
