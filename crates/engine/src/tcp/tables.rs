//! The Arrow tables of the TCP metrics: `tcp_connections`,
//! `zero_window_episodes`, `tcp_series` and `tcp_segments`. Directions are
//! named from the conversation's client (`c2s`, `s2c`), sides `client` and
//! `server`; documented column by column in docs/tcp-analysis.md.

use arrow_array::RecordBatch;

use super::capture_point::{self, Evidence, Point};
use super::limitation::Limit;
use super::metrics::{ConnSummary, SideRtt};
use super::retrans_class::{LossSite, RetransClass};
use super::segments::{flags_text, SegPoint};
use super::series::Bin;
use super::TcpAnalysis;
use crate::columns::Cols;
use crate::conversations::ConversationTable;

fn ms(ns: f64) -> f64 {
    ns / 1e6
}

/// Direction name from the client's direction.
fn dir_name(dir: usize, client: usize) -> &'static str {
    if dir == client {
        "c2s"
    } else {
        "s2c"
    }
}

/// Combined round trip: (min, median, p95, complete) in ns. The minimum is
/// the sum of each side's smallest time over every source (`*_min`,
/// handshake included).
fn combined_rtt(
    hs_c: Option<i64>,
    hs_s: Option<i64>,
    client: Option<&SideRtt>,
    server: Option<&SideRtt>,
    client_min: Option<i64>,
    server_min: Option<i64>,
) -> Option<(f64, f64, f64, bool)> {
    let part =
        |hs: Option<i64>, side: Option<&SideRtt>, min: Option<i64>| -> Option<(f64, f64, f64)> {
            let m = |x: f64| min.map_or(x, |v| (v as f64).min(x));
            match (hs.map(|v| v as f64), side) {
                (Some(h), Some(s)) => Some((m(h.min(s.min_ns)), s.median_ns, s.p95_ns)),
                (None, Some(s)) => Some((m(s.min_ns), s.median_ns, s.p95_ns)),
                (Some(h), None) => Some((m(h), h, h)),
                (None, None) => min.map(|v| (v as f64, v as f64, v as f64)),
            }
        };
    let c = part(hs_c, client, client_min);
    let s = part(hs_s, server, server_min);
    let complete = c.is_some() && s.is_some();
    let z = (0.0, 0.0, 0.0);
    match (c, s) {
        (None, None) => None,
        (c, s) => {
            let (c, s) = (c.unwrap_or(z), s.unwrap_or(z));
            Some((c.0 + s.0, c.1 + s.1, c.2 + s.2, complete))
        }
    }
}

