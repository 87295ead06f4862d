//! The JSON view's per-connection objects (`conversations` in
//! `python/nastriage/views/json_out.py`), written as text from the
//! `conversations`, `tcp_connections` and `tcp_flag_counts` tables.
//!
//! The view builds the same objects in Python for tables that are not the
//! engine's; made there, thousands of connections' objects were a fifth of
//! the command's time (4,743 connections: about 0.1 s of 0.7 s). The text
//! is what the view's encoder writes (orjson, then `\uXXXX` escapes past
//! ASCII): same keys in the same order, numbers in their shortest form,
//! non-finite floats as null (`tests/test_tcp_analysis.py` keeps the two
//! equal, byte for byte).

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, TimestampNanosecondType,
    UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, TimeUnit};

use crate::tcp::limitation::Limit;
use crate::tcp::retrans_class::RetransClass;
use crate::tcp::Flag;

/// Wireshark's TCP analysis flags, in the engine's order (the view's
/// `TCP_FLAGS` lists them so too).
const FLAGS: [Flag; Flag::COUNT] = Flag::ALL;

/// Between two objects of a list (the view's `write_list`).
pub const SEPARATOR: &str = ",\n    ";

/// A column of a table, read by row.
#[derive(Clone, Copy)]
struct Col<'a>(Option<&'a dyn Array>);

impl<'a> Col<'a> {
    fn of(batch: &'a RecordBatch, name: &str) -> Self {
        Col(batch.column_by_name(name).map(|c| c.as_ref()))
    }

    fn valid(&self, i: usize) -> Option<&'a dyn Array> {
        self.0.filter(|a| i < a.len() && a.is_valid(i))
    }

    /// An integer (None: null, or not an integer column).
    fn int(&self, i: usize) -> Option<i128> {
        let a = self.valid(i)?;
        Some(match a.data_type() {
            DataType::UInt8 => a.as_primitive::<UInt8Type>().value(i).into(),
            DataType::UInt16 => a.as_primitive::<UInt16Type>().value(i).into(),
            DataType::UInt32 => a.as_primitive::<UInt32Type>().value(i).into(),
            DataType::UInt64 => a.as_primitive::<UInt64Type>().value(i).into(),
            DataType::Int8 => a.as_primitive::<Int8Type>().value(i).into(),
            DataType::Int16 => a.as_primitive::<Int16Type>().value(i).into(),
            DataType::Int32 => a.as_primitive::<Int32Type>().value(i).into(),
            DataType::Int64 => a.as_primitive::<Int64Type>().value(i).into(),
            DataType::Timestamp(TimeUnit::Nanosecond, _) => {
                a.as_primitive::<TimestampNanosecondType>().value(i).into()
            }
            DataType::Float64 => a.as_primitive::<Float64Type>().value(i) as i128,
            DataType::Float32 => a.as_primitive::<Float32Type>().value(i) as i128,
            _ => return None,
        })
    }

    /// A number as a float (the view's `_num`: integers too).
    fn float(&self, i: usize) -> Option<f64> {
        let a = self.valid(i)?;
        match a.data_type() {
            DataType::Float64 => Some(a.as_primitive::<Float64Type>().value(i)),
            DataType::Float32 => Some(a.as_primitive::<Float32Type>().value(i).into()),
            _ => self.int(i).map(|v| v as f64),
        }
    }

    fn bool(&self, i: usize) -> Option<bool> {
        let a = self.valid(i)?;
        match a.data_type() {
            DataType::Boolean => Some(a.as_boolean().value(i)),
            _ => self.int(i).map(|v| v != 0),
        }
    }

    fn str(&self, i: usize) -> Option<&'a str> {
        let a = self.valid(i)?;
        match a.data_type() {
            DataType::Utf8 => Some(a.as_string::<i32>().value(i)),
            DataType::LargeUtf8 => Some(a.as_string::<i64>().value(i)),
            _ => None,
        }
    }
}

/// JSON text, written as the view's encoder writes it (and a buffer for
/// the floats' digits, reused).
struct Out(String, Vec<u8>);

impl Out {
    fn raw(&mut self, s: &str) {
        self.0.push_str(s);
    }

    /// A key (the view's own names: nothing to escape).
    fn key(&mut self, k: &str) {
        self.0.push('"');
        self.0.push_str(k);
        self.0.push_str("\":");
    }

    /// `"k":v,` (an integer member followed by others).
    fn int_field(&mut self, k: &str, v: Option<i128>) {
        self.key(k);
        self.int(v);
        self.raw(",");
    }

