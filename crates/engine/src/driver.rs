//! The single streaming pass.

use nastriage_capture::{linktype, CaptureError, CaptureReader, MergedReader};
use nastriage_net::{Decoder, Transport};

use std::sync::Arc;

use crate::analysis::{Analysis, CaptureSummary, ProtocolCount};
use crate::app::layer::{AppLayer, DecodeAs};
use crate::conversations::ConversationTable;
use crate::deferred::Deferred;
use crate::pipeline::{self, Seg};
use crate::tcp::{TcpAnalysisConfig, TcpAnalyzer};

/// Progress callback: (bytes read so far, total bytes or 0 when unknown).
/// Returning `false` stops the analysis (e.g. the user pressed Ctrl-C).
pub type Progress<'a> = &'a mut dyn FnMut(u64, u64) -> bool;

pub struct AnalyzeOptions<'a> {
    pub progress: Option<Progress<'a>>,
    /// Call `progress` every this many input bytes.
    pub progress_interval: u64,
    /// Decode connections on these ports as the given protocol, whatever
    /// their content looks like.
    pub decode_as: DecodeAs,
    /// Streams (`tcp.stream`) whose every segment goes to the
    /// `tcp_segments` table (sequence graphs); empty: none.
    pub segments_for: Vec<u32>,
    /// Reduced sequence-graph points of every connection
    /// (`tcp_seq_points`): ordinary points per connection and direction (0:
    /// none), points in all, segments kept around each flagged one.
    pub seq_points: crate::tcp::seq_points::SeqPointsConfig,
    /// Keep every transaction for the `transactions` table. Without it the
    /// table is absent and the transactions are only counted; every other
    /// table is the same (they are made as the transactions are logged).
    pub keep_transactions: bool,
}

impl Default for AnalyzeOptions<'_> {
    fn default() -> Self {
        AnalyzeOptions {
            progress: None,
            progress_interval: 64 << 20,
            decode_as: Vec::new(),
            segments_for: Vec::new(),
            seq_points: Default::default(),
            keep_transactions: true,
        }
    }
}