/// One row per conversation, in stream order.
pub(crate) fn tcp_connections(t: &TcpAnalysis, convs: &ConversationTable) -> RecordBatch {
    struct Row<'a> {
        stream: u32,
        c: usize,
        s: usize,
        sum: Option<&'a ConnSummary>,
        point: Point,
        why: String,
        rtt: Option<(f64, f64, f64, bool)>,
        cc_dir: usize,
    }
    let rows: Vec<Row> = convs
        .conversations()
        .iter()
        .map(|conv| {
            let c = conv.client_direction().0 as usize;
            let s = 1 - c;
            let sum = t.summary(conv.stream);
            let (point, why, rtt, cc_dir) = match sum {
                None => (Point::Unknown, String::new(), None, s),
                Some(m) => {
                    let client_side = m.dirs[s].far_rtt.as_ref();
                    let server_side = m.dirs[c].far_rtt.as_ref();
                    let ev = Evidence {
                        hs_client_ns: m.hs_client_ns,
                        hs_server_ns: m.hs_server_ns,
                        data_client_ns: client_side.map(|r| r.min_ns as i64),
                        data_server_ns: server_side.map(|r| r.min_ns as i64),
                        ttl_client: m.dirs[c].ttl_max,
                        ttl_server: m.dirs[s].ttl_max,
                        large_from_client: m.dirs[c].large_segs,
                        large_from_server: m.dirs[s].large_segs,
                    };
                    let (p, why) = capture_point::decide(&ev);
                    let rtt = combined_rtt(
                        m.hs_client_ns,
                        m.hs_server_ns,
                        client_side,
                        server_side,
                        m.dirs[s].far_min_ns,
                        m.dirs[c].far_min_ns,
                    );
                    // The hint of the direction that says more: the more
                    // confident one, else the one carrying more data.
                    let (hc, hs) = (&m.dirs[c].cc, &m.dirs[s].cc);
                    let cc_dir = if hc.confidence > hs.confidence
                        || (hc.confidence == hs.confidence && m.dirs[c].bytes > m.dirs[s].bytes)
                    {
                        c
                    } else {
                        s
                    };
                    (p, why, rtt, cc_dir)
                }
            };
            Row {
                stream: conv.stream,
                c,
                s,
                sum,
                point,
                why,
                rtt,
                cc_dir,
            }
        })
        .collect();

    let mut k = Cols::default();
    let f_ms = |v: Option<i64>| v.map(|x| ms(x as f64));
    k.u32("stream", rows.iter().map(|r| r.stream).collect());
    k.str("capture_point", rows.iter().map(|r| r.point.name()));
    k.str("capture_point_reason", rows.iter().map(|r| r.why.as_str()));
    k.f64o(
        "rtt_handshake_client_ms",
        rows.iter()
            .map(|r| r.sum.and_then(|m| f_ms(m.hs_client_ns)))
            .collect(),
    );
    k.f64o(
        "rtt_handshake_server_ms",
        rows.iter()
            .map(|r| r.sum.and_then(|m| f_ms(m.hs_server_ns)))
            .collect(),
    );
    k.f64o(
        "rtt_handshake_ms",
        rows.iter()
            .map(|r| {
                r.sum.and_then(|m| match (m.hs_client_ns, m.hs_server_ns) {
                    (Some(a), Some(b)) => Some(ms((a + b) as f64)),
                    _ => None,
                })
            })
            .collect(),
    );
    for (name, q) in [
        ("rtt_min_ms", 0usize),
        ("rtt_median_ms", 1),
        ("rtt_p95_ms", 2),
    ] {
        k.f64o(
            name,
            rows.iter()
                .map(|r| {
                    r.rtt.map(|v| {
                        ms(match q {
                            0 => v.0,
                            1 => v.1,
                            _ => v.2,
                        })
                    })
                })
                .collect(),
        );
    }
    k.bool(
        "rtt_complete",
        rows.iter().map(|r| r.rtt.is_some_and(|v| v.3)).collect(),
    );
    k.u64(
        "rtt_samples",
        rows.iter()
            .map(|r| r.sum.map_or(0, |m| m.rtt_samples))
            .collect(),
    );
    // Per side: the network part (smallest time over every source, the
    // handshake's included: no ACK delay, no server processing), then the
    // median of the samples (which includes them).
    for (name, side_of) in [("rtt_client_side_ms", true), ("rtt_server_side_ms", false)] {
        k.f64o(
            name,
            rows.iter()
                .map(|r| {
                    let dir = if side_of { r.s } else { r.c };
                    r.sum
                        .and_then(|m| m.dirs[dir].far_min_ns)
                        .map(|x| ms(x as f64))
                })
                .collect(),
        );
    }
    for (name, side_of) in [
        ("rtt_client_side_median_ms", true),
        ("rtt_server_side_median_ms", false),
    ] {
        k.f64o(
            name,
            rows.iter()
                .map(|r| {
                    let dir = if side_of { r.s } else { r.c };
                    r.sum
                        .and_then(|m| m.dirs[dir].far_rtt.as_ref())
                        .map(|x| ms(x.median_ns))
                })
                .collect(),
        );
    }
    k.stro(
        "rtt_source",
        rows.iter().map(|r| {
            r.sum.map(|m| {
                let src = |d: usize| match m.dirs[d].far_rtt.as_ref().map(|x| x.source) {
                    Some(super::rtt::Source::DataAck) => "data",
                    Some(super::rtt::Source::Timestamps) => "timestamps",
                    Some(super::rtt::Source::SingleAck) => "single_acks",
                    None if m.hs_client_ns.is_some() || m.hs_server_ns.is_some() => "handshake",
                    None => "none",
                };
                format!("client_side={},server_side={}", src(r.s), src(r.c))
            })
        }),
    );
    for (side, pick_client) in [("client", true), ("server", false)] {
        k.u16o(
            &format!("mss_{side}"),
            rows.iter()
                .map(|r| {
                    let d = if pick_client { r.c } else { r.s };
                    r.sum.and_then(|m| m.dirs[d].mss)
                })
                .collect(),
        );
    }
    for (side, pick_client) in [("client", true), ("server", false)] {
        k.u8o(
            &format!("window_scale_{side}"),
            rows.iter()
                .map(|r| {
                    let d = if pick_client { r.c } else { r.s };
                    r.sum.map(|m| m.dirs[d].window_scale)
                })
                .collect(),
        );
    }
    k.bool(
        "window_scale_inferred",
        rows.iter()
            .map(|r| r.sum.is_some_and(|m| m.window_scale_inferred))
            .collect(),
    );
    for (side, pick_client) in [("client", true), ("server", false)] {
        k.u8o(
            &format!("ttl_{side}"),
            rows.iter()
                .map(|r| {
                    let d = if pick_client { r.c } else { r.s };
                    r.sum.and_then(|m| m.dirs[d].ttl_max)
                })
                .collect(),
        );
    }
    k.u32(
        "zero_window_episodes",
        rows.iter()
            .map(|r| {
                r.sum
                    .map_or(0, |m| m.dirs[0].zw_episodes + m.dirs[1].zw_episodes)
            })
            .collect(),
    );
    k.u32(
        "zero_window_probes",
        rows.iter()
            .map(|r| {
                r.sum
                    .map_or(0, |m| m.dirs[0].zw_probes + m.dirs[1].zw_probes)
            })
            .collect(),
    );
    k.f64(
        "zero_window_s",
        rows.iter()
            .map(|r| {
                r.sum
                    .map_or(0.0, |m| (m.dirs[0].zw_ns + m.dirs[1].zw_ns) as f64 / 1e9)
            })
            .collect(),
    );
    k.f64o(
        "stalled_fraction",
        rows.iter()
            .map(|r| {
                r.sum.and_then(|m| {
                    let d = m.duration_ns();
                    (d > 0)
                        .then(|| ((m.dirs[0].zw_ns + m.dirs[1].zw_ns) as f64 / d as f64).min(1.0))
                })
            })
            .collect(),
    );
    for class in RetransClass::ALL {
        for (suffix, client_dir) in [("c2s", true), ("s2c", false)] {
            k.u64(
                &format!("retrans_{}_{suffix}", class.name()),
                rows.iter()
                    .map(|r| {
                        let d = if client_dir { r.c } else { r.s };
                        r.sum.map_or(0, |m| m.dirs[d].retrans.get(class))
                    })
                    .collect(),
            );
        }
    }
    for (name, site) in [
        ("lost_before_capture", LossSite::BeforeCapture),
        ("lost_after_capture", LossSite::AfterCapture),
        ("lost_unknown_place", LossSite::Unknown),
    ] {
        k.u64(
            name,
            rows.iter()
                .map(|r| {
                    r.sum.map_or(0, |m| {
                        m.dirs[0].retrans.by_site[site as usize]
                            + m.dirs[1].retrans.by_site[site as usize]
                    })
                })
                .collect(),
        );
    }
    k.f64o(
        "timeout_stall_max_ms",
        rows.iter()
            .map(|r| {
                r.sum.and_then(|m| {
                    let n = m.dirs[0].retrans.stalls + m.dirs[1].retrans.stalls;
                    (n > 0).then(|| {
                        ms(m.dirs[0]
                            .retrans
                            .stall_max_ns
                            .max(m.dirs[1].retrans.stall_max_ns) as f64)
                    })
                })
            })
            .collect(),
    );
    k.u64(
        "dsack_blocks",
        rows.iter()
            .map(|r| {
                r.sum
                    .map_or(0, |m| m.dirs[0].retrans.dsacks + m.dirs[1].retrans.dsacks)
            })
            .collect(),
    );
    for (suffix, client_dir) in [("c2s", true), ("s2c", false)] {
        for l in Limit::ALL {
            k.f64o(
                &format!("limit_{}_{suffix}", l.name()),
                rows.iter()
                    .map(|r| {
                        let d = if client_dir { r.c } else { r.s };
                        r.sum
                            .and_then(|m| m.dirs[d].limitation)
                            .map(|v| v[l as usize])
                    })
                    .collect(),
            );
        }
    }
    k.str(
        "cc_hint",
        rows.iter()
            .map(|r| r.sum.map_or("unknown", |m| m.dirs[r.cc_dir].cc.hint)),
    );
    k.f64(
        "cc_confidence",
        rows.iter()
            .map(|r| r.sum.map_or(0.0, |m| m.dirs[r.cc_dir].cc.confidence))
            .collect(),
    );
    k.str("cc_direction", rows.iter().map(|r| dir_name(r.cc_dir, r.c)));
    k.str(
        "cc_reasoning",
        rows.iter()
            .map(|r| r.sum.map_or("", |m| m.dirs[r.cc_dir].cc.reasoning.as_str())),
    );
    for (suffix, client_dir) in [("c2s", true), ("s2c", false)] {
        let d = |r: &Row| if client_dir { r.c } else { r.s };
        k.f64(
            &format!("slow_start_s_{suffix}"),
            rows.iter()
                .map(|r| {
                    r.sum
                        .map_or(0.0, |m| m.dirs[d(r)].slow_start_ns as f64 / 1e9)
                })
                .collect(),
        );
        k.f64(
            &format!("congestion_avoidance_s_{suffix}"),
            rows.iter()
                .map(|r| {
                    r.sum
                        .map_or(0.0, |m| m.dirs[d(r)].congestion_avoidance_ns as f64 / 1e9)
                })
                .collect(),
        );
        k.u64(
            &format!("cwnd_max_bytes_{suffix}"),
            rows.iter()
                .map(|r| r.sum.map_or(0, |m| m.dirs[d(r)].cwnd_max))
                .collect(),
        );
        k.f64o(
            &format!("ack_ratio_{suffix}"),
            rows.iter()
                .map(|r| {
                    r.sum.and_then(|m| {
                        let acks = m.dirs[1 - d(r)].pure_acks;
                        (acks > 0).then(|| m.dirs[d(r)].data_segs as f64 / acks as f64)
                    })
                })
                .collect(),
        );
        k.f64o(
            &format!("delayed_ack_ms_{suffix}"),
            rows.iter()
                .map(|r| r.sum.and_then(|m| m.dirs[d(r)].delayed_ack_ns).map(ms))
                .collect(),
        );
        k.u64(
            &format!("max_in_flight_{suffix}"),
            rows.iter()
                .map(|r| r.sum.map_or(0, |m| m.dirs[d(r)].max_flight))
                .collect(),
        );
        k.u64(
            &format!("window_limited_{suffix}"),
            rows.iter()
                .map(|r| r.sum.map_or(0, |m| m.dirs[d(r)].window_limited))
                .collect(),
        );
        k.u64(
            &format!("large_segments_{suffix}"),
            rows.iter()
                .map(|r| r.sum.map_or(0, |m| m.dirs[d(r)].large_segs))
                .collect(),
        );
        k.u32(
            &format!("max_segment_{suffix}"),
            rows.iter()
                .map(|r| r.sum.map_or(0, |m| m.dirs[d(r)].max_seg))
                .collect(),
        );
    }
    k.bool(
        "tso_seen",
        rows.iter()
            .map(|r| {
                r.sum
                    .is_some_and(|m| m.dirs[0].large_segs + m.dirs[1].large_segs > 0)
            })
            .collect(),
    );
    k.u32(
        "idle_periods",
        rows.iter()
            .map(|r| r.sum.map_or(0, |m| m.idle_count))
            .collect(),
    );
    k.f64(
        "idle_s",
        rows.iter()
            .map(|r| r.sum.map_or(0.0, |m| m.idle_ns as f64 / 1e9))
            .collect(),
    );
    k.finish("tcp_connections")
}

