//! Bytes set aside during the pass and read back after it, so that what is
//! kept per request (the compressed log, each request's facts, the response
//! times behind the percentiles) does not make memory grow with the capture.
//!
//! A spill is an unnamed temporary file: created in the temporary directory
//! (`TMPDIR`) and unlinked at once, so nothing is left behind whatever
//! happens to the process, and its space is given back when the owner is
//! dropped. Its pages live in the page cache, not in the process (but for
//! the last blocks, up to 64 KB, gathered for one write). When no
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
    /// The file's length with the blocks in `pending`: the next block's offset.
    len: u64,
    /// Bytes in the file; the blocks past them are in `pending`.
    written: u64,
    /// Blocks set aside but not yet written, gathered into writes of
    /// [`WRITE_BYTES`]: a write per block (the `srt` table's are 2 KB, the
    /// request facts' about 4 KB) was a tenth of the NFS/SMB thread's time
    /// on a capture of small requests. After a failed write they stay here.
    pending: Vec<u8>,
    memory: Vec<Vec<u8>>,
}

/// Bytes of blocks gathered before they are written (a block this large or
/// larger is written at once).
const WRITE_BYTES: usize = 64 << 10;

/// Most bytes of blocks [`Spill::joined`] reads at once.
const JOINED_BYTES: usize = 256 << 10;

