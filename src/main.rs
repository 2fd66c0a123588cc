//! The `seawall` command line.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory as _, Parser, Subcommand};
use seawall::config::Config;
use seawall::telemetry::{self, LogFormat};

/// mimalloc keeps per-thread heaps: the glibc allocator's arenas serialise the runtime's
/// worker threads under load and cost a fifth of the CPU of a proxied call.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// seawall: a resilient gateway for MCP servers.
///
/// Clients connect to `http://LISTEN/mcp` to reach every configured upstream at once (tools
/// and prompts named `<upstream>__<name>`, resources by URI), or to
/// `http://LISTEN/mcp/<upstream>` to reach one upstream with its own names; a local client
/// may instead launch `seawall stdio` as its stdio MCP server.
#[derive(Parser, Debug)]
#[command(name = "seawall", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the gateway.
    Run {
        /// Configuration file (YAML); see config/example.yaml for every key.
        #[arg(short, long, env = "SEAWALL_CONFIG")]
        config: PathBuf,
        /// Address for MCP clients, overriding `listen` (port 0 picks a free port).
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Address for /healthz and /readyz, overriding `admin_listen`.
        #[arg(long)]
        admin_listen: Option<SocketAddr>,
        /// Log format on stderr.
        #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "SEAWALL_LOG_FORMAT")]
        log_format: LogFormat,
    },
    /// Serve one MCP client on stdin/stdout: for IDEs and desktop apps that launch their
    /// MCP server. One JSON-RPC message per line; logs go to stderr. The file's `listen`
    /// and `admin_listen` do not apply (several copies may run at once); `auth:` does not
    /// apply either: the client is anonymous unless --principal says otherwise.
    Stdio {
        /// Configuration file (YAML); see config/example.yaml for every key.
        #[arg(short, long, env = "SEAWALL_CONFIG")]
        config: PathBuf,
        /// Reach only this upstream, with its own names (as /mcp/<upstream>); default:
        /// every upstream, names prefixed (as /mcp).
        #[arg(long, value_name = "NAME")]
        upstream: Option<String>,
        /// Act as the principal of this configured API key (auth.api_keys[].name) for
        /// authorization rules and rate limits; default: anonymous.
        #[arg(long, value_name = "NAME")]
        principal: Option<String>,
        /// Also serve Streamable HTTP clients at this address (port 0 picks a free port;
        /// the address is logged). A port in use is logged, not fatal.
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Also serve /healthz, /readyz and /metrics at this address (logged once bound).
        /// A port in use is logged, not fatal.
        #[arg(long)]
        admin_listen: Option<SocketAddr>,
        /// Log format on stderr.
        #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "SEAWALL_LOG_FORMAT")]
        log_format: LogFormat,
    },
    /// Validate a configuration file and report every error with its file, line and field.
    CheckConfig {
        /// The file to check.
        file: PathBuf,
    },
    /// Turn an `mcpServers` JSON file (Claude Desktop, Cursor, VS Code `servers`) into a
    /// seawall config on stdout; what cannot be carried over as written is reported on
    /// stderr. `include_mcp_servers: FILE` in a config uses such a file directly.
    Import {
        /// The JSON file, e.g. claude_desktop_config.json, ~/.cursor/mcp.json or
        /// .vscode/mcp.json.
        file: PathBuf,
    },
    /// Print the JSON Schema of the configuration file (config/seawall.schema.json is a
    /// copy: `seawall schema > config/seawall.schema.json` refreshes it).
    Schema,
    /// Run the built-in demo MCP server (tools echo, add, sleep, fail, flaky, crash, big,
    /// sample, roots, log; a resource, templates and a prompt), made to exercise a gateway.
    DemoUpstream(seawall::demo::DemoArgs),
    /// Exit 0 when URL answers with a 2xx status within the timeout, else 1: the
    /// container image's health check (`seawall health http://127.0.0.1:9090/healthz`),
    /// since its runtime image has no curl or shell.
    Health {
        /// The URL to GET, e.g. the admin listener's /healthz.
        url: String,
        /// Longest wait for the answer (duration, e.g. 2s).
        #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
        timeout: std::time::Duration,
    },
    /// Write the reference pages generated from the code (configuration, command line,
    /// metrics) into DIR: `seawall docs --out docs/src/reference` refreshes the book's.
    Docs {
        /// The folder to write them into (created if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
    /// Print the version.
    Version,
}

