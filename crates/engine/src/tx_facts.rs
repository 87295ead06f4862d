//! What the derived tables (concurrency, time profile) read of each
//! transaction, in about a hundred bytes: every transaction's facts are held
//! at once while those tables are built, so they are kept compact (names are
//! numbered, options are flag bits) rather than as full [`Transaction`]s.

use crate::interner::Interner;
use crate::transactions::Transaction;

/// First and last byte times of a request or reply.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ends {
    pub first_ts: i64,
    pub last_ts: i64,
}

const HAS_REPLY: u16 = 1;
const TCP: u16 = 1 << 1;
const NEGOTIATE: u16 = 1 << 2;
const HAS_COUNT: u16 = 1 << 3;
const HAS_REPLY_COUNT: u16 = 1 << 4;
const HAS_SLOT: u16 = 1 << 5;
const HAS_HIGHEST_SLOT: u16 = 1 << 6;
const HAS_TARGET_SLOT: u16 = 1 << 7;
const HAS_CHARGE: u16 = 1 << 8;
const HAS_GRANT: u16 = 1 << 9;
const HAS_FILE: u16 = 1 << 10;

/// One transaction's facts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TxFacts {
    /// Emission number in the log (request order ties).
    seq: u64,
    req_last_frame: u64,
    pub req_first_ts: i64,
    pub req_last_ts: i64,
    pub req_first_frame: u64,
    pub req_bytes: u64,
    reply_first_ts: i64,
    reply_last_ts: i64,
    reply_bytes: u64,
    count: u64,
    reply_count: u64,
    pub stream: u32,
    /// Index into [`Names::ops`].
    pub op: u32,
    file: u32,
    slot: u32,
    highest_slot: u32,
    target_highest_slot: u32,
    credit_charge: u16,
    credit_grant: u16,
    flags: u16,
    /// Index into [`Names::protocols`].
    protocol: u8,
}

/// The names the facts refer to by number.
#[derive(Debug, Default)]
pub(crate) struct Names {
    protocols: Vec<&'static str>,
    /// Operation names, and whether each moves file data.
    pub ops: Interner,
    data_ops: Vec<bool>,
    pub files: Interner,
}

impl Names {
    fn protocol_id(&mut self, p: &'static str) -> u8 {
        match self.protocols.iter().position(|x| *x == p) {
            Some(i) => i as u8,
            None if self.protocols.len() < usize::from(u8::MAX) => {
                self.protocols.push(p);
                (self.protocols.len() - 1) as u8
            }
            // (Never: protocol names are a handful of constants.)
            None => u8::MAX,
        }
    }

    fn op_id(&mut self, op: &str) -> u32 {
        let n = self.ops.len();
        let i = self.ops.id(op);
        if self.ops.len() > n {
            self.data_ops.push(crate::time_profile::is_data_op(op));
        }
        i
    }

    pub fn protocol(&self, f: &TxFacts) -> &'static str {
        self.protocols
            .get(usize::from(f.protocol))
            .copied()
            .unwrap_or("")
    }

    pub fn is_data_op(&self, f: &TxFacts) -> bool {
        self.data_ops.get(f.op as usize).copied().unwrap_or(false)
    }
}

/// Every transaction's facts, in request order, and the names they use.
#[derive(Debug, Default)]
pub(crate) struct Facts {
    pub txs: Vec<TxFacts>,
    pub names: Names,
}

impl Facts {
    /// Add one transaction; `seq` is its emission number in the log.
    pub fn add(&mut self, t: &Transaction, seq: u64) {
        let mut flags = 0u16;
        let mut set = |bit: u16, on: bool| {
            if on {
                flags |= bit;
            }
        };
        set(HAS_REPLY, t.reply.is_some());
        set(TCP, t.transport == "tcp");
        set(NEGOTIATE, t.id == 0);
        set(HAS_COUNT, t.count.is_some());
        set(HAS_REPLY_COUNT, t.reply_count.is_some());
        set(HAS_SLOT, t.slot.is_some());
        set(HAS_HIGHEST_SLOT, t.highest_slot.is_some());
        set(HAS_TARGET_SLOT, t.target_highest_slot.is_some());
        set(HAS_CHARGE, t.credit_charge.is_some());
        set(HAS_GRANT, t.credit_grant.is_some());
        let file = t.file_name.as_deref().filter(|f| !f.is_empty());
        set(HAS_FILE, file.is_some());
        let r = t.reply.unwrap_or_default();
        let fact = TxFacts {
            seq,
            req_last_frame: t.request.last_frame,
            req_first_ts: t.request.first_ts,
            req_last_ts: t.request.last_ts,
            req_first_frame: t.request.first_frame,
            req_bytes: t.request.bytes,
            reply_first_ts: r.first_ts,
            reply_last_ts: r.last_ts,
            reply_bytes: r.bytes,
            count: t.count.unwrap_or(0),
            reply_count: t.reply_count.unwrap_or(0),
            stream: t.stream,
            op: self.names.op_id(&t.op),
            file: file.map_or(0, |f| self.names.files.id(f)),
            slot: t.slot.unwrap_or(0),
            highest_slot: t.highest_slot.unwrap_or(0),
            target_highest_slot: t.target_highest_slot.unwrap_or(0),
            credit_charge: t.credit_charge.unwrap_or(0),
            credit_grant: t.credit_grant.unwrap_or(0),
            flags,
            protocol: self.names.protocol_id(t.protocol),
        };
        self.txs.push(fact);
    }