    /// `"k":v,` (a float member followed by others).
    fn float_field(&mut self, k: &str, v: Option<f64>) {
        self.key(k);
        self.float(v);
        self.raw(",");
    }

    fn int(&mut self, v: Option<i128>) {
        use std::fmt::Write;
        match v {
            // (Writing to a String cannot fail.)
            Some(v) => match i64::try_from(v) {
                Ok(v) => _ = write!(self.0, "{v}"),
                Err(_) => _ = write!(self.0, "{v}"),
            },
            None => self.0.push_str("null"),
        }
    }

    /// A finite float in its shortest form (as orjson: `1.0`, `1e-7`,
    /// `1e+16`), else null.
    fn float(&mut self, v: Option<f64>) {
        self.1.clear();
        let digits = v
            .filter(|v| v.is_finite())
            .and_then(|v| serde_json::to_writer(&mut self.1, &v).ok())
            .and_then(|()| std::str::from_utf8(&self.1).ok());
        self.0.push_str(digits.unwrap_or("null"));
    }

    fn bool(&mut self, v: bool) {
        self.0.push_str(if v { "true" } else { "false" });
    }

    fn opt_string(&mut self, v: Option<&str>) {
        match v {
            Some(s) => self.string(s),
            None => self.0.push_str("null"),
        }
    }

    /// A string: orjson's escapes, then `\uXXXX` (surrogate pairs past
    /// U+FFFF) for what is not ASCII.
    fn string(&mut self, s: &str) {
        let out = &mut self.0;
        out.push('"');
        // (Most are plain: addresses, the engine's own words.)
        if s.bytes()
            .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
        {
            out.push_str(s);
            out.push('"');
            return;
        }
        for ch in s.chars() {
            match ch {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c if c.is_ascii() => out.push(c),
                c => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{u:04x}"));
                    }
                }
            }
        }
        out.push('"');
    }

    /// `{"client_to_server":a,"server_to_client":b}` of two values.
    fn directions(&mut self, mut a: impl FnMut(&mut Out), mut b: impl FnMut(&mut Out)) {
        self.raw("{");
        self.key("client_to_server");
        a(self);
        self.raw(",");
        self.key("server_to_client");
        b(self);
        self.raw("}");
    }
}

/// Nanoseconds since the Unix epoch as RFC 3339 UTC with nine fraction
/// digits (the view's `rfc3339_ns`; None outside years 1-9999).
fn rfc3339_ns(ns: i128) -> Option<String> {
    let (secs, frac) = (ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000));
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i128::from(month <= 2);
    if !(1..=9999).contains(&year) {
        return None;
    }
    Some(format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{frac:09}Z",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    ))
}

/// Frames per flag and stream, from `tcp_flag_counts` (stream, kind,
/// frames).
fn flag_counts(flags: Option<&RecordBatch>) -> HashMap<i128, [i128; Flag::COUNT]> {
    let mut out: HashMap<i128, [i128; Flag::COUNT]> = HashMap::new();
    let Some(f) = flags else {
        return out;
    };
    let (stream, kind, frames) = (
        Col::of(f, "stream"),
        Col::of(f, "kind"),
        Col::of(f, "frames"),
    );
    for i in 0..f.num_rows() {
        let (Some(s), Some(k)) = (stream.int(i), kind.str(i)) else {
            continue;
        };
        if let Some(slot) = FLAGS.iter().position(|f| f.name() == k) {
            let counts = out.entry(s).or_insert([0; Flag::COUNT]);
            counts[slot] += frames.int(i).unwrap_or(0);
        }
    }
    out
}

