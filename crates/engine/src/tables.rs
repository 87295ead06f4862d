//! Arrow tables built from the analysers' state at the end of the pass.

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, StringBuilder, TimestampNanosecondBuilder, UInt16Builder,
    UInt32Builder, UInt64Builder, UInt8Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, TimeUnit};

use crate::conversations::ConversationTable;
use crate::tcp::TcpAnalysis;

fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
}

/// One row per TCP conversation, in `tcp.stream` order, oriented client → server.
pub(crate) fn conversations(t: &ConversationTable) -> RecordBatch {
    let convs = t.conversations();
    let n = convs.len();
    let mut stream = UInt32Builder::with_capacity(n);
    let mut ipv = UInt8Builder::with_capacity(n);
    let mut cip = StringBuilder::with_capacity(n, n * 16);
    let mut cport = UInt16Builder::with_capacity(n);
    let mut sip = StringBuilder::with_capacity(n, n * 16);
    let mut sport = UInt16Builder::with_capacity(n);
    let mut rule = StringBuilder::with_capacity(n, n * 4);
    let mut ff = UInt64Builder::with_capacity(n);
    let mut lf = UInt64Builder::with_capacity(n);
    let mut start = TimestampNanosecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut end = TimestampNanosecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut dur = Float64Builder::with_capacity(n);
    let mut u64s: Vec<UInt64Builder> = (0..6).map(|_| UInt64Builder::with_capacity(n)).collect();
    let mut tput_c2s = Float64Builder::with_capacity(n);
    let mut tput_s2c = Float64Builder::with_capacity(n);
    let mut syn = BooleanBuilder::with_capacity(n);
    let mut fin = BooleanBuilder::with_capacity(n);
    let mut rst = BooleanBuilder::with_capacity(n);

    for c in convs {
        let (cdir, why) = c.client_direction();
        let (ci, si) = (cdir as usize, 1 - cdir as usize);
        let (client, server) = if cdir == 0 { (c.a, c.b) } else { (c.b, c.a) };
        stream.append_value(c.stream);
        ipv.append_value(if client.0.is_ipv4() { 4 } else { 6 });
        cip.append_value(client.0.to_string());
        cport.append_value(client.1);
        sip.append_value(server.0.to_string());
        sport.append_value(server.1);
        rule.append_value(why.name());
        ff.append_value(c.first_frame);
        lf.append_value(c.last_frame);
        start.append_value(c.first_ts);
        end.append_value(c.last_ts);
        let d = (c.last_ts - c.first_ts) as f64 / 1e9;
        dur.append_value(d);
        for (b, v) in u64s.iter_mut().zip([
            c.frames[ci],
            c.frames[si],
            c.bytes[ci],
            c.bytes[si],
            c.payload[ci],
            c.payload[si],
        ]) {
            b.append_value(v);
        }
        let rate = |bytes: u64| if d > 0.0 { bytes as f64 * 8.0 / d } else { 0.0 };
        tput_c2s.append_value(rate(c.payload[ci]));
        tput_s2c.append_value(rate(c.payload[si]));
        syn.append_value(c.syn_dir.is_some() || c.synack_dir.is_some());
        fin.append_value(c.fin);
        rst.append_value(c.rst);
    }

    let u64_names = [
        "frames_c2s",
        "frames_s2c",
        "bytes_c2s",
        "bytes_s2c",
        "payload_bytes_c2s",
        "payload_bytes_s2c",
    ];
    let mut fields = vec![
        Field::new("stream", DataType::UInt32, false),
        Field::new("ip_version", DataType::UInt8, false),
        Field::new("client_ip", DataType::Utf8, false),
        Field::new("client_port", DataType::UInt16, false),
        Field::new("server_ip", DataType::Utf8, false),
        Field::new("server_port", DataType::UInt16, false),
        Field::new("client_rule", DataType::Utf8, false),
        Field::new("first_frame", DataType::UInt64, false),
        Field::new("last_frame", DataType::UInt64, false),
        Field::new("start", ts_type(), false),
        Field::new("end", ts_type(), false),
        Field::new("duration_s", DataType::Float64, false),
    ];
    let mut cols: Vec<ArrayRef> = vec![
        Arc::new(stream.finish()),
        Arc::new(ipv.finish()),
        Arc::new(cip.finish()),
        Arc::new(cport.finish()),
        Arc::new(sip.finish()),
        Arc::new(sport.finish()),
        Arc::new(rule.finish()),
        Arc::new(ff.finish()),
        Arc::new(lf.finish()),
        Arc::new(start.finish()),
        Arc::new(end.finish()),
        Arc::new(dur.finish()),
    ];
    for (name, mut b) in u64_names.iter().zip(u64s) {
        fields.push(Field::new(*name, DataType::UInt64, false));
        cols.push(Arc::new(b.finish()));
    }
    for (name, arr) in [
        (
            "throughput_c2s_bps",
            Arc::new(tput_c2s.finish()) as ArrayRef,
        ),
        (
            "throughput_s2c_bps",
            Arc::new(tput_s2c.finish()) as ArrayRef,
        ),
    ] {
        fields.push(Field::new(name, DataType::Float64, false));
        cols.push(arr);
    }
    for (name, mut b) in [("syn", syn), ("fin", fin), ("rst", rst)] {
        fields.push(Field::new(name, DataType::Boolean, false));
        cols.push(Arc::new(b.finish()));
    }
    // The columns are built above with exactly these types and lengths.
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
        .expect("conversation columns match their schema")
}

