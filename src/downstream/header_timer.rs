//! The timer behind the header-read timeout of client connections (HTTP/1).
//!
//! hyper arms that timeout anew for every request a connection reads. With tokio's timer,
//! each arming registers a timer that is often the earliest of its runtime, and tokio then
//! wakes the runtime's driver through its eventfd, even when the arming thread is the
//! runtime's own and about to poll anyway: on a worker's single-threaded runtime, one
//! `write` and one spurious `epoll_wait` return per proxied call. A header-read timeout
//! needs no precision finer than a tenth of a second, so here a sleep is an entry in one
//! table that a thread of its own looks at every [`TICK`], waking those whose deadline
//! passed: arming one costs an allocation and a push under a lock, and no system call.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::task::AtomicWaker;
use hyper::rt::{Sleep, Timer};
use parking_lot::Mutex;

/// How often the table is looked at: a deadline fires at most this late.
const TICK: Duration = Duration::from_millis(100);

/// The hyper [`Timer`] of client connections' header-read timeouts.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HeaderTimer;

impl Timer for HeaderTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        self.sleep_until(Instant::now() + duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        Box::pin(CoarseSleep::new(deadline))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<CoarseSleep>() {
            Some(mut sleep) => sleep.as_mut().get_mut().reset(new_deadline),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

/// What a sleep and the ticking thread share.
struct Shared {
    /// The deadline, in nanoseconds after [`base`].
    deadline: AtomicU64,
    fired: AtomicBool,
    waker: AtomicWaker,
}

/// A sleep until a deadline, woken by the ticking thread.
pub(crate) struct CoarseSleep {
    shared: Arc<Shared>,
    deadline: Instant,
    /// Whether the table holds it (from its first pending poll).
    listed: bool,
}

impl CoarseSleep {
    fn new(deadline: Instant) -> CoarseSleep {
        let shared = Shared {
            deadline: AtomicU64::new(nanos(deadline)),
            fired: AtomicBool::new(false),
            waker: AtomicWaker::new(),
        };
        CoarseSleep { shared: Arc::new(shared), deadline, listed: false }
    }

    fn reset(&mut self, deadline: Instant) {
        self.deadline = deadline;
        self.shared.deadline.store(nanos(deadline), Ordering::Release);
        // Fired or not, it is due at its new deadline; once fired, the table let it go.
        if self.shared.fired.swap(false, Ordering::AcqRel) {
            self.listed = false;
        }
    }
}

impl Future for CoarseSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.shared.fired.load(Ordering::Acquire) || Instant::now() >= this.deadline {
            return Poll::Ready(());
        }
        this.shared.waker.register(cx.waker());
        if !this.listed {
            this.listed = true;
            table().lock().push(Arc::downgrade(&this.shared));
        }
        Poll::Pending
    }
}

impl Sleep for CoarseSleep {}

/// The sleeps waiting, started with its ticking thread on first use.
fn table() -> &'static Mutex<Vec<Weak<Shared>>> {
    static TABLE: OnceLock<Mutex<Vec<Weak<Shared>>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let spawned = std::thread::Builder::new().name("seawall-timer".into()).spawn(|| {
            loop {
                std::thread::sleep(TICK);
                tick(table());
            }
        });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "the header-read timer thread did not start: header-read timeouts will not fire");
        }
        Mutex::new(Vec::new())
    })
}

/// Wakes the sleeps past their deadline and lets go of them and of those dropped.
fn tick(table: &Mutex<Vec<Weak<Shared>>>) {
    let now = nanos(Instant::now());
    let mut due = Vec::new();
    table.lock().retain(|entry| {
        let Some(shared) = entry.upgrade() else { return false };
        if shared.deadline.load(Ordering::Acquire) > now {
            return true;
        }
        shared.fired.store(true, Ordering::Release);
        due.push(shared);
        false
    });
    // Woken outside the lock.
    for shared in due {
        shared.waker.wake();
    }
}

/// The instant nanoseconds are counted from.
fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

fn nanos(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(base()).as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_sleep_ends_near_its_deadline_not_before() {
        let start = Instant::now();
        HeaderTimer.sleep(Duration::from_millis(250)).await;
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(250), "{took:?}");
        assert!(took < Duration::from_millis(250) + 10 * TICK, "{took:?}");
    }

    #[tokio::test]
    async fn a_reset_moves_the_deadline_both_ways() {
        let timer = HeaderTimer;
        let mut sleep = timer.sleep(Duration::from_secs(3600));
        assert!(futures::poll!(sleep.as_mut()).is_pending());
        let start = Instant::now();
        timer.reset(&mut sleep, Instant::now() + Duration::from_millis(200));
        sleep.as_mut().await;
        assert!(start.elapsed() < Duration::from_secs(3), "brought forward: {:?}", start.elapsed());
        // Fired, then reset to a later deadline: due again, not at once.
        timer.reset(&mut sleep, Instant::now() + Duration::from_millis(300));
        assert!(futures::poll!(sleep.as_mut()).is_pending());
        let again = Instant::now();
        sleep.as_mut().await;
        assert!(again.elapsed() >= Duration::from_millis(300), "{:?}", again.elapsed());
    }

    #[test]
    fn the_table_lets_go_of_dropped_and_fired_sleeps() {
        let table = Mutex::new(Vec::new());
        let kept = CoarseSleep::new(Instant::now() + Duration::from_secs(3600));
        let dropped = CoarseSleep::new(Instant::now() + Duration::from_secs(3600));
        let due = CoarseSleep::new(Instant::now());
        for sleep in [&kept, &dropped, &due] {
            table.lock().push(Arc::downgrade(&sleep.shared));
        }
        drop(dropped);
        tick(&table);
        assert_eq!(table.lock().len(), 1, "only the pending one is left");
        assert!(due.shared.fired.load(Ordering::Acquire));
        assert!(!kept.shared.fired.load(Ordering::Acquire));
    }
}