fn main() -> ExitCode {
    // mimalloc asks for transparent huge pages for its arenas; they would double the
    // resident memory of an idle gateway (10 MiB of huge pages for a few KiB in use).
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_thp_disable(true);
    let cli = Cli::parse();
    match cli.command {
        Command::Version => {
            println!("seawall {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Command::Health { url, timeout } => block_on(health(url, timeout)),
        Command::Docs { out } => match write_reference(&out) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("seawall: {}: {e}", out.display());
                ExitCode::FAILURE
            }
        },
        Command::Schema => match serde_json::to_string_pretty(&seawall::config::json_schema()) {
            Ok(text) => {
                println!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("seawall: cannot render the schema: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Import { file } => match seawall::config::import(&file, &file.display().to_string()) {
            Ok(imported) => {
                print_warnings(&imported.warnings);
                print!("{}", imported.yaml);
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::FAILURE
            }
        },
        Command::CheckConfig { file } => match Config::load(&file) {
            Ok(config) => {
                print_warnings(&config.warnings);
                println!("{}: ok ({} upstreams)", file.display(), config.upstreams.len());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::FAILURE
            }
        },
        Command::Run { config, listen, admin_listen, log_format } => {
            let Some((loaded, telemetry)) = start(&config, log_format) else { return ExitCode::FAILURE };
            let overrides = seawall::app::run::Overrides { listen, admin_listen, config_file: Some(config) };
            let code = block_on(seawall::app::run::run(loaded, overrides));
            telemetry.shutdown();
            code
        }
        Command::Stdio { config, upstream, principal, listen, admin_listen, log_format } => {
            let Some((loaded, telemetry)) = start(&config, log_format) else { return ExitCode::FAILURE };
            let options = seawall::app::stdio::StdioOptions {
                upstream,
                principal,
                listen,
                admin_listen,
                config_file: Some(config),
            };
            let code = block_on(seawall::app::stdio::run_stdio(loaded, options));
            telemetry.shutdown();
            code
        }
        Command::DemoUpstream(args) => {
            let telemetry = match telemetry::init(LogFormat::Text, "warn", None) {
                Ok(telemetry) => telemetry,
                Err(e) => {
                    eprintln!("seawall: {e:#}");
                    return ExitCode::FAILURE;
                }
            };
            let code = block_on(seawall::demo::run(args));
            telemetry.shutdown();
            code
        }
    }
}

/// Loads the configuration, then starts logging and, when the configuration (or the
/// `OTEL_*` variables) asks for it, tracing: the subscriber is built once, knowing both.
fn start(path: &std::path::Path, log_format: LogFormat) -> Option<(Config, telemetry::Telemetry)> {
    let config = match Config::load(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return None;
        }
    };
    print_warnings(&config.warnings);
    match telemetry::init(log_format, "info", Some(&config.tracing)) {
        Ok(telemetry) => Some((config, telemetry)),
        Err(e) => {
            eprintln!("seawall: tracing: {e:#}");
            None
        }
    }
}

/// Writes every generated reference page into `dir`.
fn write_reference(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for page in seawall::reference::pages(&Cli::command()) {
        std::fs::write(dir.join(page.file), page.text)?;
    }
    Ok(())
}

/// GETs `url`; an error unless it answers 2xx within `timeout`.
async fn health(url: String, timeout: std::time::Duration) -> anyhow::Result<()> {
    let client = reqwest::Client::builder().timeout(timeout).build()?;
    let status = client.get(&url).send().await?.status();
    anyhow::ensure!(status.is_success(), "{url}: HTTP {status}");
    Ok(())
}

/// Prints warnings of loading or importing on stderr, one per line.
fn print_warnings(warnings: &[String]) {
    for warning in warnings {
        eprintln!("warning: {warning}");
    }
}

fn block_on(fut: impl std::future::Future<Output = anyhow::Result<()>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("seawall: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = match runtime.block_on(fut) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("seawall: {e:#}");
            ExitCode::FAILURE
        }
    };
    // A blocking read of stdin (stdio mode after a signal) cannot be cancelled: do not
    // wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    code
}