/// One row per flagged TCP frame and flag (Wireshark's `tcp.analysis.*`),
/// in frame order; `direction` is relative to the conversation's client.
pub(crate) fn tcp_events(t: &TcpAnalysis, convs: &ConversationTable) -> RecordBatch {
    tcp_events_rows(t, convs, 0, usize::MAX)
}

/// Rows `start..stop` (clamped) of [`tcp_events`], made from those events
/// alone.
pub(crate) fn tcp_events_rows(
    t: &TcpAnalysis,
    convs: &ConversationTable,
    start: usize,
    stop: usize,
) -> RecordBatch {
    let log = t.events();
    let stop = stop.min(log.len());
    let start = start.min(stop);
    let events = log.range(start, stop);
    let n = stop - start;
    let mut frame = UInt64Builder::with_capacity(n);
    let mut time = TimestampNanosecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut stream = UInt32Builder::with_capacity(n);
    let mut direction = StringBuilder::with_capacity(n, n * 3);
    let mut kind = StringBuilder::with_capacity(n, n * 14);
    let mut detail = StringBuilder::with_capacity(n, n * 4);
    for e in events {
        frame.append_value(e.frame);
        time.append_value(e.ts);
        stream.append_value(e.stream);
        direction.append_value(event_direction(&e, convs));
        kind.append_value(e.kind.name());
        detail.append_value(e.detail_text());
    }
    let fields = vec![
        Field::new("frame", DataType::UInt64, false),
        Field::new("time", ts_type(), false),
        Field::new("stream", DataType::UInt32, false),
        Field::new("direction", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("detail", DataType::Utf8, false),
    ];
    let cols: Vec<ArrayRef> = vec![
        Arc::new(frame.finish()),
        Arc::new(time.finish()),
        Arc::new(stream.finish()),
        Arc::new(direction.finish()),
        Arc::new(kind.finish()),
        Arc::new(detail.finish()),
    ];
    // The columns are built above with exactly these types and lengths.
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
        .expect("tcp_events columns match their schema")
}

/// A `tcp_events` row's `direction`: "c2s" or "s2c", from the
/// conversation's client.
pub(crate) fn event_direction(e: &crate::tcp::TcpEvent, convs: &ConversationTable) -> &'static str {
    let client = convs.get(e.stream).map_or(0, |c| c.client_direction().0);
    if e.dir == client {
        "c2s"
    } else {
        "s2c"
    }
}

/// `tcp_flag_counts`: frames per Wireshark flag per conversation (only the
/// flags seen), as tshark's expert info counts them.
pub(crate) fn tcp_flag_counts(t: &crate::tcp::TcpAnalysis) -> RecordBatch {
    let rows: Vec<(u32, &'static str, u64)> = t
        .flagged_streams()
        .flat_map(|(s, counts)| {
            counts
                .iter()
                .filter(|(_, n)| *n > 0)
                .map(move |(name, n)| (s, name, n))
        })
        .collect();
    let mut k = crate::columns::Cols::default();
    k.u32("stream", rows.iter().map(|r| r.0).collect());
    k.str("kind", rows.iter().map(|r| r.1));
    k.u64("frames", rows.iter().map(|r| r.2).collect());
    k.finish("tcp_flag_counts")
}
