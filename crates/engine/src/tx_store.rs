//! Completed transactions, kept compact so that memory does not grow with
//! the capture: a long capture holds millions of requests, and a
//! [`Transaction`] takes about a kilobyte in memory (strings, handles,
//! options) but some tens of bytes serialised and compressed.
//!
//! The parsers emit a transaction when its reply arrives (or when it is
//! given up), so emission is close to request order but not equal to it.
//! The store keeps the most recent [`WINDOW`] transactions as they are (a
//! reorder buffer); when it is full, the oldest [`RUN`] of them, sorted, are
//! serialised (bincode) and compressed (zstd) into a run. Runs therefore
//! follow each other in order. A transaction whose request comes before the
//! end of the last run (a request answered very late, or never) goes to a
//! separate `late` list, also compressed in chunks. Reading merges the runs,
//! the buffer and the late list back into request order: by the request's
//! first frame, then its last frame, then emission order (as the stable sort
//! it replaces). The compressed chunks go to a temporary file (see
//! [`crate::spill`]), so memory is the buffer alone, whatever the capture's
//! length; only the late list is decoded whole when read (it is small unless
//! most requests went unanswered for a long time).

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use crate::spill::{Codec, Packed, Spill};
use crate::transactions::Transaction;

/// Transactions per compressed run. The reorder window is most of the
/// store's memory (a transaction in memory takes one to two kilobytes with
/// its strings); 1024 sends about 0.5 % of a busy capture's requests to the
/// late list (4096 sent 0.1 %) for 4 MB less memory.
const RUN: usize = 1024;
/// Transactions kept uncompressed (the reorder window).
const WINDOW: usize = 2 * RUN;

/// Request order: first frame, last frame, emission number.
type Key = (u64, u64, u64);

fn key(seq: u64, t: &Transaction) -> Key {
    (t.request.first_frame, t.request.last_frame, seq)
}

/// A record as written: the emission number, the transaction's static
/// names (serde cannot read back a `&'static str`) and the rest.
type Written<'a> = (u64, &'a str, &'a str, Option<&'a str>, &'a Transaction);
type Read = (u64, String, String, Option<String>, Transaction);

/// The `&'static str` the parsers wrote for a name read back. Names come from
/// the program's own tables, so the set is small and bounded; one not seen
/// before is kept once.
fn intern(s: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let names = NAMES.get_or_init(Default::default);
    let mut set = match names.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    };
    if let Some(&known) = set.get(s) {
        return known;
    }
    let kept: &'static str = Box::leak(s.to_owned().into_boxed_str());
    set.insert(kept);
    kept
}

/// Serialise and compress `items` into the spill.
fn pack(items: &[(u64, Transaction)], spill: &mut Spill) -> Option<Packed> {
    let written: Vec<Written<'_>> = items
        .iter()
        .map(|(s, t)| (*s, t.protocol, t.transport, t.auth, t))
        .collect();
    spill.put_packed(&written, Codec::Zstd)
}

fn unpack(p: Packed, spill: &Spill) -> Option<Vec<(u64, Transaction)>> {
    let read: Vec<Read> = spill.get_packed(p)?;
    Some(
        read.into_iter()
            .map(|(s, protocol, transport, auth, mut t)| {
                t.protocol = intern(&protocol);
                t.transport = intern(&transport);
                t.auth = auth.as_deref().map(intern);
                (s, t)
            })
            .collect(),
    )
}

/// The transactions of one analysis (see the module documentation).
#[derive(Debug, Default)]
pub struct TxStore {
    /// Reorder buffer, emission order.
    hot: Vec<(u64, Transaction)>,
    /// Sorted runs, each after the previous one.
    runs: Vec<Packed>,
    /// Key of the last transaction in the runs.
    high: Option<Key>,
    late: Vec<(u64, Transaction)>,
    late_chunks: Vec<Packed>,
    /// Transactions that could not be encoded and are kept as they are
    /// (none in practice; a fallback that loses nothing).
    unencoded: Vec<(u64, Transaction)>,
    next_seq: u64,
    spill: Spill,
    /// Count the transactions without keeping them ([`TxStore::counting`]).
    discard: bool,
}

impl TxStore {
    /// Copies what is held in memory into the calling thread's allocations
    /// (see [`crate::heap::relocate_after_pass`]).
    pub(crate) fn relocate(&mut self) {
        crate::heap::renew(&mut self.hot);
        crate::heap::renew(&mut self.runs);
        crate::heap::renew(&mut self.late);
        crate::heap::renew(&mut self.late_chunks);
        crate::heap::renew(&mut self.unencoded);
        self.spill.relocate();
    }

