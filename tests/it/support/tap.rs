//! A recording TCP relay: it listens on 127.0.0.1:0, forwards every connection to a
//! target, and keeps every byte of each direction of each connection, so a test can
//! inspect exactly what one side sent the other — headers, chunk framing and SSE framing
//! included. [`Tap::bodies`] also de-frames the HTTP/1.1 messages of a direction (chunked
//! or sized bodies), so text split across chunks is found too.

use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The bytes of one relayed connection.
#[derive(Default, Debug, Clone)]
pub struct Conversation {
    /// What the connecting side sent (requests).
    pub sent: Vec<u8>,
    /// What the target answered (responses).
    pub answered: Vec<u8>,
}

/// A running relay in front of `target`.
pub struct Tap {
    pub addr: SocketAddr,
    conversations: Arc<Mutex<Vec<Arc<Mutex<Conversation>>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Tap {
    pub async fn start(target: SocketAddr) -> Tap {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind tap");
        let addr = listener.local_addr().expect("tap addr");
        let conversations: Arc<Mutex<Vec<Arc<Mutex<Conversation>>>>> = Arc::default();
        let all = Arc::clone(&conversations);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(target).await else { continue };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let conversation = Arc::new(Mutex::new(Conversation::default()));
                all.lock().push(Arc::clone(&conversation));
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(pump(client_read, server_write, Arc::clone(&conversation), true));
                tokio::spawn(pump(server_read, client_write, conversation, false));
            }
        });
        Tap { addr, conversations, task }
    }

    /// `http://ADDR` with `path_and_query` appended.
    pub fn url(&self, path_and_query: &str) -> String {
        format!("http://{}{path_and_query}", self.addr)
    }

    /// A copy of every connection's bytes so far.
    pub fn conversations(&self) -> Vec<Conversation> {
        self.conversations.lock().iter().map(|c| c.lock().clone()).collect()
    }

    /// Every byte the connecting side sent (`sent`) or received (`!sent`), one buffer
    /// per connection, followed by the de-framed bodies of its HTTP messages.
    pub fn views(&self, sent: bool) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for c in self.conversations() {
            let raw = if sent { c.sent } else { c.answered };
            out.extend(bodies(&raw));
            out.push(raw);
        }
        out
    }

    /// Total bytes in one direction.
    pub fn byte_count(&self, sent: bool) -> usize {
        self.conversations().iter().map(|c| if sent { c.sent.len() } else { c.answered.len() }).sum()
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn pump(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    conversation: Arc<Mutex<Conversation>>,
    sent: bool,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        {
            let mut c = conversation.lock();
            let side = if sent { &mut c.sent } else { &mut c.answered };
            side.extend_from_slice(&buf[..n]);
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// The bodies of the HTTP/1.1 messages in `raw`, one after the other: chunked bodies
/// de-chunked, sized ones cut to their length, the rest of the stream otherwise.
pub fn bodies(raw: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = raw;
    while let Some(end) = find(rest, b"\r\n\r\n") {
        let head = String::from_utf8_lossy(&rest[..end]).to_ascii_lowercase();
        rest = &rest[end + 4..];
        let header = |name: &str| {
            head.lines()
                .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(':')).map(|v| v.trim().to_owned()))
        };
        let status = head.split(' ').nth(1).and_then(|s| s.parse::<u16>().ok());
        let bodiless = head.starts_with("http/") && matches!(status, Some(100..=199 | 204 | 304));
        if bodiless {
            continue;
        }
        if header("transfer-encoding").is_some_and(|t| t.contains("chunked")) {
            let (body, after) = dechunk(rest);
            out.push(body);
            rest = after;
        } else if let Some(len) = header("content-length").and_then(|l| l.parse::<usize>().ok()) {
            let len = len.min(rest.len());
            out.push(rest[..len].to_vec());
            rest = &rest[len..];
        } else if head.starts_with("http/") {
            // A response without a length runs to the end of the connection.
            out.push(rest.to_vec());
            break;
        }
    }
    out
}

/// A chunked body and what follows it (an unfinished body: what arrived of it).
fn dechunk(mut rest: &[u8]) -> (Vec<u8>, &[u8]) {
    let mut body = Vec::new();
    loop {
        let Some(line_end) = find(rest, b"\r\n") else { return (body, &[]) };
        let size_text = String::from_utf8_lossy(&rest[..line_end]);
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let Ok(size) = usize::from_str_radix(size_text, 16) else { return (body, &[]) };
        rest = &rest[line_end + 2..];
        if size == 0 {
            // Trailers, then the blank line.
            let end = find(rest, b"\r\n").map_or(rest.len(), |e| e + 2);
            return (body, &rest[end..]);
        }
        let take = size.min(rest.len());
        body.extend_from_slice(&rest[..take]);
        rest = &rest[take..];
        if take < size {
            return (body, &[]);
        }
        rest = rest.strip_prefix(b"\r\n").unwrap_or(rest);
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let first = *needle.first()?;
    let mut from = 0;
    while let Some(i) = hay.get(from..)?.iter().position(|&b| b == first) {
        let at = from + i;
        if hay.get(at..at + needle.len()) == Some(needle) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn chunked_and_sized_bodies_are_deframed() {
        let raw = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\nHTTP/1.1 202 Accepted\r\ncontent-length: 2\r\n\r\nokHTTP/1.1 204 No Content\r\n\r\n";
        assert_eq!(super::bodies(raw), vec![b"abcde".to_vec(), b"ok".to_vec()]);
    }
}
