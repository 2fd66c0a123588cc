//! `/status.json`: the gateway, its upstreams, their breakers and the last 15 minutes
//! of traffic, in one document that the status page and scripts share.
//!
//! It stays small however many tools there are: breakers are counted per upstream and
//! only those not closed are listed (all of them with `?all=1`), and one upstream's
//! tools are listed only when asked for (`?upstream=NAME`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::resilience::breaker::{Breakers, State};
use crate::session::Session;
use crate::telemetry::recent::{self, Recent};
use crate::upstream::registry::Upstreams;

mod breaker;
mod upstream;

pub(crate) use breaker::{Breaker, breaker, breakers};
use breaker::{StateCounts, millis, sort};
use upstream::{Health, Series, Tool, Upstream, UpstreamBreakers, tools_of, upstream};

/// The query of `/status.json`, as sent.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawQuery {
    all: Option<String>,
    upstream: Option<String>,
}

/// What `/status.json` was asked for.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Query {
    /// List every breaker, closed ones included.
    pub all: bool,
    /// Also list this upstream's tools.
    pub upstream: Option<String>,
}

impl TryFrom<RawQuery> for Query {
    type Error = String;

    fn try_from(raw: RawQuery) -> Result<Query, String> {
        let all = match raw.all.as_deref() {
            None | Some("0" | "false") => false,
            Some("" | "1" | "true") => true,
            Some(_) => return Err("all: expected 1 or 0".to_owned()),
        };
        Ok(Query { all, upstream: raw.upstream })
    }
}

/// What the document is made of.
pub(crate) struct Sources<'a> {
    /// Every upstream, in configuration order.
    pub upstreams: &'a Upstreams,
    /// Every breaker.
    pub breakers: &'a Breakers,
    /// The live client sessions.
    pub sessions: Vec<Arc<Session>>,
    /// The recent requests.
    pub recent: &'a Recent,
    /// When the process started serving.
    pub started: Instant,
    /// The same moment on the wall clock.
    pub started_wall: SystemTime,
}

/// `?upstream=NAME` named no upstream.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct UnknownUpstream;

/// The whole document.
#[derive(Debug, Serialize)]
pub(crate) struct Status {
    gateway: Gateway,
    /// Seconds per bucket of every `recent` series.
    bucket_seconds: u64,
    /// How much of the last bucket (the one in progress) has passed.
    current_bucket_ms: u64,
    recent: Series,
    upstreams: Vec<Upstream>,
    breakers: BreakerList,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<Tool>>,
}

#[derive(Debug, Serialize)]
struct Gateway {
    version: &'static str,
    state: Health,
    uptime_seconds: u64,
    started_unix_ms: u64,
    sessions: Sessions,
}

#[derive(Debug, Serialize)]
struct Sessions {
    total: usize,
    /// By protocol version; the modern era's contexts under `2026-07-28`.
    by_era: BTreeMap<String, usize>,
}

#[derive(Debug, Serialize)]
struct BreakerList {
    /// Whether closed breakers are listed too (`?all=1`).
    all: bool,
    /// Every breaker, by state, listed or not.
    #[serde(flatten)]
    counts: StateCounts,
    /// Breakers left out of `listed` beyond [`MAX_LISTED`] (never with `?all=1`).
    unlisted: usize,
    /// Not closed first (open, then half-open), then by upstream and tool.
    listed: Vec<Breaker>,
}

/// Most breakers listed without `?all=1`: an outage that opens thousands of tool
/// breakers at once must not make the document that reports it unbounded.
pub(crate) const MAX_LISTED: usize = 500;