/// One row per zero-window episode.
pub(crate) fn zero_window_episodes(t: &TcpAnalysis, convs: &ConversationTable) -> RecordBatch {
    let eps = t.episodes();
    let client = |stream: u32| {
        convs
            .get(stream)
            .map_or(0, |c| c.client_direction().0 as usize)
    };
    let mut k = Cols::default();
    k.u32("stream", eps.iter().map(|e| e.stream).collect());
    k.str(
        "host",
        eps.iter().map(|e| {
            if e.host_dir as usize == client(e.stream) {
                "client"
            } else {
                "server"
            }
        }),
    );
    k.str(
        "stalled_direction",
        eps.iter()
            .map(|e| dir_name(1 - e.host_dir as usize, client(e.stream))),
    );
    k.u64("start_frame", eps.iter().map(|e| e.start_frame).collect());
    k.ts("start", eps.iter().map(|e| e.start_ts).collect());
    k.u64o("end_frame", eps.iter().map(|e| e.end_frame).collect());
    k.ts("end", eps.iter().map(|e| e.end_ts).collect());
    k.f64(
        "duration_s",
        eps.iter().map(|e| e.duration_ns() as f64 / 1e9).collect(),
    );
    k.u32("probes", eps.iter().map(|e| e.probes).collect());
    k.bool("resolved", eps.iter().map(|e| e.resolved).collect());
    k.f64o(
        "connection_fraction",
        eps.iter()
            .map(|e| {
                t.summary(e.stream).and_then(|m| {
                    let d = m.duration_ns();
                    (d > 0).then(|| e.duration_ns() as f64 / d as f64)
                })
            })
            .collect(),
    );
    k.finish("zero_window_episodes")
}

