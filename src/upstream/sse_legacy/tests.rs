//! The HTTP+SSE link against the demo server's `/sse` on a real listener, port 0.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use serde_json::{Value, json};

use super::*;
use crate::call::{Clock, EventRx, UpstreamEvent};
use crate::demo::{DemoConfig, DemoServer};

/// Serves `app` on 127.0.0.1, port 0; returns `http://127.0.0.1:PORT`.
async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

async fn demo() -> String {
    serve(crate::demo::http::router(DemoServer::new(DemoConfig::default(), None))).await
}

fn upstream(url: &str) -> Arc<SseUpstream> {
    Arc::new(SseUpstream::new("old", url, &Default::default(), Duration::from_secs(2), 1 << 20).unwrap())
}

fn init() -> InitParams {
    InitParams {
        protocol_version: "2024-11-05".into(),
        capabilities: json!({}),
        client_info: json!({"name": "t", "version": "1"}),
        modern_client: false,
    }
}

fn request(link: &Arc<SseLink>, method: &str, params: Value, progress: Option<Value>) -> (UpstreamCall, EventRx) {
    let (tx, rx) = crate::call::events(64);
    let call = UpstreamCall {
        upstream: Arc::from("old"),
        method: Arc::from(method),
        params: Some(Arc::from(jsonrpc::to_raw(&params))),
        progress_token: progress,
        tool: None,
        idempotent: true,
        clock: Clock::new(Duration::from_secs(10)),
        events: EventSink::new(Arc::from("old"), tx),
        target: Arc::clone(link) as crate::call::Link,
        avoid: Vec::new(),
        endpoint: None,
        attempt_deadline: None,
        headers: Arc::from([]),
        trace: Default::default(),
    };
    (call, rx)
}

async fn result_of(link: &Arc<SseLink>, method: &str, params: Value) -> Result<Value, UpstreamError> {
    let (call, _rx) = request(link, method, params, None);
    let reply = link.call(&call).await?;
    Ok(serde_json::from_str(reply.unwrap().get()).unwrap())
}

async fn sessions(base: &str) -> u64 {
    let stats: Value =
        serde_json::from_str(&reqwest::get(format!("{base}/admin/stats")).await.unwrap().text().await.unwrap())
            .unwrap();
    stats["sessions"].as_u64().unwrap()
}

#[tokio::test]
async fn calls_are_answered_on_the_stream_concurrently_with_progress() {
    let base = demo().await;
    let link = SseLink::connect(upstream(&format!("{base}/sse")), init()).await.unwrap();
    let init = link.init_result().unwrap();
    assert_eq!(init.protocol_version, "2024-11-05");
    assert_eq!(init.server_info["name"], "seawall-demo");

    let echoes = (0..4).map(|n| {
        let link = Arc::clone(&link);
        async move {
            result_of(&link, "tools/call", json!({"name": "echo", "arguments": {"message": format!("m{n}")}})).await
        }
    });
    for (n, result) in futures::future::join_all(echoes).await.into_iter().enumerate() {
        assert_eq!(result.unwrap()["content"][0]["text"], format!("m{n}"));
    }

    let token = json!("tok-1");
    let params = json!({"name": "sleep", "arguments": {"ms": 200}, "_meta": {"progressToken": token}});
    let (call, mut events) = request(&link, "tools/call", params, Some(token));
    let reply = link.call(&call).await.unwrap();
    assert!(reply.is_ok());
    let mut progress = 0;
    while let Some(tagged) = events.try_recv() {
        if matches!(&tagged.event, UpstreamEvent::Notification(n) if n.method == method::PROGRESS) {
            progress += 1;
        }
    }
    assert!(progress >= 2, "progress reached the call: {progress}");

    assert_eq!(sessions(&base).await, 1);
    link.close().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(sessions(&base).await, 0, "closing the link ends the upstream session");
    assert!(matches!(result_of(&link, "ping", json!({})).await, Err(UpstreamError::SessionLost(_))));
}

#[tokio::test]
async fn a_forgotten_session_is_replaced_by_a_new_stream() {
    let base = demo().await;
    let link = SseLink::connect(upstream(&format!("{base}/sse")), init()).await.unwrap();
    assert!(result_of(&link, "ping", json!({})).await.is_ok());
    // The demo forgets every session and closes their streams: a call racing the close
    // fails as a lost session; the link opens a new stream and upstream session.
    reqwest::Client::new().post(format!("{base}/admin/drop-sessions")).send().await.unwrap();
    match result_of(&link, "ping", json!({})).await {
        Ok(_) | Err(UpstreamError::SessionLost(_)) => {}
        Err(other) => panic!("{other:?}"),
    }
    assert!(result_of(&link, "tools/list", json!({})).await.unwrap()["tools"].is_array());
    assert_eq!(sessions(&base).await, 1, "one new upstream session");
    link.close().await;
}

#[tokio::test]
async fn an_endpoint_on_another_origin_is_refused() {
    use axum::response::sse::{Event, Sse};
    let app = axum::Router::new().route(
        "/sse",
        axum::routing::get(|| async {
            let event = Event::default().event("endpoint").data("http://203.0.113.9/messages?sessionId=x");
            Sse::new(
                futures::stream::iter([Ok::<_, std::convert::Infallible>(event)]).chain(futures::stream::pending()),
            )
        }),
    );
    let base = serve(app).await;
    let refused = SseLink::connect(upstream(&format!("{base}/sse")), init()).await.err();
    assert!(matches!(&refused, Some(UpstreamError::Handshake(why)) if why.contains("another origin")), "{refused:?}");
}

#[tokio::test]
async fn nothing_listening_is_a_connect_failure() {
    let refused = SseLink::connect(upstream("http://127.0.0.1:9/sse"), init()).await.err();
    assert!(matches!(refused, Some(UpstreamError::Connect(_))), "{refused:?}");
}
