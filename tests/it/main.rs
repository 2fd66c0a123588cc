//! seawall's integration tests: the real binary, real upstreams and real client SDKs, on
//! port 0. One test binary with one module per area, so the gateway is linked once:
//! `cargo test --test it` runs them all, `cargo test --test it chaos::` one area,
//! `cargo test --test it -- chaos::one_test --exact` one test. Helpers live in
//! [`support`].

mod access_log;
mod admin_api;
mod auth;
mod auth_jwt;
mod authz;
mod callpath;
mod chaos;
mod config_schema;
mod conformance_rounds;
mod defects;
mod deploy;
mod docs;
mod errors;
mod framing;
mod front;
mod gateway;
mod guards;
mod hostile;
mod import;
mod interop;
mod interop_sse;
mod leaks;
mod matrix;
mod metrics;
mod modern;
mod modern_upstream;
mod overrides;
mod rate_limit;
mod reload;
mod resilience;
mod resume;
mod sealed_sessions;
mod shared_breakers;
mod shutdown;
mod sse;
mod status_page;
mod stdio_client;
mod support;
mod tls_upstream;
mod tracing;
mod trusted_proxies;
