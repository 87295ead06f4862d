//! Opening a capture (file or standard input), sniffing compression and
//! format, and the lending packet cursor.

use std::fs::File;
use std::io::{self, Read};

use crate::error::{CaptureError, Warning};
use crate::format::{Compression, FileFormat, PCAPNG_MAGIC, SNOOP_MAGIC};
use crate::pcap::PcapState;
use crate::pcapng::PcapNgState;
use crate::snoop::SnoopState;
use crate::source::{Shared, Source};
use crate::Packet;

/// Where a record lies in the read buffer, plus its metadata.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Record {
    pub(crate) buf_index: usize,
    pub(crate) len: usize,
    pub(crate) ts_ns: i64,
    pub(crate) linktype: u32,
    pub(crate) interface: u32,
    pub(crate) orig_len: u32,
    pub(crate) offset: u64,
}

/// Collects warnings raised while reading.
pub(crate) type Sink = Vec<Warning>;

pub(crate) enum Fetch {
    Ready(usize),
    End,
}

/// Buffer `need` bytes of the next record. A clean end of stream before the
/// record gives `End`; a partial record gives a truncation warning and `End`
/// (every earlier packet stays valid).
pub(crate) fn fetch(
    src: &mut Source,
    path: &str,
    need: usize,
    what: &str,
    sink: &mut Sink,
) -> Result<Fetch, CaptureError> {
    let offset = src.offset();
    let avail = match src.fill(need) {
        Ok(n) => n,
        // A compressed stream cut short (full disk, copy in progress) ends
        // like a cut plain file: a warning, and every packet before it.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            sink.push(Warning {
                path: path.to_string(),
                offset,
                message: format!(
                    "compressed capture is cut short ({e}); results cover everything before this point"
                ),
            });
            return Ok(Fetch::End);
        }
        Err(e) => return Err(CaptureError::new(path, offset, format!("read error: {e}"))),
    };
    if avail >= need {
        return Ok(Fetch::Ready(avail));
    }
    if avail > 0 {
        sink.push(Warning {
            path: path.to_string(),
            offset,
            message: format!(
                "capture is cut short: {what} needs {need} bytes but only {avail} remain; results cover everything before this point"
            ),
        });
    }
    Ok(Fetch::End)
}

enum Kind {
    Pcap(PcapState),
    PcapNg(PcapNgState),
    Snoop(SnoopState),
}

/// What a capture file is, as far as its container tells.
#[derive(Debug, Clone)]
pub struct CaptureInfo {
    pub path: String,
    pub format: FileFormat,
    pub compression: Compression,
}

/// A streaming reader over one capture.
pub struct CaptureReader {
    info: CaptureInfo,
    src: Source,
    kind: Kind,
    cur: Option<Record>,
    warnings: Vec<Warning>,
    done: bool,
}

impl CaptureReader {
    /// Open a capture file, or standard input when `path` is `-`.
    pub fn open(path: &str) -> Result<Self, CaptureError> {
        if path == "-" {
            return Self::from_reader("-", Box::new(io::stdin()));
        }
        let file = File::open(path)
            .map_err(|e| CaptureError::new(path, 0, format!("cannot open: {e}")))?;
        if file.metadata().map(|m| m.is_dir()).unwrap_or(false) {
            return Err(CaptureError::new(
                path,
                0,
                "is a directory, not a capture file",
            ));
        }
        // No `BufReader`: the source is the buffer, and its reads go
        // straight into it (a second buffer would copy every byte again).
        Self::from_reader(path, Box::new(file))
    }

    /// Read a capture from any byte stream; `name` is used in messages.
    pub fn from_reader(name: &str, mut reader: Box<dyn Read + Send>) -> Result<Self, CaptureError> {
        let magic = read_prefix(&mut reader, 8)
            .map_err(|e| CaptureError::new(name, 0, format!("read error: {e}")))?;
        let compression = Compression::sniff(&magic);
        let src = match compression {
            Compression::None => Source::with_prefix(reader, magic),
            Compression::Gzip => {
                let chained = io::Cursor::new(magic).chain(reader);
                Source::new(Box::new(flate2::read::MultiGzDecoder::new(chained)))
            }
            Compression::Zstd => {
                let chained = io::Cursor::new(magic).chain(reader);
                let dec = zstd::stream::read::Decoder::new(chained)
                    .map_err(|e| CaptureError::new(name, 0, format!("zstd: {e}")))?;
                Source::new(Box::new(dec))
            }
        };
        Self::from_source(name, src, compression)
    }

