//! Classic libpcap files. The header and records are decoded here rather
//! than with `pcap-parser`, whose parsers know neither the big-endian
//! modified (Kuznetsov) magic nor big-endian 24-byte modified records.

use crate::error::CaptureError;
use crate::format::FileFormat;
use crate::reader::{fetch, Fetch, Record, Sink};
use crate::source::Source;
use crate::MAX_RECORD_LEN;

pub(crate) struct PcapState {
    big_endian: bool,
    nanosecond: bool,
    modified: bool,
    linktype: u32,
    pub(crate) format: FileFormat,
}

const FILE_HEADER_LEN: usize = 24;
const MAGIC_USEC: u32 = 0xa1b2_c3d4;
const MAGIC_NSEC: u32 = 0xa1b2_3c4d;
const MAGIC_MODIFIED: u32 = 0xa1b2_cd34;

impl PcapState {
    pub(crate) fn open(src: &mut Source, path: &str) -> Result<Self, CaptureError> {
        let avail = src
            .fill(FILE_HEADER_LEN)
            .map_err(|e| CaptureError::new(path, 0, format!("read error: {e}")))?;
        if avail < FILE_HEADER_LEN {
            return Err(CaptureError::new(
                path,
                avail as u64,
                format!("pcap file header truncated ({avail} of 24 bytes)"),
            ));
        }
        let w = src.window();
        let magic_le = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        let (big_endian, magic) = match magic_le {
            MAGIC_USEC | MAGIC_NSEC | MAGIC_MODIFIED => (false, magic_le),
            m if matches!(m.swap_bytes(), MAGIC_USEC | MAGIC_NSEC | MAGIC_MODIFIED) => {
                (true, m.swap_bytes())
            }
            _ => return Err(CaptureError::new(path, 0, "invalid pcap file header")),
        };
        let u16_at = |i: usize| {
            let b = [w[i], w[i + 1]];
            if big_endian {
                u16::from_be_bytes(b)
            } else {
                u16::from_le_bytes(b)
            }
        };
        let u32_at = |i: usize| {
            let b = [w[i], w[i + 1], w[i + 2], w[i + 3]];
            if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let (version_major, version_minor) = (u16_at(4), u16_at(6));
        if version_major != 2 {
            return Err(CaptureError::new(
                path,
                4,
                format!(
                    "unsupported pcap version {version_major}.{version_minor} (only 2.x exists)"
                ),
            ));
        }
        let network = u32_at(20);
        // Bits 16..25 of the link-type field are reserved and must be zero
        // (the upper bits carry the FCS length).
        if network & 0x03FF_0000 != 0 {
            return Err(CaptureError::new(
                path,
                20,
                format!("link-type field 0x{network:08x} has reserved bits set"),
            ));
        }
        let modified = magic == MAGIC_MODIFIED;
        let nanosecond = magic == MAGIC_NSEC;
        let state = PcapState {
            big_endian,
            nanosecond,
            modified,
            linktype: network & 0xFFFF,
            format: FileFormat::Pcap {
                big_endian,
                nanosecond,
                modified,
                version_major,
                version_minor,
            },
        };
        src.consume(FILE_HEADER_LEN);
        Ok(state)
    }

    pub(crate) fn linktype(&self) -> u32 {
        self.linktype
    }

    pub(crate) fn next(
        &mut self,
        src: &mut Source,
        path: &str,
        sink: &mut Sink,
    ) -> Result<Option<Record>, CaptureError> {
        let hdr_len = if self.modified { 24 } else { 16 };
        let offset = src.offset();
        // Nearly every record lies whole in the buffer: read it there.
        if let Some(rec) = self.buffered(src, hdr_len, offset) {
            return Ok(Some(rec));
        }
        let avail = match fetch(src, path, hdr_len, "packet record header", sink)? {
            Fetch::Ready(n) => n,
            Fetch::End => return Ok(None),
        };
        debug_assert!(avail >= hdr_len);
        let Some(h) = header(src.window()) else {
            return Ok(None); // (fetched: cannot happen)
        };
        let caplen = self.word(h, 8) as usize;
        if caplen > MAX_RECORD_LEN {
            return Err(CaptureError::new(
                path,
                offset,
                format!("packet record claims {caplen} captured bytes (corrupt record)"),
            ));
        }
        match fetch(src, path, hdr_len + caplen, "packet record", sink)? {
            Fetch::Ready(_) => {}
            Fetch::End => return Ok(None),
        }
        // (Whole in the buffer now.)
        Ok(self.buffered(src, hdr_len, offset))
    }

    /// The next record if it lies whole in the buffer and its length is
    /// plausible (else `next` reads on, and reports what is wrong).
    #[inline]
    fn buffered(&self, src: &mut Source, hdr_len: usize, offset: u64) -> Option<Record> {
        let w = src.window();
        let h = header(w)?;
        let caplen = self.word(h, 8) as usize;
        if caplen > MAX_RECORD_LEN || w.len() < hdr_len + caplen {
            return None;
        }
        let frac = if self.nanosecond {
            self.word(h, 4) as i64
        } else {
            self.word(h, 4) as i64 * 1000
        };
        let rec = Record {
            buf_index: src.pos() + hdr_len,
            len: caplen,
            ts_ns: self.word(h, 0) as i64 * 1_000_000_000 + frac,
            linktype: self.linktype,
            interface: 0,
            orig_len: self.word(h, 12),
            offset,
        };
        src.consume(hdr_len + caplen);
        Some(rec)
    }

    /// The word at `i` of a record header.
    #[inline]
    fn word(&self, h: &[u8; 16], i: usize) -> u32 {
        let b = [h[i], h[i + 1], h[i + 2], h[i + 3]];
        if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    }
}

/// The first 16 bytes of a record header (the words of every flavour), if
/// there are as many.
#[inline]
fn header(w: &[u8]) -> Option<&[u8; 16]> {
    w.get(..16)?.try_into().ok()
}
