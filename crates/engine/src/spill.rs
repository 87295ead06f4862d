//! Bytes set aside during the pass and read back after it, so that what is
//! kept per request (the compressed log, each request's facts, the response
//! times behind the percentiles) does not make memory grow with the capture.
//!
//! A spill is an unnamed temporary file: created in the temporary directory
//! (`TMPDIR`) and unlinked at once, so nothing is left behind whatever
//! happens to the process, and its space is given back when the owner is
//! dropped. Its pages live in the page cache, not in the process. When no
//! file can be made or written (read-only or full disk), the bytes stay in
//! memory: slower to bound, never lost. Each owner (the log, the failed
//! requests, the facts, the SRT samples) has its own, made at its first
//! block, so a small capture opens no file at all.

use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};

use bincode::Options;

/// Where a block went.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Span {
    File { offset: u64, len: u32 },
    Memory(u32),
}

#[derive(Debug, Default)]
pub(crate) struct Spill {
    /// `None` before the first block, `Some(None)` when no file could be made.
    file: Option<Option<File>>,
    /// A write failed (a full disk): later blocks stay in memory, while the
    /// file is kept for the blocks already in it.
    full: bool,
    len: u64,
    memory: Vec<Vec<u8>>,
}

impl Spill {
    /// A spill that never uses a file (tests of the fallback).
    #[cfg(test)]
    pub(crate) fn in_memory() -> Self {
        Spill {
            file: Some(None),
            ..Default::default()
        }
    }

    /// Set a block aside.
    pub(crate) fn put(&mut self, bytes: Vec<u8>) -> Span {
        let file = self.file.get_or_insert_with(temp_file).as_ref();
        if let (Some(f), Ok(len), false) = (file, u32::try_from(bytes.len()), self.full) {
            if write_at(f, &bytes, self.len).is_ok() {
                let span = Span::File {
                    offset: self.len,
                    len,
                };
                self.len += u64::from(len);
                return span;
            }
            self.full = true;
        }
        self.memory.push(bytes);
        Span::Memory((self.memory.len() - 1) as u32)
    }

    /// A block back. The file is this process's own and unlinked, so a
    /// failed read is a failing disk or a bug: it stops the analysis rather
    /// than drop requests silently.
    pub(crate) fn get(&self, span: Span) -> Vec<u8> {
        match span {
            Span::Memory(i) => self.memory.get(i as usize).cloned().unwrap_or_default(),
            Span::File { offset, len } => {
                let mut buf = vec![0u8; len as usize];
                let read = match &self.file {
                    Some(Some(f)) => read_at(f, &mut buf, offset),
                    // The file is never closed while its spans exist.
                    _ => Err(std::io::Error::other("spill file closed")),
                };
                if let Err(e) = read {
                    panic!("cannot read back the analysis' temporary file: {e}");
                }
                buf
            }
        }
    }

    /// Set a value aside serialised (bincode, varints) and, with
    /// [`Codec::Zstd`], compressed; None only if either fails.
    pub(crate) fn put_packed<T: serde::Serialize + ?Sized>(
        &mut self,
        value: &T,
        codec: Codec,
    ) -> Option<Packed> {
        let raw = codec_options().serialize(value).ok()?;
        let raw_len = u32::try_from(raw.len()).ok()?;
        let bytes = match codec {
            Codec::Plain => raw,
            Codec::Zstd => compress(&raw)?,
        };
        Some(Packed {
            span: self.put(bytes),
            raw_len,
            codec,
        })
    }

    /// A value [`Self::put_packed`] set aside, back (None: it does not read
    /// back, which only a bug can cause).
    pub(crate) fn get_packed<T: serde::de::DeserializeOwned>(&self, p: Packed) -> Option<T> {
        let bytes = self.get(p.span);
        let raw = match p.codec {
            Codec::Plain => bytes,
            Codec::Zstd => decompress(&bytes, p.raw_len as usize)?,
        };
        codec_options().deserialize(&raw).ok()
    }

    /// Bytes a packed value takes in the spill.
    #[cfg(test)]
    pub(crate) fn packed_len(&self, p: Packed) -> usize {
        self.get(p.span).len()
    }

