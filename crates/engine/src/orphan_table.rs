//! `orphan_replies`: replies whose request was not captured (the capture
//! started mid-transaction, or the request was lost before the capture
//! point). Listed, never dropped silently.

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, StringBuilder, TimestampNanosecondBuilder, UInt32Builder, UInt64Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, TimeUnit};

use crate::transactions::TransactionLog;

pub(crate) fn orphan_replies(log: &TransactionLog) -> RecordBatch {
    let mut protocol = StringBuilder::new();
    let mut stream = UInt32Builder::new();
    let mut id = UInt64Builder::new();
    let mut ff = UInt64Builder::new();
    let mut lf = UInt64Builder::new();
    let mut ft = TimestampNanosecondBuilder::new().with_timezone("UTC");
    let mut bytes = UInt64Builder::new();
    let mut complete = BooleanBuilder::new();
    let mut status = UInt32Builder::new();
    for o in &log.orphan_replies {
        protocol.append_value(o.protocol);
        stream.append_value(o.stream);
        id.append_value(o.id);
        ff.append_value(o.reply.first_frame);
        lf.append_value(o.reply.last_frame);
        ft.append_value(o.reply.first_ts);
        bytes.append_value(o.reply.bytes);
        complete.append_value(o.reply.complete);
        status.append_option(o.status);
    }
    let ts = DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()));
    let fields = vec![
        Field::new("protocol", DataType::Utf8, false),
        Field::new("stream", DataType::UInt32, false),
        Field::new("id", DataType::UInt64, false),
        Field::new("reply_first_frame", DataType::UInt64, false),
        Field::new("reply_last_frame", DataType::UInt64, false),
        Field::new("reply_first_time", ts, false),
        Field::new("reply_bytes", DataType::UInt64, false),
        Field::new("reply_complete", DataType::Boolean, false),
        Field::new("status", DataType::UInt32, true),
    ];
    let cols: Vec<ArrayRef> = vec![
        Arc::new(protocol.finish()),
        Arc::new(stream.finish()),
        Arc::new(id.finish()),
        Arc::new(ff.finish()),
        Arc::new(lf.finish()),
        Arc::new(ft.finish()),
        Arc::new(bytes.finish()),
        Arc::new(complete.finish()),
        Arc::new(status.finish()),
    ];
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
        .expect("orphan columns match their schema")
}
