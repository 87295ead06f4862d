//! Classic libpcap files, through `pcap-parser`'s record parsers.

use pcap_parser::pcap::{parse_pcap_frame, parse_pcap_frame_be, parse_pcap_frame_modified};
use pcap_parser::{parse_pcap_header, LegacyPcapBlock};

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
        let (_, hdr) = parse_pcap_header(src.window())
            .map_err(|_| CaptureError::new(path, 0, "invalid pcap file header"))?;
        if hdr.version_major != 2 {
            return Err(CaptureError::new(
                path,
                4,
                format!(
                    "unsupported pcap version {}.{} (only 2.x exists)",
                    hdr.version_major, hdr.version_minor
                ),
            ));
        }
        let network = hdr.network.0 as u32;
        // Bits 16..25 of the link-type field are reserved and must be zero
        // (the upper bits carry the FCS length).
        if network & 0x03FF_0000 != 0 {
            return Err(CaptureError::new(
                path,
                20,
                format!("link-type field 0x{network:08x} has reserved bits set"),
            ));
        }
        let modified = hdr.is_modified_format();
        let state = PcapState {
            big_endian: hdr.is_bigendian(),
            nanosecond: hdr.is_nanosecond_precision(),
            modified,
            linktype: network & 0xFFFF,
            format: FileFormat::Pcap {
                big_endian: hdr.is_bigendian(),
                nanosecond: hdr.is_nanosecond_precision(),
                modified,
                version_major: hdr.version_major,
                version_minor: hdr.version_minor,
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
        let avail = match fetch(src, path, hdr_len, "packet record header", sink)? {
            Fetch::Ready(n) => n,
            Fetch::End => return Ok(None),
        };
        debug_assert!(avail >= hdr_len);
        let w = src.window();
        let word = |i: usize| {
            let b = [w[i], w[i + 1], w[i + 2], w[i + 3]];
            if self.big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let caplen = word(8) as usize;
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
        let window = src.window();
        let parsed = if self.modified {
            parse_pcap_frame_modified(window)
        } else if self.big_endian {
            parse_pcap_frame_be(window)
        } else {
            parse_pcap_frame(window)
        };
        let block: LegacyPcapBlock = match parsed {
            Ok((_, b)) => b,
            Err(_) => {
                return Err(CaptureError::new(path, offset, "unparseable packet record"));
            }
        };
        let frac = if self.nanosecond {
            block.ts_usec as i64
        } else {
            block.ts_usec as i64 * 1000
        };
        let rec = Record {
            buf_index: src.pos() + hdr_len,
            len: caplen,
            ts_ns: block.ts_sec as i64 * 1_000_000_000 + frac,
            linktype: self.linktype,
            interface: 0,
            orig_len: block.origlen,
            offset,
        };
        src.consume(hdr_len + caplen);
        Ok(Some(rec))
    }
}
