//! The requests of a stateless (modern-era) session that a server may ask the client
//! something for.
//!
//! Many servers send the requests they make of the client while a call runs
//! (`sampling/createMessage`, `elicitation/create`, `roots/list`) on the session's
//! standalone stream, without saying which call they belong to. A legacy client reads
//! them on its GET stream; a modern client has none and can only be asked through the
//! `input_required` result of one of its requests. So a request of a modern client that
//! may run long (`tools/call`, `prompts/get`, `resources/read`) is noted here while it
//! runs, and a server request from the standalone stream goes to it when it is the only
//! one: with two or more, which of them the server means cannot be told, and the server
//! is answered with an error rather than one client being asked another's question.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use tokio::sync::mpsc;

/// The requests running now, each with where its messages go.
#[derive(Debug, Default)]
pub(crate) struct Askers {
    running: Mutex<Vec<(u64, mpsc::Sender<String>)>>,
    next: AtomicU64,
}

/// Where a server request from the standalone stream went.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Asked {
    /// To the one request running.
    Delivered,
    /// Nowhere: no request runs, or several do.
    Nobody,
}

impl Askers {
    /// Notes a request whose messages go to `out` until the guard drops.
    pub(crate) fn running(self: &Arc<Self>, out: mpsc::Sender<String>) -> Running {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        self.running.lock().push((number, out));
        Running { askers: Arc::clone(self), number }
    }

    /// Hands `message` (a request of the client) to the one request running.
    pub(crate) fn ask(&self, message: String) -> Asked {
        let out = {
            let running = self.running.lock();
            match running.as_slice() {
                [(_, out)] => out.clone(),
                _ => return Asked::Nobody,
            }
        };
        match out.try_send(message) {
            Ok(()) => Asked::Delivered,
            Err(_) => Asked::Nobody,
        }
    }
}

/// A request noted in [`Askers`]; dropping it takes the note away.
#[derive(Debug)]
pub(crate) struct Running {
    askers: Arc<Askers>,
    number: u64,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.askers.running.lock().retain(|(n, _)| *n != self.number);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_a_single_running_request_is_asked() {
        let askers = Arc::new(Askers::default());
        assert_eq!(askers.ask("q0".into()), Asked::Nobody);
        let (tx, mut rx) = mpsc::channel(4);
        let one = askers.running(tx);
        assert_eq!(askers.ask("q1".into()), Asked::Delivered);
        assert_eq!(rx.recv().await.as_deref(), Some("q1"));
        let (tx2, _rx2) = mpsc::channel(4);
        let two = askers.running(tx2);
        assert_eq!(askers.ask("q2".into()), Asked::Nobody);
        drop(one);
        assert_eq!(askers.ask("q3".into()), Asked::Delivered);
        drop(two);
        assert_eq!(askers.ask("q4".into()), Asked::Nobody);
    }
}
