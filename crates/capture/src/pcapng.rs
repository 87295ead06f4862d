//! pcapng files (several sections and interfaces; EPB, SPB and the obsolete
//! OPB), through `pcap-parser`'s block parsers. Block lengths are checked
//! before any buffering so that a corrupt length is an error, not an
//! allocation. An enhanced packet block without options, whole in the
//! buffer and sound, is read in place without the parse (nearly every
//! block of a capture: the parse and its options vector were a third of
//! the reading thread's instructions per packet); anything else is parsed.

use pcap_parser::pcapng::{parse_block_be, parse_block_le, Block, OptionCode};
use pcap_parser::traits::PcapNGPacketBlock;

use crate::error::CaptureError;
use crate::reader::{fetch, Fetch, Record, Sink};
use crate::source::Source;
use crate::MAX_RECORD_LEN;

const SHB_TYPE: u32 = 0x0A0D_0D0A;
const OPB_TYPE: u32 = 0x0000_0002;
const EPB_TYPE: u32 = 0x0000_0006;
/// An enhanced packet block's fixed fields with its two lengths.
const EPB_LEN: usize = 32;
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;

struct Interface {
    linktype: u32,
    snaplen: u32,
    /// Timestamp units per second (if_tsresol).
    units_per_sec: u64,
    /// Seconds added to every timestamp (if_tsoffset).
    offset_s: i64,
}

pub(crate) struct PcapNgState {
    big_endian: bool,
    interfaces: Vec<Interface>,
    sections: u32,
    /// Every link type declared by an interface, in order of first appearance.
    pub(crate) linktypes: Vec<u32>,
}

impl PcapNgState {
    pub(crate) fn open() -> Self {
        PcapNgState {
            big_endian: false,
            interfaces: Vec::new(),
            sections: 0,
            linktypes: Vec::new(),
        }
    }

    fn u32_at(&self, b: &[u8], i: usize) -> u32 {
        let w = [b[i], b[i + 1], b[i + 2], b[i + 3]];
        if self.big_endian {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        }
    }

    fn ts_ns(&self, iface: &Interface, high: u32, low: u32) -> i64 {
        let ticks = ((high as u64) << 32 | low as u64) as i128;
        let ns = iface.offset_s as i128 * 1_000_000_000
            + ticks * 1_000_000_000 / iface.units_per_sec as i128;
        ns.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }

