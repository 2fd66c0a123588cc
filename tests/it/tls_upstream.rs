//! `https://` upstreams through the real binary: a TLS-terminating relay (a certificate
//! made for the test) in front of the demo upstream, trusted by the gateway through
//! `SSL_CERT_FILE` (the platform verifier reads it on Linux). Streamable HTTP in both
//! eras and HTTP+SSE ride TLS; calls share one connection; a certificate that does not
//! verify is a connect failure; a connection the server closed while idle is replaced.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::support::mcp_client::Client;
use crate::support::{DemoUpstream, Seawall, TestDir, text_of};

/// A certificate for 127.0.0.1 and its key, self-signed: its own trust anchor.
struct Identity {
    cert: CertificateDer<'static>,
    key: Vec<u8>,
    pem: String,
}

impl Identity {
    fn new() -> Identity {
        let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).expect("certificate");
        Identity { cert: made.cert.der().clone(), key: made.signing_key.serialize_der(), pem: made.cert.pem() }
    }
}

/// A TLS server that relays each connection, decrypted, to `target`; counts the
/// connections it accepts, and closes them all (`close_notify`, then the socket) when
/// told.
struct Relay {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    close: watch::Sender<u64>,
}

impl Relay {
    async fn start(identity: &Identity, target: SocketAddr) -> Relay {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(identity.key.clone()));
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(vec![identity.cert.clone()], key)
            .expect("server config");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let accepted = Arc::new(AtomicUsize::new(0));
        let (close, _) = watch::channel(0);
        let (counted, closing) = (Arc::clone(&accepted), close.clone());
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(relay(acceptor.clone(), tcp, target, closing.subscribe()));
            }
        });
        Relay { addr, accepted, close }
    }

    /// `https://127.0.0.1:PORT` + `path`.
    fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Closes every connection it carries, as a server closing idle ones does.
    fn close_all(&self) {
        self.close.send_modify(|generation| *generation += 1);
    }
}

async fn relay(
    acceptor: tokio_rustls::TlsAcceptor,
    tcp: TcpStream,
    target: SocketAddr,
    mut close: watch::Receiver<u64>,
) {
    let Ok(mut tls) = acceptor.accept(tcp).await else { return };
    let Ok(mut inner) = TcpStream::connect(target).await else { return };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut tls, &mut inner) => {}
        _ = close.changed() => {
            let _ = tls.shutdown().await;
        }
    }
}

/// The demo's address, from its `http://ADDR/mcp`.
fn addr_of(demo: &DemoUpstream) -> SocketAddr {
    demo.url.trim_start_matches("http://").trim_end_matches("/mcp").parse().expect("demo address")
}

/// A gateway trusting `trusted` (alone) for TLS, with these upstreams (name, URL,
/// extra YAML lines).
async fn gateway(dir: &TestDir, trusted: &Identity, upstreams: &[(&str, String, &str)]) -> Seawall {
    let roots = dir.write("roots.pem", &trusted.pem);
    let mut yaml = String::from("listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nworkers: 2\nupstreams:\n");
    for (name, url, extra) in upstreams {
        yaml.push_str(&format!("  - name: {name}\n    url: {url}\n{extra}"));
    }
    let roots = roots.to_str().expect("path");
    Seawall::start_with(&yaml, &[], &[("SSL_CERT_FILE", roots), ("SSL_CERT_DIR", "")]).await
}

async fn echo(c: &Client, id: u64, tool: &str, message: &str) {
    let result = c.call_tool(id, tool, json!({"message": message})).await;
    assert_eq!(text_of(&result), message, "{tool}: {result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_upstreams_of_every_transport_share_their_connections_and_outlive_a_close() {
    let demo = DemoUpstream::start(false, &[]).await;
    let identity = Identity::new();
    let relay = Relay::start(&identity, addr_of(&demo)).await;
    let dir = TestDir::new("tls-upstream");
    let upstreams = [
        ("session", relay.url("/mcp"), "    protocol: legacy\n"),
        ("stateless", relay.url("/mcp"), "    protocol: modern\n"),
        ("old", relay.url("/sse"), "    transport: sse\n"),
    ];
    let gw = gateway(&dir, &identity, &upstreams).await;
    let c = Client::connect(&gw.url, json!({})).await;
    for tool in ["session__echo", "stateless__echo", "old__echo"] {
        echo(&c, 1, tool, "first").await;
    }

    // Sequential calls reuse their connections. A connection is reused only on the worker
    // whose reactor it is registered with, so each of the three upstreams may open one
    // more, for the gateway's second worker (of two), and no other.
    let before = relay.accepted();
    for i in 0..20 {
        for tool in ["session__echo", "stateless__echo", "old__echo"] {
            echo(&c, 10 + i, tool, &format!("m{i}")).await;
        }
    }
    let opened = relay.accepted() - before;
    assert!(opened <= 3, "60 calls opened {opened} TLS connections (accepted before: {before})");

    // The server closes every connection, idle or streaming: the next calls go on new ones.
    relay.close_all();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = relay.accepted();
    for tool in ["session__echo", "stateless__echo", "old__echo"] {
        echo(&c, 100, tool, "after the close").await;
    }
    assert!(relay.accepted() > before, "new connections after the close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_that_does_not_verify_is_a_connect_failure() {
    let demo = DemoUpstream::start(true, &[]).await;
    let (trusted, stranger) = (Identity::new(), Identity::new());
    let relay = Relay::start(&stranger, addr_of(&demo)).await;
    let dir = TestDir::new("tls-upstream");
    let gw = gateway(&dir, &trusted, &[("stranger", relay.url("/mcp"), "")]).await;

    let reply = Client::new(&gw.upstream_url("stranger"))
        .post(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
        .await;
    assert_eq!(reply.error()["code"], -32010, "unavailable, not sent: {}", reply.raw);
    assert!(relay.accepted() >= 1, "the gateway reached the relay");
    let requests = demo.recorded().iter().filter(|e: &&Value| e["event"] == "request").count();
    assert_eq!(requests, 0, "nothing reached the upstream behind the certificate");
    crate::support::until_logged(&gw, &["tls handshake error", "invalid peer certificate"]).await;
}
