//! TLS towards `https://` upstreams, on the same driven connections as plain HTTP/1.1:
//! a TCP connection, then a rustls handshake naming the URI's host (SNI), offering
//! `http/1.1` alone (ALPN), and verifying the certificate with the platform's verifier.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::TcpStream;

use crate::call::{Cause, UpstreamError};

/// A TLS connection to an upstream.
pub(super) type TlsStream = tokio_rustls::client::TlsStream<TcpStream>;

/// The TLS settings of one upstream's connections (its resumed sessions among them).
#[derive(Clone)]
pub(super) struct Connector(tokio_rustls::TlsConnector);

impl Connector {
    /// Certificates verified by the platform's verifier (on Linux, the system's roots,
    /// or those of `SSL_CERT_FILE` / `SSL_CERT_DIR`).
    pub(super) fn new() -> anyhow::Result<Connector> {
        use rustls_platform_verifier::BuilderVerifierExt;
        let config = builder()?.with_platform_verifier()?.with_no_client_auth();
        Ok(Connector::of(config))
    }

    /// Certificates verified against `roots` alone.
    #[cfg(test)]
    pub(super) fn trusting(roots: rustls::RootCertStore) -> anyhow::Result<Connector> {
        Ok(Connector::of(builder()?.with_root_certificates(roots).with_no_client_auth()))
    }

    fn of(mut config: rustls::ClientConfig) -> Connector {
        // One HTTP/1.1 exchange per connection at a time is what the driven connections
        // speak: HTTP/2 is not offered.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Connector(tokio_rustls::TlsConnector::from(Arc::new(config)))
    }

    /// The handshake on `tcp` with `host` (a name, or an address without brackets); a
    /// failure is a connect failure: the request never reached the upstream.
    pub(super) async fn handshake(&self, host: &str, tcp: TcpStream) -> Result<TlsStream, UpstreamError> {
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| UpstreamError::Connect(Cause::described(format!("not a TLS server name: {e}"), e)))?;
        self.0
            .connect(name, tcp)
            .await
            .map_err(|e| UpstreamError::Connect(Cause::described(format!("tls handshake error: {e}"), e)))
    }
}

/// The crypto provider is named rather than taken from the process default, which is
/// ambiguous when more than one provider is compiled in.
fn builder() -> Result<rustls::ConfigBuilder<rustls::ClientConfig, rustls::WantsVerifier>, rustls::Error> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    rustls::ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions()
}

/// Whether an idle TLS connection can take a request. The server may have sent records
/// since the last answer that are no data (TLS 1.3 session tickets): reading takes them
/// in. A read that would wait means nothing else came; data, the server's close
/// (`close_notify` or the socket's) or an error mean the connection is done. The read
/// does not wait: its waker wakes nobody, and whoever reads next registers its own.
pub(super) fn quiet(stream: &mut TlsStream) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    let mut byte = [0u8; 1];
    let mut buf = ReadBuf::new(&mut byte);
    matches!(Pin::new(stream).poll_read(&mut cx, &mut buf), Poll::Pending)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::AsyncWriteExt as _;

    use super::*;

    /// A TLS connection to a server on 127.0.0.1 with a certificate made for it, and the
    /// server's end of it.
    async fn pair() -> (TlsStream, tokio_rustls::server::TlsStream<TcpStream>) {
        let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(made.signing_key.serialize_der().into());
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![made.cert.der().clone()], key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move { acceptor.accept(listener.accept().await.unwrap().0).await.unwrap() });
        let mut roots = rustls::RootCertStore::empty();
        roots.add(made.cert.der().clone()).unwrap();
        let tcp = TcpStream::connect(addr).await.unwrap();
        let client = Connector::trusting(roots).unwrap().handshake("127.0.0.1", tcp).await.unwrap();
        (client, server.await.unwrap())
    }

    /// Long enough for what the server wrote to reach the client's socket.
    async fn settle() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    #[tokio::test]
    async fn an_idle_tls_connection_is_quiet_until_the_server_sends_or_closes() {
        let (mut client, mut server) = pair().await;
        settle().await;
        assert!(quiet(&mut client), "the session tickets sent after the handshake are no data");
        assert!(quiet(&mut client), "looking takes nothing away");
        server.shutdown().await.unwrap();
        settle().await;
        assert!(!quiet(&mut client), "close_notify ends it");

        let (mut client, mut server) = pair().await;
        server.write_all(b"unasked").await.unwrap();
        server.flush().await.unwrap();
        settle().await;
        assert!(!quiet(&mut client), "data nobody asked for ends it");
    }
}
