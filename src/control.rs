//! What an operator asks of a running gateway besides requests: configuration reloads
//! (from SIGHUP, a change of the file, or the admin API), served by `app::reload`.

use tokio::sync::{mpsc, oneshot};

/// What a reload did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub(crate) struct Reloaded {
    /// Upstreams added.
    pub(crate) added: Vec<String>,
    /// Upstreams removed.
    pub(crate) removed: Vec<String>,
    /// Upstreams reached in a new way (new connections or processes).
    pub(crate) reconnected: Vec<String>,
    /// Upstreams with new settings over the same connections.
    pub(crate) reconfigured: Vec<String>,
    /// Sections changed in the file that keep their values until a restart.
    pub(crate) need_restart: Vec<&'static str>,
}

/// How a reload went: what it did, or why it left the configuration in force alone
/// (the outcome's metric label — `invalid`, `refused` or `failed` — and the message).
pub(crate) type Outcome = Result<Reloaded, (&'static str, String)>;

/// One request for a reload: what asked for it, and where its outcome goes.
pub(crate) struct Trigger {
    cause: &'static str,
    reply: Option<oneshot::Sender<Outcome>>,
}

/// Asks for reloads (the admin API holds one).
#[derive(Clone)]
pub(crate) struct Reloads(mpsc::Sender<Trigger>);

impl Reloads {
    /// Reloads now and returns the outcome: what changed, or why nothing did (`None`
    /// when reloading is not running).
    pub(crate) async fn reload(&self, cause: &'static str) -> Option<Outcome> {
        let (reply, outcome) = oneshot::channel();
        self.0.send(Trigger { cause, reply: Some(reply) }).await.ok()?;
        outcome.await.ok()
    }

    /// Asks for a reload without waiting for it; one already asked for and not started
    /// covers this one too.
    pub(crate) fn ask(&self, cause: &'static str) {
        let _ = self.0.try_send(Trigger { cause, reply: None });
    }
}

impl Trigger {
    /// What asked for the reload.
    pub(crate) fn cause(&self) -> &'static str {
        self.cause
    }

    /// Tells whoever asked how it went.
    pub(crate) fn answer(self, outcome: Outcome) {
        if let Some(reply) = self.reply {
            let _ = reply.send(outcome);
        }
    }
}

/// The channel of reload requests: the handle to ask with, and the receiving end the
/// reloader serves.
pub(crate) fn channel() -> (Reloads, mpsc::Receiver<Trigger>) {
    let (tx, rx) = mpsc::channel(8);
    (Reloads(tx), rx)
}
