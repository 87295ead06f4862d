use std::fmt;

/// A problem that stops reading a capture file at a given byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureError {
    pub path: String,
    /// Byte offset in the (decompressed) stream where the problem was found.
    pub offset: u64,
    pub message: String,
}

impl CaptureError {
    pub fn new(path: &str, offset: u64, message: impl Into<String>) -> Self {
        Self {
            path: path.to_string(),
            offset,
            message: message.into(),
        }
    }
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: byte offset {}: {}",
            self.path, self.offset, self.message
        )
    }
}

impl std::error::Error for CaptureError {}

/// A problem the reader worked around; reading went on (or ended cleanly).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub path: String,
    pub offset: u64,
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: byte offset {}: {}",
            self.path, self.offset, self.message
        )
    }
}
