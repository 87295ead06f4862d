//! A refillable read buffer over any byte stream, tracking absolute offsets.

use std::io::{self, Read};

const INITIAL_CAPACITY: usize = 4 * 1024 * 1024;

pub(crate) struct Source {
    reader: Box<dyn Read + Send>,
    buf: Vec<u8>,
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
            buf,
            pos: 0,
            end,
            base: 0,
            eof: false,
        }
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
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.base += self.pos as u64;
            self.end -= self.pos;
            self.pos = 0;
        }
        while self.end < need {
            if self.end == self.buf.len() {
                // Grow geometrically, and only once the data arrives: a
                // corrupt length (callers bound `need` by MAX_RECORD_LEN)
                // in a short file must not cost a huge zeroed allocation.
                let new_len = need.min(self.buf.len().max(4096) * 2);
                self.buf.resize(new_len, 0);
            }
            match self.reader.read(&mut self.buf[self.end..]) {
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
