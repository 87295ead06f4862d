//! Deterministic synthetic captures built with the project's own code.
//!
//! Test fixtures, the README's first example and benchmark inputs all need
//! captures whose content is known exactly. Shipping third-party captures
//! would bring licensing questions, unknown ground truth and binary blobs
//! that cannot be regenerated; this crate instead *simulates* the traffic:
//!
//! * [`packet`] builds frames (Ethernet with VLAN stacks, Linux SLL/SLL2,
//!   BSD NULL, raw IP; IPv4 with fragmentation, IPv6; TCP with options, UDP,
//!   ICMP, ARP) with correct lengths and checksums;
//! * [`tcp`] simulates a TCP conversation (handshake, segmentation, ACK
//!   policy, retransmissions, windows, keep-alive) so timing and sequence
//!   numbers stay consistent, with hooks to inject trouble;
//! * [`rpc`], [`nfs3`] and [`smb2`] encode the application protocols;
//! * [`scenario`] assembles named scenarios, and [`write_capture`] writes
//!   them as pcap, pcapng or snoop with the capture crate's writers.
//!
//! Everything is a pure function of the seed: the same arguments give the
//! same bytes on every platform.

pub mod bench;
pub mod nfs3;
pub mod nfs4;
pub mod packet;
pub mod rng;
pub mod rpc;
pub mod scenario;
pub mod smb2;
pub mod tcp;

use std::io::{self, Write};

use nastriage_capture::writer::{PcapNgWriter, PcapWriter, SnoopWriter};

pub use packet::{LinkConfig, LinkKind, NetPacket};
pub use scenario::Options;

/// One frame ready for a capture file: timestamp (ns) and link-layer bytes.
pub type Frame = (i64, Vec<u8>);

/// Capture container format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Pcap,
    PcapNg,
    /// Solaris snoop; Ethernet only.
    Snoop,
}

impl Format {
    pub const ALL: [Format; 3] = [Format::Pcap, Format::PcapNg, Format::Snoop];

    pub fn name(self) -> &'static str {
        match self {
            Format::Pcap => "pcap",
            Format::PcapNg => "pcapng",
            Format::Snoop => "snoop",
        }
    }

    pub fn parse(s: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == s)
    }
}

/// How to write a capture.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    pub format: Format,
    pub link: LinkConfig,
    /// Bytes kept per frame (the wire length is still recorded).
    pub snaplen: u32,
    /// Nanosecond timestamps (pcap only; pcapng is always ns, snoop µs).
    pub nanosecond: bool,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            format: Format::Pcap,
            link: LinkConfig::ethernet(),
            snaplen: 262_144,
            nanosecond: false,
        }
    }
}

impl WriteOptions {
    /// Reject combinations that cannot be written.
    pub fn validate(&self) -> Result<(), String> {
        self.link.validate()?;
        if self.format == Format::Snoop && self.link.kind != LinkKind::Ethernet {
            return Err(format!(
                "snoop captures are written with Ethernet framing only; --linktype {} needs pcap or pcapng",
                self.link.kind.name()
            ));
        }
        if self.snaplen == 0 {
            return Err("snaplen must be at least 1".into());
        }
        Ok(())
    }
}

/// Render packets into frames with `link`; packets the link type cannot
/// carry (ARP on NULL or raw IP) are left out.
pub fn render(packets: &[NetPacket], link: &LinkConfig) -> Vec<Frame> {
    packets
        .iter()
        .filter_map(|p| link.frame(p).map(|f| (p.ts_ns, f)))
        .collect()
}

/// Build scenario `name` and render it with `link`.
pub fn scenario_frames(
    name: &str,
    opts: &Options,
    link: &LinkConfig,
) -> Result<Vec<Frame>, String> {
    Ok(render(&scenario::build(name, opts)?, link))
}

/// Write `frames` to `out`; returns the number of frames written.
pub fn write_capture<W: Write>(out: W, frames: &[Frame], opts: &WriteOptions) -> io::Result<usize> {
    opts.validate()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut out = io::BufWriter::with_capacity(1 << 16, out);
    match opts.format {
        Format::Pcap => {
            let mut w = PcapWriter::new(
                &mut out,
                opts.link.linktype(),
                opts.snaplen,
                opts.nanosecond,
            )?;
            for (ts, f) in frames {
                w.write(*ts, f)?;
            }
        }
        Format::PcapNg => {
            let mut w = PcapNgWriter::new(&mut out)?;
            let linktype = u16::try_from(opts.link.linktype()).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "link type does not fit pcapng")
            })?;
            let id = w.add_interface(linktype, opts.snaplen)?;
            for (ts, f) in frames {
                w.write(id, *ts, f)?;
            }
        }
        Format::Snoop => {
            let mut w = SnoopWriter::new(&mut out, opts.snaplen)?;
            for (ts, f) in frames {
                w.write(*ts, f)?;
            }
        }
    }
    out.flush()?;
    Ok(frames.len())
}
