//! Why an HTTP/1.1 message could not be read, and the bounds on what is read of one.

/// Longest answer head (status line and fields) read from an upstream.
pub(crate) const MAX_HEAD: usize = 64 * 1024;
/// Most header fields in an answer head.
pub(crate) const MAX_HEADERS: usize = 100;
/// Longest chunk-size line (the size and any extensions).
pub(super) const MAX_LINE: usize = 1024;

/// Why an HTTP/1.1 message could not be read: an upstream's answer, or a client's
/// request body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProtocolError {
    /// The head is not a valid HTTP/1.x response head.
    #[error("invalid HTTP response head: {0}")]
    Head(&'static str),
    /// The head is longer than [`MAX_HEAD`] bytes.
    #[error("HTTP response head longer than {MAX_HEAD} bytes")]
    HeadTooLong,
    /// The body's framing is contradictory or unreadable.
    #[error("invalid HTTP response framing: {0}")]
    Framing(&'static str),
    /// A chunk of a `chunked` body is malformed.
    #[error("invalid chunked body: {0}")]
    Chunk(&'static str),
    /// The connection closed before the end of the answer.
    #[error("the connection closed before the end of the answer")]
    Truncated,
}

/// Most interim (1xx) answers taken before the final one.
pub(crate) const MAX_INTERIM: usize = 8;
