//! Boxes of logged requests kept for the next requests: a parser holds each
//! outstanding request in a box of its own (its transaction is some 600
//! bytes, and the maps of outstanding requests would otherwise size their
//! slots for it), and one allocated and freed per request was most of the
//! NFS/SMB stage's allocations. One pool per protocol serves every
//! connection of an analysis ([`SharedSpares`]): a pool per connection kept
//! its idle boxes, 7.5 MB with 8,640 connections open at once.

use std::cell::RefCell;
use std::rc::Rc;

/// Emptied boxes, at most [`KEPT`] (requests are answered about as fast as
/// they come, so a few dozen suffice for all the connections).
pub(crate) struct Spares<T: Default>(Vec<Box<T>>);

/// A pool shared by the parsers of one protocol (the NFS/SMB stage is one
/// thread).
pub(crate) type SharedSpares<T> = Rc<RefCell<Spares<T>>>;

const KEPT: usize = 64;

impl<T: Default> Default for Spares<T> {
    fn default() -> Self {
        Spares(Vec::new())
    }
}

impl<T: Default> std::fmt::Debug for Spares<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Spares({} kept)", self.0.len())
    }
}

impl<T: Default> Spares<T> {
    /// An empty box: a kept one, or a new one.
    pub(crate) fn take(&mut self) -> Box<T> {
        self.0.pop().unwrap_or_default()
    }

    /// Boxes kept (tests).
    #[cfg(test)]
    pub(crate) fn kept(&self) -> usize {
        self.0.len()
    }

    /// Keep a logged request's box for a later request, emptied now (what
    /// the log did not take is dropped here: a counting log takes nothing,
    /// so this is what keeps one request's fields out of the next).
    pub(crate) fn give(&mut self, mut b: Box<T>) {
        if self.0.len() < KEPT {
            *b = T::default();
            self.0.push(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boxes_come_back_empty_and_few_are_kept() {
        let mut s: Spares<Vec<u32>> = Spares::default();
        let mut b = s.take();
        b.push(7);
        let at: *const Vec<u32> = &*b;
        s.give(b);
        let again = s.take();
        assert!(again.is_empty(), "emptied");
        assert_eq!(&*again as *const Vec<u32>, at, "the same box");
        for _ in 0..KEPT + 3 {
            s.give(Box::new(vec![1]));
        }
        assert_eq!(s.0.len(), KEPT);
    }
}
