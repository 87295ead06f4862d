//! What is gathered from each transaction as it is logged, so that the
//! tables derived from all of them (srt, concurrency, time profile, failed and
//! unanswered requests) need no second reading of the compressed log.

use crate::srt_table::SrtBuilder;
use crate::transactions::Transaction;
use crate::tx_facts::Facts;

/// Accumulated while the log fills; turned into tables after the pass.
#[derive(Debug, Default)]
pub struct Derived {
    pub(crate) srt: SrtBuilder,
    /// Every transaction's compact facts, by connection.
    pub(crate) facts: Facts,
    /// The failed requests, kept compressed like the log itself (a storm of
    /// lookups of missing names fails every request).
    pub(crate) failed: crate::tx_store::TxStore,
}

impl Derived {
    /// Take in one transaction; `seq` is its emission number in the log.
    pub(crate) fn add(&mut self, t: &Transaction, seq: u64) {
        self.srt.add(t);
        self.facts.add(t, seq);
        if crate::transaction_table::failed(t) {
            self.failed.push(t.clone());
        }
    }

    /// Copies what is kept into the calling thread's allocations (see
    /// [`crate::heap::relocate_after_pass`]).
    pub(crate) fn relocate(&mut self) {
        self.srt.relocate();
        self.facts.relocate();
        self.failed.relocate();
    }

    /// No more transactions.
    pub(crate) fn seal(mut self) -> Self {
        self.failed.seal();
        self
    }
}
