//! An OTLP trace receiver on 127.0.0.1 and a free port, for tests and the benchmark:
//! OTLP/HTTP (`POST /v1/traces`, protobuf) or OTLP/gRPC (`TraceService/Export` over
//! HTTP/2 without TLS, framed and answered as gRPC: a length-prefixed message, then the
//! `grpc-status` trailer). It decodes what it receives with `opentelemetry-proto` and
//! keeps the spans, simplified into [`Received`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message as _;
use serde_json::{Value, json};

/// One exported span, simplified: ids as lowercase hex, attributes as JSON values.
#[derive(Debug, Clone)]
pub struct Received {
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    /// 1 internal, 2 server, 3 client (OTLP's numbering).
    pub kind: i32,
    /// 0 unset, 1 ok, 2 error.
    pub status: i32,
    pub attributes: BTreeMap<String, Value>,
    /// `(trace id, span id)` of each link.
    pub links: Vec<(String, String)>,
    /// `service.name` of its resource.
    pub service: String,
}

impl Received {
    /// An attribute as a string (`""` when absent; numbers and booleans as written).
    pub fn attr(&self, key: &str) -> String {
        match self.attributes.get(key) {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        }
    }
}

/// What the receiver answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Accept every export.
    Accept,
    /// Refuse every export (HTTP 503, or gRPC `UNAVAILABLE`).
    Refuse,
    /// Never answer (the exporter's timeout ends each export).
    Stall,
    /// Accept every export, counting its spans without keeping them (for load).
    Count,
}

struct State {
    spans: Mutex<Vec<Received>>,
    /// Spans received in all (kept or only counted).
    counted: AtomicUsize,
    exports: AtomicUsize,
    /// The headers (gRPC metadata) of the last export request.
    headers: Mutex<HeaderMap>,
    behaviour: Behaviour,
}

/// A running receiver; stops when dropped.
pub struct Collector {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Collector {
    /// An OTLP/HTTP receiver that accepts everything.
    pub async fn http() -> Collector {
        Collector::start(false, Behaviour::Accept).await
    }

    /// An OTLP/gRPC receiver that accepts everything.
    pub async fn grpc() -> Collector {
        Collector::start(true, Behaviour::Accept).await
    }