/// Shift applied to the windows advertised in `dir` of `stream`.
fn shift(t: &TcpAnalysis, stream: u32, dir: usize) -> u8 {
    t.summary(stream).map_or(0, |m| m.dirs[dir].window_scale)
}

/// One row per (stream, direction, bin) with activity.
pub(crate) fn tcp_series(t: &TcpAnalysis, convs: &ConversationTable) -> RecordBatch {
    let series = t.series();
    let iv = series.interval_ns();
    let n = series.rows();
    let mut stream = Vec::with_capacity(n);
    let mut direction = Vec::with_capacity(n);
    let mut start = Vec::with_capacity(n);
    let mut bytes = Vec::with_capacity(n);
    let mut segs = Vec::with_capacity(n);
    let mut retx = Vec::with_capacity(n);
    let mut stalled = Vec::with_capacity(n);
    let mut flight = Vec::with_capacity(n);
    let mut window = Vec::with_capacity(n);
    let mut rtt = Vec::with_capacity(n);
    let mut tput = Vec::with_capacity(n);
    for (s, d, name, t0, b) in series_rows(t, convs) {
        stream.push(s);
        direction.push(name);
        start.push(t0);
        bytes.push(b.bytes);
        segs.push(b.segments);
        retx.push(b.retransmissions);
        stalled.push(b.stalled_ns as f64 / 1e9);
        flight.push(b.max_in_flight);
        window.push(bin_window(t, s, d, b));
        rtt.push((b.rtt_samples > 0).then(|| ms(b.rtt_sum_ns / f64::from(b.rtt_samples))));
        tput.push(bin_throughput(b, iv));
    }
    let mut k = Cols::default();
    k.u32("stream", stream);
    k.str("direction", direction);
    k.ts("start", start);
    k.i64("interval_ns", vec![iv; n]);
    k.u64("bytes", bytes);
    k.u32("segments", segs);
    k.u32("retransmissions", retx);
    k.f64("stalled_s", stalled);
    k.u64("max_in_flight", flight);
    k.u64o("receive_window", window);
    k.f64o("rtt_ms", rtt);
    k.f64("throughput_bps", tput);
    k.finish("tcp_series")
}

