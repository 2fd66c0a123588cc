//! nginx as a round-robin reverse proxy in front of several gateways: what a Kubernetes
//! Service does to a client's requests, on one machine.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::process::Command;

use super::TestDir;
use super::process::Proc;

/// A running nginx.
pub struct Nginx {
    /// Held for its `Drop`, which stops the process.
    _proc: Proc,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Held for its `Drop`, which removes the directory.
    _dir: TestDir,
}

/// nginx: `SEAWALL_TEST_NGINX`, then `nginx` on PATH, then `/usr/sbin/nginx`; panics
/// with instructions when there is none (`tests/run` installs it).
pub fn nginx_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("SEAWALL_TEST_NGINX") {
        return PathBuf::from(path);
    }
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("nginx")).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path.into_iter().chain([PathBuf::from("/usr/sbin/nginx")]).find(|p| p.is_file()).unwrap_or_else(|| {
        panic!("nginx is not installed (bash tests/run installs it; SEAWALL_TEST_NGINX may name one)")
    })
}

impl Nginx {
    /// nginx on a free loopback port, sending each request to the next of `backends`
    /// (`http://host:port` roots) in turn: HTTP/1.1, nothing buffered either way (SSE
    /// streams pass as they come), the client's `Host` passed on.
    pub async fn round_robin(backends: &[&str]) -> Nginx {
        Nginx::start(backends, "").await
    }

    /// [`Nginx::round_robin`] to one backend, adding the client's address to
    /// `X-Forwarded-For` as a reverse proxy does.
    pub async fn forwarding_for(backend: &str) -> Nginx {
        Nginx::start(&[backend], "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;").await
    }

    /// nginx in front of `backends`, with `extra` directives in its one location.
    async fn start(backends: &[&str], extra: &str) -> Nginx {
        let dir = TestDir::new("nginx");
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
            listener.local_addr().expect("local addr").port()
        };
        let d = dir.path().display();
        let servers: String = backends
            .iter()
            .map(|b| format!("        server {};\n", b.trim_start_matches("http://").trim_end_matches('/')))
            .collect();
        let config = format!(
            "daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    upstream gateways {{
{servers}    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://gateways;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_set_header Host $http_host;
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 1h;
            {extra}
        }}
    }}
}}
"
        );
        let path = dir.write("nginx.conf", &config);
        let mut cmd = Command::new(nginx_binary());
        cmd.arg("-c").arg(&path).arg("-p").arg(dir.path()).arg("-e").arg("stderr");
        let proc = Proc::spawn("nginx", cmd);
        let deadline = Instant::now() + super::START_TIMEOUT;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "nginx does not listen on {port}:\n{}", proc.output());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Nginx { _proc: proc, url: format!("http://127.0.0.1:{port}"), _dir: dir }
    }
}
