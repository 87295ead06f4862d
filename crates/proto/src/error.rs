//! The one error type shared by every parser in this crate.

use std::fmt;

/// Why a record could not be decoded.
///
/// The distinction matters to callers: `Incomplete` means "the bytes seen so
/// far are consistent, more would be needed" (a record split across TCP
/// segments, or a snaplen-truncated frame), whereas `Malformed` means the
/// bytes themselves are not a valid record and waiting will not help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// The input ended before the structure did.
    Incomplete,
    /// The input violates the wire format; the text names the field.
    Malformed(&'static str),
}

impl ParseError {
    #[inline]
    pub fn is_incomplete(&self) -> bool {
        matches!(self, ParseError::Incomplete)
    }

    /// Inside a length-delimited blob that was fully present, running out of
    /// bytes is a format violation, not a truncation.
    #[inline]
    pub(crate) fn within_blob(self, what: &'static str) -> Self {
        match self {
            ParseError::Incomplete => ParseError::Malformed(what),
            e => e,
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Incomplete => f.write_str("incomplete record"),
            ParseError::Malformed(what) => write!(f, "malformed record: {what}"),
        }
    }
}

impl std::error::Error for ParseError {}

pub type Result<T> = std::result::Result<T, ParseError>;
