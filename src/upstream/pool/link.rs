//! One client session across the replicas of an upstream: a session of its own per
//! endpoint, opened when that endpoint is first used.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::time::Instant;

use parking_lot::Mutex;

use super::endpoints::HttpPool;
use crate::call::{AttachedSession, BoxFuture, EventSink, Reply, Transport, UpstreamCall, UpstreamError};
use crate::jsonrpc::{Id, Notification};
use crate::mcp::init::{InitParams, InitResult};
use crate::upstream::http::HttpLink;

/// One client session's view of a pooled upstream.
pub(crate) struct PoolLink {
    pool: Arc<HttpPool>,
    init: InitParams,
    links: tokio::sync::Mutex<Vec<Option<Arc<HttpLink>>>>,
    first_init: Mutex<Option<Arc<InitResult>>>,
    subscribers: Mutex<HashMap<u64, EventSink>>,
    get_wanted: std::sync::atomic::AtomicBool,
}

impl PoolLink {
    /// Opens a session on one endpoint (trying the others if it fails), so that the
    /// upstream's capabilities are known.
    pub(crate) async fn connect(pool: Arc<HttpPool>, init: InitParams) -> Result<Arc<PoolLink>, UpstreamError> {
        let link = Arc::new(PoolLink {
            links: tokio::sync::Mutex::new(vec![None; pool.len()]),
            pool,
            init,
            first_init: Mutex::new(None),
            subscribers: Mutex::new(HashMap::new()),
            get_wanted: std::sync::atomic::AtomicBool::new(false),
        });
        let mut tried = Vec::new();
        let mut last = UpstreamError::Connect("no endpoints".into());
        while tried.len() < link.pool.len() {
            let i = link.pool.pick(&tried);
            tried.push(i as u16);
            match link.endpoint_link(i).await {
                Ok(_) => return Ok(link),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Re-attaches to the endpoint sessions another process opened (see
    /// [`HttpLink::attach`]); endpoints without one open a session when first used.
    /// `None` when none of them names an endpoint of this pool.
    pub(crate) fn attach(pool: Arc<HttpPool>, init: InitParams, sessions: &[AttachedSession]) -> Option<Arc<PoolLink>> {
        let mut links: Vec<Option<Arc<HttpLink>>> = vec![None; pool.len()];
        let mut first_init = None;
        for session in sessions {
            let Some(i) = session.endpoint.map(usize::from).filter(|i| *i < pool.len()) else { continue };
            let link = HttpLink::attach(Arc::clone(&pool.endpoints[i].upstream), init.clone(), session);
            first_init = first_init.or_else(|| link.init_result());
            links[i] = Some(link);
        }
        first_init.as_ref()?;
        Some(Arc::new(PoolLink {
            links: tokio::sync::Mutex::new(links),
            pool,
            init,
            first_init: Mutex::new(first_init),
            subscribers: Mutex::new(HashMap::new()),
            get_wanted: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    /// The endpoint sessions opened so far, as another process re-attaches to them.
    fn attached(&self) -> Vec<AttachedSession> {
        let Ok(links) = self.links.try_lock() else { return Vec::new() };
        links.iter().enumerate().filter_map(|(i, link)| link.as_ref()?.attached(u16::try_from(i).ok())).collect()
    }

    /// Stops every endpoint session's streams, leaving the sessions to other replicas.
    async fn detach(&self) {
        for link in self.links.lock().await.iter().flatten() {
            link.stop();
        }
    }

    /// The initialize result of the first endpoint that answered.
    pub(crate) fn init_result(&self) -> Option<Arc<InitResult>> {
        self.first_init.lock().clone()
    }

    async fn endpoint_link(&self, i: usize) -> Result<Arc<HttpLink>, UpstreamError> {
        let mut links = self.links.lock().await;
        if let Some(link) = &links[i] {
            return Ok(Arc::clone(link));
        }
        let endpoint = &self.pool.endpoints[i];
        let connect = HttpLink::connect(Arc::clone(&endpoint.upstream), self.init.clone());
        let link = match tokio::time::timeout(self.pool.connect_timeout, connect).await {
            Ok(Ok(link)) => link,
            Ok(Err(e)) => {
                self.pool.record(i, true);
                return Err(e);
            }
            Err(_) => {
                self.pool.record(i, true);
                return Err(UpstreamError::Handshake("no answer to initialize in time".into()));
            }
        };
        for (key, sink) in self.subscribers.lock().iter() {
            link.shared.fanout.subscribe(*key, sink.clone().with_endpoint(i as u16));
        }
        self.first_init.lock().get_or_insert_with(|| link.init_result().unwrap_or_else(empty_init));
        if self.get_wanted.load(std::sync::atomic::Ordering::SeqCst) {
            link.want_get_stream().await;
        }
        links[i] = Some(Arc::clone(&link));
        Ok(link)
    }

    /// Opens the standalone GET stream of every endpoint session, now and later ones.
    pub(crate) async fn want_get_stream(&self) {
        self.get_wanted.store(true, std::sync::atomic::Ordering::SeqCst);
        let links: Vec<_> = self.links.lock().await.iter().flatten().cloned().collect();
        futures::future::join_all(links.iter().map(|link| link.want_get_stream())).await;
    }

    /// Sends one attempt to the endpoint the attempt layer chose (or one picked now).
    async fn call(&self, call: &UpstreamCall) -> Result<Reply, UpstreamError> {
        let i = call.endpoint.map_or_else(|| self.pool.pick(&call.avoid), usize::from);
        let link = self.endpoint_link(i).await?;
        let _in_flight = self.pool.endpoints[i].enter();
        link.call(call).await
    }

    /// Sends a notification to every endpoint session opened so far.
    pub(crate) async fn notify(&self, n: Notification) -> Result<(), UpstreamError> {
        let links: Vec<Arc<HttpLink>> = self.links.lock().await.iter().flatten().cloned().collect();
        for link in links {
            link.notify(n.clone()).await?;
        }
        Ok(())
    }

    /// Answers a server-initiated request on the endpoint that made it.
    pub(crate) async fn respond(&self, endpoint: Option<u16>, id: Id, body: Reply) -> Result<(), UpstreamError> {
        let i = endpoint.map(usize::from).unwrap_or(0);
        let link = self.links.lock().await.get(i).cloned().flatten();
        match link {
            Some(link) => link.respond(id, body).await,
            None => Err(UpstreamError::SessionLost("no session with that endpoint".into())),
        }
    }

    /// Subscribes a session to unrelated events of every endpoint session.
    pub(crate) fn subscribe(&self, key: u64, sink: EventSink) {
        self.subscribers.lock().insert(key, sink.clone());
        if let Ok(links) = self.links.try_lock() {
            for (i, link) in links.iter().enumerate() {
                if let Some(link) = link {
                    link.shared.fanout.subscribe(key, sink.clone().with_endpoint(i as u16));
                }
            }
        }
    }

    /// Unsubscribes a session.
    pub(crate) fn unsubscribe(&self, key: u64) {
        self.subscribers.lock().remove(&key);
        if let Ok(links) = self.links.try_lock() {
            for link in links.iter().flatten() {
                link.shared.fanout.unsubscribe(key);
            }
        }
    }

    /// Ends every endpoint session.
    pub(crate) async fn close(&self) {
        let links: Vec<Arc<HttpLink>> = self.links.lock().await.iter().flatten().cloned().collect();
        futures::future::join_all(links.iter().map(|l| l.close())).await;
    }
}

impl Transport for PoolLink {
    fn send<'a>(&'a self, call: &'a UpstreamCall) -> BoxFuture<'a, Result<Reply, UpstreamError>> {
        Box::pin(self.call(call))
    }

    fn pick(&self, avoid: &[u16]) -> Option<u16> {
        u16::try_from(self.pool.pick(avoid)).ok()
    }

    fn record(&self, endpoint: u16, failed: bool) {
        if usize::from(endpoint) < self.pool.len() {
            self.pool.record(usize::from(endpoint), failed);
        }
    }

    fn has_untried(&self, endpoint: u16, tried: &[u16]) -> bool {
        (0..self.pool.len())
            .any(|j| j != usize::from(endpoint) && !tried.contains(&(j as u16)) && !self.pool.held_out(j))
    }

    fn has_spare(&self, endpoint: u16) -> bool {
        let now = Instant::now();
        (0..self.pool.len()).any(|j| j != usize::from(endpoint) && !self.pool.ejected(j, now))
    }

    fn notify(&self, n: Notification) -> BoxFuture<'_, Result<(), UpstreamError>> {
        Box::pin(PoolLink::notify(self, n))
    }

    fn respond(&self, endpoint: Option<u16>, id: Id, body: Reply) -> BoxFuture<'_, Result<(), UpstreamError>> {
        Box::pin(PoolLink::respond(self, endpoint, id, body))
    }

    fn init_result(&self) -> Option<Arc<InitResult>> {
        PoolLink::init_result(self)
    }

    fn subscribe(&self, key: u64, sink: EventSink) {
        PoolLink::subscribe(self, key, sink);
    }

    fn unsubscribe(&self, key: u64) {
        PoolLink::unsubscribe(self, key);
    }

    fn want_unrelated_stream(&self) -> BoxFuture<'_, ()> {
        Box::pin(PoolLink::want_get_stream(self))
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(PoolLink::close(self))
    }

    fn attached(&self) -> Vec<AttachedSession> {
        PoolLink::attached(self)
    }

    fn detach(&self) -> BoxFuture<'_, ()> {
        Box::pin(PoolLink::detach(self))
    }
}

fn empty_init() -> Arc<InitResult> {
    Arc::new(InitResult {
        protocol_version: crate::mcp::LATEST_LEGACY.to_owned(),
        capabilities: serde_json::json!({}),
        instructions: None,
        raw: crate::jsonrpc::to_raw(&serde_json::json!({})),
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_pool as pool;
    use super::*;

    #[tokio::test]
    async fn a_pool_link_re_attaches_to_the_endpoint_sessions_it_is_given() {
        let pool = Arc::new(pool(3));
        let held = AttachedSession {
            endpoint: Some(2),
            session_id: "session-on-2".into(),
            version: "2025-06-18".into(),
            capabilities: vec!["tools".into(), "prompts".into()],
        };
        let elsewhere = AttachedSession { endpoint: Some(7), ..held.clone() };
        let link = PoolLink::attach(Arc::clone(&pool), InitParams::gateway_own(), &[held.clone(), elsewhere.clone()])
            .expect("one session fits the pool");
        assert_eq!(Transport::attached(&*link), vec![held], "only endpoints of this pool are attached");
        let init = link.init_result().expect("the capabilities the id carried");
        assert!(init.has("tools") && init.has("prompts") && !init.has("resources"));
        assert_eq!(init.protocol_version, "2025-06-18");
        assert!(PoolLink::attach(pool, InitParams::gateway_own(), &[elsewhere]).is_none(), "nothing fits");
    }
}