/// The `tcp_series` rows in table order (by stream, direction, time):
/// stream, direction index and name ("c2s"/"s2c"), bin start, bin.
fn series_rows<'a>(
    t: &'a TcpAnalysis,
    convs: &'a ConversationTable,
) -> impl Iterator<Item = (u32, usize, &'static str, i64, &'a Bin)> + 'a {
    named_rows(convs, t.series().iter())
}

/// Series rows with their direction's name ("c2s", "s2c").
fn named_rows<'a>(
    convs: &'a ConversationTable,
    rows: impl Iterator<Item = (u32, usize, i64, &'a Bin)> + 'a,
) -> impl Iterator<Item = (u32, usize, &'static str, i64, &'a Bin)> + 'a {
    let mut client_of = (u32::MAX, 0usize);
    rows.map(move |(s, d, t0, b)| {
        if client_of.0 != s {
            client_of = (
                s,
                convs.get(s).map_or(0, |c| c.client_direction().0 as usize),
            );
        }
        (s, d, dir_name(d, client_of.1), t0, b)
    })
}

/// The receive window last offered to the sender of a bin (scaled), if any.
fn bin_window(t: &TcpAnalysis, stream: u32, dir: usize, b: &Bin) -> Option<u64> {
    (b.window_raw != u32::MAX).then(|| u64::from(b.window_raw) << shift(t, stream, 1 - dir))
}

