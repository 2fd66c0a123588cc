//! Limit state in Redis, shared by every replica: one Lua script per request checks every
//! limit that applies (GCRA on Redis's own clock) and counts the request on all of them
//! only if all admit it, in one round trip.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::rules::Rule;
use crate::config::OnBackendError;

/// The longest a check may take before the store counts as unreachable.
const CHECK_TIMEOUT: Duration = Duration::from_millis(500);

/// GCRA for every key at once. KEYS: one per limit; ARGV: interval and burst per key
/// (microseconds, count). Each key holds its theoretical arrival time (TAT, µs on
/// Redis's clock). A request is admitted when `max(TAT, now) + T - b·T <= now` for every
/// key; then every TAT moves on by `T`. Returns `{0, 0}`, or `{i, wait µs}` for the key
/// (1-based) that must wait longest.
const GCRA: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local worst, worst_i = 0, 0
local next_tat = {}
for i, key in ipairs(KEYS) do
  local interval = tonumber(ARGV[2 * i - 1])
  local burst = tonumber(ARGV[2 * i])
  local tat = tonumber(redis.call('GET', key) or now)
  if tat < now then tat = now end
  local new = tat + interval
  local wait = new - burst * interval - now
  if wait > worst then worst, worst_i = wait, i end
  next_tat[i] = new
end
if worst_i > 0 then return {worst_i, math.ceil(worst)} end
for i, key in ipairs(KEYS) do
  local ttl = math.ceil((next_tat[i] - now) / 1000) + 1
  redis.call('SET', key, string.format('%.0f', next_tat[i]), 'PX', ttl)
end
return {0, 0}
";

/// What the store said about one request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Every limit admits it (and has counted it).
    Admitted,
    /// The limit of rule `rule` refuses it for `wait`.
    Refused { rule: usize, wait: Duration },
    /// Redis could not be asked.
    Unreachable,
}

/// The shared store.
pub(crate) struct RedisStore {
    connection: ConnectionManager,
    script: redis::Script,
    prefix: String,
    /// `(interval µs, burst)` per rule.
    quotas: Vec<(u64, u32)>,
    /// What the layer does while Redis is unreachable (for the log line).
    on_error: OnBackendError,
    /// Whether the last check failed, so that an outage is logged once.
    down: AtomicBool,
}

impl RedisStore {
    /// A store at `url`, connecting on first use and reconnecting by itself.
    pub(crate) fn new(url: &str, prefix: &str, on_error: OnBackendError, rules: &[Rule]) -> Result<RedisStore, String> {
        let client = redis::Client::open(url).map_err(|e| format!("backend: {e}"))?;
        let config = ConnectionManagerConfig::new()
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(200))
            .set_connection_timeout(Some(CHECK_TIMEOUT))
            .set_response_timeout(Some(CHECK_TIMEOUT));
        let connection =
            ConnectionManager::new_lazy_with_config(client, config).map_err(|e| format!("backend: {e}"))?;
        let quotas = rules
            .iter()
            .map(|r| (u64::try_from(r.rate.interval().as_micros()).unwrap_or(u64::MAX).max(1), r.burst))
            .collect();
        Ok(RedisStore {
            connection,
            script: redis::Script::new(GCRA),
            prefix: prefix.to_owned(),
            quotas,
            on_error,
            down: AtomicBool::new(false),
        })
    }

    /// Checks and counts one request on the limits `keys` (rule index and key) in one
    /// script call.
    pub(crate) async fn check(&self, keys: &[(usize, String)]) -> Verdict {
        let mut invocation = self.script.prepare_invoke();
        for (rule, key) in keys {
            let (interval, burst) = self.quotas.get(*rule).copied().unwrap_or((1, 1));
            invocation.key(format!("{}{rule}:{key}", self.prefix)).arg(interval).arg(burst);
        }
        let mut connection = self.connection.clone();
        let asked = tokio::time::timeout(CHECK_TIMEOUT, invocation.invoke_async::<(u64, u64)>(&mut connection)).await;
        match asked {
            Ok(Ok((index, wait))) => {
                if self.down.swap(false, Ordering::Relaxed) {
                    tracing::info!("rate limit store reachable again; limits apply");
                }
                match index.checked_sub(1).and_then(|i| keys.get(usize::try_from(i).ok()?)) {
                    Some((rule, _)) => Verdict::Refused { rule: *rule, wait: Duration::from_micros(wait) },
                    None => Verdict::Admitted,
                }
            }
            Ok(Err(error)) => self.unreachable(&error.to_string()),
            Err(_) => self.unreachable("no answer in time"),
        }
    }

    fn unreachable(&self, why: &str) -> Verdict {
        if !self.down.swap(true, Ordering::Relaxed) {
            let requests = match self.on_error {
                OnBackendError::Allow => "admitted without limits",
                OnBackendError::Deny => "refused",
            };
            tracing::warn!(error = %why, "rate limit store unreachable; requests are {requests} until it is back");
        }
        Verdict::Unreachable
    }
}
