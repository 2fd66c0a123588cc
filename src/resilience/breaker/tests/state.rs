//! The state machine alone.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::advance;

use super::{FAILURE, SUCCESS, assert_jittered, cfg};
use crate::config::BreakerConfig;
use crate::resilience::breaker::classify::Verdict;
use crate::resilience::breaker::state::Breaker;
use crate::resilience::breaker::{BreakerKey, State};

fn breaker(cfg: BreakerConfig) -> Arc<Breaker> {
    Breaker::new(BreakerKey { upstream: Arc::from("u"), tool: None }, cfg, None)
}

fn record(b: &Arc<Breaker>, verdicts: &[Verdict]) {
    for v in verdicts {
        b.try_acquire().unwrap().record(*v);
    }
}

/// Opens `b` by consecutive failures; returns the break.
fn open(b: &Arc<Breaker>) -> Duration {
    record(b, &[FAILURE, FAILURE, FAILURE]);
    assert_eq!(b.state(), State::Open);
    b.try_acquire().unwrap_err()
}

#[tokio::test(start_paused = true)]
async fn failures_further_apart_than_the_window_are_no_run() {
    let b = breaker(BreakerConfig { failure_rate: 1.1, ..cfg() });
    for _ in 0..5 {
        record(&b, &[FAILURE]);
        advance(cfg().window + Duration::from_secs(1)).await;
    }
    assert_eq!(b.state(), State::Closed, "five failures, each alone in its window");
    record(&b, &[FAILURE, FAILURE, FAILURE]);
    assert_eq!(b.state(), State::Open, "three within the window are a run");
}