    pub fn len(&self) -> usize {
        self.next_seq as usize
    }

    pub fn is_empty(&self) -> bool {
        self.next_seq == 0
    }

    /// A store that only counts: for runs that never read the log (the
    /// rules read the engine's summaries), keeping it is about a tenth of
    /// the pass.
    pub fn counting() -> Self {
        TxStore {
            discard: true,
            ..Default::default()
        }
    }

    /// Whether the transactions are kept (not a [`TxStore::counting`] one).
    pub fn kept(&self) -> bool {
        !self.discard
    }

    /// [`TxStore::push`], taking `t` (leaving a default one) only when
    /// transactions are kept.
    pub fn push_from(&mut self, t: &mut Transaction) {
        if self.discard {
            self.next_seq += 1;
        } else {
            self.push(std::mem::take(t));
        }
    }

    pub fn push(&mut self, t: Transaction) {
        let seq = self.next_seq;
        self.next_seq += 1;
        if self.discard {
            return;
        }
        if self.high.is_some_and(|h| key(seq, &t) < h) {
            self.late.push((seq, t));
            if self.late.len() >= RUN {
                let items = std::mem::take(&mut self.late);
                self.stash(items, true);
            }
            return;
        }
        self.hot.push((seq, t));
        if self.hot.len() >= WINDOW {
            self.hot.sort_unstable_by_key(|(s, t)| key(*s, t));
            let rest = self.hot.split_off(RUN);
            let run = std::mem::replace(&mut self.hot, rest);
            self.high = run.last().map(|(s, t)| key(*s, t));
            self.stash(run, false);
        }
    }

    /// No more transactions: compress the reorder buffer and the late ones
    /// too (the log is only read from now on). Pushing afterwards still works.
    pub fn seal(&mut self) {
        if !self.hot.is_empty() {
            self.hot.sort_unstable_by_key(|(s, t)| key(*s, t));
            let run = std::mem::take(&mut self.hot);
            self.high = run.last().map(|(s, t)| key(*s, t));
            self.stash(run, false);
        }
        if !self.late.is_empty() {
            let items = std::mem::take(&mut self.late);
            self.stash(items, true);
        }
    }

    fn stash(&mut self, items: Vec<(u64, Transaction)>, late: bool) {
        match pack(&items, &mut self.spill) {
            Some(c) if late => self.late_chunks.push(c),
            Some(c) => self.runs.push(c),
            None => self.unencoded.extend(items),
        }
    }

    fn decode(&self, c: &Packed) -> Vec<(u64, Transaction)> {
        // The store wrote these bytes itself: they fail to read back only
        // through a bug, which must not silently drop requests.
        unpack(*c, &self.spill).unwrap_or_else(|| {
            panic!("a compressed run of transactions does not read back (a bug)")
        })
    }

    /// Every transaction, in request order.
    pub fn iter(&self) -> impl Iterator<Item = Transaction> + '_ {
        let mut tail = self.hot.clone();
        tail.sort_unstable_by_key(|(s, t)| key(*s, t));
        let main = self
            .runs
            .iter()
            .flat_map(move |c| self.decode(c))
            .chain(tail);
        let mut late: Vec<(u64, Transaction)> = self
            .late_chunks
            .iter()
            .flat_map(|c| self.decode(c))
            .chain(self.late.iter().cloned())
            .chain(self.unencoded.iter().cloned())
            .collect();
        late.sort_unstable_by_key(|(s, t)| key(*s, t));
        Merge {
            a: main.peekable(),
            b: late.into_iter().peekable(),
        }
    }

    /// Every transaction, in request order, as a vector (tests, small logs).
    pub fn to_vec(&self) -> Vec<Transaction> {
        self.iter().collect()
    }

    /// Bytes kept (compressed chunks, wherever they are, and the buffers'
    /// structs).
    #[cfg(test)]
    fn held_bytes(&self) -> usize {
        let chunks: usize = self
            .runs
            .iter()
            .chain(&self.late_chunks)
            .map(|c| self.spill.packed_len(*c))
            .sum();
        let items = self.hot.len() + self.late.len() + self.unencoded.len();
        chunks + items * std::mem::size_of::<(u64, Transaction)>()
    }
}

