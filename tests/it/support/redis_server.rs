//! A real `redis-server` on a free loopback port, without persistence, for the shared rate
//! limit store. `tests/run` installs it when it is missing.

use std::time::Duration;

use tokio::process::Command;

use super::process::{Proc, Stream};

/// A running redis-server; dropping it stops the process.
pub struct RedisServer {
    pub proc: Proc,
    pub port: u16,
    /// `redis://127.0.0.1:PORT`.
    pub url: String,
}

impl RedisServer {
    /// Starts redis-server on a free port (redis cannot bind port 0: a port the OS just
    /// handed out and took back is used).
    pub async fn start() -> RedisServer {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
            listener.local_addr().expect("local addr").port()
        };
        RedisServer::start_on(port).await
    }

    /// Starts redis-server on `port`.
    pub async fn start_on(port: u16) -> RedisServer {
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]);
        let mut proc = Proc::spawn("redis-server", cmd);
        proc.wait_for_line(Stream::Stdout, Duration::from_secs(20), "Ready to accept connections", |l| {
            l.contains("Ready to accept connections").then_some(())
        })
        .await;
        RedisServer { proc, port, url: format!("redis://127.0.0.1:{port}") }
    }

    /// Stops the server.
    pub async fn stop(&mut self) {
        self.proc.stop(Duration::from_secs(5)).await;
    }
}