    /// Bytes set aside in memory (not in the file).
    #[cfg(test)]
    pub(crate) fn memory_bytes(&self) -> usize {
        self.memory.iter().map(Vec::len).sum()
    }
}

/// Bounds, together, what waits in the partly filled blocks of one spill's
/// many owners (the `srt` table's groups, a group per file of a copy; the
/// request facts' connections): each keeps its newest items in memory until
/// they fill a block, and thousands of owners that each stopped short of a
/// block would keep them all to the end of the pass. Once [`Self::MAX`]
/// items wait, the owner sets every partly filled block aside as it is.
#[derive(Debug, Default)]
pub(crate) struct TailBudget {
    held: usize,
}

impl TailBudget {
    /// Items that may wait in partly filled blocks together.
    pub(crate) const MAX: usize = 16_384;

    /// One item more in some owner's partly filled block.
    pub(crate) fn add(&mut self) {
        self.held += 1;
    }

    /// A block of `n` items went to the spill.
    pub(crate) fn set_aside(&mut self, n: usize) {
        self.held = self.held.saturating_sub(n);
    }

    /// Whether every partly filled block must go to the spill now (and, if
    /// so, counts them gone).
    pub(crate) fn exhausted(&mut self) -> bool {
        let over = self.held > Self::MAX;
        if over {
            self.held = 0;
        }
        over
    }

    /// Items waiting (tests).
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.held
    }
}

/// A value set aside by [`Spill::put_packed`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Packed {
    span: Span,
    raw_len: u32,
    codec: Codec,
}

/// How a packed value is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Codec {
    /// As serialised. For blocks of numbers (TCP events; the request facts,
    /// which have a codec of their own, were too): their varints leave zstd
    /// little to find (a 1 GiB lossy copy's 16.8 MB of them compressed to
    /// 15.3 MB), and compressing and decompressing them was a tenth of the
    /// pass' instructions.
    Plain,
    /// Compressed with zstd. For whole transactions, whose names and
    /// handles repeat (about 7x smaller).
    Zstd,
}

fn codec_options() -> impl Options {
    bincode::DefaultOptions::new().with_varint_encoding()
}

/// zstd level of the blocks: fast, and enough for repeated names and handles.
const ZSTD_LEVEL: i32 = 1;

thread_local! {
    // One compression and one decompression context per thread, reused:
    // making a context costs more than compressing a small block.
    static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { std::cell::RefCell::new(None) };
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// `raw` compressed with zstd (None only if zstd fails).
fn compress(raw: &[u8]) -> Option<Vec<u8>> {
    COMPRESSOR.with(|c| {
        let mut c = c.try_borrow_mut().ok()?;
        if c.is_none() {
            *c = Some(zstd::bulk::Compressor::new(ZSTD_LEVEL).ok()?);
        }
        c.as_mut()?.compress(raw).ok()
    })
}

/// What [`compress`] made of `raw_len` bytes, back.
fn decompress(bytes: &[u8], raw_len: usize) -> Option<Vec<u8>> {
    DECOMPRESSOR.with(|d| {
        let mut d = d.try_borrow_mut().ok()?;
        if d.is_none() {
            *d = Some(zstd::bulk::Decompressor::new().ok()?);
        }
        d.as_mut()?.decompress(bytes, raw_len).ok()
    })
}

/// An unlinked temporary file, or `None` when none can be made.
fn temp_file() -> Option<File> {
    temp_file_in(&std::env::temp_dir())
}

fn temp_file_in(dir: &std::path::Path) -> Option<File> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    for _ in 0..4 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = dir.join(format!(
            ".nastriage-spill-{}-{n}-{nanos:09}",
            std::process::id()
        ));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path);
        match file {
            Ok(f) => {
                // Unlinked while open: gone when closed, even after a crash.
                // Where an open file cannot be removed, use memory instead.
                return std::fs::remove_file(&path).is_ok().then_some(f);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(_) => return None,
        }
    }
    None
}

