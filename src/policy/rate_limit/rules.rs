//! Which limits apply to a request, and under which key each counts it.

use crate::client::ClientRequest;
use crate::config::{LimitConfig, LimitKey, Rate};
use crate::session::Scope;

/// The key all unauthenticated clients share under `per: principal`.
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
            LimitKey::Principal => Some(req.principal.as_ref().map_or_else(|| ANONYMOUS.to_owned(), |p| p.label())),
            LimitKey::Tool => req.tool.clone(),
            LimitKey::Upstream => upstream_of(req, separator).map(str::to_owned),
            LimitKey::Global => Some(String::new()),
        }
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

/// Whether `name` matches `pattern`, where `*` is any run of characters (also none) and
/// `?` exactly one character.
pub(crate) fn glob(pattern: &str, name: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let name: Vec<char> = name.chars().collect();
    let (mut p, mut n) = (0, 0);
    // Where the last `*` was, and the name position it currently stands for up to.
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(&c) if c == '?' || c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                // Let the last `*` swallow one more character and try again.
                Some((sp, sn)) => {
                    star = Some((sp, sn + 1));
                    p = sp + 1;
                    n = sn + 1;
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn glob_matches_stars_and_question_marks() {
        for (pattern, name) in [
            ("*", ""),
            ("*", "demo__echo"),
            ("demo__*", "demo__echo"),
            ("*__echo", "demo__echo"),
            ("d?mo__e*o", "demo__echo"),
            ("*e*c*", "demo__echo"),
            ("a*b*c", "aXbYbZc"),
            ("exact", "exact"),
            ("**", "x"),
        ] {
            assert!(glob(pattern, name), "{pattern} should match {name}");
        }
        for (pattern, name) in
            [("demo__*", "other__echo"), ("?", ""), ("?", "ab"), ("exact", "exact2"), ("a*c", "abd"), ("", "x")]
        {
            assert!(!glob(pattern, name), "{pattern} should not match {name}");
        }
    }
}
