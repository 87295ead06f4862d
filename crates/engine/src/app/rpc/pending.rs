//! Outstanding calls of one connection (or UDP flow), keyed by the
//! direction the call travelled and its XID, bounded: past the cap the
//! oldest call is evicted (and reported unanswered by the caller).

use std::collections::VecDeque;

// Looked up for every call and reply: a fast hasher (seeded per process).
use foldhash::HashMap;

use crate::transactions::Transaction;

use super::decode::ReplyCtx;

/// Most outstanding calls kept per connection.
pub const MAX_OUTSTANDING: usize = 65536;

/// (direction of the call, XID).
pub type CallKey = (u8, u32);

#[derive(Debug, Default)]
pub struct PendingCall {
    pub tx: Transaction,
    pub ctx: ReplyCtx,
    serial: u64,
}

#[derive(Debug)]
pub struct PendingCalls {
    /// Boxed: a call is about 700 bytes (its transaction so far), and a
    /// map's slots, most of them empty, are sized for the most calls ever
    /// outstanding at once; thousands of open connections each kept
    /// kilobytes of empty slots (see `bench/README.md`).
    map: HashMap<CallKey, Box<PendingCall>>,
    /// Insertion order; entries whose serial no longer matches the map are
    /// stale (answered) and skipped.
    order: VecDeque<(CallKey, u64)>,
    serial: u64,
    cap: usize,
}

impl Default for PendingCalls {
    fn default() -> Self {
        Self::with_capacity(MAX_OUTSTANDING)
    }
}

impl PendingCalls {
    pub fn with_capacity(cap: usize) -> Self {
        PendingCalls {
            map: HashMap::default(),
            order: VecDeque::new(),
            serial: 0,
            cap: cap.max(1),
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn get(&self, key: &CallKey) -> Option<&PendingCall> {
        self.map.get(key).map(|p| &**p)
    }

    pub fn get_mut(&mut self, key: &CallKey) -> Option<&mut PendingCall> {
        self.map.get_mut(key).map(|p| &mut **p)
    }

    pub fn contains(&self, key: &CallKey) -> bool {
        self.map.contains_key(key)
    }

    /// (Boxed as kept: the caller completes and logs the transaction where
    /// it lies rather than moving its 700 bytes out.)
    pub fn remove(&mut self, key: &CallKey) -> Option<Box<PendingCall>> {
        let p = self.map.remove(key);
        if self.order.len() > 2 * self.map.len() + 1024 {
            let map = &self.map;
            self.order
                .retain(|(k, s)| map.get(k).is_some_and(|p| p.serial == *s));
        }
        p
    }

    /// Add a call (the key must not be present), made in its box by the
    /// caller ([`PendingCall::default`]); returns the oldest call if the
    /// table was full.
    pub fn insert(&mut self, key: CallKey, mut call: Box<PendingCall>) -> Option<Box<PendingCall>> {
        let evicted = if self.map.len() >= self.cap {
            self.pop_oldest()
        } else {
            None
        };
        self.serial += 1;
        self.order.push_back((key, self.serial));
        call.serial = self.serial;
        self.map.insert(key, call);
        evicted
    }

    fn pop_oldest(&mut self) -> Option<Box<PendingCall>> {
        while let Some((k, s)) = self.order.pop_front() {
            if self.map.get(&k).is_some_and(|p| p.serial == s) {
                return self.map.remove(&k);
            }
        }
        None
    }

    /// Every outstanding call, oldest first.
    pub fn drain(&mut self) -> Vec<PendingCall> {
        let mut v: Vec<PendingCall> = self.map.drain().map(|(_, p)| *p).collect();
        v.sort_by_key(|p| p.serial);
        self.order.clear();
        v
    }
}

/// Calls answered recently: a call seen again after its reply is a
/// retransmission the server answers from its duplicate request cache.
#[derive(Debug, Default)]
pub struct RecentlyAnswered {
    map: HashMap<CallKey, u64>,
    order: VecDeque<CallKey>,
}

/// How many answered XIDs each flow remembers.
pub const RECENT_ANSWERED: usize = 1024;

impl RecentlyAnswered {
    /// Remember that `key` was answered in frame `reply_frame`.
    pub fn insert(&mut self, key: CallKey, reply_frame: u64) {
        if self.map.insert(key, reply_frame).is_none() {
            self.order.push_back(key);
            if self.order.len() > RECENT_ANSWERED {
                if let Some(old) = self.order.pop_front() {
                    self.map.remove(&old);
                }
            }
        }
    }

    /// The reply frame of `key`, if it was answered recently.
    pub fn get(&self, key: &CallKey) -> Option<u64> {
        self.map.get(key).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_oldest_first() {
        let mut p = PendingCalls::with_capacity(2);
        let tx = |id| {
            let mut c = Box::<PendingCall>::default();
            c.tx.id = id;
            c
        };
        assert!(p.insert((0, 1), tx(1)).is_none());
        assert!(p.insert((0, 2), tx(2)).is_none());
        assert_eq!(p.remove(&(0, 1)).map(|c| c.tx.id), Some(1));
        assert!(p.insert((0, 3), tx(3)).is_none());
        let ev = p.insert((0, 4), tx(4));
        assert_eq!(ev.map(|e| e.tx.id), Some(2));
        assert_eq!(p.len(), 2);
        let left: Vec<u64> = p.drain().into_iter().map(|c| c.tx.id).collect();
        assert_eq!(left, vec![3, 4]);
    }
}