/// A bin's payload rate in bit/s.
fn bin_throughput(b: &Bin, interval_ns: i64) -> f64 {
    b.bytes as f64 * 8.0 * 1e9 / interval_ns as f64
}

/// One sender direction's `tcp_series` bins that carried payload, as the
/// diagnosis reads them: its rows' `throughput_bps` and `receive_window`
/// (NaN where none), in time order.
pub struct DirectionSeries {
    pub stream: u32,
    /// "c2s" or "s2c", as the table's `direction`.
    pub direction: &'static str,
    pub interval_ns: i64,
    pub throughput_bps: Vec<f64>,
    pub receive_window: Vec<f64>,
}

/// The `tcp_series` rows with payload grouped by (stream, direction), in
/// table order, without making the table: on thousands of connections the
/// table was 12 columns of some hundred thousand rows that the diagnosis
/// read only to regroup three of them.
///
/// `stream`: that connection's only (the loss analysis reads the rates of
/// a few connections; every connection's, held at once as Python values,
/// were some 27 MB with 8,640 connections open).
pub(crate) fn series_by_direction(
    t: &TcpAnalysis,
    convs: &ConversationTable,
    stream: Option<u32>,
) -> Vec<DirectionSeries> {
    let iv = t.series().interval_ns();
    let mut out: Vec<DirectionSeries> = Vec::new();
    let rows: Box<dyn Iterator<Item = _>> = match stream {
        Some(s) => Box::new(named_rows(convs, t.series().iter_stream(s))),
        None => Box::new(series_rows(t, convs)),
    };
    for (s, d, direction, _, b) in rows {
        if b.bytes == 0 {
            continue;
        }
        // (The rows come by stream, then direction: a key's rows are next
        // to each other.)
        let group = match out.last_mut() {
            Some(o) if o.stream == s && o.direction == direction => o,
            _ => {
                out.push(DirectionSeries {
                    stream: s,
                    direction,
                    interval_ns: iv,
                    throughput_bps: Vec::new(),
                    receive_window: Vec::new(),
                });
                out.last_mut().expect("just pushed")
            }
        };
        group.throughput_bps.push(bin_throughput(b, iv));
        group
            .receive_window
            .push(bin_window(t, s, d, b).map_or(f64::NAN, |w| w as f64));
    }
    out
}

