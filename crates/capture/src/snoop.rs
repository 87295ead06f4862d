//! Solaris snoop files (RFC 1761): big-endian, 16-byte file header, 24-byte
//! record headers, records padded to 4 bytes.

use crate::error::CaptureError;
use crate::linktype;
use crate::reader::{fetch, Fetch, Record, Sink};
use crate::source::Source;
use crate::MAX_RECORD_LEN;

pub(crate) struct SnoopState {
    linktype: u32,
}

const FILE_HEADER_LEN: usize = 16;
const RECORD_HEADER_LEN: usize = 24;

/// snoop datalink codes (RFC 1761 section 4) to LINKTYPE_* values.
fn map_datalink(code: u32) -> Option<u32> {
    match code {
        0 | 4 => Some(linktype::ETHERNET), // IEEE 802.3, Ethernet
        8 => Some(linktype::FDDI),
        _ => None,
    }
}

fn be32(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

impl SnoopState {
    pub(crate) fn open(src: &mut Source, path: &str) -> Result<Self, CaptureError> {
        let avail = src
            .fill(FILE_HEADER_LEN)
            .map_err(|e| CaptureError::new(path, 0, format!("read error: {e}")))?;
        if avail < FILE_HEADER_LEN {
            return Err(CaptureError::new(
                path,
                avail as u64,
                format!("snoop file header truncated ({avail} of 16 bytes)"),
            ));
        }
        let w = src.window();
        let version = be32(w, 8);
        if version != 2 {
            return Err(CaptureError::new(
                path,
                8,
                format!("unsupported snoop version {version} (only 2 is defined)"),
            ));
        }
        let code = be32(w, 12);
        let linktype = map_datalink(code).ok_or_else(|| {
            CaptureError::new(path, 12, format!("unsupported snoop datalink type {code}"))
        })?;
        src.consume(FILE_HEADER_LEN);
        Ok(SnoopState { linktype })
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
        let offset = src.offset();
        match fetch(src, path, RECORD_HEADER_LEN, "snoop record header", sink)? {
            Fetch::Ready(_) => {}
            Fetch::End => return Ok(None),
        }
        let w = src.window();
        let orig_len = be32(w, 0);
        let incl_len = be32(w, 4) as usize;
        let rec_len = be32(w, 8) as usize;
        let ts_sec = be32(w, 16) as i64;
        let ts_usec = be32(w, 20) as i64;
        if rec_len > MAX_RECORD_LEN || rec_len < RECORD_HEADER_LEN + incl_len {
            return Err(CaptureError::new(
                path,
                offset,
                format!(
                    "snoop record length {rec_len} does not hold its {incl_len} captured bytes"
                ),
            ));
        }
        match fetch(src, path, rec_len, "snoop record", sink)? {
            Fetch::Ready(_) => {}
            Fetch::End => return Ok(None),
        }
        let rec = Record {
            buf_index: src.pos() + RECORD_HEADER_LEN,
            len: incl_len,
            ts_ns: ts_sec * 1_000_000_000 + ts_usec * 1000,
            linktype: self.linktype,
            interface: 0,
            orig_len,
            offset,
        };
        src.consume(rec_len);
        Ok(Some(rec))
    }
}
