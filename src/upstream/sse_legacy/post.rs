//! Messages to an HTTP+SSE upstream: each a POST to the endpoint its event stream named.

use http::Method;

use super::{Conn, SseLink};
use crate::call::UpstreamError;
use crate::jsonrpc;
use crate::upstream::client::UpstreamResponse;
use crate::upstream::failure::status_error;

impl SseLink {
    /// POSTs a notification or an answer, once the stream is open.
    pub(super) async fn send_one_way(&self, body: String) -> Result<(), UpstreamError> {
        let conn = self.ready(self.up.connect_timeout).await?;
        self.post(&conn, body).await
    }

    /// POSTs one message to the stream's endpoint. Any 2xx is success (servers answer 202);
    /// a 404 means the upstream forgot the session, so the stream is reopened. A server
    /// that answers a request in the POST's own body rather than on the stream (not what
    /// the transport says, but it happens) is heard there too.
    pub(super) async fn post(&self, conn: &Conn, body: String) -> Result<(), UpstreamError> {
        self.post_with(conn, body, &[]).await
    }

    /// [`SseLink::post`] with extra headers (a call's trace context).
    pub(super) async fn post_with(
        &self,
        conn: &Conn,
        body: String,
        extra: &[(String, String)],
    ) -> Result<(), UpstreamError> {
        let mut more = Vec::with_capacity(extra.len());
        crate::upstream::push_headers(&mut more, extra, &self.up.name);
        let resp = self.up.client.send(Method::POST, &conn.endpoint, &self.up.post_headers, &more, body).await?;
        let status = resp.status();
        if status.is_success() {
            if status != http::StatusCode::ACCEPTED && status != http::StatusCode::NO_CONTENT {
                self.answered_inline(conn, resp).await;
            }
            return Ok(());
        }
        if status == http::StatusCode::NOT_FOUND {
            conn.shut();
            return Err(UpstreamError::SessionLost("the upstream no longer knows this session".into()));
        }
        Err(status_error(status, resp.headers()))
    }

    /// Reads what a POST answered with in its body (bounded by the message limit): an
    /// answer to a call waiting on `conn` completes it; anything else is left alone.
    async fn answered_inline(&self, conn: &Conn, mut resp: UpstreamResponse) {
        let mut body = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) if body.len() + chunk.len() <= self.up.max_message_bytes => {
                    body.extend_from_slice(&chunk)
                }
                Ok(Some(_)) | Err(_) => return,
                Ok(None) => break,
            }
        }
        let Ok(text) = std::str::from_utf8(&body) else { return };
        if text.trim().is_empty() {
            return;
        }
        if let Ok(jsonrpc::Message::Response(r)) = jsonrpc::decode(text)
            && let Some(pending) = conn.pending.lock().remove(&r.id)
        {
            let _ = pending.tx.send(r.body);
        }
    }
}
