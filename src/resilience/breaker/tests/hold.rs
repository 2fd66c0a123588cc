//! The operator's holds: forced open, forced closed, reset.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::advance;
use tower::ServiceExt;

use super::{FAILURE, SUCCESS, call, cfg, result, stack, transport_error};
use crate::call::GatewayError;
use crate::resilience::breaker::transition::{Listener, Reason};
use crate::resilience::breaker::{Breaker, BreakerKey, Breakers, Hold, State};

fn isolated(reason: &str) -> Option<Hold> {
    Some(Hold::Open { reason: Arc::from(reason) })
}

fn watched() -> (Arc<Breaker>, Arc<Mutex<Vec<State>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let listener: Listener = Arc::new(move |_: &BreakerKey, state| log.lock().unwrap().push(state));
    let key = BreakerKey { upstream: Arc::from("u"), tool: Some(Arc::from("t")) };
    (Breaker::new(key, cfg(), Some(listener)), seen)
}

#[tokio::test(start_paused = true)]
async fn held_open_it_refuses_and_never_half_opens_until_reset() {
    let (b, seen) = watched();
    let before = b.try_acquire().unwrap();
    assert_eq!(b.force(isolated("maintenance")), State::Closed);
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.isolation().as_deref(), Some("maintenance"));
    // A call admitted before the hold says nothing now.
    before.record(SUCCESS);
    advance(cfg().max_break * 100).await;
    assert_eq!(b.state(), State::Open, "no break ends a hold");
    assert!(b.try_acquire().is_err());
    let snapshot = b.snapshot();
    assert_eq!(snapshot.reason, Some(Reason::ForcedOpen));
    assert_eq!(snapshot.retry_in, None);
    assert_eq!(snapshot.hold, isolated("maintenance"));

    assert_eq!(b.force(None), State::Open);
    assert_eq!((b.state(), b.hold(), b.isolation()), (State::Closed, None, None));
    assert_eq!(b.snapshot().opens, 0);
    assert_eq!(*seen.lock().unwrap(), [State::Open, State::Closed], "each change of state is reported once");
    // Back to the automatic rules: failures open it again.
    for _ in 0..3 {
        b.try_acquire().unwrap().record(FAILURE);
    }
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.snapshot().reason, Some(Reason::ConsecutiveFailures));
}

#[tokio::test(start_paused = true)]
async fn held_closed_no_failure_opens_it() {
    let (b, seen) = watched();
    assert_eq!(b.force(Some(Hold::Closed)), State::Closed);
    for _ in 0..50 {
        b.try_acquire().unwrap().record(FAILURE);
    }
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().window.failures, 50, "calls are still counted");
    assert!(seen.lock().unwrap().is_empty(), "closed to closed is no transition");
    // Closing an isolated breaker holds it closed.
    b.force(isolated("x"));
    assert_eq!(b.force(Some(Hold::Closed)), State::Open);
    assert_eq!((b.state(), b.hold()), (State::Closed, Some(Hold::Closed)));
}

#[tokio::test(start_paused = true)]
async fn an_open_breaker_closed_by_hand_forgets_its_opens() {
    let (b, _) = watched();
    for _ in 0..3 {
        b.try_acquire().unwrap().record(FAILURE);
    }
    assert_eq!(b.state(), State::Open);
    b.force(None);
    assert_eq!(b.state(), State::Closed);
    b.try_acquire().unwrap().record(SUCCESS);
    assert_eq!(b.snapshot().window.calls, 1);
}

#[tokio::test(start_paused = true)]
async fn refused_calls_carry_the_operators_reason() {
    let breakers = Arc::new(Breakers::new());
    let (svc, calls) = stack(&breakers, |_| (Duration::ZERO, result()));
    svc.clone().oneshot(call(Some("t"))).await.unwrap();
    breakers.tool(&Arc::from("u"), &Arc::from("t"), &cfg()).unwrap().force(isolated("bad deploy"));
    let err = svc.clone().oneshot(call(Some("t"))).await.unwrap_err();
    let GatewayError::CircuitOpen { tool: Some(tool), isolated: Some(reason), .. } = &err else { panic!("{err:?}") };
    assert_eq!((&**tool, &**reason), ("t", "bad deploy"));
    svc.clone().oneshot(call(Some("other"))).await.unwrap();
    svc.clone().oneshot(call(None)).await.unwrap();
    assert!(breakers.is_open("u", Some("t")));

    breakers.upstream(&Arc::from("u"), &cfg()).force(isolated("whole upstream"));
    let err = svc.clone().oneshot(call(Some("other"))).await.unwrap_err();
    let GatewayError::CircuitOpen { tool: None, isolated: Some(reason), .. } = &err else { panic!("{err:?}") };
    assert_eq!(&**reason, "whole upstream");
    assert_eq!(calls.load(Ordering::SeqCst), 3, "refused calls never reach the upstream");

    // An automatic open carries no reason.
    let breakers = Arc::new(Breakers::new());
    let (svc, _) = stack(&breakers, |_| (Duration::ZERO, transport_error()));
    for _ in 0..3 {
        let _ = svc.clone().oneshot(call(None)).await;
    }
    let err = svc.clone().oneshot(call(None)).await.unwrap_err();
    assert!(matches!(err, GatewayError::CircuitOpen { isolated: None, .. }), "{err:?}");
}