    fn from_source(
        name: &str,
        mut src: Source,
        compression: Compression,
    ) -> Result<Self, CaptureError> {
        let avail = src.fill(8).map_err(|e| {
            CaptureError::new(name, 0, format!("read error ({}): {e}", compression.name()))
        })?;
        let head = src.window();
        if avail == 0 {
            return Err(CaptureError::new(name, 0, "empty file, not a capture"));
        }
        let (kind, format) = if head.len() >= 4 && head[..4] == PCAPNG_MAGIC {
            (Kind::PcapNg(PcapNgState::open()), FileFormat::PcapNg)
        } else if head.len() >= 8 && &head[..8] == SNOOP_MAGIC {
            (
                Kind::Snoop(SnoopState::open(&mut src, name)?),
                FileFormat::Snoop,
            )
        } else if head.len() >= 4 && is_pcap_magic(&head[..4]) {
            let st = PcapState::open(&mut src, name)?;
            let f = st.format;
            (Kind::Pcap(st), f)
        } else {
            let shown: Vec<String> = head.iter().take(4).map(|b| format!("{b:02x}")).collect();
            return Err(CaptureError::new(
                name,
                0,
                format!(
                    "not a capture file (pcap, pcapng or snoop; plain, gzip or zstd): starts with {}",
                    shown.join(" ")
                ),
            ));
        };
        Ok(CaptureReader {
            info: CaptureInfo {
                path: name.to_string(),
                format,
                compression,
            },
            src,
            kind,
            cur: None,
            warnings: Vec::new(),
            done: false,
        })
    }

    /// Move to the next packet. `Ok(false)` at the end of the capture (a cut
    /// record ends it with a warning); `Err` for corruption that stops reading.
    /// After an error or the end, further calls return `Ok(false)`.
    pub fn advance(&mut self) -> Result<bool, CaptureError> {
        if self.done {
            return Ok(false);
        }
        let path = self.info.path.as_str();
        let next = match &mut self.kind {
            Kind::Pcap(st) => st.next(&mut self.src, path, &mut self.warnings),
            Kind::PcapNg(st) => st.next(&mut self.src, path, &mut self.warnings),
            Kind::Snoop(st) => st.next(&mut self.src, path, &mut self.warnings),
        };
        match next {
            Ok(Some(rec)) => {
                self.cur = Some(rec);
                Ok(true)
            }
            Ok(None) => {
                self.cur = None;
                self.done = true;
                Ok(false)
            }
            Err(e) => {
                self.cur = None;
                self.done = true;
                Err(e)
            }
        }
    }

    /// The packet `advance` moved to. Panics if there is none; call only after
    /// `advance` returned `Ok(true)`.
    #[inline]
    pub fn packet(&self) -> Packet<'_> {
        let rec = self
            .cur
            .as_ref()
            .expect("packet() called without a current packet");
        self.packet_of(rec)
    }

    /// The current packet, if any.
    #[inline]
    pub fn current(&self) -> Option<Packet<'_>> {
        self.cur.as_ref().map(|rec| self.packet_of(rec))
    }

    #[inline]
    fn packet_of(&self, rec: &Record) -> Packet<'_> {
        Packet {
            ts_ns: rec.ts_ns,
            linktype: rec.linktype,
            interface: rec.interface,
            orig_len: rec.orig_len,
            data: self.src.held(rec.buf_index, rec.len),
            offset: rec.offset,
        }
    }

    /// The buffer the current packet's bytes lie in. Holding it keeps those
    /// bytes (and the rest of the buffer) as they are after the reader moves
    /// on, so a packet can be handed to another thread without a copy: its
    /// `data` is within `shared_buffer()[..]`, at the offset its address
    /// gives.
    #[inline]
    pub fn shared_buffer(&self) -> &Shared {
        self.src.shared()
    }

    pub fn info(&self) -> &CaptureInfo {
        &self.info
    }

    /// Link types declared by the file so far (pcapng may add interfaces as
    /// it goes; the full list is known after the last packet).
    pub fn linktypes(&self) -> Vec<u32> {
        match &self.kind {
            Kind::Pcap(st) => vec![st.linktype()],
            Kind::PcapNg(st) => st.linktypes.clone(),
            Kind::Snoop(st) => vec![st.linktype()],
        }
    }

    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// Stop reading: the read buffers and the decompressor are given back
    /// (a few megabytes, which the work after the pass can use). Its info,
    /// link types, warnings and position stay; `advance` returns `Ok(false)`.
    pub fn finish(&mut self) {
        self.cur = None;
        self.done = true;
        self.src.release();
    }

    /// Bytes consumed so far in the (decompressed) stream.
    pub fn position(&self) -> u64 {
        self.src.offset()
    }
}

fn is_pcap_magic(m: &[u8]) -> bool {
    const MAGICS: [u32; 3] = [0xa1b2_c3d4, 0xa1b2_3c4d, 0xa1b2_cd34];
    let le = u32::from_le_bytes([m[0], m[1], m[2], m[3]]);
    let be = u32::from_be_bytes([m[0], m[1], m[2], m[3]]);
    MAGICS.contains(&le) || MAGICS.contains(&be)
}

fn read_prefix(r: &mut dyn Read, n: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; n];
    let mut got = 0;
    while got < n {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    buf.truncate(got);
    Ok(buf)
}
