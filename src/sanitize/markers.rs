//! The fixed texts the sanitiser writes in place of what it removes.
//!
//! A leaf: the pipeline, the byte helpers and every detector read them from here.

/// Replaces a credential or anything too risky to show.
pub(super) const MARK_REDACTED: &str = "[redacted]";
/// Replaces a key block that something follows without a separator: the space keeps
/// what follows a word of its own, as it was next to the block's dashes.
pub(super) const MARK_REDACTED_SPACED: &str = "[redacted] ";
/// Replaces an absolute file system path.
pub(super) const MARK_PATH: &str = "[path]";
/// Replaces a URL.
pub(super) const MARK_URL: &str = "[url]";
/// Replaces an IP address, `host:port`, or an internal host name.
pub(super) const MARK_HOST: &str = "[host]";
/// Stands for a stack trace that had no headline to keep.
pub(super) const MARK_TRACE: &str = "[trace]";
/// Every marker; a value that already is one is left alone.
pub(super) const MARKERS: [&str; 5] = [MARK_REDACTED, MARK_PATH, MARK_URL, MARK_HOST, MARK_TRACE];
/// Ends a text that was cut.
pub(super) const ELLIPSIS: &str = "...";
