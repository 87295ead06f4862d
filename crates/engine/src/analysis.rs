//! What an analysis run produces.

use arrow_array::RecordBatch;

use crate::conversations::ConversationTable;
use crate::tables;

/// Per-input-file facts.
#[derive(Debug, Clone, Default)]
pub struct CaptureSummary {
    pub path: String,
    /// "pcap", "pcapng" or "snoop".
    pub format: String,
    pub format_description: String,
    /// "none", "gzip" or "zstd".
    pub compression: String,
    pub link_types: Vec<String>,
    pub frames: u64,
    /// Sum of frame lengths on the wire.
    pub bytes: u64,
    /// Sum of captured lengths.
    pub captured_bytes: u64,
    pub first_ts: Option<i64>,
    pub last_ts: Option<i64>,
    /// Frames cut by the snaplen (captured < wire length).
    pub truncated_frames: u64,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolCount {
    pub protocol: String,
    pub frames: u64,
    pub bytes: u64,
}

/// The result of [`crate::analyze`].
pub struct Analysis {
    pub captures: Vec<CaptureSummary>,
    pub protocols: Vec<ProtocolCount>,
    pub warnings: Vec<String>,
    pub frames: u64,
    pub(crate) conversations: ConversationTable,
}

impl Analysis {
    /// Names of the tables this analysis can produce.
    pub fn table_names(&self) -> Vec<&'static str> {
        vec!["conversations"]
    }

    /// Build a table by name (None for an unknown name).
    pub fn table(&self, name: &str) -> Option<RecordBatch> {
        match name {
            "conversations" => Some(tables::conversations(&self.conversations)),
            _ => None,
        }
    }

    pub fn conversations(&self) -> &ConversationTable {
        &self.conversations
    }
}
