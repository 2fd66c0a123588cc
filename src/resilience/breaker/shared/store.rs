//! What shared breakers keep in Redis: the channel every replica subscribes to
//! (`<prefix>transitions`) and the hash of breakers open now (`<prefix>open`), one field
//! per breaker, that a replica reads when it (re)subscribes.
//!
//! Expiry runs on Redis's own clock, so replicas' clocks matter only for ordering
//! transitions: each hash value is `<expires ms> <at ms> <message>`, with `0` for a
//! hold that lasts until released. Writing a transition and publishing it is one script
//! call, which drops a write older than the one it would replace (the last writer
//! wins), prunes expired fields, and lets the hash expire with its last open breaker.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig, PubSub};

use super::message::Message;

/// The longest a command may take before Redis counts as unreachable.
const COMMAND_TIMEOUT: Duration = Duration::from_millis(1000);

/// KEYS: the hash. ARGV: field, at ms, keep ms (`>0` expires then, `0` never, `-1`
/// removes the field), message, channel. Returns 1 when written and published, 0 when an
/// entry written later stands.
const PUBLISH: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local at, keep = tonumber(ARGV[2]), tonumber(ARGV[3])
local old = redis.call('HGET', KEYS[1], ARGV[1])
if old then
  local old_expires, old_at = string.match(old, '^(%d+) (%d+) ')
  old_expires, old_at = tonumber(old_expires), tonumber(old_at)
  if old_at and old_at > at and (old_expires == 0 or old_expires > now) then return 0 end
end
if keep < 0 then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  local expires = 0
  if keep > 0 then expires = now + keep end
  redis.call('HSET', KEYS[1], ARGV[1], string.format('%.0f', expires) .. ' ' .. ARGV[2] .. ' ' .. ARGV[4])
end
local latest, forever = 0, false
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local expires = tonumber(string.match(all[i + 1], '^(%d+) '))
  if expires == 0 then
    forever = true
  elseif expires == nil or expires <= now then
    redis.call('HDEL', KEYS[1], all[i])
  elseif expires > latest then
    latest = expires
  end
end
if forever then
  redis.call('PERSIST', KEYS[1])
elseif latest > 0 then
  redis.call('PEXPIRE', KEYS[1], math.ceil(latest - now) + 1000)
end
redis.call('PUBLISH', ARGV[5], ARGV[4])
return 1
";

/// KEYS: the hash. Returns two arrays: the messages of the breakers open now, and for
/// each the break left in ms on Redis's clock (`-1`: held open until released).
const OPEN_NOW: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local messages, left = {}, {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local expires, message = string.match(all[i + 1], '^(%d+) %d+ (.*)$')
  expires = tonumber(expires)
  if expires == 0 then
    table.insert(messages, message)
    table.insert(left, -1)
  elseif expires and expires > now then
    table.insert(messages, message)
    table.insert(left, expires - now)
  end
end
return {messages, left}
";

/// The channel and the hash of one fleet on one Redis.
pub(super) struct Store {
    client: redis::Client,
    connection: ConnectionManager,
    publish: redis::Script,
    open_now: redis::Script,
    channel: String,
    hash: String,
}

/// An open breaker read from the hash.
pub(super) struct OpenEntry {
    /// The message that opened it, as published.
    pub message: Vec<u8>,
    /// The break left, or `None` for a hold.
    pub left: Option<Duration>,
}

impl Store {
    /// The store at `url` under `prefix`; connects on first use and reconnects by itself.
    pub(super) fn new(url: &str, prefix: &str) -> Result<Store, String> {
        let client = redis::Client::open(url).map_err(|e| format!("breaker_sharing: {e}"))?;
        let config = ConnectionManagerConfig::new()
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(200))
            .set_connection_timeout(Some(COMMAND_TIMEOUT))
            .set_response_timeout(Some(COMMAND_TIMEOUT));
        let connection = ConnectionManager::new_lazy_with_config(client.clone(), config)
            .map_err(|e| format!("breaker_sharing: {e}"))?;
        Ok(Store {
            client,
            connection,
            publish: redis::Script::new(PUBLISH),
            open_now: redis::Script::new(OPEN_NOW),
            channel: format!("{prefix}transitions"),
            hash: format!("{prefix}open"),
        })
    }

    /// The channel transitions are published on.
    pub(super) fn channel(&self) -> &str {
        &self.channel
    }

    /// Records `message` in the hash and publishes it, in one call. `Ok(false)`: a later
    /// transition of the same breaker is already there, so this one is dropped.
    pub(super) async fn publish(&self, message: &Message) -> Result<bool, String> {
        let keep: i64 = match message.kept_for() {
            Some(Some(left)) => i64::try_from(left.as_millis()).unwrap_or(i64::MAX).max(1),
            Some(None) => 0,
            None => -1,
        };
        let mut invocation = self.publish.prepare_invoke();
        invocation.key(&self.hash).arg(message.field()).arg(message.at_ms).arg(keep).arg(message.encode());
        invocation.arg(&self.channel);
        let mut connection = self.connection.clone();
        match tokio::time::timeout(COMMAND_TIMEOUT, invocation.invoke_async::<i64>(&mut connection)).await {
            Ok(Ok(written)) => Ok(written == 1),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("no answer in time".to_owned()),
        }
    }

    /// The breakers open now.
    pub(super) async fn open_now(&self) -> Result<Vec<OpenEntry>, String> {
        let mut invocation = self.open_now.prepare_invoke();
        invocation.key(&self.hash);
        let mut connection = self.connection.clone();
        let asked = invocation.invoke_async::<(Vec<Vec<u8>>, Vec<i64>)>(&mut connection);
        let (messages, left) = match tokio::time::timeout(COMMAND_TIMEOUT, asked).await {
            Ok(Ok(found)) => found,
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("no answer in time".to_owned()),
        };
        let entries = messages
            .into_iter()
            .zip(left)
            .map(|(message, left)| OpenEntry { message, left: u64::try_from(left).ok().map(Duration::from_millis) });
        Ok(entries.collect())
    }

    /// A connection subscribed to the channel.
    pub(super) async fn subscribe(&self) -> Result<PubSub, String> {
        let subscribed = async {
            let mut pubsub = self.client.get_async_pubsub().await?;
            pubsub.subscribe(&self.channel).await?;
            Ok::<_, redis::RedisError>(pubsub)
        };
        match tokio::time::timeout(COMMAND_TIMEOUT, subscribed).await {
            Ok(Ok(pubsub)) => Ok(pubsub),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("no answer in time".to_owned()),
        }
    }

    /// How long a command may take.
    pub(super) fn timeout(&self) -> Duration {
        COMMAND_TIMEOUT
    }
}