    pub(crate) fn next(
        &mut self,
        src: &mut Source,
        path: &str,
        sink: &mut Sink,
    ) -> Result<Option<Record>, CaptureError> {
        loop {
            let offset = src.offset();
            // Nearly every block is a packet lying whole in the buffer.
            if let Some(rec) = self.buffered_epb(src, offset) {
                return Ok(Some(rec));
            }
            match fetch(src, path, 12, "pcapng block header", sink)? {
                Fetch::Ready(_) => {}
                Fetch::End => {
                    self.warn_if_no_interface(src, path, sink);
                    return Ok(None);
                }
            }
            let w = src.window();
            let raw_type = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            if raw_type == SHB_TYPE {
                let bom = u32::from_le_bytes([w[8], w[9], w[10], w[11]]);
                self.big_endian = match bom {
                    BYTE_ORDER_MAGIC => false,
                    m if m.swap_bytes() == BYTE_ORDER_MAGIC => true,
                    m => {
                        return Err(CaptureError::new(
                            path,
                            offset + 8,
                            format!("pcapng section header has bad byte-order magic 0x{m:08x}"),
                        ))
                    }
                };
            } else if self.sections == 0 {
                return Err(CaptureError::new(
                    path,
                    offset,
                    "pcapng file does not start with a section header block",
                ));
            }
            let block_type = self.u32_at(w, 0);
            let block_len = self.u32_at(w, 4) as usize;
            if block_len < 12 || !block_len.is_multiple_of(4) || block_len > MAX_RECORD_LEN {
                return Err(CaptureError::new(
                    path,
                    offset,
                    format!(
                        "pcapng block of type 0x{block_type:08x} has invalid length {block_len}"
                    ),
                ));
            }
            match fetch(src, path, block_len, "pcapng block", sink)? {
                Fetch::Ready(_) => {}
                Fetch::End if self.sections == 0 => {
                    // Without a complete section header nothing can be read.
                    sink.pop();
                    return Err(CaptureError::new(
                        path,
                        offset,
                        format!("pcapng section header block truncated or with insane length {block_len}"),
                    ));
                }
                Fetch::End => {
                    self.warn_if_no_interface(src, path, sink);
                    return Ok(None);
                }
            }
            let window = &src.window()[..block_len];
            let base = window.as_ptr() as usize;
            let parsed = if self.big_endian {
                parse_block_be(window)
            } else {
                parse_block_le(window)
            };
            let block = match parsed {
                Ok((_, b)) => b,
                Err(_) => {
                    return Err(CaptureError::new(
                        path,
                        offset,
                        format!(
                        "malformed pcapng block of type 0x{block_type:08x} (length {block_len})"
                    ),
                    ))
                }
            };
            let mut record = None;
            match block {
                Block::SectionHeader(_) => {
                    self.sections += 1;
                    self.interfaces.clear();
                }
                Block::InterfaceDescription(idb) => {
                    // Not `idb.ts_resolution()`: pcap-parser 0.17 rejects
                    // every binary (2^-n) resolution.
                    let units_per_sec = ts_resolution(idb.if_tsresol).ok_or_else(|| {
                        CaptureError::new(
                            path,
                            offset,
                            format!(
                                "interface has an unusable if_tsresol 0x{:02x}",
                                idb.if_tsresol
                            ),
                        )
                    })?;
                    let linktype = idb.linktype.0 as u32;
                    if !self.linktypes.contains(&linktype) {
                        self.linktypes.push(linktype);
                    }
                    self.interfaces.push(Interface {
                        linktype,
                        snaplen: idb.snaplen,
                        units_per_sec,
                        offset_s: self.tsoffset(&idb.options),
                    });
                }
                Block::EnhancedPacket(epb) => {
                    let iface = self.interface(epb.if_id, path, offset)?;
                    let data = epb.packet_data();
                    record = Some(Record {
                        buf_index: src.pos() + (data.as_ptr() as usize - base),
                        len: data.len(),
                        ts_ns: self.ts_ns(iface, epb.ts_high, epb.ts_low),
                        linktype: iface.linktype,
                        interface: epb.if_id,
                        orig_len: epb.origlen,
                        offset,
                    });
                }
                Block::SimplePacket(spb) => {
                    let iface = self.interface(0, path, offset)?;
                    let mut len = spb.packet_data().len();
                    if iface.snaplen > 0 {
                        len = len.min(iface.snaplen as usize);
                    }
                    let data = spb.packet_data();
                    record = Some(Record {
                        buf_index: src.pos() + (data.as_ptr() as usize - base),
                        len,
                        // SPBs carry no timestamp.
                        ts_ns: 0,
                        linktype: iface.linktype,
                        interface: 0,
                        orig_len: spb.origlen,
                        offset,
                    });
                }
                Block::Unknown(ub) if block_type == OPB_TYPE => {
                    // Obsolete Packet Block: if_id u16, drops u16, ts_high,
                    // ts_low, caplen, len, data.
                    let d = ub.data;
                    if d.len() < 20 {
                        return Err(CaptureError::new(
                            path,
                            offset,
                            "truncated obsolete packet block",
                        ));
                    }
                    let if_id = if self.big_endian {
                        u16::from_be_bytes([d[0], d[1]])
                    } else {
                        u16::from_le_bytes([d[0], d[1]])
                    } as u32;
                    let caplen = self.u32_at(d, 12) as usize;
                    if caplen > d.len() - 20 {
                        return Err(CaptureError::new(
                            path,
                            offset,
                            format!("obsolete packet block claims {caplen} captured bytes"),
                        ));
                    }
                    let iface = self.interface(if_id, path, offset)?;
                    record = Some(Record {
                        buf_index: src.pos() + (d.as_ptr() as usize - base) + 20,
                        len: caplen,
                        ts_ns: self.ts_ns(iface, self.u32_at(d, 4), self.u32_at(d, 8)),
                        linktype: iface.linktype,
                        interface: if_id,
                        orig_len: self.u32_at(d, 16),
                        offset,
                    });
                }
                _ => {}
            }
            src.consume(block_len);
            if record.is_some() {
                return Ok(record);
            }
        }
    }