/// The `tcp_connections` columns a `tcp` object reads, looked up once.
struct TcpCols<'a> {
    stream: Col<'a>,
    handshake: [Col<'a>; 3],
    rtt: [(&'static str, Col<'a>); 3],
    complete: Col<'a>,
    samples: Col<'a>,
    side: [Col<'a>; 2],
    mss: [Col<'a>; 2],
    scale: [Col<'a>; 2],
    scale_inferred: Col<'a>,
    zw_episodes: Col<'a>,
    zw_s: Col<'a>,
    stalled: Col<'a>,
    /// By direction (c2s, s2c), by class.
    retrans: [[Col<'a>; 5]; 2],
    lost: [(&'static str, Col<'a>); 3],
    stall_max: Col<'a>,
    capture_point: Col<'a>,
    capture_point_reason: Col<'a>,
    /// By direction, by bucket.
    limits: [[Col<'a>; 5]; 2],
    cc_hint: Col<'a>,
    cc_confidence: Col<'a>,
    cc_direction: Col<'a>,
    cc_reasoning: Col<'a>,
    ack_ratio: [Col<'a>; 2],
    delayed_ack: [Col<'a>; 2],
    in_flight: [Col<'a>; 2],
    tso: Col<'a>,
    idle_periods: Col<'a>,
    idle_s: Col<'a>,
}

impl<'a> TcpCols<'a> {
    fn new(t: &'a RecordBatch) -> Self {
        let c = |name: &str| Col::of(t, name);
        let dirs = |f: &dyn Fn(&str) -> Col<'a>| [f("c2s"), f("s2c")];
        TcpCols {
            stream: c("stream"),
            handshake: [
                c("rtt_handshake_client_ms"),
                c("rtt_handshake_server_ms"),
                c("rtt_handshake_ms"),
            ],
            rtt: ["rtt_min_ms", "rtt_median_ms", "rtt_p95_ms"].map(|n| (n, c(n))),
            complete: c("rtt_complete"),
            samples: c("rtt_samples"),
            side: [c("rtt_client_side_ms"), c("rtt_server_side_ms")],
            mss: [c("mss_client"), c("mss_server")],
            scale: [c("window_scale_client"), c("window_scale_server")],
            scale_inferred: c("window_scale_inferred"),
            zw_episodes: c("zero_window_episodes"),
            zw_s: c("zero_window_s"),
            stalled: c("stalled_fraction"),
            retrans: ["c2s", "s2c"]
                .map(|d| RetransClass::ALL.map(|k| c(&format!("retrans_{}_{d}", k.name())))),
            lost: [
                "lost_before_capture",
                "lost_after_capture",
                "lost_unknown_place",
            ]
            .map(|n| (n, c(n))),
            stall_max: c("timeout_stall_max_ms"),
            capture_point: c("capture_point"),
            capture_point_reason: c("capture_point_reason"),
            limits: ["c2s", "s2c"]
                .map(|d| Limit::ALL.map(|b| c(&format!("limit_{}_{d}", b.name())))),
            cc_hint: c("cc_hint"),
            cc_confidence: c("cc_confidence"),
            cc_direction: c("cc_direction"),
            cc_reasoning: c("cc_reasoning"),
            ack_ratio: dirs(&|d| c(&format!("ack_ratio_{d}"))),
            delayed_ack: dirs(&|d| c(&format!("delayed_ack_ms_{d}"))),
            in_flight: dirs(&|d| c(&format!("max_in_flight_{d}"))),
            tso: c("tso_seen"),
            idle_periods: c("idle_periods"),
            idle_s: c("idle_s"),
        }
    }
}

/// `{"client_to_server":a,"server_to_client":b}` of a pair of columns.
fn pair(o: &mut Out, cols: &[Col<'_>; 2], i: usize, int: bool) {
    named_pair(o, ["client_to_server", "server_to_client"], cols, i, int);
}

/// `{"<keys[0]>":a,"<keys[1]>":b}` of a pair of columns (integers or
/// floats).
fn named_pair(o: &mut Out, keys: [&str; 2], cols: &[Col<'_>; 2], i: usize, int: bool) {
    o.raw("{");
    for (j, (k, c)) in keys.iter().zip(cols).enumerate() {
        if j > 0 {
            o.raw(",");
        }
        o.key(k);
        if int {
            o.int(c.int(i));
        } else {
            o.float(c.float(i));
        }
    }
    o.raw("}");
}

/// The `tcp` object of `tcp_connections` row `i` (the view's
/// `tcp_objects`).
fn tcp_object(o: &mut Out, t: &TcpCols<'_>, i: usize) {
    let flag = |o: &mut Out, c: &Col<'_>| o.bool(c.bool(i).unwrap_or(false));
    o.raw("{");
    o.key("rtt_handshake_ms");
    o.raw("{");
    for (j, (k, c)) in ["client_side", "server_side", "total"]
        .iter()
        .zip(&t.handshake)
        .enumerate()
    {
        if j > 0 {
            o.raw(",");
        }
        o.key(k);
        o.float(c.float(i));
    }
    o.raw("},");
    for (name, c) in &t.rtt {
        o.float_field(name, c.float(i));
    }
    o.key("rtt_complete");
    flag(o, &t.complete);
    o.raw(",");
    o.int_field("rtt_samples", t.samples.int(i));
    o.key("rtt_side_median_ms");
    named_pair(o, ["client_side", "server_side"], &t.side, i, false);
    o.raw(",");
    o.key("mss");
    named_pair(o, ["client", "server"], &t.mss, i, true);
    o.raw(",");
    o.key("window_scale");
    o.raw("{");
    o.int_field("client", t.scale[0].int(i));
    o.int_field("server", t.scale[1].int(i));
    o.key("inferred");
    flag(o, &t.scale_inferred);
    o.raw("},");
    o.int_field("zero_window_episodes", t.zw_episodes.int(i));
    o.float_field("zero_window_s", t.zw_s.float(i));
    o.float_field("stalled_fraction", t.stalled.float(i));
    o.key("retransmissions");
    o.raw("{");
    let [c2s, s2c] = t.retrans.map(|d| d.map(|c| c.int(i)));
    for (k, (a, b)) in RetransClass::ALL.iter().zip(c2s.iter().zip(&s2c)) {
        o.int_field(k.name(), a.zip(*b).map(|(a, b)| a + b));
    }
    for (name, c) in &t.lost {
        o.int_field(name, c.int(i));
    }
    o.float_field("timeout_stall_max_ms", t.stall_max.float(i));
    o.key("by_direction");
    let classes = |o: &mut Out, v: &[Option<i128>; 5]| {
        o.raw("{");
        for (j, (k, x)) in RetransClass::ALL.iter().zip(v).enumerate() {
            if j > 0 {
                o.raw(",");
            }
            o.key(k.name());
            o.int(*x);
        }
        o.raw("}");
    };
    o.directions(|o| classes(o, &c2s), |o| classes(o, &s2c));
    o.raw("},");
    o.key("capture_point");
    o.opt_string(t.capture_point.str(i));
    o.raw(",");
    o.key("capture_point_reason");
    o.opt_string(t.capture_point_reason.str(i));
    o.raw(",");
    o.key("limitation");
    let limits = |o: &mut Out, cols: &[Col<'_>; 5]| {
        let v = cols.map(|c| c.float(i));
        // (null when every value is: the view's `_limitation` sees None
        // for a null and for a non-finite value alike.)
        if v.iter().all(|x| x.is_none_or(|x| !x.is_finite())) {
            o.raw("null");
            return;
        }
        o.raw("{");
        for (j, (b, x)) in Limit::ALL.iter().zip(v).enumerate() {
            if j > 0 {
                o.raw(",");
            }
            o.key(b.name());
            o.float(x);
        }
        o.raw("}");
    };
    o.directions(|o| limits(o, &t.limits[0]), |o| limits(o, &t.limits[1]));
    o.raw(",");
    o.key("cc_hint");
    o.opt_string(t.cc_hint.str(i));
    o.raw(",");
    o.float_field("cc_confidence", t.cc_confidence.float(i));
    o.key("cc_direction");
    o.string(if t.cc_direction.str(i) == Some("c2s") {
        "client_to_server"
    } else {
        "server_to_client"
    });
    o.raw(",");
    o.key("cc_reasoning");
    o.opt_string(t.cc_reasoning.str(i));
    o.raw(",");
    o.key("ack_ratio");
    pair(o, &t.ack_ratio, i, false);
    o.raw(",");
    o.key("delayed_ack_ms");
    pair(o, &t.delayed_ack, i, false);
    o.raw(",");
    o.key("max_in_flight");
    pair(o, &t.in_flight, i, true);
    o.raw(",");
    o.key("tso_seen");
    flag(o, &t.tso);
    o.raw(",");
    o.key("idle");
    o.raw("{");
    o.int_field("periods", t.idle_periods.int(i));
    o.key("seconds");
    o.float(t.idle_s.float(i));
    o.raw("}}");
}

/// The view's conversation objects of `conversations` rows `start..stop`
/// (clamped), each joined with its `tcp_connections` row (the row at the
/// same position: the engine writes both in stream order; none past the
/// end of that table) and its frames per flag, as JSON text separated by
/// [`SEPARATOR`]. Err if the two tables' rows do not line up.
pub fn conversation_objects(
    conv: &RecordBatch,
    tcp: Option<&RecordBatch>,
    flags: Option<&RecordBatch>,
    start: usize,
    stop: usize,
) -> Result<String, String> {
    let stop = stop.min(conv.num_rows());
    let flags = flag_counts(flags);
    let c = |name: &str| Col::of(conv, name);
    let stream = c("stream");
    let ip_version = c("ip_version");
    let ends = [
        ("client", c("client_ip"), c("client_port")),
        ("server", c("server_ip"), c("server_port")),
    ];
    let client_rule = c("client_rule");
    let frame_range = [
        ("first_frame", c("first_frame")),
        ("last_frame", c("last_frame")),
    ];
    let first_ts = c("start");
    let duration = c("duration_s");
    let counts = ["frames", "bytes", "payload_bytes"]
        .map(|k| (k, [c(&format!("{k}_c2s")), c(&format!("{k}_s2c"))]));
    let throughput = [c("throughput_c2s_bps"), c("throughput_s2c_bps")];
    let syn_fin_rst = ["syn", "fin", "rst"].map(|k| (k, c(k)));
    let tcp = tcp.map(|t| (t.num_rows(), TcpCols::new(t)));
    let mut o = Out(
        String::with_capacity(stop.saturating_sub(start) * 1600),
        Vec::new(),
    );
    for i in start..stop {
        if i > start {
            o.raw(SEPARATOR);
        }
        let s = stream.int(i);
        o.raw("{");
        o.int_field("stream", s);
        o.int_field("ip_version", ip_version.int(i));
        for (side, ip, port) in &ends {
            o.key(side);
            o.raw("{");
            o.key("ip");
            o.opt_string(ip.str(i));
            o.raw(",");
            o.key("port");
            o.int(port.int(i));
            o.raw("},");
        }
        o.key("client_rule");
        o.opt_string(client_rule.str(i));
        o.raw(",");
        for (k, col) in &frame_range {
            o.int_field(k, col.int(i));
        }
        o.key("start");
        let start_text = first_ts.int(i).and_then(rfc3339_ns);
        o.opt_string(start_text.as_deref());
        o.raw(",");
        o.float_field("duration_s", duration.float(i));
        for (key, cols) in &counts {
            o.key(key);
            pair(&mut o, cols, i, true);
            o.raw(",");
        }
        o.key("throughput_bps");
        pair(&mut o, &throughput, i, false);
        o.raw(",");
        o.key("flags");
        o.raw("{");
        for (j, (k, col)) in syn_fin_rst.iter().enumerate() {
            if j > 0 {
                o.raw(",");
            }
            o.key(k);
            o.bool(col.bool(i).unwrap_or(false));
        }
        o.raw("},");
        o.key("tcp");
        match &tcp {
            Some((rows, t)) if i < *rows => {
                if t.stream.int(i) != s {
                    return Err("tcp_connections is not aligned with conversations".into());
                }
                tcp_object(&mut o, t, i);
            }
            _ => o.raw("null"),
        }
        o.raw(",");
        o.key("tcp_flags");
        let n = s
            .and_then(|s| flags.get(&s))
            .copied()
            .unwrap_or([0; Flag::COUNT]);
        o.raw("{");
        for (j, (flag, v)) in FLAGS.iter().zip(n).enumerate() {
            if j > 0 {
                o.raw(",");
            }
            o.key(flag.name());
            o.int(Some(v));
        }
        o.raw("}}");
    }
    Ok(o.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_as_the_view_writes_it() {
        assert_eq!(
            rfc3339_ns(1_704_164_645_123_456_789).as_deref(),
            Some("2024-01-02T03:04:05.123456789Z")
        );
        assert_eq!(
            rfc3339_ns(0).as_deref(),
            Some("1970-01-01T00:00:00.000000000Z")
        );
        assert_eq!(
            rfc3339_ns(-1).as_deref(),
            Some("1969-12-31T23:59:59.999999999Z")
        );
        assert_eq!(
            rfc3339_ns(951_782_400_000_000_000).as_deref(),
            Some("2000-02-29T00:00:00.000000000Z")
        );
        assert_eq!(rfc3339_ns(i128::from(i64::MAX) * 1_000_000), None);
    }

    #[test]
    fn strings_escaped_as_the_view_writes_them() {
        let mut o = Out(String::new(), Vec::new());
        o.string("a\"\\\n\r\t\u{8}\u{c}\u{1}\u{1f}\u{7f}/é😀");
        assert_eq!(
            o.0,
            "\"a\\\"\\\\\\n\\r\\t\\b\\f\\u0001\\u001f\u{7f}/\\u00e9\\ud83d\\ude00\""
        );
    }

    #[test]
    fn floats_in_their_shortest_form_and_non_finite_as_null() {
        let mut o = Out(String::new(), Vec::new());
        for v in [1.0, 0.1, 1e-7, 1e16, 2.5e-5, f64::NAN, f64::INFINITY] {
            o.float(Some(v));
            o.raw(" ");
        }
        assert_eq!(o.0, "1.0 0.1 1e-7 1e+16 0.000025 null null ");
    }
}