/// Builds the document; `Err` when `?upstream=` names no upstream.
pub(crate) fn document(src: &Sources<'_>, query: &Query, now: Instant) -> Result<Status, UnknownUpstream> {
    let asked = match &query.upstream {
        Some(name) => Some(src.upstreams.get(name).ok_or(UnknownUpstream)?),
        None => None,
    };
    let mut per_upstream: HashMap<Arc<str>, UpstreamBreakers> = HashMap::new();
    let mut counts = StateCounts::default();
    let mut listed = Vec::new();
    src.breakers.for_each_snapshot(None, |key, s| {
        counts.add(s.state);
        let entry = per_upstream.entry(Arc::clone(&key.upstream)).or_default();
        match key.tool {
            None => entry.own = Some(breaker(key, s)),
            Some(_) => entry.tools.add(s.state),
        }
        if query.all || s.state != State::Closed {
            listed.push(breaker(key, s));
        }
    });
    sort(&mut listed);
    let unlisted = if query.all { 0 } else { listed.len().saturating_sub(MAX_LISTED) };
    listed.truncate(listed.len() - unlisted);
    let upstreams: Vec<Upstream> = src
        .upstreams
        .iter()
        .map(|handle| {
            let found = per_upstream.remove(&handle.name).unwrap_or_default();
            upstream(handle, found, &src.sessions, src.recent.upstream(&handle.name, now))
        })
        .collect();
    let state = upstreams.iter().map(|u| u.state).max().unwrap_or(Health::Ok);
    let tools = asked.map(|handle| tools_of(handle, src.breakers));
    Ok(Status {
        gateway: Gateway {
            version: env!("CARGO_PKG_VERSION"),
            state,
            uptime_seconds: now.saturating_duration_since(src.started).as_secs(),
            started_unix_ms: src.started_wall.duration_since(UNIX_EPOCH).map(millis).unwrap_or(0),
            sessions: sessions(&src.sessions),
        },
        bucket_seconds: recent::BUCKET.as_secs(),
        current_bucket_ms: millis(src.recent.bucket_elapsed(now)),
        recent: src.recent.total(now).into(),
        upstreams,
        breakers: BreakerList { all: query.all, counts, unlisted, listed },
        tools,
    })
}

fn sessions(all: &[Arc<Session>]) -> Sessions {
    let mut by_era = BTreeMap::new();
    for s in all {
        let modern = crate::mcp::modern::MODERN_VERSIONS.first().copied();
        let era = if s.is_stateless() { modern.unwrap_or(s.version.as_str()) } else { s.version.as_str() };
        *by_era.entry(era.to_owned()).or_insert(0) += 1;
    }
    Sessions { total: all.len(), by_era }
}

#[cfg(test)]
mod tests {
    //! The status document: its query, its health rules, and its size with 50 upstreams of
    //! 2,000 tools each.

    use std::fmt::Write as _;
    use std::sync::Arc;
    use std::time::{Duration, Instant, SystemTime};

    use serde_json::Value;

    use super::*;
    use crate::config::{BreakerConfig, Config};
    use crate::resilience::breaker::classify::{Outcome, Verdict};
    use crate::session::Scope;

    const UPSTREAMS: usize = 50;
    const TOOLS: usize = 2000;

    /// 50 HTTP upstreams (never contacted) and a registry allowing 2,000 tool breakers each.
    fn gateway(upstreams: usize) -> (Upstreams, Arc<Breakers>) {
        let mut yaml = String::from("upstreams:\n");
        for i in 0..upstreams {
            let _ = writeln!(yaml, "  - name: upstream-{i:02}\n    url: http://user:secret@127.0.0.1:9/mcp?token=t");
        }
        let config = Config::parse(&yaml, "test.yaml").unwrap();
        let breakers = Arc::new(Breakers::new().with_tool_limit(TOOLS));
        let built = crate::app::upstreams::build_upstreams(&config, &breakers).unwrap();
        (built, breakers)
    }

    fn cfg() -> BreakerConfig {
        // Breaks far longer than the test, so a loaded machine cannot see one end.
        let hour = std::time::Duration::from_secs(3600);
        BreakerConfig {
            consecutive_failures: 2,
            min_calls: 1000,
            break_duration: hour,
            max_break: hour,
            ..BreakerConfig::default()
        }
    }

