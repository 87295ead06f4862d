//! Minimal capture writers (pcap, pcapng, snoop), used to make fixtures,
//! examples and benchmark captures with the project's own code.

use std::io::{self, Write};

/// Classic pcap, little-endian, microsecond or nanosecond timestamps.
pub struct PcapWriter<W: Write> {
    out: W,
    nanosecond: bool,
    snaplen: u32,
}

impl<W: Write> PcapWriter<W> {
    pub fn new(mut out: W, linktype: u32, snaplen: u32, nanosecond: bool) -> io::Result<Self> {
        let magic: u32 = if nanosecond { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
        out.write_all(&magic.to_le_bytes())?;
        out.write_all(&2u16.to_le_bytes())?;
        out.write_all(&4u16.to_le_bytes())?;
        out.write_all(&0i32.to_le_bytes())?;
        out.write_all(&0u32.to_le_bytes())?;
        out.write_all(&snaplen.to_le_bytes())?;
        out.write_all(&linktype.to_le_bytes())?;
        Ok(Self {
            out,
            nanosecond,
            snaplen,
        })
    }

    /// Write one packet; it is cut to the snaplen, keeping its wire length.
    pub fn write(&mut self, ts_ns: i64, data: &[u8]) -> io::Result<()> {
        let cap = data.len().min(self.snaplen as usize);
        let sec = ts_ns.div_euclid(1_000_000_000);
        let ns = ts_ns.rem_euclid(1_000_000_000);
        let frac = if self.nanosecond { ns } else { ns / 1000 };
        self.out.write_all(&(sec as u32).to_le_bytes())?;
        self.out.write_all(&(frac as u32).to_le_bytes())?;
        self.out.write_all(&(cap as u32).to_le_bytes())?;
        self.out.write_all(&(data.len() as u32).to_le_bytes())?;
        self.out.write_all(&data[..cap])
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

/// pcapng with one section and one interface per `add_interface` call,
/// nanosecond resolution (if_tsresol = 9).
pub struct PcapNgWriter<W: Write> {
    out: W,
    snaplens: Vec<u32>,
}

fn pad4(n: usize) -> usize {
    (4 - n % 4) % 4
}

impl<W: Write> PcapNgWriter<W> {
    pub fn new(mut out: W) -> io::Result<Self> {
        // SHB: type, len, BOM, v1.0, section length -1, len.
        out.write_all(&0x0A0D_0D0Au32.to_le_bytes())?;
        out.write_all(&28u32.to_le_bytes())?;
        out.write_all(&0x1A2B_3C4Du32.to_le_bytes())?;
        out.write_all(&1u16.to_le_bytes())?;
        out.write_all(&0u16.to_le_bytes())?;
        out.write_all(&(-1i64).to_le_bytes())?;
        out.write_all(&28u32.to_le_bytes())?;
        Ok(Self {
            out,
            snaplens: Vec::new(),
        })
    }

    /// Declare an interface; returns its id.
    pub fn add_interface(&mut self, linktype: u16, snaplen: u32) -> io::Result<u32> {
        // IDB with options if_tsresol=9 and opt_endofopt.
        let len: u32 = 20 + 8 + 4;
        self.out.write_all(&1u32.to_le_bytes())?;
        self.out.write_all(&len.to_le_bytes())?;
        self.out.write_all(&linktype.to_le_bytes())?;
        self.out.write_all(&0u16.to_le_bytes())?;
        self.out.write_all(&snaplen.to_le_bytes())?;
        self.out.write_all(&9u16.to_le_bytes())?;
        self.out.write_all(&1u16.to_le_bytes())?;
        self.out.write_all(&[9, 0, 0, 0])?;
        self.out.write_all(&[0, 0, 0, 0])?;
        self.out.write_all(&len.to_le_bytes())?;
        self.snaplens.push(snaplen);
        Ok(self.snaplens.len() as u32 - 1)
    }

    /// Write an Enhanced Packet Block on interface `if_id`.
    pub fn write(&mut self, if_id: u32, ts_ns: i64, data: &[u8]) -> io::Result<()> {
        let snap = self
            .snaplens
            .get(if_id as usize)
            .copied()
            .unwrap_or(u32::MAX) as usize;
        let cap = data.len().min(snap);
        let len = (32 + cap + pad4(cap)) as u32;
        let ts = ts_ns as u64;
        self.out.write_all(&6u32.to_le_bytes())?;
        self.out.write_all(&len.to_le_bytes())?;
        self.out.write_all(&if_id.to_le_bytes())?;
        self.out.write_all(&((ts >> 32) as u32).to_le_bytes())?;
        self.out.write_all(&(ts as u32).to_le_bytes())?;
        self.out.write_all(&(cap as u32).to_le_bytes())?;
        self.out.write_all(&(data.len() as u32).to_le_bytes())?;
        self.out.write_all(&data[..cap])?;
        self.out.write_all(&[0u8; 3][..pad4(cap)])?;
        self.out.write_all(&len.to_le_bytes())
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Solaris snoop (RFC 1761), Ethernet datalink.
pub struct SnoopWriter<W: Write> {
    out: W,
    snaplen: u32,
}

impl<W: Write> SnoopWriter<W> {
    pub fn new(mut out: W, snaplen: u32) -> io::Result<Self> {
        out.write_all(b"snoop\0\0\0")?;
        out.write_all(&2u32.to_be_bytes())?;
        out.write_all(&4u32.to_be_bytes())?; // DL_ETHER
        Ok(Self { out, snaplen })
    }

    pub fn write(&mut self, ts_ns: i64, data: &[u8]) -> io::Result<()> {
        let cap = data.len().min(self.snaplen as usize);
        let rec_len = 24 + cap + pad4(cap);
        let sec = ts_ns.div_euclid(1_000_000_000);
        let usec = ts_ns.rem_euclid(1_000_000_000) / 1000;
        self.out.write_all(&(data.len() as u32).to_be_bytes())?;
        self.out.write_all(&(cap as u32).to_be_bytes())?;
        self.out.write_all(&(rec_len as u32).to_be_bytes())?;
        self.out.write_all(&0u32.to_be_bytes())?;
        self.out.write_all(&(sec as u32).to_be_bytes())?;
        self.out.write_all(&(usec as u32).to_be_bytes())?;
        self.out.write_all(&data[..cap])?;
        self.out.write_all(&[0u8; 3][..pad4(cap)])
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}