    /// Request order, as the log reads back: first frame, last frame,
    /// emission number.
    pub fn sort(&mut self) {
        self.txs
            .sort_unstable_by_key(|f| (f.req_first_frame, f.req_last_frame, f.seq));
    }
}

impl TxFacts {
    fn has(&self, bit: u16) -> bool {
        self.flags & bit != 0
    }

    fn opt<T: Copy>(&self, bit: u16, v: T) -> Option<T> {
        self.has(bit).then_some(v)
    }

    pub fn tcp(&self) -> bool {
        self.has(TCP)
    }

    /// SMB2 NEGOTIATE (MessageId 0): the credit history starts there.
    pub fn negotiate(&self) -> bool {
        self.has(NEGOTIATE)
    }

    pub fn reply(&self) -> Option<Ends> {
        self.opt(
            HAS_REPLY,
            Ends {
                first_ts: self.reply_first_ts,
                last_ts: self.reply_last_ts,
            },
        )
    }

    pub fn reply_bytes(&self) -> Option<u64> {
        self.opt(HAS_REPLY, self.reply_bytes)
    }

    pub fn count(&self) -> Option<u64> {
        self.opt(HAS_COUNT, self.count)
    }

    pub fn reply_count(&self) -> Option<u64> {
        self.opt(HAS_REPLY_COUNT, self.reply_count)
    }

    pub fn slot(&self) -> Option<u32> {
        self.opt(HAS_SLOT, self.slot)
    }

    pub fn highest_slot(&self) -> Option<u32> {
        self.opt(HAS_HIGHEST_SLOT, self.highest_slot)
    }

    pub fn target_highest_slot(&self) -> Option<u32> {
        self.opt(HAS_TARGET_SLOT, self.target_highest_slot)
    }

    pub fn credit_charge(&self) -> Option<u16> {
        self.opt(HAS_CHARGE, self.credit_charge)
    }

    pub fn credit_grant(&self) -> Option<u16> {
        self.opt(HAS_GRANT, self.credit_grant)
    }

    pub fn file(&self) -> Option<u32> {
        self.opt(HAS_FILE, self.file)
    }

    /// Service response time: last reply byte minus last request byte.
    pub fn srt_ns(&self) -> Option<i64> {
        self.reply().map(|r| r.last_ts - self.req_last_ts)
    }

    /// Last request byte to first reply byte.
    pub fn server_time_ns(&self) -> Option<i64> {
        self.reply().map(|r| r.first_ts - self.req_last_ts)
    }
}

/// `unanswered_requests`: the requests whose reply was not seen, in request
/// order (one row each: what a reset or a stalled server left hanging).
pub(crate) fn unanswered_table(facts: &Facts) -> arrow_array::RecordBatch {
    let rows: Vec<&TxFacts> = facts.txs.iter().filter(|f| f.reply().is_none()).collect();
    let mut k = crate::columns::Cols::default();
    k.u32("stream", rows.iter().map(|f| f.stream).collect());
    let transport = |f: &&TxFacts| if f.tcp() { "tcp" } else { "udp" }.to_string();
    k.str("transport", rows.iter().map(transport).collect());
    let protocol = |f: &&TxFacts| facts.names.protocol(f).to_string();
    k.str("protocol", rows.iter().map(protocol).collect());
    k.str(
        "op",
        rows.iter()
            .map(|f| facts.names.ops.name(f.op).to_string())
            .collect(),
    );
    k.u64(
        "request_first_frame",
        rows.iter().map(|f| f.req_first_frame).collect(),
    );
    k.ts(
        "request_first_time",
        rows.iter().map(|f| f.req_first_ts).collect(),
    );
    k.finish("unanswered_requests")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transactions::PduSpan;

    #[test]
    fn facts_keep_what_the_tables_read() {
        let t = Transaction {
            protocol: "smb2",
            transport: "tcp",
            op: "Read".into(),
            id: 5,
            file_name: Some("a.bin".into()),
            count: Some(65536),
            credit_charge: Some(1),
            slot: None,
            request: PduSpan {
                first_ts: 10,
                last_ts: 20,
                first_frame: 3,
                bytes: 100,
                ..Default::default()
            },
            reply: Some(PduSpan {
                first_ts: 50,
                last_ts: 70,
                bytes: 65600,
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut f = Facts::default();
        f.add(&t, 0);
        f.add(
            &Transaction {
                protocol: "nfs",
                op: "GETATTR".into(),
                ..Default::default()
            },
            1,
        );
        let (a, b) = (&f.txs[0], &f.txs[1]);
        assert_eq!(f.names.protocol(a), "smb2");
        assert_eq!(f.names.protocol(b), "nfs");
        assert!(a.tcp() && !a.negotiate() && b.negotiate() && !b.tcp());
        assert!(f.names.is_data_op(a) && !f.names.is_data_op(b));
        assert_eq!((a.srt_ns(), a.server_time_ns()), (Some(50), Some(30)));
        assert_eq!(
            (a.count(), a.reply_count(), a.slot()),
            (Some(65536), None, None)
        );
        assert_eq!((a.credit_charge(), a.credit_grant()), (Some(1), None));
        assert_eq!(a.file().map(|i| f.names.files.name(i)), Some("a.bin"));
        assert!(b.reply().is_none() && b.file().is_none());
        assert!(std::mem::size_of::<TxFacts>() <= 128);
    }
}