#[cfg(unix)]
fn write_at(f: &File, bytes: &[u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(f, bytes, offset)
}

#[cfg(unix)]
fn read_at(f: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(f, buf, offset)
}

#[cfg(not(unix))]
fn write_at(_: &File, _: &[u8], _: u64) -> std::io::Result<()> {
    Err(std::io::Error::other(
        "positioned writes are not implemented here",
    ))
}

#[cfg(not(unix))]
fn read_at(_: &File, _: &mut [u8], _: u64) -> std::io::Result<()> {
    Err(std::io::Error::other(
        "positioned reads are not implemented here",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks() -> Vec<Vec<u8>> {
        (0..50u32)
            .map(|i| (0..i * 37).map(|b| (b ^ i) as u8).collect())
            .collect()
    }

    #[test]
    fn blocks_read_back_from_the_file() {
        let mut s = Spill::default();
        let spans: Vec<Span> = blocks().into_iter().map(|b| s.put(b)).collect();
        assert!(matches!(spans[1], Span::File { .. }), "{spans:?}");
        assert_eq!(s.memory_bytes(), 0);
        for (span, want) in spans.into_iter().zip(blocks()) {
            assert_eq!(s.get(span), want);
        }
    }

    #[test]
    fn without_a_file_blocks_stay_in_memory() {
        let mut s = Spill::in_memory();
        let spans: Vec<Span> = blocks().into_iter().map(|b| s.put(b)).collect();
        assert!(spans.iter().all(|s| matches!(s, Span::Memory(_))));
        for (span, want) in spans.into_iter().zip(blocks()) {
            assert_eq!(s.get(span), want);
        }
    }

    /// A file that cannot be written (a full disk): the blocks go to memory
    /// and all read back.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_full_disk_falls_back_to_memory() {
        let Ok(full) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/full")
        else {
            return; // no /dev/full here
        };
        let mut s = Spill {
            file: Some(Some(full)),
            ..Default::default()
        };
        // (The first, empty block is written: nothing to fail on.)
        let spans: Vec<Span> = blocks().into_iter().map(|b| s.put(b)).collect();
        assert!(s.full);
        assert!(spans[1..].iter().all(|s| matches!(s, Span::Memory(_))));
        // Every block reads back, those in the file included.
        for (span, want) in spans.into_iter().zip(blocks()) {
            assert_eq!(s.get(span), want);
        }
    }

    /// No usable temporary directory: no file, and (see `put`) memory instead.
    #[test]
    fn no_temporary_directory_means_no_file() {
        let missing = std::env::temp_dir().join(".nastriage-no-such-dir/below");
        assert!(temp_file_in(&missing).is_none());
    }

    #[test]
    fn packed_values_come_back() {
        for mut s in [Spill::default(), Spill::in_memory()] {
            let values: Vec<Vec<(u64, String)>> = (0..20u64)
                .map(|i| {
                    (0..i * 50)
                        .map(|j| (j * i, format!("name{}", j % 7)))
                        .collect()
                })
                .collect();
            let packed: Vec<Packed> = values
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let codec = if i % 2 == 0 {
                        Codec::Plain
                    } else {
                        Codec::Zstd
                    };
                    s.put_packed(v, codec).expect("packs")
                })
                .collect();
            for (p, want) in packed.into_iter().zip(&values) {
                assert_eq!(s.get_packed::<Vec<(u64, String)>>(p).as_ref(), Some(want));
            }
        }
    }

    #[test]
    fn blocks_compress_and_come_back() {
        for n in [0usize, 1, 100, 100_000] {
            let raw: Vec<u8> = (0..n).map(|i| (i % 7) as u8).collect();
            let packed = compress(&raw).expect("compress");
            assert_eq!(decompress(&packed, raw.len()), Some(raw));
        }
    }

    /// The file is unlinked: nothing is left in the directory while it is
    /// open and written. (In a directory of its own: the other tests of
    /// this process make spills in the temporary directory at the same
    /// time, each there between its creation and its unlinking.)
    #[test]
    fn leaves_no_file_behind() {
        let dir = std::env::temp_dir().join(format!(
            ".nastriage-spill-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir(&dir).expect("a directory for the test");
        let mut f = temp_file_in(&dir).expect("a spill file");
        std::io::Write::write_all(&mut f, &[1, 2, 3]).expect("written");
        let left = std::fs::read_dir(&dir).map(|d| d.count());
        drop(f);
        let removed = std::fs::remove_dir(&dir);
        assert_eq!(left.ok(), Some(0));
        assert!(removed.is_ok(), "the directory was left non-empty");
    }
}
