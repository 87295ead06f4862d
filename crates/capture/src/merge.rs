//! Several capture files (a rotated set) read as one, in timestamp order.

use crate::error::CaptureError;
use crate::reader::CaptureReader;
use crate::Packet;

/// Merges readers chronologically, as `mergecap` does: the packet with the
/// earliest timestamp comes next; ties go to the file given first.
pub struct MergedReader {
    readers: Vec<CaptureReader>,
    /// Reader whose packet was handed out last (to be advanced next).
    last: Option<usize>,
    started: bool,
    /// Errors that stopped a reader, with the index of the file.
    errors: Vec<(usize, CaptureError)>,
}

impl MergedReader {
    pub fn new(readers: Vec<CaptureReader>) -> Self {
        MergedReader {
            readers,
            last: None,
            started: false,
            errors: Vec::new(),
        }
    }

    fn step(&mut self, i: usize) {
        if let Err(e) = self.readers[i].advance() {
            self.errors.push((i, e));
        }
    }

    /// Move to the next packet of the merged stream; `false` when every file
    /// is exhausted (or stopped by an error, see [`Self::errors`]).
    pub fn advance(&mut self) -> bool {
        if !self.started {
            self.started = true;
            for i in 0..self.readers.len() {
                self.step(i);
            }
        } else if let Some(i) = self.last {
            self.step(i);
        }
        self.last = None;
        let mut best: Option<(i64, usize)> = None;
        for (i, r) in self.readers.iter().enumerate() {
            if let Some(p) = r.current() {
                if best.is_none_or(|(ts, _)| p.ts_ns < ts) {
                    best = Some((p.ts_ns, i));
                }
            }
        }
        self.last = best.map(|(_, i)| i);
        self.last.is_some()
    }

    /// The current packet and the index of the file it came from.
    #[inline]
    pub fn packet(&self) -> Option<(usize, Packet<'_>)> {
        let i = self.last?;
        self.readers[i].current().map(|p| (i, p))
    }

    /// The buffer the current packet lies in (see
    /// [`CaptureReader::shared_buffer`]).
    #[inline]
    pub fn shared_buffer(&self) -> Option<&crate::Shared> {
        self.last.map(|i| self.readers[i].shared_buffer())
    }

    /// Stop reading every file (see [`CaptureReader::finish`]).
    pub fn finish(&mut self) {
        self.last = None;
        self.readers.iter_mut().for_each(CaptureReader::finish);
    }

    pub fn readers(&self) -> &[CaptureReader] {
        &self.readers
    }

    pub fn errors(&self) -> &[(usize, CaptureError)] {
        &self.errors
    }
}
