//! What broke an upstream connection, kept as the error's source.

use std::sync::Arc;

/// What broke a connection: the error itself, kept as the [`source`](std::error::Error::source)
/// so that its kind and chain stay readable, and the words a log line shows of it (its
/// chain, without a URL, which may hold credentials).
#[derive(Debug, Clone)]
pub(crate) struct Cause {
    text: Arc<str>,
    error: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl Cause {
    /// The cause `error`, shown as its chain of sources.
    pub(crate) fn of(error: impl std::error::Error + Send + Sync + 'static) -> Cause {
        Cause::described(chain(&error), error)
    }

    /// The cause `error`, shown as `text` (for errors whose own words hold what a log must
    /// not, such as a URL).
    pub(crate) fn described(text: impl Into<Arc<str>>, error: impl std::error::Error + Send + Sync + 'static) -> Cause {
        Cause { text: text.into(), error: Some(Arc::new(error)) }
    }

    /// A cause seawall observed itself (a stream that closed, a connect that timed out),
    /// with no error behind it.
    pub(crate) fn seen(text: impl Into<Arc<str>>) -> Cause {
        Cause { text: text.into(), error: None }
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<&str> for Cause {
    fn from(text: &str) -> Cause {
        Cause::seen(text)
    }
}

impl From<String> for Cause {
    fn from(text: String) -> Cause {
        Cause::seen(text)
    }
}

/// An error and its sources, one after the other.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
