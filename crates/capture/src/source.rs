//! A refillable read buffer over any byte stream, tracking absolute offsets.
//!
//! The buffer is shared ([`Shared`]): whoever keeps packets beyond the next
//! record (the engine's batches for its analysis threads) holds a reference
//! instead of copying their bytes. A refill never writes into a buffer
//! someone else holds: it moves on to a spare one (a returned buffer is
//! reused, so the steady state allocates nothing).

use std::io::{self, Read};
use std::sync::Arc;

/// Half a MiB: the batches in flight hold the buffers their payloads lie
/// in, so this sets how much the pipeline pins (with 1 MiB, and 1 MiB of
/// payload a batch, the peak with 8,640 connections open was 5 MB higher,
/// at the same speed).
const INITIAL_CAPACITY: usize = 512 * 1024;
/// Returned buffers kept for reuse (beyond these, still-held buffers are
/// simply freed when their last holder lets go).
const SPARES: usize = 8;

/// A read buffer that packets' bytes can be borrowed from for longer than
/// one record: see [`crate::CaptureReader::shared_buffer`].
pub type Shared = Arc<Vec<u8>>;

pub(crate) struct Source {
    reader: Box<dyn Read + Send>,
    buf: Shared,
    /// Earlier buffers, possibly still held elsewhere; reused once free.
    spares: Vec<Shared>,
    /// Start of unconsumed data in `buf`.
    pos: usize,
    /// End of valid data in `buf`.
    end: usize,
    /// Absolute stream offset of `buf[0]`.
    base: u64,
    eof: bool,
}

impl Source {
    pub(crate) fn new(reader: Box<dyn Read + Send>) -> Self {
        Self::with_prefix(reader, Vec::new())
    }

    /// A source whose first bytes were already read (format sniffing).
    pub(crate) fn with_prefix(reader: Box<dyn Read + Send>, prefix: Vec<u8>) -> Self {
        let end = prefix.len();
        // `vec![0; n]` is a zeroed allocation (calloc): pages are only
        // touched when data arrives, unlike `resize`.
        let mut buf = vec![0u8; INITIAL_CAPACITY.max(end)];
        buf[..end].copy_from_slice(&prefix);
        Self {
            reader,
            buf: Arc::new(buf),
            spares: Vec::new(),
            pos: 0,
            end,
            base: 0,
            eof: false,
        }
    }

    /// The buffer the current records lie in.
    #[inline]
    pub(crate) fn shared(&self) -> &Shared {
        &self.buf
    }

    /// Unconsumed bytes currently buffered.
    #[inline]
    pub(crate) fn window(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    /// Absolute offset of the first unconsumed byte.
    #[inline]
    pub(crate) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    #[inline]
    pub(crate) fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.end);
    }

    /// Make at least `need` unconsumed bytes available. Returns the number
    /// available, which is less than `need` only at end of stream.
    /// Buffered data may move, so slices from `window` must not be held across.
    pub(crate) fn fill(&mut self, need: usize) -> io::Result<usize> {
        if self.end - self.pos >= need || self.eof {
            return Ok(self.end - self.pos);
        }
        self.own_buffer();
        // `own_buffer` left `buf` held by nobody else: no copy here.
        let buf = Arc::make_mut(&mut self.buf);
        while self.end < need {
            if self.end == buf.len() {
                // Grow geometrically, and only once the data arrives: a
                // corrupt length (callers bound `need` by MAX_RECORD_LEN)
                // in a short file must not cost a huge zeroed allocation.
                let new_len = need.min(buf.len().max(4096) * 2);
                buf.resize(new_len, 0);
            }
            match self.reader.read(&mut buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(self.end - self.pos)
    }

    /// Make `buf` a buffer nobody else holds, with the unconsumed bytes at
    /// its start.
    fn own_buffer(&mut self) {
        let tail = self.end - self.pos;
        if let Some(buf) = Arc::get_mut(&mut self.buf) {
            if self.pos > 0 {
                buf.copy_within(self.pos..self.end, 0);
            }
        } else {
            let mut fresh = self.spare(self.buf.len().max(tail));
            fresh[..tail].copy_from_slice(&self.buf[self.pos..self.end]);
            let held = std::mem::replace(&mut self.buf, Arc::new(fresh));
            if self.spares.len() < SPARES {
                self.spares.push(held);
            }
        }
        self.base += self.pos as u64;
        self.end = tail;
        self.pos = 0;
    }

    /// A buffer of at least `len` bytes: a returned one if any, else new.
    fn spare(&mut self, len: usize) -> Vec<u8> {
        let free = self.spares.iter().position(|b| Arc::strong_count(b) == 1);
        if let Some(b) = free.map(|i| self.spares.swap_remove(i)) {
            // Only `spares` held it, and it holds no weak references.
            if let Ok(mut v) = Arc::try_unwrap(b) {
                if v.len() < len {
                    v.resize(len, 0);
                }
                return v;
            }
        }
        vec![0u8; len]
    }

    /// No more reading: give back the buffers, spares included, and the
    /// underlying reader (a decompressor's window). The offset stays.
    pub(crate) fn release(&mut self) {
        self.base += self.pos as u64;
        self.pos = 0;
        self.end = 0;
        self.eof = true;
        self.buf = Arc::new(Vec::new());
        self.spares = Vec::new();
        self.reader = Box::new(io::empty());
    }

    /// Index in the buffer of the first unconsumed byte; with [`Self::held`]
    /// it lets a record be lent out after it has been consumed (it stays in
    /// place until the next `fill`).
    #[inline]
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    #[inline]
    pub(crate) fn held(&self, index: usize, len: usize) -> &[u8] {
        &self.buf[index..index + len]
    }
}