    /// A receiver of either protocol answering as `behaviour` says.
    pub async fn start(grpc: bool, behaviour: Behaviour) -> Collector {
        let state = Arc::new(State {
            spans: Mutex::new(Vec::new()),
            counted: AtomicUsize::new(0),
            exports: AtomicUsize::new(0),
            headers: Mutex::new(HeaderMap::new()),
            behaviour,
        });
        let shared = Arc::clone(&state);
        let app = if grpc {
            axum::Router::new().route(
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                    grpc_export(Arc::clone(&shared), headers, body)
                }),
            )
        } else {
            axum::Router::new().route(
                "/v1/traces",
                axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                    http_export(Arc::clone(&shared), headers, body)
                }),
            )
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the collector");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Collector { url, state, task }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Received> {
        self.state.spans.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A header (gRPC metadata) of the last export request.
    pub fn header(&self, name: &str) -> Option<String> {
        let headers = self.state.headers.lock().unwrap_or_else(|e| e.into_inner());
        headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
    }

    /// How many spans arrived in accepted exports.
    #[allow(dead_code)] // benches/gateway.rs reads it; the tests look at the spans themselves
    pub fn counted(&self) -> usize {
        self.state.counted.load(Ordering::SeqCst)
    }

    /// How many export requests arrived (accepted or not).
    pub fn exports(&self) -> usize {
        self.state.exports.load(Ordering::SeqCst)
    }

    /// Waits until `pick` finds what it needs in the spans received (up to `timeout`).
    pub async fn wait_for<T>(&self, what: &str, timeout: Duration, pick: impl Fn(&[Received]) -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let spans = self.spans();
            if let Some(found) = pick(&spans) {
                return found;
            }
            if tokio::time::Instant::now() >= deadline {
                panic!("the collector did not receive {what} within {timeout:?}; it has:\n{spans:#?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Counts one export request and keeps its headers.
fn arrived(state: &State, headers: HeaderMap) {
    state.exports.fetch_add(1, Ordering::SeqCst);
    *state.headers.lock().unwrap_or_else(|e| e.into_inner()) = headers;
}

/// Keeps the spans of one export request; `false` when the body is not one.
fn keep(state: &State, body: &[u8]) -> bool {
    let Ok(request) = ExportTraceServiceRequest::decode(body) else { return false };
    let n: usize = request.resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum();
    state.counted.fetch_add(n, Ordering::SeqCst);
    if state.behaviour == Behaviour::Count {
        return true;
    }
    let mut kept = Vec::new();
    for resource_spans in request.resource_spans {
        let resource = resource_spans.resource.map(|r| attributes(&r.attributes)).unwrap_or_default();
        let service = resource.get("service.name").and_then(Value::as_str).unwrap_or_default().to_owned();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                kept.push(Received {
                    name: span.name,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    kind: span.kind,
                    status: span.status.map_or(0, |s| s.code),
                    attributes: attributes(&span.attributes),
                    links: span.links.iter().map(|l| (hex(&l.trace_id), hex(&l.span_id))).collect(),
                    service: service.clone(),
                });
            }
        }
    }
    state.spans.lock().unwrap_or_else(|e| e.into_inner()).extend(kept);
    true
}

async fn http_export(state: Arc<State>, headers: HeaderMap, body: Bytes) -> Response {
    arrived(&state, headers);
    match state.behaviour {
        Behaviour::Stall => std::future::pending().await,
        Behaviour::Refuse => StatusCode::SERVICE_UNAVAILABLE.into_response(),
        Behaviour::Accept | Behaviour::Count if keep(&state, &body) => {
            let mut response = Response::new(Body::from(ExportTraceServiceResponse::default().encode_to_vec()));
            response.headers_mut().insert("content-type", HeaderValue::from_static("application/x-protobuf"));
            response
        }
        Behaviour::Accept | Behaviour::Count => StatusCode::BAD_REQUEST.into_response(),
    }
}

/// A unary gRPC call: the request is one length-prefixed message; the answer too, then
/// the status in the trailers.
async fn grpc_export(state: Arc<State>, headers: HeaderMap, body: Bytes) -> Response {
    arrived(&state, headers);
    let (status, message) = match state.behaviour {
        Behaviour::Stall => std::future::pending().await,
        Behaviour::Refuse => ("14", Vec::new()),
        Behaviour::Accept | Behaviour::Count => {
            let message = body.get(5..).filter(|_| body.first() == Some(&0)).unwrap_or_default();
            if keep(&state, message) {
                ("0", ExportTraceServiceResponse::default().encode_to_vec())
            } else {
                ("13", Vec::new())
            }
        }
    };
    let mut framed = vec![0u8];
    framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
    framed.extend_from_slice(&message);
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static(status));
    let frames = futures::stream::iter([
        Ok::<_, std::convert::Infallible>(http_body::Frame::data(Bytes::from(framed))),
        Ok(http_body::Frame::trailers(trailers)),
    ]);
    let mut response = Response::new(Body::new(http_body_util::StreamBody::new(frames)));
    response.headers_mut().insert("content-type", HeaderValue::from_static("application/grpc"));
    response
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attributes(list: &[KeyValue]) -> BTreeMap<String, Value> {
    list.iter()
        .map(|kv| {
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(AnyValue::StringValue(s)) => json!(s),
                Some(AnyValue::BoolValue(b)) => json!(b),
                Some(AnyValue::IntValue(i)) => json!(i),
                Some(AnyValue::DoubleValue(d)) => json!(d),
                Some(other) => json!(format!("{other:?}")),
                None => Value::Null,
            };
            (kv.key.clone(), value)
        })
        .collect()
}
