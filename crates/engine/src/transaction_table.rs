//! The `transactions` Arrow table: one row per request.

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, StringBuilder, TimestampNanosecondBuilder, UInt16Builder,
    UInt32Builder, UInt64Builder, UInt8Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, TimeUnit};

use crate::conversations::ConversationTable;
use crate::transactions::{PduSpan, Transaction};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

struct Cols {
    fields: Vec<Field>,
    arrays: Vec<ArrayRef>,
}

impl Cols {
    fn push(&mut self, name: &str, nullable: bool, arr: ArrayRef) {
        self.fields
            .push(Field::new(name, arr.data_type().clone(), nullable));
        self.arrays.push(arr);
    }
}

/// Whether a request failed: a non-zero status, or an RPC-level failure.
pub(crate) fn failed(t: &Transaction) -> bool {
    t.status.is_some_and(|s| s != 0) || t.rpc_status.is_some()
}

/// The `transactions` table (every request of the log, in request order) or
/// `failed_transactions` (the same columns, the failed ones only: the error
/// rule reads those without turning every request into a row).
pub(crate) fn transactions(
    txs: impl IntoIterator<Item = Transaction>,
    n: usize,
    convs: &ConversationTable,
) -> RecordBatch {
    let ts = || TimestampNanosecondBuilder::with_capacity(n).with_timezone("UTC");
    let (mut protocol, mut op, mut transport) = (
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
    );
    let (mut version, mut minor, mut op_code, mut program, mut stream) = (
        UInt32Builder::new(),
        UInt32Builder::new(),
        UInt32Builder::new(),
        UInt32Builder::new(),
        UInt32Builder::new(),
    );
    let (mut cip, mut sip) = (StringBuilder::new(), StringBuilder::new());
    let (mut cport, mut sport) = (UInt16Builder::new(), UInt16Builder::new());
    let mut id = UInt64Builder::new();
    let (mut rq_ff, mut rq_lf, mut rp_ff, mut rp_lf) = (
        UInt64Builder::new(),
        UInt64Builder::new(),
        UInt64Builder::new(),
        UInt64Builder::new(),
    );
    let (mut rq_ft, mut rq_lt, mut rp_ft, mut rp_lt, mut interim) = (ts(), ts(), ts(), ts(), ts());
    let (mut srt, mut server_time, mut rq_xfer, mut rp_xfer) = (
        Float64Builder::new(),
        Float64Builder::new(),
        Float64Builder::new(),
        Float64Builder::new(),
    );
    let (mut rq_bytes, mut rp_bytes, mut offset, mut count, mut reply_count) = (
        UInt64Builder::new(),
        UInt64Builder::new(),
        UInt64Builder::new(),
        UInt64Builder::new(),
        UInt64Builder::new(),
    );
    let mut status = UInt32Builder::new();
    let (mut status_name, mut rpc_status, mut fh, mut fname, mut share) = (
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
    );
    let (mut stable, mut committed) = (UInt32Builder::new(), UInt32Builder::new());
    let mut eof = BooleanBuilder::new();
    let (mut cc, mut cr, mut cg) = (
        UInt16Builder::new(),
        UInt16Builder::new(),
        UInt16Builder::new(),
    );
    let (mut slot, mut hslot, mut thslot) = (
        UInt32Builder::new(),
        UInt32Builder::new(),
        UInt32Builder::new(),
    );
    let (mut session, mut ops, mut auth, mut note) = (
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
    );
    let mut retrans = UInt32Builder::new();
    let mut ops_status = StringBuilder::new();
    let (mut rq_complete, mut rp_complete, mut answered) = (
        BooleanBuilder::new(),
        BooleanBuilder::new(),
        BooleanBuilder::new(),
    );
    let mut ipv = UInt8Builder::new();

    for t in txs {
        protocol.append_value(t.protocol);
        version.append_value(t.version);
        minor.append_value(t.minor_version);
        op.append_value(&t.op);
        op_code.append_value(t.op_code);
        program.append_value(t.program);
        stream.append_value(t.stream);
        transport.append_value(t.transport);
        // Orient by the request: its sender is the client. UDP flows
        // carry their endpoints in the transaction.
        let ends = match convs.get(t.stream).filter(|_| t.transport == "tcp") {
            Some(c) if t.request_dir == 0 => Some((c.a, c.b)),
            Some(c) => Some((c.b, c.a)),
            None => t.client_addr.zip(t.server_addr),
        };
        match ends {
            Some((cl, sv)) => {
                cip.append_value(cl.0.to_string());
                cport.append_value(cl.1);
                sip.append_value(sv.0.to_string());
                sport.append_value(sv.1);
                ipv.append_value(if cl.0.is_ipv4() { 4 } else { 6 });
            }
            None => {
                cip.append_null();
                cport.append_null();
                sip.append_null();
                sport.append_null();
                ipv.append_null();
            }
        }
        id.append_value(t.id);
        let q: &PduSpan = &t.request;
        rq_ff.append_value(q.first_frame);
        rq_lf.append_value(q.last_frame);
        rq_ft.append_value(q.first_ts);
        rq_lt.append_value(q.last_ts);
        rq_xfer.append_value(ms(q.last_ts - q.first_ts));
        rq_bytes.append_value(q.bytes);
        rq_complete.append_value(q.complete);
        answered.append_value(t.reply.is_some());
        match t.reply {
            Some(r) => {
                rp_ff.append_value(r.first_frame);
                rp_lf.append_value(r.last_frame);
                rp_ft.append_value(r.first_ts);
                rp_lt.append_value(r.last_ts);
                rp_xfer.append_value(ms(r.last_ts - r.first_ts));
                rp_bytes.append_value(r.bytes);
                rp_complete.append_value(r.complete);
            }
            None => {
                rp_ff.append_null();
                rp_lf.append_null();
                rp_ft.append_null();
                rp_lt.append_null();
                rp_xfer.append_null();
                rp_bytes.append_null();
                rp_complete.append_null();
            }
        }
        srt.append_option(t.srt_ns().map(ms));
        server_time.append_option(t.server_time_ns().map(ms));
        interim.append_option(t.interim_ts);
        offset.append_option(t.offset);
        count.append_option(t.count);
        reply_count.append_option(t.reply_count);
        status.append_option(t.status);
        status_name.append_option(t.status_name.as_deref());
        rpc_status.append_option(t.rpc_status.as_deref());
        fh.append_option(t.file_handle.as_deref().map(hex));
        fname.append_option(t.file_name.as_deref());
        share.append_option(t.share.as_deref());
        stable.append_option(t.stable);
        committed.append_option(t.committed);
        eof.append_option(t.eof);
        cc.append_option(t.credit_charge);
        cr.append_option(t.credit_request);
        cg.append_option(t.credit_grant);
        slot.append_option(t.slot);
        hslot.append_option(t.highest_slot);
        thslot.append_option(t.target_highest_slot);
        session.append_option(t.session.as_deref().map(hex));
        ops.append_option(t.compound_ops.as_deref());
        ops_status.append_option(t.compound_status.as_deref());
        auth.append_option(t.auth);
        retrans.append_value(t.retransmissions);
        note.append_option(t.note.as_deref());
    }

    let mut c = Cols {
        fields: Vec::new(),
        arrays: Vec::new(),
    };
    c.push("protocol", false, Arc::new(protocol.finish()));
    c.push("version", false, Arc::new(version.finish()));
    c.push("minor_version", false, Arc::new(minor.finish()));
    c.push("op", false, Arc::new(op.finish()));
    c.push("op_code", false, Arc::new(op_code.finish()));
    c.push("program", false, Arc::new(program.finish()));
    c.push("stream", false, Arc::new(stream.finish()));
    c.push("transport", false, Arc::new(transport.finish()));
    c.push("ip_version", true, Arc::new(ipv.finish()));
    c.push("client_ip", true, Arc::new(cip.finish()));
    c.push("client_port", true, Arc::new(cport.finish()));
    c.push("server_ip", true, Arc::new(sip.finish()));
    c.push("server_port", true, Arc::new(sport.finish()));
    c.push("id", false, Arc::new(id.finish()));
    c.push("request_first_frame", false, Arc::new(rq_ff.finish()));
    c.push("request_last_frame", false, Arc::new(rq_lf.finish()));
    c.push("request_first_time", false, Arc::new(rq_ft.finish()));
    c.push("request_last_time", false, Arc::new(rq_lt.finish()));
    c.push("reply_first_frame", true, Arc::new(rp_ff.finish()));
    c.push("reply_last_frame", true, Arc::new(rp_lf.finish()));
    c.push("reply_first_time", true, Arc::new(rp_ft.finish()));
    c.push("reply_last_time", true, Arc::new(rp_lt.finish()));
    c.push("answered", false, Arc::new(answered.finish()));
    c.push("srt_ms", true, Arc::new(srt.finish()));
    c.push("server_time_ms", true, Arc::new(server_time.finish()));
    c.push("request_transfer_ms", false, Arc::new(rq_xfer.finish()));
    c.push("reply_transfer_ms", true, Arc::new(rp_xfer.finish()));
    c.push("interim_time", true, Arc::new(interim.finish()));
    c.push("request_bytes", false, Arc::new(rq_bytes.finish()));
    c.push("reply_bytes", true, Arc::new(rp_bytes.finish()));
    c.push("offset", true, Arc::new(offset.finish()));
    c.push("count", true, Arc::new(count.finish()));
    c.push("reply_count", true, Arc::new(reply_count.finish()));
    c.push("status", true, Arc::new(status.finish()));
    c.push("status_name", true, Arc::new(status_name.finish()));
    c.push("rpc_status", true, Arc::new(rpc_status.finish()));
    c.push("file_handle", true, Arc::new(fh.finish()));
    c.push("file_name", true, Arc::new(fname.finish()));
    c.push("share", true, Arc::new(share.finish()));
    c.push("stable", true, Arc::new(stable.finish()));
    c.push("committed", true, Arc::new(committed.finish()));
    c.push("eof", true, Arc::new(eof.finish()));
    c.push("credit_charge", true, Arc::new(cc.finish()));
    c.push("credit_request", true, Arc::new(cr.finish()));
    c.push("credit_grant", true, Arc::new(cg.finish()));
    c.push("slot", true, Arc::new(slot.finish()));
    c.push("highest_slot", true, Arc::new(hslot.finish()));
    c.push("target_highest_slot", true, Arc::new(thslot.finish()));
    c.push("session", true, Arc::new(session.finish()));
    c.push("compound_ops", true, Arc::new(ops.finish()));
    c.push("compound_status", true, Arc::new(ops_status.finish()));
    c.push("auth", true, Arc::new(auth.finish()));
    c.push("retransmissions", false, Arc::new(retrans.finish()));
    c.push("request_complete", false, Arc::new(rq_complete.finish()));
    c.push("reply_complete", true, Arc::new(rp_complete.finish()));
    c.push("note", true, Arc::new(note.finish()));
    // Timestamp builders carry the UTC zone; the schema must say the same.
    let fields: Vec<Field> = c
        .fields
        .into_iter()
        .map(|f| {
            if matches!(f.data_type(), DataType::Timestamp(_, _)) {
                let nullable = f.is_nullable();
                Field::new(
                    f.name(),
                    DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
                    nullable,
                )
            } else {
                f
            }
        })
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), c.arrays)
        .expect("transaction columns match their schema")
}