    /// The next block if it is an enhanced packet block without options,
    /// whole in the buffer, valid and of a declared interface (anything
    /// else is read by `next`, which parses every block and reports what is
    /// wrong): the record `next` would give for it, without its parse.
    #[inline]
    fn buffered_epb(&self, src: &mut Source, offset: u64) -> Option<Record> {
        let w = src.window();
        if self.sections == 0 || w.len() < EPB_LEN || self.u32_at(w, 0) != EPB_TYPE {
            return None;
        }
        let block_len = self.u32_at(w, 4) as usize;
        let caplen = self.u32_at(w, 20) as usize;
        // Exactly the header, the padded data and the trailing length: no
        // options (their parse is `next`'s).
        if block_len > MAX_RECORD_LEN
            || block_len > w.len()
            || caplen > block_len
            || block_len != EPB_LEN + caplen.next_multiple_of(4)
            || self.u32_at(w, block_len - 4) as usize != block_len
        {
            return None;
        }
        let if_id = self.u32_at(w, 8);
        let iface = self.interfaces.get(if_id as usize)?;
        let rec = Record {
            buf_index: src.pos() + 28,
            len: caplen,
            ts_ns: self.ts_ns(iface, self.u32_at(w, 12), self.u32_at(w, 16)),
            linktype: iface.linktype,
            interface: if_id,
            orig_len: self.u32_at(w, 24),
            offset,
        };
        src.consume(block_len);
        Some(rec)
    }

    /// if_tsoffset in the section's byte order (pcap-parser 0.17 always
    /// reads it little-endian).
    fn tsoffset(&self, options: &[pcap_parser::pcapng::PcapNGOption<'_>]) -> i64 {
        options
            .iter()
            .rev()
            .find(|o| o.code == OptionCode::IfTsoffset && o.value.len() >= 8)
            .map(|o| {
                let b: [u8; 8] = o.value[..8].try_into().unwrap_or([0; 8]);
                if self.big_endian {
                    i64::from_be_bytes(b)
                } else {
                    i64::from_le_bytes(b)
                }
            })
            .unwrap_or(0)
    }

    /// A file whose sections declare no interface holds no packets at all;
    /// say so rather than end silently.
    fn warn_if_no_interface(&self, src: &Source, path: &str, sink: &mut Sink) {
        if self.sections > 0 && self.linktypes.is_empty() {
            sink.push(crate::error::Warning {
                path: path.to_string(),
                offset: src.offset(),
                message:
                    "pcapng file declares no interface description block, so it holds no packets"
                        .into(),
            });
        }
    }

    fn interface(&self, id: u32, path: &str, offset: u64) -> Result<&Interface, CaptureError> {
        self.interfaces.get(id as usize).ok_or_else(|| {
            CaptureError::new(
                path,
                offset,
                format!(
                    "packet refers to interface {id} but the section declares {} interface(s)",
                    self.interfaces.len()
                ),
            )
        })
    }
}

/// Timestamp units per second for an if_tsresol value: 10^n, or 2^n when
/// the top bit is set; `None` when it does not fit in 64 bits.
fn ts_resolution(tsresol: u8) -> Option<u64> {
    let exp = u32::from(tsresol & 0x7f);
    if tsresol & 0x80 == 0 {
        10u64.checked_pow(exp)
    } else {
        1u64.checked_shl(exp).filter(|_| exp < 64)
    }
}
