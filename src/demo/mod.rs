//! `seawall demo-upstream`: a built-in MCP server made to exercise a gateway.
//!
//! It speaks MCP over stdio, Streamable HTTP or HTTP+SSE and offers tools that misbehave
//! on demand (latency, injected errors, leaky tracebacks, flaky failures,
//! crashes, huge results), long calls with progress and cancellation, and
//! server-to-client requests (sampling, roots). With `--record FILE` it appends
//! one JSON line per event so tests can count what reached the upstream.
//!
//! Layout: `server` holds the transport-independent MCP logic, `tools` and
//! `catalog` what it offers, `session` per-client state, `stdio` and
//! `http` the transports, `record` the event log and counters.

pub(crate) mod catalog;
pub(crate) mod handler;
pub(crate) mod http;
pub(crate) mod modern;
pub(crate) mod record;
pub(crate) mod rpc;
pub(crate) mod server;
pub(crate) mod session;
pub(crate) mod stdio;
pub(crate) mod tools;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;

pub(crate) use handler::DemoConfig;
pub(crate) use server::DemoServer;

/// Flags of `seawall demo-upstream`.
#[derive(Debug, Clone, clap::Args)]
#[command(group(
    clap::ArgGroup::new("transport")
        .required(true)
        .multiple(false)
        .args(["stdio", "listen"])
))]
pub struct DemoArgs {
    /// Serve MCP over stdin/stdout (one JSON message per line; logs go to stderr;
    /// exits when stdin closes).
    #[arg(long)]
    pub stdio: bool,

    /// Serve MCP Streamable HTTP at http://ADDR/mcp and HTTP+SSE (2024-11-05) at
    /// http://ADDR/sse (port 0 picks a free port); prints `listening on
    /// http://IP:PORT/mcp` once bound.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,

    /// Delay added before every tools/call answer, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub latency: u64,

    /// Delay added before every resources/read answer, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub read_latency: u64,

    /// Delay added before every resources/subscribe answer, in milliseconds (the
    /// subscription is made when it ends).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub subscribe_latency: u64,

    /// The Retry-After, in seconds, of HTTP 503 answers (flaky mode http_503).
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    pub retry_after: u64,

    /// Fraction (0 to 1) of tools/call requests that fail with JSON-RPC -32603.
    #[arg(long, value_name = "F", default_value_t = 0.0, value_parser = parse_fraction)]
    pub error_rate: f64,

    /// Append one JSON object per line to FILE for every event received
    /// (request, call, initialize, cancelled, notification).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,

    /// Server name reported in serverInfo.name.
    #[arg(long, value_name = "NAME", default_value = "seawall-demo")]
    pub name: String,

    /// Instructions returned by initialize.
    #[arg(long, value_name = "TEXT")]
    pub instructions: Option<String>,

    /// Tools per tools/list page; 0 disables pagination.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub page_size: usize,

    /// N more tools (at most 10000), `extra_0001` … (each answers its `message`, or
    /// its own name), for gateways in front of many tools.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = parse_extra_tools)]
    pub extra_tools: usize,

    /// HTTP: speak only the legacy era (refuse 2026-07-28 requests as a server of
    /// 2025-11-25 would: 400, unsupported protocol version).
    #[arg(long)]
    pub legacy_only: bool,

    /// HTTP+SSE: answer each request in the body of its POST (200) instead of on the
    /// event stream, as some servers of that transport do.
    #[arg(long)]
    pub sse_inline: bool,

    /// stdio: after this fraction (0 to 1) of its answers, also write one line of noise
    /// — a line that is not JSON, the same answer again, the answer under an id nobody
    /// asked, or a notification nobody knows — as misbehaving servers do.
    #[arg(long, value_name = "F", default_value_t = 0.0, value_parser = parse_fraction)]
    pub noise: f64,
}

fn parse_fraction(text: &str) -> Result<f64, String> {
    let value: f64 = text.parse().map_err(|err| format!("{err}"))?;
    if (0.0..=1.0).contains(&value) { Ok(value) } else { Err(format!("{value} is not between 0 and 1")) }
}

fn parse_extra_tools(text: &str) -> Result<usize, String> {
    let value: usize = text.parse().map_err(|err| format!("{err}"))?;
    if value <= 10_000 { Ok(value) } else { Err(format!("{value} is more than 10000")) }
}

/// Run the demo server until stdin closes (`--stdio`) or forever (`--listen`).
pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    let recorder = match &args.record {
        Some(path) => {
            Some(record::Recorder::open(path).with_context(|| format!("cannot open record file {}", path.display()))?)
        }
        None => None,
    };
    let config = DemoConfig {
        name: args.name,
        instructions: args.instructions,
        latency: Duration::from_millis(args.latency),
        read_latency: Duration::from_millis(args.read_latency),
        subscribe_latency: Duration::from_millis(args.subscribe_latency),
        retry_after_secs: args.retry_after,
        error_rate: args.error_rate,
        page_size: args.page_size,
        extra_tools: args.extra_tools,
        legacy_only: args.legacy_only,
        sse_inline: args.sse_inline,
    };
    let server = DemoServer::new(config, recorder);
    match args.listen {
        Some(addr) => http::serve(server, &addr).await,
        None => stdio::serve(server, tokio::io::stdin(), tokio::io::stdout(), args.noise).await,
    }
}

#[cfg(test)]
mod tests {
    use super::DemoArgs;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: DemoArgs,
    }

    #[test]
    fn exactly_one_transport_is_required() {
        assert!(Cli::try_parse_from(["demo"]).is_err());
        assert!(Cli::try_parse_from(["demo", "--stdio", "--listen", "127.0.0.1:0"]).is_err());
        let cli = Cli::try_parse_from(["demo", "--listen", "127.0.0.1:0", "--error-rate", "0.5"]);
        assert!(cli.is_ok_and(|c| c.args.listen.is_some() && c.args.error_rate == 0.5));
        assert!(Cli::try_parse_from(["demo", "--stdio", "--error-rate", "1.5"]).is_err());
        let cli = Cli::try_parse_from(["demo", "--stdio"]);
        assert!(cli.is_ok_and(|c| c.args.stdio && c.args.name == "seawall-demo"));
    }
}
