//! What is gathered from each transaction as it is logged, so that the
//! tables derived from all of them (srt, concurrency, time profile, failed
//! requests, counters) need no second reading of the compressed log.

use crate::srt_table::SrtBuilder;
use crate::transactions::Transaction;
use crate::tx_facts::Facts;

/// Accumulated while the log fills; turned into tables after the pass.
#[derive(Debug, Default)]
pub struct Derived {
    pub(crate) srt: SrtBuilder,
    /// Every transaction's compact facts, in emission order until
    /// [`Derived::into_request_order`].
    pub(crate) facts: Facts,
    /// The failed requests (few), with their emission number.
    pub(crate) failed: Vec<(u64, Transaction)>,
    pub(crate) unanswered: u64,
}

impl Derived {
    /// Take in one transaction; `seq` is its emission number in the log.
    pub(crate) fn add(&mut self, t: &Transaction, seq: u64) {
        self.srt.add(t);
        self.facts.add(t, seq);
        self.unanswered += u64::from(t.reply.is_none());
        if crate::transaction_table::failed(t) {
            self.failed.push((seq, t.clone()));
        }
    }

    /// Facts and failed requests in request order, as the log reads back.
    pub(crate) fn into_request_order(mut self) -> Self {
        self.facts.sort();
        self.failed
            .sort_by_key(|(s, t)| (t.request.first_frame, t.request.last_frame, *s));
        self
    }
}