#[tokio::test(start_paused = true)]
async fn opens_after_consecutive_failures() {
    // A failure rate above 100% never opens it: only the consecutive count does.
    let b = breaker(BreakerConfig { failure_rate: 1.1, ..cfg() });
    record(&b, &[FAILURE, FAILURE, SUCCESS, FAILURE, FAILURE]);
    assert_eq!(b.state(), State::Closed, "a success resets the count");
    record(&b, &[FAILURE]);
    assert_eq!(b.state(), State::Open);
    assert_jittered(b.try_acquire().unwrap_err(), Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn failure_rate_opens_only_after_min_calls() {
    let b = breaker(BreakerConfig { consecutive_failures: 0, ..cfg() });
    record(&b, &[FAILURE, FAILURE, FAILURE]);
    assert_eq!(b.state(), State::Closed, "100% of 3 calls, but min_calls is 4");
    record(&b, &[FAILURE]);
    assert_eq!(b.state(), State::Open);

    let b = breaker(BreakerConfig { consecutive_failures: 0, ..cfg() });
    record(&b, &[SUCCESS, FAILURE, SUCCESS, SUCCESS, FAILURE]);
    assert_eq!(b.state(), State::Closed, "2 failures in 5 calls is under 50%");
    record(&b, &[FAILURE]);
    assert_eq!(b.state(), State::Open, "3 in 6 is 50%");
}

#[tokio::test(start_paused = true)]
async fn old_calls_leave_the_window() {
    let b = breaker(BreakerConfig { consecutive_failures: 0, ..cfg() });
    record(&b, &[FAILURE, FAILURE, FAILURE]);
    advance(Duration::from_secs(11)).await;
    record(&b, &[SUCCESS, SUCCESS, SUCCESS, FAILURE]);
    assert_eq!(b.state(), State::Closed, "1 failure in the 4 calls of the window");
}

#[tokio::test(start_paused = true)]
async fn slow_call_rate_opens() {
    let b = breaker(cfg());
    let slow = Verdict { slow: true, ..SUCCESS };
    record(&b, &[SUCCESS, SUCCESS, slow]);
    assert_eq!(b.state(), State::Closed);
    record(&b, &[slow]);
    assert_eq!(b.state(), State::Open, "2 slow calls in 4 is 50%");
}

#[tokio::test(start_paused = true)]
async fn half_open_admits_exactly_the_configured_probes() {
    let b = breaker(cfg());
    let pause = open(&b);
    advance(pause).await;
    let first = b.try_acquire().unwrap();
    let second = b.try_acquire().unwrap();
    assert!(first.is_probe() && second.is_probe());
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(b.try_acquire().unwrap_err(), cfg().probe_timeout, "a third concurrent probe is refused");
    drop(first);
    let third = b.try_acquire().expect("a dropped probe frees its slot");
    assert_eq!(b.state(), State::HalfOpen, "an ignored probe decides nothing");
    drop((second, third));
}

#[tokio::test(start_paused = true)]
async fn probe_success_closes_and_resets_the_break() {
    let b = breaker(cfg());
    let pause = open(&b);
    advance(pause).await;
    let other = b.try_acquire().unwrap();
    b.try_acquire().unwrap().record(SUCCESS);
    assert_eq!(b.state(), State::Closed);
    other.record(FAILURE);
    record(&b, &[FAILURE, FAILURE]);
    assert_eq!(b.state(), State::Closed, "a probe of the half-open period no longer counts");
    record(&b, &[FAILURE]);
    assert_eq!(b.state(), State::Open);
    assert_jittered(b.try_acquire().unwrap_err(), Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn probe_failure_reopens_with_a_doubled_break_up_to_max_break() {
    let b = breaker(cfg());
    let mut pause = open(&b);
    assert_jittered(pause, Duration::from_secs(1));
    for expected in [2, 4, 4, 4] {
        advance(pause).await;
        b.try_acquire().unwrap().record(FAILURE);
        assert_eq!(b.state(), State::Open);
        pause = b.try_acquire().unwrap_err();
        assert_jittered(pause, Duration::from_secs(expected));
        assert!(pause <= cfg().max_break);
    }
}

#[tokio::test(start_paused = true)]
async fn a_probe_slower_than_probe_timeout_fails() {
    let b = breaker(cfg());
    let pause = open(&b);
    advance(pause).await;
    let probe = b.try_acquire().unwrap();
    advance(Duration::from_millis(600)).await;
    probe.record(SUCCESS);
    assert_eq!(b.state(), State::Open);
    assert_jittered(b.try_acquire().unwrap_err(), Duration::from_secs(2));
}

#[tokio::test(start_paused = true)]
async fn calls_started_before_a_transition_are_not_counted() {
    let b = breaker(cfg());
    let old = b.try_acquire().unwrap();
    let pause = open(&b);
    advance(pause).await;
    old.record(SUCCESS);
    assert_eq!(b.state(), State::HalfOpen, "only a probe may close the breaker");
}

#[tokio::test(start_paused = true)]
async fn every_transition_is_reported() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let listener: crate::resilience::breaker::transition::Listener =
        Arc::new(move |key: &BreakerKey, state| log.lock().unwrap().push((key.to_string(), state)));
    let key = BreakerKey { upstream: Arc::from("u"), tool: Some(Arc::from("t")) };
    let b = Breaker::new(key, cfg(), Some(listener));
    let pause = open(&b);
    assert!(b.is_open());
    advance(pause).await;
    assert!(!b.is_open(), "half-open is not open");
    record(&b, &[SUCCESS]);
    let seen = seen.lock().unwrap().clone();
    let expected = [State::Open, State::HalfOpen, State::Closed].map(|s| ("u/t".to_owned(), s));
    assert_eq!(seen, expected);
}

#[tokio::test(start_paused = true)]
async fn a_snapshot_keeps_the_counts_that_opened_the_breaker() {
    use crate::resilience::breaker::transition::Reason;
    use crate::resilience::breaker::{Breakers, Totals};

    let b = breaker(BreakerConfig { consecutive_failures: 0, ..cfg() });
    let fresh = b.snapshot();
    assert_eq!((fresh.state, fresh.reason, fresh.tripped), (State::Closed, None, None));
    record(&b, &[SUCCESS, FAILURE, SUCCESS]);
    advance(Duration::from_secs(2)).await;
    let closed = b.snapshot();
    assert_eq!(closed.window, Totals { calls: 3, failures: 1, slow: 0 });
    assert_eq!((closed.consecutive_failures, closed.in_state), (0, Duration::from_secs(2)));

    record(&b, &[FAILURE]);
    advance(Duration::from_millis(300)).await;
    let open = b.snapshot();
    assert_eq!((open.state, open.reason, open.opens), (State::Open, Some(Reason::FailureRate), 1));
    assert_eq!(open.window, Totals::default(), "an open breaker counts nothing");
    assert_eq!(open.in_state, Duration::from_millis(300));
    let tripped = open.tripped.unwrap();
    assert_eq!(tripped.reason, Reason::FailureRate);
    assert_eq!(tripped.window, Totals { calls: 4, failures: 2, slow: 0 }, "the opening call included");
    assert_eq!((tripped.consecutive_failures, tripped.ago), (1, Duration::from_millis(300)));
    let retry_in = open.retry_in.unwrap();
    assert_jittered(retry_in + Duration::from_millis(300), Duration::from_secs(1));

    // Half-open after the break; a failed probe reopens it without a new trip from closed.
    advance(retry_in).await;
    let half = b.snapshot();
    assert_eq!((half.state, half.reason, half.retry_in), (State::HalfOpen, Some(Reason::BreakElapsed), None));
    record(&b, &[FAILURE]);
    let reopened = b.snapshot();
    assert_eq!((reopened.state, reopened.reason, reopened.opens), (State::Open, Some(Reason::ProbeFailed), 2));
    assert_eq!(reopened.tripped.map(|t| t.window), Some(tripped.window));

    // The registry reads every breaker, or one upstream's.
    let all = Breakers::new();
    let u: Arc<str> = Arc::from("u");
    let v: Arc<str> = Arc::from("v");
    all.upstream(&u, &cfg());
    all.tool(&u, &Arc::from("t"), &cfg());
    all.upstream(&v, &cfg());
    let mut seen = Vec::new();
    all.for_each_snapshot(None, |key, s| seen.push((key.to_string(), s.state)));
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(seen, [("u".into(), State::Closed), ("u/t".into(), State::Closed), ("v".into(), State::Closed)]);
    let mut only_u = 0;
    all.for_each_snapshot(Some("u"), |key, _| only_u += usize::from(&*key.upstream == "u"));
    assert_eq!(only_u, 2);
    all.for_each_snapshot(Some("nobody"), |_, _| panic!("no breakers"));
}