/// Merge of two iterators sorted by [`key`].
struct Merge<A: Iterator<Item = (u64, Transaction)>, B: Iterator<Item = (u64, Transaction)>> {
    a: std::iter::Peekable<A>,
    b: std::iter::Peekable<B>,
}

impl<A, B> Iterator for Merge<A, B>
where
    A: Iterator<Item = (u64, Transaction)>,
    B: Iterator<Item = (u64, Transaction)>,
{
    type Item = Transaction;

    fn next(&mut self) -> Option<Transaction> {
        let take_a = match (self.a.peek(), self.b.peek()) {
            (Some((sa, ta)), Some((sb, tb))) => key(*sa, ta) <= key(*sb, tb),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return None,
        };
        let next = if take_a { self.a.next() } else { self.b.next() };
        next.map(|(_, t)| t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transactions::PduSpan;

    fn tx(first: u64, last: u64, name: &str) -> Transaction {
        Transaction {
            protocol: "nfs",
            transport: "tcp",
            auth: Some("AUTH_UNIX"),
            op: "READ".into(),
            file_name: Some(name.into()),
            file_handle: Some(crate::transactions::IdBytes::from_slice(&[
                1,
                2,
                3,
                first as u8,
            ])),
            client_addr: Some((
                "10.0.0.1"
                    .parse()
                    .unwrap_or(std::net::Ipv4Addr::LOCALHOST.into()),
                700,
            )),
            request: PduSpan {
                first_frame: first,
                last_frame: last,
                first_ts: first as i64 * 10,
                last_ts: last as i64 * 10,
                bytes: 100,
                complete: true,
            },
            ..Default::default()
        }
    }

    /// Emission close to request order, with some very late ones and ties:
    /// reading gives exactly what a stable sort of the emitted list gives.
    #[test]
    fn reads_back_in_request_order_whatever_the_emission_order() {
        let mut emitted = Vec::new();
        let n = 5 * WINDOW as u64 + 123;
        for i in 0..n {
            // Replies come back out of order within ~50 requests.
            let first = i - i % 50 + (49 - i % 50);
            emitted.push(tx(first * 2, first * 2 + 1, &format!("f{i}")));
        }
        // Requests answered very late (or never): emitted at the end.
        for i in 0..300u64 {
            emitted.push(tx(i * 37 % n, i * 37 % n + 5, "late"));
        }
        // Ties: several requests in one frame, emission order kept.
        for j in 0..5 {
            emitted.push(tx(1000, 1000, &format!("tie{j}")));
        }
        let mut store = TxStore::default();
        for t in emitted.iter().cloned() {
            store.push(t);
        }
        let mut expect = emitted.clone();
        expect.sort_by_key(|t| (t.request.first_frame, t.request.last_frame));
        let unsealed = store.to_vec();
        store.seal();
        assert!(store.hot.is_empty() && store.late.is_empty());
        let got = store.to_vec();
        assert_eq!(got.len(), unsealed.len());
        for (a, b) in got.iter().zip(&unsealed) {
            assert_eq!((a.request, &a.file_name), (b.request, &b.file_name));
        }
        assert_eq!(store.len(), expect.len());
        assert_eq!(got.len(), expect.len());
        for (g, e) in got.iter().zip(&expect) {
            assert_eq!(g.request, e.request);
            assert_eq!(g.file_name, e.file_name);
            assert_eq!(g.file_handle, e.file_handle);
            assert_eq!(g.auth, e.auth);
            assert_eq!(g.client_addr, e.client_addr);
        }
        assert!(!store.runs.is_empty() && !store.late_chunks.is_empty() || !store.late.is_empty());
        // Compact: far below the in-memory size of the transactions.
        let in_memory = expect.len() * std::mem::size_of::<Transaction>();
        assert!(
            store.held_bytes() * 3 < in_memory,
            "{} vs {in_memory}",
            store.held_bytes()
        );
    }

    #[test]
    fn static_names_come_back_as_the_same_names() {
        let mut store = TxStore::default();
        store.push(tx(1, 1, "a"));
        for i in 0..WINDOW as u64 {
            store.push(tx(i + 2, i + 2, "b"));
        }
        let first = store.iter().next();
        assert!(first.is_some_and(|t| t.protocol == "nfs" && t.auth == Some("AUTH_UNIX")));
        assert!(store.iter().all(|t| t.transport == "tcp"));
    }
}