/// Analyse one or more captures (several are merged in timestamp order and
/// numbered as one, like `mergecap`). Fails only when a file cannot be
/// opened or yields no packet before an error; later problems become
/// warnings and every result up to them is kept.
///
/// Returns when the pass ends: the tables derived from the transactions
/// (the digest) are then made on a thread of their own, and reading one
/// waits for them ([`Analysis::wait_for_digest`]).
pub fn analyze(paths: &[String], mut opts: AnalyzeOptions<'_>) -> Result<Analysis, CaptureError> {
    if paths.is_empty() {
        return Err(CaptureError::new("-", 0, "no capture file given"));
    }
    let mut readers = Vec::with_capacity(paths.len());
    let mut total_size = 0u64;
    for p in paths {
        let r = CaptureReader::open(p)?;
        if p != "-" && r.info().compression == nastriage_capture::Compression::None {
            total_size += std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        } else {
            total_size = 0;
        }
        readers.push(r);
    }
    let known_total = readers.iter().all(|r| {
        r.info().path != "-" && r.info().compression == nastriage_capture::Compression::None
    });
    let mut summaries: Vec<CaptureSummary> = readers
        .iter()
        .map(|r| CaptureSummary {
            path: r.info().path.clone(),
            format: r.info().format.name().to_string(),
            format_description: r.info().format.describe(),
            compression: r.info().compression.name().to_string(),
            ..Default::default()
        })
        .collect();

    let mut merged = MergedReader::new(readers);
    let mut decoder = Decoder::default();
    let mut convs = ConversationTable::default();
    let tcp_cfg = TcpAnalysisConfig {
        segments_for: std::mem::take(&mut opts.segments_for),
        seq_points: opts.seq_points,
        ..Default::default()
    };
    let decode_as = std::mem::take(&mut opts.decode_as);
    let keep_transactions = opts.keep_transactions;
    let mut frame: u64 = 0;
    // The latest frame time so far, and the most a frame's time fell behind
    // it (a clock step, frames out of order): the digest's sweeps rely on it
    // (`connection_digest`).
    let (mut latest_ts, mut time_back) = (i64::MIN, 0i64);
    let mut next_progress = opts.progress_interval;
    crate::heap::keep_large_blocks_apart();
    let (mut feeder, tcp_stage, app_stage) = pipeline::pipeline();

    let (read, mut tcp, mut log) = std::thread::scope(|scope| {
        // The two stages (see `pipeline`): each analyser is built in its own
        // thread and sees every segment in capture order.
        let stage = |name: &str| std::thread::Builder::new().name(format!("nastriage-{name}"));
        let tcp_thread = stage("tcp").spawn_scoped(scope, move || {
            let mut tcpa = TcpAnalyzer::new(tcp_cfg);
            for b in tcp_stage.batches.iter() {
                b.for_each(|s| {
                    if let Seg::Tcp {
                        frame,
                        ts,
                        asg,
                        seg,
                        ip,
                        hash,
                    } = s
                    {
                        tcpa.update_hashed(frame, ts, asg, &seg, Some(ip), hash);
                    }
                });
                tcp_stage.done(b);
            }
            tcpa.finish()
        });
        let app_thread = stage("app").spawn_scoped(scope, move || {
            let mut app = AppLayer::new(decode_as);
            if !keep_transactions {
                app.log.transactions = crate::tx_store::TxStore::counting();
            }
            for b in app_stage.batches.iter() {
                b.for_each(|s| match s {
                    Seg::Tcp {
                        frame,
                        ts,
                        asg,
                        seg,
                        ..
                    } => app.tcp(asg.stream, asg.dir, frame, ts, &seg),
                    Seg::Udp { frame, ts, ip, udp } => app.udp(ip, &udp, frame, ts),
                });
                app_stage.done(b);
            }
            app.finish();
            app.log
        });

        let (tcp_thread, app_thread) = match (tcp_thread, app_thread) {
            (Ok(t), Ok(a)) => (t, a),
            (t, a) => {
                // No thread to run a stage (a process limit): end the one that
                // started and say why.
                drop(feeder);
                let mut why = String::new();
                for r in [t.map(|h| drop(h.join())), a.map(|h| drop(h.join()))] {
                    if let Err(e) = r {
                        why = e.to_string();
                    }
                }
                let e = CaptureError::new(
                    &paths[0],
                    0,
                    format!("cannot start an analysis thread: {why}"),
                );
                return Err(e);
            }
        };

        let mut read = || -> Result<(), CaptureError> {
            while merged.advance() {
                let Some((file, pkt)) = merged.packet() else {
                    break;
                };
                frame += 1;
                let s = &mut summaries[file];
                s.frames += 1;
                s.bytes += pkt.orig_len as u64;
                s.captured_bytes += pkt.data.len() as u64;
                if (pkt.data.len() as u64) < pkt.orig_len as u64 {
                    s.truncated_frames += 1;
                }
                if pkt.ts_ns == i64::MAX || pkt.ts_ns == i64::MIN {
                    // Beyond what 64-bit nanoseconds hold (years before 1678 or
                    // after 2262: a broken clock or a wrapped counter); kept out
                    // of the span.
                    s.clamped_ts_frames += 1;
                } else {
                    s.first_ts = Some(s.first_ts.map_or(pkt.ts_ns, |t| t.min(pkt.ts_ns)));
                    s.last_ts = Some(s.last_ts.map_or(pkt.ts_ns, |t| t.max(pkt.ts_ns)));
                    // How far a frame's time falls behind an earlier frame's.
                    if pkt.ts_ns >= latest_ts {
                        latest_ts = pkt.ts_ns;
                    } else {
                        time_back = time_back.max(latest_ts.saturating_sub(pkt.ts_ns));
                    }
                }

                let wire = pkt.orig_len as u64;
                let buf = merged.shared_buffer();
                let d = decoder.decode(&pkt);
                if let (Some(ip), Transport::Tcp(tcp)) = (d.ip.as_ref(), d.transport) {
                    let asg = convs.update(frame, pkt.ts_ns, wire, ip, &tcp);
                    feeder.tcp(frame, pkt.ts_ns, asg, &tcp, ip, buf);
                } else if let (Some(ip), Transport::Udp(udp)) = (d.ip.as_ref(), d.transport) {
                    feeder.udp(frame, pkt.ts_ns, ip, &udp, buf);
                }

                if let Some(cb) = opts.progress.as_mut() {
                    if frame & 4095 == 0 {
                        let pos: u64 = merged.readers().iter().map(|r| r.position()).sum();
                        if pos >= next_progress {
                            next_progress = pos + opts.progress_interval;
                            if !cb(pos, if known_total { total_size } else { 0 }) {
                                return Err(CaptureError::new(
                                    &paths[file],
                                    pos,
                                    "analysis interrupted",
                                ));
                            }
                        }
                    }
                }
            }
            Ok(())
        };
        let read = read();
        feeder.flush();
        // Closing the channels ends the stages.
        drop(feeder);
        let tcp = joined(tcp_thread.join());
        let log = joined(app_thread.join());
        Ok((read, tcp, log))
    })?;
    // The batches are gone with the stages: the read buffers go too, before
    // the digest (whose peak on a long capture they would add to).
    merged.finish();
    // The stage threads' freed memory sits in their own glibc arenas, where
    // the tables built after the pass (on this thread) cannot reuse it.
    crate::heap::give_back_free_memory();
    read?;
    // What is kept leaves those arenas, which then go back whole.
    crate::heap::relocate_after_pass(&mut tcp, &mut log);
    crate::heap::pool_large_blocks();

    // Per-file link types, warnings and errors.
    let mut warnings = Vec::new();
    for (i, r) in merged.readers().iter().enumerate() {
        let s = &mut summaries[i];
        s.link_types = r.linktypes().into_iter().map(linktype::name).collect();
        if s.clamped_ts_frames > 0 {
            let msg = format!(
                "{}: {} frame(s) have timestamps outside years 1678-2262 (clamped; left out of the time span)",
                s.path, s.clamped_ts_frames
            );
            s.warnings.push(msg.clone());
            warnings.push(msg);
        }
        for w in r.warnings() {
            s.warnings.push(w.to_string());
            warnings.push(w.to_string());
        }
    }
    for (i, e) in merged.errors() {
        if summaries[*i].frames == 0 {
            return Err(e.clone());
        }
        let msg = format!("{e}; reading stopped there, results cover the frames before it");
        summaries[*i].warnings.push(msg.clone());
        warnings.push(msg);
    }
    for (lt, n) in decoder.counters().unsupported_linktypes() {
        warnings.push(format!(
            "{n} frame(s) with link type {} ({lt}) were counted but not decoded (unsupported link layer)",
            linktype::name(lt)
        ));
    }
    decoder.finish();
    let (_, abandoned) = decoder.defrag_stats();
    if abandoned > 0 {
        warnings.push(format!(
            "{abandoned} fragmented IP datagram(s) could not be reassembled (fragments missing, cut by the snaplen, or over the memory bound)"
        ));
    }
    if let Some(cb) = opts.progress.as_mut() {
        let pos: u64 = merged.readers().iter().map(|r| r.position()).sum();
        cb(pos, if known_total { total_size } else { 0 });
    }
    let protocols = decoder
        .counters()
        .summary()
        .into_iter()
        .map(|(protocol, frames, bytes)| ProtocolCount {
            protocol,
            frames,
            bytes,
        })
        .collect();
    warnings.extend(tcp.warnings());
    let derived = &log.derived;
    let folded = derived
        .srt
        .files
        .folded
        .max(derived.facts.names.files.folded);
    if folded > 0 {
        warnings.push(format!(
            "{folded} request(s) on files or shares past the first {} distinct ones are counted under \"{}\" in the srt file breakdown and the time profiles' files (memory bound)",
            crate::interner::MAX_FILE_NAMES,
            crate::interner::OTHER_FILES
        ));
    }
    // The digest is made on a thread of its own: the caller can read the
    // TCP tables meanwhile (see `deferred`).
    let (tcp, convs) = (Arc::new(tcp), Arc::new(convs));
    let digest = {
        let derived = std::mem::take(&mut log.derived);
        let (tcp, convs) = (Arc::clone(&tcp), Arc::clone(&convs));
        Deferred::spawn(
            "nastriage-digest",
            move || crate::analysis::Digest::new(derived, &tcp, &convs, time_back),
            // Once the digest is handed over: its readers need not wait for it.
            crate::heap::give_back_free_memory,
        )
    };
    // The parsers' warnings (records not decoded, tables full).
    warnings.extend(log.warnings.iter().cloned());
    Ok(Analysis {
        captures: summaries,
        protocols,
        warnings,
        frames: frame,
        conversations: convs,
        tcp,
        transactions: log,
        digest,
        srt: Default::default(),
    })
}

/// A stage's result; a stage that panicked panics here too, as the pass on
/// one thread would have.
pub(crate) fn joined<T>(r: std::thread::Result<T>) -> T {
    match r {
        Ok(v) => v,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}