/// The median receive window offered to each sender direction over its
/// `tcp_series` bins that carried payload and saw a window: (stream,
/// direction, median), in table order (what the receive-window rule reads
/// of the series: [`series_by_direction`] a connection at a time). The
/// median of an even count is the mean of the middle two, as Python's
/// `statistics.median`.
pub(crate) fn series_window_medians(
    t: &TcpAnalysis,
    convs: &ConversationTable,
) -> Vec<(u32, &'static str, f64)> {
    let mut out = Vec::new();
    for stream in 0..t.series().streams() {
        for g in series_by_direction(t, convs, Some(stream)) {
            let mut windows: Vec<f64> = g
                .receive_window
                .into_iter()
                .filter(|w| !w.is_nan())
                .collect();
            if let Some(m) = crate::order_stats::median(&mut windows) {
                out.push((g.stream, g.direction, m));
            }
        }
    }
    out
}

/// One row per segment of the chosen streams, in frame order.
pub(crate) fn tcp_segments(t: &TcpAnalysis, convs: &ConversationTable) -> RecordBatch {
    point_cols(t, convs, t.segments().points()).finish("tcp_segments")
}

/// The reduced points of every connection, by stream, direction and frame.
pub(crate) fn tcp_seq_points(t: &TcpAnalysis, convs: &ConversationTable) -> RecordBatch {
    let sp = t.seq_points();
    let mut pts = Vec::with_capacity(sp.total());
    let mut reduced = Vec::with_capacity(sp.total());
    for s in sp.streams() {
        for d in 0..2 {
            for k in sp.log(s, d).map(|l| l.points()).unwrap_or_default() {
                pts.push(k.p);
                reduced.push(k.bucketed);
            }
        }
    }
    let mut k = point_cols(t, convs, &pts);
    k.str(
        "kind",
        pts.iter().map(|p| if p.len > 0 { "data" } else { "ack" }),
    );
    k.bool("reduced", reduced);
    k.finish("tcp_seq_points")
}

/// (stream, direction, seen, kept, flagged, context, bucket width, dropped).
type ReductionRow = (u32, usize, u64, u64, u64, u64, Option<i64>, bool);

/// Per stream and direction, how `tcp_seq_points` was reduced.
pub(crate) fn tcp_seq_reduction(t: &TcpAnalysis, convs: &ConversationTable) -> RecordBatch {
    let sp = t.seq_points();
    let mut rows: Vec<ReductionRow> = Vec::new();
    for s in sp.streams() {
        for d in 0..2 {
            if let Some(l) = sp.log(s, d) {
                let kept = l.points().len() as u64;
                let w = (l.width() > 0).then_some(l.width());
                rows.push((s, d, l.seen, kept, l.flagged, l.context, w, false));
            }
        }
    }
    for (s, seen) in sp.dropped() {
        for (d, n) in seen.iter().enumerate() {
            rows.push((s, d, *n, 0, 0, 0, None, true));
        }
    }
    rows.sort_by_key(|r| (r.0, r.1));
    let client = |stream: u32| {
        convs
            .get(stream)
            .map_or(0, |c| c.client_direction().0 as usize)
    };
    let mut k = Cols::default();
    k.u32("stream", rows.iter().map(|r| r.0).collect());
    k.str("direction", rows.iter().map(|r| dir_name(r.1, client(r.0))));
    k.u64("points_seen", rows.iter().map(|r| r.2).collect());
    k.u64("points_kept", rows.iter().map(|r| r.3).collect());
    k.u64("flagged_kept", rows.iter().map(|r| r.4).collect());
    k.u64("context_kept", rows.iter().map(|r| r.5).collect());
    k.i64o("bucket_ns", rows.iter().map(|r| r.6).collect());
    k.bool(
        "reduced",
        rows.iter().map(|r| r.6.is_some() || r.7).collect(),
    );
    k.bool("dropped", rows.iter().map(|r| r.7).collect());
    k.finish("tcp_seq_reduction")
}