impl Spill {
    /// Copies the blocks held in memory into the calling thread's
    /// allocations (see [`crate::heap::relocate_after_pass`]).
    pub(crate) fn relocate(&mut self) {
        crate::heap::renew(&mut self.pending);
        crate::heap::renew(&mut self.memory);
    }

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
        self.file.get_or_insert_with(temp_file);
        if let (Some(Some(_)), Ok(len), false) = (&self.file, u32::try_from(bytes.len()), self.full)
        {
            let offset = self.len;
            if bytes.len() >= WRITE_BYTES {
                // Written as it is, after what waits (when that fails, this
                // block goes to memory below).
                self.write_pending();
                if !self.full && self.write(&bytes) {
                    self.len += u64::from(len);
                    self.written = self.len;
                    return Span::File { offset, len };
                }
            } else {
                self.pending.extend_from_slice(&bytes);
                self.len += u64::from(len);
                if self.pending.len() >= WRITE_BYTES {
                    self.write_pending();
                }
                return Span::File { offset, len };
            }
        }
        self.memory.push(bytes);
        Span::Memory((self.memory.len() - 1) as u32)
    }

    /// Write `bytes` at the end of the file; false (and the spill is full)
    /// when that fails.
    fn write(&mut self, bytes: &[u8]) -> bool {
        let ok = match &self.file {
            Some(Some(f)) => write_at(f, bytes, self.written).is_ok(),
            _ => false,
        };
        self.full |= !ok;
        ok
    }

    /// The gathered blocks to the file (kept in `pending` if that fails).
    fn write_pending(&mut self) {
        if self.pending.is_empty() || self.full {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        if self.write(&pending) {
            self.written += pending.len() as u64;
            self.pending = pending;
            self.pending.clear();
        } else {
            self.pending = pending;
        }
    }

    /// A block back. The file is this process's own and unlinked, so a
    /// failed read is a failing disk or a bug: it stops the analysis rather
    /// than drop requests silently.
    pub(crate) fn get(&self, span: Span) -> Vec<u8> {
        match span {
            Span::Memory(i) => self.memory.get(i as usize).cloned().unwrap_or_default(),
            Span::File { offset, len } if offset >= self.written => {
                let at = (offset - self.written) as usize;
                match self.pending.get(at..at + len as usize) {
                    Some(b) => b.to_vec(),
                    None => panic!("a spilled block is not where it was put (a bug)"),
                }
            }
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

    /// `spans` in the order they lie in the file, those next to each other
    /// (and on the same side of what was written) joined, up to
    /// [`JOINED_BYTES`]: getting the joined spans gives the same bytes as
    /// getting the others in that order, with fewer reads. Blocks in
    /// memory come last, as they are.
    pub(crate) fn joined(&self, spans: impl IntoIterator<Item = Span>) -> Vec<Span> {
        let (mut file, memory): (Vec<Span>, Vec<Span>) = spans
            .into_iter()
            .partition(|s| matches!(s, Span::File { .. }));
        let at = |s: &Span| match s {
            Span::File { offset, .. } => *offset,
            Span::Memory(_) => u64::MAX,
        };
        file.sort_unstable_by_key(at);
        let mut out: Vec<Span> = Vec::with_capacity(file.len() + memory.len());
        for s in file {
            let both = out.last().and_then(|&last| self.join(last, s));
            match (both, out.last_mut()) {
                (Some(both), Some(last)) => *last = both,
                _ => out.push(s),
            }
        }
        out.extend(memory);
        out
    }

    /// `a` and `b` as one span, if `b` follows `a` in the file, on the same
    /// side of what was written (a block lies wholly in the file or wholly
    /// in `pending`), and both make at most [`JOINED_BYTES`].
    fn join(&self, a: Span, b: Span) -> Option<Span> {
        let (Span::File { offset, len }, Span::File { offset: o, len: l }) = (a, b) else {
            return None;
        };
        let next = offset + u64::from(len) == o;
        let same_side = (offset >= self.written) == (o >= self.written);
        let len = len.checked_add(l).filter(|&n| n as usize <= JOINED_BYTES)?;
        (next && same_side).then_some(Span::File { offset, len })
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

/// Reads blocks that are read back about in the order they were set aside
/// (a connection's request facts) a joined run at a time ([`JOINED_BYTES`]),
/// instead of one read per block.
#[derive(Debug, Default)]
pub(crate) struct ReadAhead {
    /// Offset in the file of `bytes`.
    at: u64,
    bytes: Vec<u8>,
}

impl ReadAhead {
    /// The bytes of `span`: from what was read ahead, or read now together
    /// with the spans of `next` that follow it in the file (`next`: the
    /// blocks to be read after it, in that order).
    pub(crate) fn get<'a>(
        &'a mut self,
        spill: &Spill,
        span: Span,
        next: impl IntoIterator<Item = Span>,
    ) -> std::borrow::Cow<'a, [u8]> {
        let Span::File { offset, len } = span else {
            return spill.get(span).into();
        };
        // (Blocks not yet written are read from memory anyway.)
        let end = offset + u64::from(len);
        if end > spill.written {
            return spill.get(span).into();
        }
        let held = self.at + self.bytes.len() as u64;
        if offset < self.at || end > held {
            let mut joined = span;
            for s in next {
                match spill.join(joined, s) {
                    Some(both) => joined = both,
                    None => break,
                }
            }
            self.bytes = spill.get(joined);
            self.at = offset;
        }
        let from = (offset - self.at) as usize;
        std::borrow::Cow::Borrowed(&self.bytes[from..from + len as usize])
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

    /// Blocks of every size, many more bytes than one write gathers, some
    /// larger than one: each reads back, from the file or from what waits
    /// to be written.
    #[test]
    fn gathered_and_large_blocks_read_back() {
        let sizes = [
            0usize,
            1,
            2048,
            3700,
            WRITE_BYTES - 1,
            WRITE_BYTES,
            5 * WRITE_BYTES / 2,
        ];
        let blocks: Vec<Vec<u8>> = (0..120u32)
            .map(|i| {
                let n = sizes[i as usize % sizes.len()] + i as usize;
                (0..n)
                    .map(|b| (b as u32 ^ i.wrapping_mul(31)) as u8)
                    .collect()
            })
            .collect();
        let mut s = Spill::default();
        let spans: Vec<Span> = blocks.iter().map(|b| s.put(b.clone())).collect();
        assert!(spans.iter().all(|s| matches!(s, Span::File { .. })));
        assert!(
            s.written > 0 && s.written < s.len,
            "{} of {}",
            s.written,
            s.len
        );
        assert_eq!(s.memory_bytes(), 0);
        for (span, want) in spans.into_iter().zip(&blocks) {
            assert_eq!(&s.get(span), want);
        }
    }

    /// A spill of `n` blocks of up to `most` bytes, some written to the
    /// file, the last gathered for the next write, and one in memory (as
    /// after a failed write), with their spans in the order put.
    fn blocks_everywhere(n: u32, most: u32) -> (Spill, Vec<Span>) {
        let mut s = Spill::default();
        let mut spans: Vec<Span> = (0..n)
            .map(|i| s.put((0..(i * 7919) % most).map(|b| (b ^ i) as u8).collect()))
            .collect();
        assert!(s.written > 0 && s.written < s.len);
        s.memory.push(vec![7; 10]);
        spans.push(Span::Memory(0));
        (s, spans)
    }

    /// Spans joined where they lie next to each other read back the same
    /// bytes in file order, in fewer and bounded reads, whichever order
    /// they are given in; none joins across what was written, nor a span
    /// in memory.
    #[test]
    fn joined_spans_read_back_the_same_bytes() {
        let (s, spans) = blocks_everywhere(400, 5000);
        let want: Vec<u8> = spans.iter().flat_map(|&sp| s.get(sp)).collect();
        // Every other block, backwards: joined only where neighbours remain.
        let some: Vec<Span> = spans.iter().rev().step_by(2).copied().collect();
        let mut some_sorted = some.clone();
        some_sorted.sort_by_key(|sp| match sp {
            Span::File { offset, .. } => *offset,
            Span::Memory(_) => u64::MAX,
        });
        let some_want: Vec<u8> = some_sorted.iter().flat_map(|&sp| s.get(sp)).collect();
        let some_joined = s.joined(some.iter().copied());
        assert_eq!(some_joined.len(), some.len());
        assert_eq!(
            some_joined
                .iter()
                .flat_map(|&sp| s.get(sp))
                .collect::<Vec<u8>>(),
            some_want
        );
        // All of them, shuffled.
        let mut shuffled = spans.clone();
        shuffled.reverse();
        shuffled.swap(3, 250);
        let joined = s.joined(shuffled);
        assert!(joined.len() < spans.len() / 20, "{} reads", joined.len());
        assert_eq!(
            joined.iter().flat_map(|&sp| s.get(sp)).collect::<Vec<u8>>(),
            want
        );
        for sp in &joined {
            if let Span::File { offset, len } = *sp {
                assert!(len as usize <= JOINED_BYTES);
                let end = offset + u64::from(len);
                assert!(
                    end <= s.written || offset >= s.written,
                    "{offset}+{len} across {}",
                    s.written
                );
            }
        }
    }

    /// Blocks read through a read-ahead come back as they were put, in
    /// order, backwards, skipping, with `next` naming the wrong blocks, or
    /// none; those not yet written and those in memory too.
    #[test]
    fn read_ahead_gives_each_block() {
        let (s, spans) = blocks_everywhere(300, 6000);
        let want: Vec<Vec<u8>> = spans.iter().map(|&sp| s.get(sp)).collect();
        let n = spans.len();
        let orders: [Vec<usize>; 3] = [
            (0..n).collect(),
            (0..n).rev().collect(),
            (0..n).step_by(3).chain((1..n).step_by(3)).collect(),
        ];
        for order in orders {
            for wrong_next in [false, true] {
                let mut ahead = ReadAhead::default();
                for (k, &i) in order.iter().enumerate() {
                    let next: Vec<Span> = if wrong_next {
                        spans.iter().rev().take(5).copied().collect()
                    } else {
                        order[k + 1..].iter().take(64).map(|&j| spans[j]).collect()
                    };
                    let got = ahead.get(&s, spans[i], next);
                    assert_eq!(&got[..], &want[i][..], "block {i}");
                }
            }
        }
    }

    /// A file that cannot be written (a full disk): the blocks go to memory
    /// and all read back, those gathered for the failed write included.
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
        for large in [false, true] {
            let mut s = Spill {
                file: Some(Some(
                    std::fs::File::try_clone(&full).expect("a second handle"),
                )),
                ..Default::default()
            };
            // Small blocks until a gathered write fails, then (with `large`) a
            // block written at once, then more.
            let mut blocks = Vec::new();
            while blocks.len() < 200 {
                let i = blocks.len() as u32;
                let n = if large && i == 10 {
                    2 * WRITE_BYTES
                } else {
                    3000 + i as usize
                };
                blocks.push((0..n).map(|b| (b as u32 ^ i) as u8).collect::<Vec<u8>>());
            }
            let spans: Vec<Span> = blocks.iter().map(|b| s.put(b.clone())).collect();
            assert!(s.full);
            let in_file = spans
                .iter()
                .filter(|s| matches!(s, Span::File { .. }))
                .count();
            assert!(in_file > 0 && in_file < spans.len(), "{in_file}");
            assert!(matches!(spans[spans.len() - 1], Span::Memory(_)));
            // Every block reads back, those gathered for the failed write too.
            for (span, want) in spans.into_iter().zip(&blocks) {
                assert_eq!(&s.get(span), want);
            }
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
