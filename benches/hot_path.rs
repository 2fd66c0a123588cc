//! Micro-benchmarks of what seawall does on every proxied call, through the library's
//! public API: the JSON-RPC envelope decode, the id rewrite of an upstream's answer,
//! the error sanitiser on a clean and on a dirty message, the breakers' bookkeeping,
//! the retry budget's, and the metrics of one answered request.
//!
//! `cargo bench --bench hot_path` (divan; `-- NAME` runs the benchmarks matching NAME).
//! Compare figures run to run on one machine, not across machines.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use divan::Bencher;
use seawall::config::BreakerConfig;
use seawall::jsonrpc::{self, Id, Message};
use seawall::resilience::breaker::Breakers;
use seawall::resilience::breaker::classify::{Outcome, Verdict};

fn main() {
    divan::main();
}

/// A client's `tools/call`, as it arrives.
const CALL: &str = r#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo__echo","arguments":{"message":"bench-42"},"_meta":{"progressToken":"p-42"}}}"#;
/// An upstream's answer to it, under the id seawall gave the upstream.
const ANSWER: &str =
    r#"{"jsonrpc":"2.0","id":918273,"result":{"content":[{"type":"text","text":"bench-42"}],"isError":false}}"#;

mod envelope {
    use super::*;

    /// A client request: the body split (single message or batch), then decoded.
    #[divan::bench]
    fn decode_request() -> Message {
        let body = black_box(CALL.as_bytes());
        match jsonrpc::split_payload(body).expect("payload") {
            jsonrpc::Payload::Single(text) => jsonrpc::decode(text).expect("decode"),
            jsonrpc::Payload::Batch(_) => unreachable!("one message"),
        }
    }

    /// An upstream's answer decoded.
    #[divan::bench]
    fn decode_response() -> Message {
        jsonrpc::decode(black_box(ANSWER)).expect("decode")
    }

    /// The upstream's answer decoded and encoded again under the client's id, the id
    /// rewrite every proxied answer goes through.
    #[divan::bench]
    fn rewrite_id(bencher: Bencher) {
        let client_id = Id::number(42);
        bencher.bench_local(|| {
            let Message::Response(mut response) = jsonrpc::decode(black_box(ANSWER)).expect("decode") else {
                unreachable!("a response")
            };
            response.id = client_id.clone();
            jsonrpc::encode(&Message::Response(response))
        });
    }
}

mod sanitiser {
    use super::*;

    const CLEAN: &str = "Invalid arguments: `message` must be a string";
    const DIRTY: &str = "Traceback (most recent call last):\n  File \"/srv/app/tools/echo.py\", line 41, in call\n    \
        resp = requests.get('https://admin:hunter2@db.internal.corp:5432/q?token=sk-live-4f9a8b7c6d5e4f3a2b1c')\n  \
        File \"/usr/lib/python3.12/site-packages/requests/api.py\", line 73, in get\nConnectionError: \
        HTTPConnectionPool(host='10.2.3.4', port=5432): Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln";

    /// An upstream error message with nothing to redact.
    #[divan::bench]
    fn clean() -> String {
        seawall::sanitize::text(black_box(CLEAN))
    }

    /// A traceback with paths, a URL with credentials, an internal host and a token.
    #[divan::bench]
    fn dirty() -> String {
        seawall::sanitize::text(black_box(DIRTY))
    }

    /// The same, scrubbed only (an `isError` result's text keeps its length).
    #[divan::bench]
    fn dirty_scrub_only() -> String {
        seawall::sanitize::scrub(black_box(DIRTY))
    }
}

mod resilience {
    use super::*;

    /// One call on the breakers: the upstream's and the tool's looked up, both admit
    /// the call, and both record its success.
    #[divan::bench]
    fn breakers_admit_and_record(bencher: Bencher) {
        let breakers = Breakers::new();
        let cfg = BreakerConfig::default();
        let (upstream, tool): (Arc<str>, Arc<str>) = (Arc::from("echo"), Arc::from("echo"));
        bencher.bench_local(|| {
            let up = breakers.upstream(&upstream, &cfg).try_acquire().expect("closed");
            let tool = breakers.tool(&upstream, &tool, &cfg).map(|b| b.try_acquire().expect("closed"));
            up.record(Verdict::new(Outcome::Success));
            if let Some(tool) = tool {
                tool.record(Verdict::new(Outcome::Success));
            }
        });
    }

    /// The retry budget's deposit, made for every request (seawall's settings: 10 s,
    /// 1 retry per second, 20 %).
    #[divan::bench]
    fn retry_budget_deposit(bencher: Bencher) {
        use tower::retry::budget::{Budget, TpsBudget};
        let budget = TpsBudget::new(Duration::from_secs(10), 1, 0.2);
        bencher.bench_local(|| budget.deposit());
    }

    /// A deposit and a withdrawal, as a request that is retried once.
    #[divan::bench]
    fn retry_budget_deposit_withdraw(bencher: Bencher) {
        use tower::retry::budget::{Budget, TpsBudget};
        let budget = TpsBudget::new(Duration::from_secs(10), 1, 0.2);
        bencher.bench_local(|| {
            budget.deposit();
            budget.withdraw()
        });
    }
}

mod metrics {
    use super::*;
    use seawall::telemetry::metrics;

    /// What one answered `tools/call` records: the upstream request (counter,
    /// histogram, recent series) and the client request (counter, histogram), in the
    /// Prometheus recorder.
    #[divan::bench]
    fn record_one_call(bencher: Bencher) {
        install_recorder();
        bencher.bench_local(|| {
            metrics::request(black_box("echo"), "tools/call", "echo", "ok", Duration::from_micros(250));
            metrics::client_request(black_box("tools/call"), "ok", Duration::from_micros(300));
        });
    }

    fn install_recorder() {
        static INSTALLED: std::sync::Once = std::sync::Once::new();
        INSTALLED.call_once(|| {
            let _ = metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder();
        });
    }
}