/// The columns of `tcp_segments` for `pts`.
fn point_cols(t: &TcpAnalysis, convs: &ConversationTable, pts: &[SegPoint]) -> Cols {
    let client = |stream: u32| {
        convs
            .get(stream)
            .map_or(0, |c| c.client_direction().0 as usize)
    };
    let mut k = Cols::default();
    k.u64("frame", pts.iter().map(|p| p.frame).collect());
    k.ts("time", pts.iter().map(|p| p.ts).collect());
    k.u32("stream", pts.iter().map(|p| p.stream).collect());
    k.str(
        "direction",
        pts.iter()
            .map(|p| dir_name(p.dir as usize, client(p.stream))),
    );
    k.i64("seq", pts.iter().map(|p| p.seq).collect());
    k.u32("len", pts.iter().map(|p| p.len).collect());
    k.i64(
        "next_seq",
        pts.iter().map(|p| p.seq + i64::from(p.len)).collect(),
    );
    k.i64o("ack", pts.iter().map(|p| p.ack).collect());
    k.u64(
        "window",
        pts.iter()
            .map(|p| {
                let s = if p.syn {
                    0
                } else {
                    shift(t, p.stream, p.dir as usize)
                };
                u64::from(p.window_raw) << s
            })
            .collect(),
    );
    k.str(
        "sack",
        pts.iter().map(|p| {
            p.sack[..p.sack_len as usize]
                .iter()
                .map(|(l, r)| format!("{l}-{r}"))
                .collect::<Vec<_>>()
                .join(" ")
        }),
    );
    k.str("flags", pts.iter().map(|p| flags_text(p.flags)));
    k.u64("in_flight", pts.iter().map(|p| p.in_flight).collect());
    k.bool(
        "is_retransmission",
        pts.iter().map(|p| p.class.is_some()).collect(),
    );
    k.stro(
        "retrans_class",
        pts.iter().map(|p| p.class.map(|c| c.name())),
    );
    k.str(
        "analysis",
        pts.iter().map(|p| {
            p.analysis
                .iter()
                .map(|f| f.name())
                .collect::<Vec<_>>()
                .join(",")
        }),
    );
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::rtt::Source;

    fn side(min: f64, med: f64) -> SideRtt {
        SideRtt {
            min_ns: min,
            median_ns: med,
            p95_ns: med * 2.0,
            samples: 5,
            source: Source::DataAck,
        }
    }

    #[test]
    fn combined_rtt_sums_the_sides() {
        let c = side(10.0, 20.0);
        let s = side(1000.0, 1200.0);
        assert_eq!(
            combined_rtt(Some(8), Some(990), Some(&c), Some(&s), None, None),
            Some((998.0, 1220.0, 2440.0, true))
        );
        // A smaller sample from another source (e.g. a single-segment ACK)
        // lowers the minimum only.
        assert_eq!(
            combined_rtt(Some(8), Some(990), Some(&c), Some(&s), Some(7), Some(985)),
            Some((992.0, 1220.0, 2440.0, true))
        );
        // Handshake only on one side, nothing on the other.
        assert_eq!(
            combined_rtt(None, None, None, Some(&s), None, None),
            Some((1000.0, 1200.0, 2400.0, false))
        );
        assert_eq!(
            combined_rtt(Some(5), Some(95), None, None, None, None),
            Some((100.0, 100.0, 100.0, true))
        );
        assert_eq!(combined_rtt(None, None, None, None, None, None), None);
    }
}