    fn fail(breaker: &Arc<crate::resilience::breaker::state::Breaker>, times: usize) {
        for _ in 0..times {
            breaker.try_acquire().unwrap().record(Verdict { outcome: Outcome::Failure, slow: false });
        }
    }

    fn succeed(breaker: &Arc<crate::resilience::breaker::state::Breaker>) {
        breaker.try_acquire().unwrap().record(Verdict { outcome: Outcome::Success, slow: false });
    }

    fn sources<'a>(upstreams: &'a Upstreams, breakers: &'a Breakers, recent: &'a Recent) -> Sources<'a> {
        Sources {
            upstreams,
            breakers,
            sessions: Vec::new(),
            recent,
            started: Instant::now(),
            started_wall: SystemTime::now(),
        }
    }

    fn json(status: &Status) -> (Value, usize) {
        let text = serde_json::to_string(status).unwrap();
        (serde_json::from_str(&text).unwrap(), text.len())
    }

    fn query(all: Option<&str>, upstream: Option<&str>) -> Result<Query, String> {
        Query::try_from(RawQuery { all: all.map(str::to_owned), upstream: upstream.map(str::to_owned) })
    }

    #[test]
    fn the_query_takes_all_as_a_flag_and_refuses_other_values() {
        assert_eq!(query(None, None), Ok(Query::default()));
        for yes in ["1", "true", ""] {
            assert!(query(Some(yes), None).unwrap().all, "{yes}");
        }
        for no in ["0", "false"] {
            assert!(!query(Some(no), None).unwrap().all, "{no}");
        }
        assert_eq!(query(Some("yes"), None), Err("all: expected 1 or 0".to_owned()));
        assert_eq!(query(None, Some("a")).unwrap().upstream.as_deref(), Some("a"));
    }

    /// The document stays small with 50 upstreams × 2,000 tool breakers and every recent
    /// bucket full: breakers are counted, and only those not closed are listed.
    #[tokio::test]
    async fn fifty_upstreams_of_two_thousand_tools_stay_small() {
        let (upstreams, breakers) = gateway(UPSTREAMS);
        let recent = Recent::starting(Instant::now() - crate::telemetry::recent::BUCKET * 100);
        let now = Instant::now();
        for handle in upstreams.iter() {
            breakers.upstream(&handle.name, &cfg());
            for t in 0..TOOLS {
                breakers.tool(&handle.name, &Arc::from(format!("tool_{t:04}").as_str()), &cfg()).unwrap();
            }
            // Every bucket of every series counted, with five-digit counts (1,000 requests
            // a second to each upstream, 1 % of them errors).
            for back in 0..crate::telemetry::recent::BUCKETS as u32 {
                let at = now - crate::telemetry::recent::BUCKET * back;
                recent.record_many_at(at, &handle.name, 10_000, 100);
            }
        }
        let u7: Arc<str> = Arc::from("upstream-07");
        fail(&breakers.tool(&u7, &Arc::from("tool_0042"), &cfg()).unwrap(), 2);
        fail(&breakers.tool(&u7, &Arc::from("tool_1999"), &cfg()).unwrap(), 2);
        let u3: Arc<str> = Arc::from("upstream-03");
        fail(&breakers.upstream(&u3, &cfg()), 2);
        succeed(&breakers.tool(&u3, &Arc::from("tool_0001"), &cfg()).unwrap());
        fail(&breakers.tool(&u3, &Arc::from("tool_0001"), &cfg()).unwrap(), 1);

        let src = sources(&upstreams, &breakers, &recent);
        let started = Instant::now();
        let (doc, size) = json(&document(&src, &Query::default(), Instant::now()).unwrap());
        let took = started.elapsed();
        println!("/status.json with {UPSTREAMS} upstreams × {TOOLS} tools: {size} bytes, built in {took:?}");
        assert!(size < 128 * 1024, "{size} bytes");

        let list = &doc["breakers"];
        let total = UPSTREAMS * (TOOLS + 1);
        assert_eq!((list["open"].as_u64(), list["half_open"].as_u64()), (Some(3), Some(0)));
        assert_eq!(list["closed"].as_u64(), Some(total as u64 - 3));
        assert_eq!(list["unlisted"], 0);
        let listed: Vec<(String, String)> = list["listed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| (b["upstream"].as_str().unwrap().to_owned(), b["tool"].as_str().unwrap_or("-").to_owned()))
            .collect();
        let expected = [("upstream-03", "-"), ("upstream-07", "tool_0042"), ("upstream-07", "tool_1999")];
        assert_eq!(listed, expected.map(|(u, t)| (u.to_owned(), t.to_owned())));
        let open = &list["listed"][1];
        assert_eq!((open["state"].as_str(), open["reason"].as_str()), (Some("open"), Some("consecutive_failures")));
        assert_eq!(open["failure_rate"], 1.0);
        assert_eq!((open["tripped"]["calls"].as_u64(), open["tripped"]["failures"].as_u64()), (Some(2), Some(2)));

        let ups = doc["upstreams"].as_array().unwrap();
        assert_eq!(ups.len(), UPSTREAMS);
        let state_of =
            |name: &str| ups.iter().find(|u| u["name"] == name).unwrap()["state"].as_str().unwrap().to_owned();
        assert_eq!(state_of("upstream-03"), "failing", "its own breaker is open");
        assert_eq!(state_of("upstream-07"), "degraded", "two of its tools' breakers are open");
        assert_eq!(state_of("upstream-00"), "ok");
        assert_eq!(doc["gateway"]["state"], "failing");
        let u7_json = ups.iter().find(|u| u["name"] == "upstream-07").unwrap();
        assert_eq!(u7_json["tools"]["breakers"]["open"], 2);
        assert_eq!(u7_json["tools"]["breakers"]["closed"], TOOLS as u64 - 2);
        let series = &u7_json["recent"];
        assert_eq!(series["requests"].as_array().unwrap().len(), crate::telemetry::recent::BUCKETS);
        assert!(series["requests"].as_array().unwrap().iter().all(|n| n == 10_000));
        assert!(series["errors"].as_array().unwrap().iter().all(|n| n == 100));
        assert_eq!(u7_json["endpoints"][0]["url"], "http://127.0.0.1:9/mcp", "no credentials or query shown");
        let total_requests: u64 = doc["recent"]["requests"].as_array().unwrap().iter().filter_map(Value::as_u64).sum();
        assert_eq!(total_requests, (UPSTREAMS * 10_000 * crate::telemetry::recent::BUCKETS) as u64);

        // `?all=1` lists every breaker; `?upstream=` adds that upstream's tools.
        let (all, all_size) = json(&document(&src, &query(Some("1"), None).unwrap(), Instant::now()).unwrap());
        println!("  ?all=1: {all_size} bytes");
        assert_eq!(all["breakers"]["listed"].as_array().unwrap().len(), total);
        let one = document(&src, &query(None, Some("upstream-07")).unwrap(), Instant::now()).unwrap();
        let (one, one_size) = json(&one);
        println!("  ?upstream=upstream-07: {one_size} bytes");
        let tools = one["tools"].as_array().unwrap();
        assert_eq!(tools.len(), TOOLS);
        assert_eq!((tools[0]["tool"].as_str(), tools[0]["state"].as_str()), (Some("tool_0042"), Some("open")));
        assert_eq!(tools[1]["tool"], "tool_1999");
        assert_eq!(tools[2]["state"], "closed");
        assert!(tools.iter().all(|t| t["listed"] == false), "the catalog learnt nothing");
        assert!(document(&src, &query(None, Some("nobody")).unwrap(), Instant::now()).is_err());
    }

    #[tokio::test]
    async fn an_outage_of_many_tools_lists_a_bounded_number() {
        let (upstreams, breakers) = gateway(2);
        let name: Arc<str> = Arc::from("upstream-01");
        for t in 0..MAX_LISTED + 100 {
            fail(&breakers.tool(&name, &Arc::from(format!("t{t:04}").as_str()), &cfg()).unwrap(), 2);
        }
        let recent = Recent::new();
        let src = sources(&upstreams, &breakers, &recent);
        let (doc, _) = json(&document(&src, &Query::default(), Instant::now()).unwrap());
        assert_eq!(doc["breakers"]["listed"].as_array().unwrap().len(), MAX_LISTED);
        assert_eq!(doc["breakers"]["unlisted"], 100);
        assert_eq!(doc["breakers"]["open"], MAX_LISTED as u64 + 100);
        let (all, _) = json(&document(&src, &query(Some("1"), None).unwrap(), Instant::now()).unwrap());
        assert_eq!(all["breakers"]["listed"].as_array().unwrap().len(), MAX_LISTED + 100 + 1);
        assert_eq!(all["breakers"]["unlisted"], 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_half_open_breaker_degrades_its_upstream_and_the_catalog_lists_tools() {
        let (upstreams, breakers) = gateway(1);
        let name: Arc<str> = Arc::from("upstream-00");
        let own = breakers.upstream(&name, &cfg());
        fail(&own, 2);
        // Past the hour-long break (paused time).
        tokio::time::advance(Duration::from_secs(3700)).await;
        let handle = upstreams.get("upstream-00").unwrap();
        handle
            .policy
            .catalog
            .learn(&crate::jsonrpc::raw_from_str(r#"{"tools":[{"name":"listed_only"},{"name":"called"}]}"#).unwrap());
        succeed(&breakers.tool(&name, &Arc::from("called"), &cfg()).unwrap());
        let recent = Recent::new();
        let src = sources(&upstreams, &breakers, &recent);
        let (doc, _) = json(&document(&src, &query(None, Some("upstream-00")).unwrap(), Instant::now()).unwrap());
        let up = &doc["upstreams"][0];
        assert_eq!((up["state"].as_str(), up["breaker"]["state"].as_str()), (Some("degraded"), Some("half_open")));
        assert_eq!(up["breaker"]["reason"], "break_elapsed");
        assert_eq!(up["tools"]["listed"], 2);
        assert_eq!(doc["gateway"]["state"], "degraded");
        let tools = doc["tools"].as_array().unwrap();
        let called = tools.iter().find(|t| t["tool"] == "called").unwrap();
        assert_eq!(
            (called["state"].as_str(), called["calls"].as_u64(), called["failure_rate"].as_f64()),
            (Some("closed"), Some(1), Some(0.0))
        );
        let listed_only = tools.iter().find(|t| t["tool"] == "listed_only").unwrap();
        assert_eq!((listed_only["listed"].as_bool(), listed_only["state"].as_str()), (Some(true), None));
    }

    #[tokio::test]
    async fn sessions_are_counted_by_era() {
        let (upstreams, breakers) = gateway(1);
        let recent = Recent::new();
        let legacy = |v: &str| Session::new(Scope::Aggregate, v.to_owned(), Value::Null, Value::Null);
        let modern = legacy(crate::mcp::LATEST_LEGACY);
        modern.mark_stateless();
        let mut src = sources(&upstreams, &breakers, &recent);
        src.sessions = vec![legacy("2025-11-25"), legacy("2025-11-25"), legacy("2024-11-05"), modern];
        let (doc, _) = json(&document(&src, &Query::default(), Instant::now()).unwrap());
        let sessions = &doc["gateway"]["sessions"];
        assert_eq!(sessions["total"], 4);
        assert_eq!(sessions["by_era"], serde_json::json!({"2024-11-05": 1, "2025-11-25": 2, "2026-07-28": 1}));
    }
}
