//! Streaming capture readers: classic pcap, pcapng and Solaris snoop, plain or
//! gzip/zstd compressed, from files or standard input, and several files merged
//! in timestamp order.
//!
//! The reader is a *lending* cursor: [`CaptureReader::advance`] moves to the
//! next packet and [`CaptureReader::packet`] borrows it from the read buffer, so
//! the hot path never copies or allocates per packet. Records are read through
//! one large buffer (no mmap: a capture appliance may truncate a file while we
//! read it, which would turn an mmap into SIGBUS).

mod error;
mod format;
pub mod linktype;
mod merge;
mod pcap;
mod pcapng;
mod reader;
mod snoop;
mod source;
pub mod writer;

pub use error::{CaptureError, Warning};
pub use format::{Compression, FileFormat};
pub use merge::MergedReader;
pub use reader::{CaptureInfo, CaptureReader};
pub use source::Shared;

/// One captured packet, borrowed from the reader's buffer.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    /// Capture time, nanoseconds since the Unix epoch.
    pub ts_ns: i64,
    /// LINKTYPE_* value (see [`linktype`]).
    pub linktype: u32,
    /// Interface index within the file (pcapng); 0 for pcap and snoop.
    pub interface: u32,
    /// Length of the packet on the wire (may exceed `data.len()` when the
    /// capture was snaplen-truncated).
    pub orig_len: u32,
    /// Captured bytes.
    pub data: &'a [u8],
    /// Byte offset of the record in the (decompressed) capture stream.
    pub offset: u64,
}

/// Upper bound for one record or block; larger lengths are treated as
/// corruption rather than honoured with an allocation.
pub const MAX_RECORD_LEN: usize = 64 * 1024 * 1024;
