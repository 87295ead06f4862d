//! The loss analysis' reading of one data direction of a connection: the
//! per-event work of the diagnosis' `nastriage.diagnosis.retrans`, which
//! keeps the rest (which connections and directions, the ranges of rows,
//! connections whose events go back in time, the thresholds, the results'
//! form). In Python this reading was most of the diagnosis' time on a lossy
//! copy: about 70 ms per GiB for its hundred thousand flags.
//!
//! Two readings of the direction's events, a range of rows at a time, in
//! time order ([`Reading::first`], then [`Reading::decide`],
//! [`Reading::second`], [`Reading::finish`]):
//!
//! 1. the retransmissions' times (the duplicate-ACK runs look ahead in
//!    them), the holes and the capture drops, and how many runs: whether
//!    the capture is downstream of the loss;
//! 2. the runs, each classified once it is all read, and the loss episodes
//!    they make; and the retransmissions again, each placed in an episode,
//!    a timeout or reordering once every run starting at or before it is
//!    classified (the run still being read may start before them).
//!
//! Only the retransmissions' times and the episodes grow with the
//! connection (8 and 16 bytes each); full blocks of them go to a temporary
//! file ([`Column`]), so memory does not grow with a long lossy copy. The
//! rest is counts and the first [`KEEP`] of each list.

use std::collections::VecDeque;

use crate::spill::{Span, Spill};
use crate::time_profile::Union;

/// Runs, retransmissions, timeouts, capture drops and episodes kept for the
/// findings (their frames and times); the rest are only counted.
pub const KEEP: usize = 30;

/// What a reading does with an event, by its label (the diagnosis'
/// `retrans._action`, one byte per label code).
pub mod action {
    pub const SKIP: u8 = 0;
    /// A data segment sent again or late, in the data direction.
    pub const RESENT: u8 = 1;
    pub const SPURIOUS: u8 = 2;
    /// A hole the capture saw (`lost_segment`) in the data direction.
    pub const HOLE: u8 = 3;
    /// A duplicate ACK, the other way.
    pub const DUP_ACK: u8 = 4;
    /// An ACK of data the capture never saw, the other way.
    pub const UNSEEN: u8 = 5;
}

/// Values per block a [`Column`] writes out (64 KiB of i64).
pub const BLOCK: usize = 8192;

/// An event's label code with no action given for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownCode(pub u16);

impl std::fmt::Display for UnknownCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no action for label code {}", self.0)
    }
}

impl std::error::Error for UnknownCode {}

fn act(actions: &[u8], code: u16) -> Result<u8, UnknownCode> {
    actions
        .get(usize::from(code))
        .copied()
        .ok_or(UnknownCode(code))
}

/// Closed time spans, possibly overlapping (the zero-window episodes with a
/// margin), asked whether a time lies in any of them: their starts in order
/// and, for each, the latest end among those starting at or before it.
#[derive(Debug, Clone, Default)]
pub struct Spans {
    starts: Vec<i64>,
    reach: Vec<i64>,
}

impl Spans {
    /// `starts` sorted, `reach` as the diagnosis' `retrans.Spans` makes it.
    pub fn new(starts: Vec<i64>, reach: Vec<i64>) -> Self {
        Spans { starts, reach }
    }

    pub fn contains(&self, t: i64) -> bool {
        let i = self.starts.partition_point(|&s| s <= t);
        i > 0 && self.reach.get(i - 1).is_some_and(|&r| r >= t)
    }
}

/// An append-only i64 column whose full blocks go to a spill; the last
/// value may still change (a loss episode's end grows while the runs that
/// go on with it are read). Read forward only, by [`Cursor`]s, which see
/// the values appended after they were made.
pub(crate) struct Column {
    block: usize,
    blocks: Vec<Span>,
    tail: Vec<i64>,
    n: usize,
}

impl Column {
    pub(crate) fn new(block: usize) -> Self {
        Column {
            block: block.max(1),
            blocks: Vec::new(),
            tail: Vec::new(),
            n: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.n
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.n == 0
    }

    pub(crate) fn push(&mut self, v: i64, spill: &mut Spill) {
        self.tail.push(v);
        self.n += 1;
        // (The last stays in memory: it may still change.)
        if self.tail.len() > self.block {
            let bytes = self.tail[..self.block]
                .iter()
                .flat_map(|x| x.to_ne_bytes())
                .collect();
            self.blocks.push(spill.put(bytes));
            self.tail.drain(..self.block);
        }
    }

    pub(crate) fn last(&self) -> Option<i64> {
        self.tail.last().copied()
    }

    pub(crate) fn set_last(&mut self, v: i64) {
        if let Some(x) = self.tail.last_mut() {
            *x = v;
        }
    }

    /// The value at `i`, reading its block into `cache` when it is spilled.
    fn at(&self, i: usize, cache: &mut Option<(usize, Vec<i64>)>, spill: &Spill) -> Option<i64> {
        let spilled = self.blocks.len() * self.block;
        if i >= spilled {
            return self.tail.get(i - spilled).copied();
        }
        let b = i / self.block;
        if cache.as_ref().is_none_or(|(at, _)| *at != b) {
            let bytes = spill.get(self.blocks[b]);
            let values = bytes
                .chunks_exact(8)
                .map(|c| i64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
                .collect();
            *cache = Some((b, values));
        }
        cache
            .as_ref()
            .and_then(|(_, v)| v.get(i % self.block).copied())
    }
}

/// A place in a [`Column`], moved forward only.
#[derive(Default)]
pub(crate) struct Cursor {
    i: usize,
    cache: Option<(usize, Vec<i64>)>,
}

impl Cursor {
    /// Move to the first value at least `x` (values in order) and give it,
    /// or None when there is none yet (the place is then past every value).
    pub(crate) fn first_at_least(&mut self, c: &Column, x: i64, spill: &Spill) -> Option<i64> {
        while let Some(v) = c.at(self.i, &mut self.cache, spill) {
            if v >= x {
                return Some(v);
            }
            self.i += 1;
        }
        None
    }

    /// Move past the values at most `x` (values in order); how many.
    pub(crate) fn count_at_most(&mut self, c: &Column, x: i64, spill: &Spill) -> usize {
        let from = self.i;
        while c.at(self.i, &mut self.cache, spill).is_some_and(|v| v <= x) {
            self.i += 1;
        }
        self.i - from
    }

    /// The value at the place, moving past it; None past the last one.
    pub(crate) fn next(&mut self, c: &Column, spill: &Spill) -> Option<i64> {
        let v = c.at(self.i, &mut self.cache, spill)?;
        self.i += 1;
        Some(v)
    }

    /// Move past the next `k` values (fewer if the column ends); the
    /// largest of them and `start`.
    pub(crate) fn max_of_next(&mut self, c: &Column, k: usize, start: i64, spill: &Spill) -> i64 {
        (0..k)
            .map_while(|_| self.next(c, spill))
            .fold(start, i64::max)
    }
}

/// The fixed inputs of one direction's reading (made by the diagnosis from
/// its thresholds and the connection's round trip).
pub struct Params {
    /// Runs at least this long (ns) are loss, shorter ones reordering.
    pub long_ns: i64,
    /// What a loss episode lasts past its last sign (ns): the round trip.
    pub episode_tail_ns: i64,
    /// How long a hole waits for the ACK of data the capture never saw.
    pub wait_ns: i64,
    /// A retransmission alone with an `rto` this long (s) is a timeout.
    pub timeout_min_s: f64,
    /// Times around zero-window episodes (their events are left out).
    pub zero_windows: Option<Spans>,
    /// Values per spilled block (tests make it small).
    pub block: usize,
}

/// How a duplicate-ACK run was classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    Loss,
    LossContinued,
    Reorder,
    Unknown,
}

impl RunKind {
    /// As the diagnosis names it.
    pub fn name(self) -> &'static str {
        match self {
            RunKind::Loss => "loss",
            RunKind::LossContinued => "loss-continued",
            RunKind::Reorder => "reorder",
            RunKind::Unknown => "unknown",
        }
    }
}

/// A duplicate-ACK run kept for the findings.
#[derive(Debug, Clone, PartialEq)]
pub struct KeptRun {
    pub ack_frame: i64,
    pub first: i64,
    pub first_frame: i64,
    pub last: i64,
    pub count: i64,
    /// Time from the run's start to the segment that filled the hole
    /// (downstream of the loss).
    pub fill_delay_ns: Option<i64>,
    pub retransmitted: bool,
    pub kind: RunKind,
}

/// An ACK of data the capture never saw, kept for the findings.
#[derive(Debug, Clone, PartialEq)]
pub struct Unseen {
    pub frame: i64,
    pub time: i64,
    pub detail: String,
}

/// What a direction's reading found (the diagnosis' `LossAnalysis` less
/// what it knows of the connection itself).
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub downstream: bool,
    pub loss_runs: Vec<KeptRun>,
    pub loss_run_count: u64,
    pub reorder_runs: Vec<KeptRun>,
    pub reorder_run_count: u64,
    pub resent_count: u64,
    pub resent_frames: Vec<i64>,
    pub episode_resent_frames: Vec<i64>,
    pub last_resent_time: Option<i64>,
    pub timeout_count: u64,
    pub timeout_frames: Vec<i64>,
    pub hole_count: u64,
    pub ack_unseen: Vec<Unseen>,
    pub ack_unseen_count: u64,
    pub unseen_bytes: u128,
    pub spurious: u64,
    pub lost_segments: u64,
    pub reordered_segments: u64,
    pub needless_retransmissions: u64,
    pub recovery_ns: i64,
    pub episodes: Vec<(i64, i64)>,
    pub episode_count: u64,
    pub first_episode_segments: u64,
}

/// One range's rows (events other than duplicate ACKs) of the direction's
/// connection, in time order.
pub struct Rows<'a> {
    pub frames: &'a [i64],
    pub times: &'a [i64],
    pub codes: &'a [u16],
    /// A retransmission's `rto` in seconds (NaN: none).
    pub rto: &'a [f64],
}

/// One range's duplicate-ACK runs, in order of their first.
pub struct Runs<'a> {
    pub codes: &'a [u16],
    /// The acknowledged frame the run repeats.
    pub keys: &'a [i64],
    pub firsts: &'a [i64],
    pub first_frames: &'a [i64],
    pub lasts: &'a [i64],
    pub counts: &'a [i64],
}

impl Runs<'_> {
    /// Each run: label code and (acknowledged frame, first time, first
    /// frame, last time, count); as many as the shortest column.
    fn iter(&self) -> impl Iterator<Item = (u16, [i64; 5])> + '_ {
        let cols = [
            self.keys,
            self.firsts,
            self.first_frames,
            self.lasts,
            self.counts,
        ];
        let n = cols
            .iter()
            .map(|c| c.len())
            .fold(self.codes.len(), usize::min);
        (0..n).map(move |i| (self.codes[i], cols.map(|c| c[i])))
    }
}

/// One data direction's reading (see the module's doc).
pub struct Reading {
    p: Params,
    spill: Spill,
    selected: bool,
    /// The last retransmitted frame taken: a frame with several flags (a
    /// retransmission that is also a fast one) counts once; its flags are
    /// next to each other in time order.
    last_resent: Option<i64>,
    // The first reading.
    resent_times: Column,
    last_resent_time: Option<i64>,
    resent_frames: Vec<i64>,
    spurious: u64,
    hole_count: u64,
    real_holes: u64,
    /// Holes not yet followed by a capture drop's ACK, within the wait.
    pending_holes: VecDeque<i64>,
    last_unseen: Option<i64>,
    ack_unseen: Vec<Unseen>,
    ack_unseen_count: u64,
    unseen_bytes: u128,
    run_key: Option<i64>,
    run_count: u64,
    downstream: bool,
    // The second: the runs.
    /// The run being read (key, first, first frame, last, count): it may go
    /// on in the next range of rows.
    run: Option<[i64; 5]>,
    recovery_until: i64,
    /// The next retransmission a run may be answered by (runs come in order).
    answers: Cursor,
    ep_starts: Column,
    ep_ends: Column,
    /// The first KEEP episodes (the last one's end still grows).
    episodes: Vec<(i64, i64)>,
    loss_runs: Vec<KeptRun>,
    reorder_runs: Vec<KeptRun>,
    loss_run_count: u64,
    reorder_run_count: u64,
    // The second: the retransmissions.
    /// (frame, time, rto) of those not yet placed, and the latest row's time
    /// (a run starting in a later range starts no earlier).
    waiting: VecDeque<(i64, i64, f64)>,
    horizon: Option<i64>,
    /// The episodes that start at or before the retransmission (read in
    /// order), how many, and the latest end among them.
    starts_at: Cursor,
    ends_at: Cursor,
    ep_at: usize,
    ep_reach: i64,
    /// The timeouts' spans (a few per thousand retransmissions).
    timeouts: Vec<(i64, i64)>,
    timeout_frames: Vec<i64>,
    lost: u64,
    reordered: u64,
    needless: u64,
    first_episode: u64,
    episode_resent_frames: Vec<i64>,
}

/// The number in an ACK-unseen event's text ("unseen=N bytes"): the digits
/// of the first "=" that ends in " bytes" (saturating).
fn unseen_bytes_in(detail: &str) -> Option<u128> {
    let b = detail.as_bytes();
    for (i, _) in detail.match_indices('=') {
        let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits > 0 && b[i + 1 + digits..].starts_with(b" bytes") {
            return Some(b[i + 1..i + 1 + digits].iter().fold(0u128, |n, &c| {
                n.saturating_mul(10).saturating_add(u128::from(c - b'0'))
            }));
        }
    }
    None
}

fn keep<T>(list: &mut Vec<T>, item: T) {
    if list.len() < KEEP {
        list.push(item);
    }
}

impl Reading {
    pub fn new(p: Params) -> Self {
        let block = p.block;
        Reading {
            p,
            spill: Spill::default(),
            selected: false,
            last_resent: None,
            resent_times: Column::new(block),
            last_resent_time: None,
            resent_frames: Vec::new(),
            spurious: 0,
            hole_count: 0,
            real_holes: 0,
            pending_holes: VecDeque::new(),
            last_unseen: None,
            ack_unseen: Vec::new(),
            ack_unseen_count: 0,
            unseen_bytes: 0,
            run_key: None,
            run_count: 0,
            downstream: false,
            run: None,
            recovery_until: -1,
            answers: Cursor::default(),
            ep_starts: Column::new(block),
            ep_ends: Column::new(block),
            episodes: Vec::new(),
            loss_runs: Vec::new(),
            reorder_runs: Vec::new(),
            loss_run_count: 0,
            reorder_run_count: 0,
            waiting: VecDeque::new(),
            horizon: None,
            starts_at: Cursor::default(),
            ends_at: Cursor::default(),
            ep_at: 0,
            ep_reach: -1,
            timeouts: Vec::new(),
            timeout_frames: Vec::new(),
            lost: 0,
            reordered: 0,
            needless: 0,
            first_episode: 0,
            episode_resent_frames: Vec::new(),
        }
    }

    /// Whether any event concerned the direction (it is analysed further).
    pub fn selected(&self) -> bool {
        self.selected
    }

    fn in_zero_window(&self, t: i64) -> bool {
        self.p.zero_windows.as_ref().is_some_and(|z| z.contains(t))
    }

    /// The first reading of a range: its rows (`detail(i)`: row `i`'s text,
    /// asked only for capture drops), then its runs.
    pub fn first(
        &mut self,
        rows: &Rows<'_>,
        mut detail: impl FnMut(usize) -> Option<String>,
        runs: &Runs<'_>,
        actions: &[u8],
    ) -> Result<(), UnknownCode> {
        let wait = self.p.wait_ns;
        for (i, ((&frame, &time), &code)) in rows
            .frames
            .iter()
            .zip(rows.times)
            .zip(rows.codes)
            .enumerate()
        {
            let a = act(actions, code)?;
            if a == action::SKIP {
                continue;
            }
            if a <= action::SPURIOUS {
                self.selected = true;
                if self.last_resent != Some(frame) && !self.in_zero_window(time) {
                    self.last_resent = Some(frame);
                    self.resent_times.push(time, &mut self.spill);
                    self.last_resent_time = Some(time);
                    keep(&mut self.resent_frames, frame);
                }
                if a == action::SPURIOUS {
                    self.spurious += 1;
                }
                continue;
            }
            // Holes no capture drop's ACK followed within the wait are real
            // (a later ACK would come later still).
            while self
                .pending_holes
                .front()
                .is_some_and(|&h| h.saturating_add(wait) < time)
            {
                self.pending_holes.pop_front();
                self.real_holes += 1;
            }
            if a == action::HOLE {
                self.hole_count += 1;
                // (One at this very time, just before, follows it.)
                if self.last_unseen != Some(time) {
                    self.pending_holes.push_back(time);
                }
            } else {
                // A capture drop's ACK: it follows every hole still waiting.
                self.selected = true;
                self.pending_holes.clear();
                self.last_unseen = Some(time);
                self.ack_unseen_count += 1;
                let text = detail(i).unwrap_or_default();
                if let Some(n) = unseen_bytes_in(&text) {
                    self.unseen_bytes = self.unseen_bytes.saturating_add(n);
                }
                keep(
                    &mut self.ack_unseen,
                    Unseen {
                        frame,
                        time,
                        detail: text,
                    },
                );
            }
        }
        for (code, [key, first, ..]) in runs.iter() {
            if act(actions, code)? != action::DUP_ACK {
                continue;
            }
            self.selected = true;
            if self.run_key == Some(key) {
                continue; // (it goes on from the rows before)
            }
            self.run_key = Some(key);
            if !self.in_zero_window(first) {
                self.run_count += 1;
            }
        }
        Ok(())
    }

    /// The first reading is over: whether the capture is downstream of the
    /// losses (it sees their holes, about one per run; holes explained by
    /// capture drops do not count). Whether the direction is read again.
    pub fn decide(&mut self) -> bool {
        self.real_holes += self.pending_holes.len() as u64;
        self.pending_holes.clear();
        self.downstream =
            self.real_holes > 0 && self.real_holes as f64 >= 0.25 * self.run_count as f64;
        self.last_resent = None;
        self.selected
    }

    /// The second reading of a range: its runs (each classified once all
    /// read), then its retransmissions.
    pub fn second(
        &mut self,
        rows: &Rows<'_>,
        runs: &Runs<'_>,
        actions: &[u8],
    ) -> Result<(), UnknownCode> {
        for (code, run) in runs.iter() {
            if act(actions, code)? != action::DUP_ACK {
                continue;
            }
            let [key, _, _, last, count] = run;
            match self.run.as_mut() {
                // (It goes on from the range before.)
                Some(r) if r[0] == key => {
                    r[3] = r[3].max(last);
                    r[4] = r[4].saturating_add(count);
                }
                _ => {
                    if let Some(done) = self.run.replace(run) {
                        self.classify(done);
                    }
                }
            }
        }
        for (((&frame, &time), &code), &rto) in rows
            .frames
            .iter()
            .zip(rows.times)
            .zip(rows.codes)
            .zip(rows.rto)
        {
            let a = act(actions, code)?;
            if action::SKIP < a
                && a <= action::SPURIOUS
                && self.last_resent != Some(frame)
                && !self.in_zero_window(time)
            {
                self.last_resent = Some(frame);
                self.waiting.push_back((frame, time, rto));
            }
        }
        if let Some(&t) = rows.times.last() {
            self.horizon = Some(t);
        }
        // The run being read may start at or before the retransmissions of
        // its time or later, and a run of a later range at this range's
        // last time.
        let mut limit = self.horizon;
        if let Some(run) = self.run {
            if limit.is_none_or(|l| run[1] < l) {
                limit = Some(run[1]);
            }
        }
        if let Some(limit) = limit {
            while let Some(&(frame, time, rto)) = self.waiting.front() {
                if time >= limit {
                    break;
                }
                self.waiting.pop_front();
                self.place(frame, time, rto);
            }
        }
        Ok(())
    }

    /// One run, all of it read: loss, part of one, or reordering.
    fn classify(&mut self, [key, first, first_frame, last, count]: [i64; 5]) {
        if self.in_zero_window(first) {
            return;
        }
        let long_ns = self.p.long_ns;
        // (The runs come in order of their first.)
        let nxt = self.answers.first_at_least(
            &self.resent_times,
            first.saturating_sub(1_000_000),
            &self.spill,
        );
        let retransmitted = nxt.is_some_and(|n| n <= last.saturating_add(long_ns));
        let mut fill_delay_ns = None;
        let kind = if self.downstream {
            fill_delay_ns = nxt.map(|n| n.saturating_sub(first).max(0));
            if first <= self.recovery_until {
                RunKind::LossContinued
            } else {
                match fill_delay_ns {
                    None => RunKind::Unknown,
                    Some(d) if d >= long_ns => RunKind::Loss,
                    Some(_) => RunKind::Reorder,
                }
            }
        } else if first <= self.recovery_until {
            RunKind::LossContinued
        } else if retransmitted {
            RunKind::Loss
        } else {
            RunKind::Reorder
        };
        if matches!(kind, RunKind::Loss | RunKind::LossContinued) {
            // (A retransmission at time 0 counts as none, as the diagnosis
            // took it.)
            let answer = match nxt {
                Some(n) if retransmitted && n != 0 => n,
                _ => last,
            };
            let end = last.max(answer).saturating_add(self.p.episode_tail_ns);
            self.recovery_until = self.recovery_until.max(end);
            if kind == RunKind::Loss || self.ep_ends.is_empty() {
                self.ep_starts.push(first, &mut self.spill);
                self.ep_ends.push(end, &mut self.spill);
                keep(&mut self.episodes, (first, end));
            } else {
                let grown = self.ep_ends.last().map_or(end, |e| e.max(end));
                self.ep_ends.set_last(grown);
                if self.ep_ends.len() <= KEEP {
                    if let Some(e) = self.episodes.last_mut() {
                        e.1 = grown;
                    }
                }
                if self.ep_at == self.ep_ends.len() {
                    // (A retransmission was placed after it: later ones see
                    // its end.)
                    self.ep_reach = self.ep_reach.max(grown);
                }
            }
        }
        let kept = match kind {
            RunKind::Loss => {
                self.loss_run_count += 1;
                &mut self.loss_runs
            }
            RunKind::Reorder => {
                self.reorder_run_count += 1;
                &mut self.reorder_runs
            }
            _ => return,
        };
        keep(
            kept,
            KeptRun {
                ack_frame: key,
                first,
                first_frame,
                last,
                count,
                fill_delay_ns,
                retransmitted,
                kind,
            },
        );
    }

    /// One retransmission, every run starting at or before it classified:
    /// in a loss episode, a timeout, or reordering.
    fn place(&mut self, frame: i64, time: i64, rto: f64) {
        // The episodes are in order of their starts, and so are the
        // retransmissions.
        let k = self
            .starts_at
            .count_at_most(&self.ep_starts, time, &self.spill);
        if k > 0 {
            self.ep_reach = self
                .ends_at
                .max_of_next(&self.ep_ends, k, self.ep_reach, &self.spill);
            self.ep_at += k;
        }
        let in_episode = self.ep_at > 0 && self.ep_reach >= time;
        // (NaN: no rto given.)
        if !in_episode && rto >= self.p.timeout_min_s {
            keep(&mut self.timeout_frames, frame);
            self.timeouts
                .push((time.saturating_sub((rto * 1e9) as i64), time));
            self.lost += 1;
        } else if in_episode {
            self.lost += 1;
            keep(&mut self.episode_resent_frames, frame);
        } else {
            self.reordered += 1;
            if !self.downstream {
                self.needless += 1;
            }
        }
        if let Some(&(s, e)) = self.episodes.first() {
            if s <= time && time <= e {
                self.first_episode += 1;
            }
        }
    }

    /// The second reading is over: the last run, the retransmissions after
    /// it, and what was found.
    pub fn finish(mut self) -> Outcome {
        if let Some(run) = self.run.take() {
            self.classify(run);
        }
        while let Some((frame, time, rto)) = self.waiting.pop_front() {
            self.place(frame, time, rto);
        }
        let recovery_ns = self.recovery_ns();
        Outcome {
            downstream: self.downstream,
            loss_runs: self.loss_runs,
            loss_run_count: self.loss_run_count,
            reorder_runs: self.reorder_runs,
            reorder_run_count: self.reorder_run_count,
            resent_count: self.resent_times.len() as u64,
            resent_frames: self.resent_frames,
            episode_resent_frames: self.episode_resent_frames,
            last_resent_time: self.last_resent_time,
            timeout_count: self.timeouts.len() as u64,
            timeout_frames: self.timeout_frames,
            hole_count: self.hole_count,
            ack_unseen: self.ack_unseen,
            ack_unseen_count: self.ack_unseen_count,
            unseen_bytes: self.unseen_bytes,
            spurious: self.spurious,
            lost_segments: self.lost,
            reordered_segments: self.reordered,
            needless_retransmissions: self.needless,
            recovery_ns,
            episodes: self.episodes,
            episode_count: self.ep_starts.len() as u64,
            first_episode_segments: self.first_episode,
        }
    }

    /// The length of the union of the loss episodes and the timeouts: both
    /// in order of their starts, merged without a list of every episode.
    fn recovery_ns(&mut self) -> i64 {
        self.timeouts.sort_unstable();
        let (mut starts, mut ends) = (Cursor::default(), Cursor::default());
        let (ep_starts, ep_ends, spill) = (&self.ep_starts, &self.ep_ends, &self.spill);
        let mut episodes = std::iter::from_fn(|| {
            Some((starts.next(ep_starts, spill)?, ends.next(ep_ends, spill)?))
        })
        .peekable();
        let mut timeouts = self.timeouts.iter().copied().peekable();
        // (An episode first among equal starts: the union is the same.)
        let merged = std::iter::from_fn(|| match (episodes.peek(), timeouts.peek()) {
            (Some(ep), Some(t)) if t.0 < ep.0 => timeouts.next(),
            (Some(_), _) => episodes.next(),
            (None, _) => timeouts.next(),
        });
        let mut union = Union::default();
        for (s, e) in merged {
            union.add(s, e);
        }
        union.total()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A column keeps its newest values in memory and the rest in blocks on
    /// the spill; cursors move forward over every value in order, those
    /// appended while they read too: past the values at most a bound, to
    /// the first at least one, over the next k (their largest); the last
    /// value can still change. In a spill with a file and in one without.
    #[test]
    fn columns_read_back_in_order() {
        for in_memory in [false, true] {
            for block in [1, 2, 3, 64, BLOCK] {
                let mut below = crate::test_rng::xorshift_below(5 + block as u64);
                let mut spill = if in_memory {
                    Spill::in_memory()
                } else {
                    Spill::default()
                };
                let mut col = Column::new(block);
                let mut want: Vec<i64> = Vec::new();
                let (mut counter, mut taker, mut finder) =
                    (Cursor::default(), Cursor::default(), Cursor::default());
                let (mut counted, mut taken) = (0usize, 0usize);
                let mut bound = -10;
                for _ in 0..300 {
                    let v = want.last().copied().unwrap_or(0) + below(4) as i64;
                    col.push(v, &mut spill);
                    want.push(v);
                    if below(10) < 3 {
                        col.set_last(v + 1);
                        *want.last_mut().unwrap() = v + 1;
                    }
                    let x = want[want.len() - 1] - below(3) as i64;
                    if below(10) < 3 {
                        let k = counter.count_at_most(&col, x, &spill);
                        assert_eq!(k, want[counted..].iter().filter(|&&w| w <= x).count());
                        counted += k;
                        if k > 0 {
                            // (A start above the values, within them or below.)
                            let start =
                                [-1, want[taken], want[want.len() - 1] + 5][below(3) as usize];
                            let got = taker.max_of_next(&col, k, start, &spill);
                            let most = want[taken..taken + k].iter().copied().max().unwrap();
                            assert_eq!(got, start.max(most));
                            taken += k;
                        }
                    }
                    if below(10) < 2 {
                        // (Bounds no smaller than the one before, as the runs ask.)
                        bound = bound.max(want[want.len() - 1] - below(6) as i64);
                        let got = finder.first_at_least(&col, bound, &spill);
                        assert_eq!(got, want.iter().copied().find(|&w| w >= bound));
                    }
                }
                assert_eq!(col.len(), want.len());
                assert_eq!(col.last(), want.last().copied());
                let mut all = Cursor::default();
                let read: Vec<i64> = std::iter::from_fn(|| all.next(&col, &spill)).collect();
                assert_eq!(read, want, "block {block}");
                assert_eq!(
                    finder.first_at_least(&col, want[want.len() - 1] + 1, &spill),
                    None
                );
                // Past the end: the values there are, no more.
                let left = want.len() - taken;
                let most = want[taken..].iter().copied().max().unwrap_or(i64::MIN);
                assert_eq!(taker.max_of_next(&col, left + 1, i64::MIN, &spill), most);
            }
        }
    }

    #[test]
    fn unseen_bytes_are_the_number_before_bytes() {
        assert_eq!(unseen_bytes_in("unseen=4096 bytes"), Some(4096));
        assert_eq!(unseen_bytes_in("a=b unseen=12 bytes"), Some(12));
        assert_eq!(unseen_bytes_in("x=7 frames, unseen=9 bytes"), Some(9));
        assert_eq!(unseen_bytes_in("unseen=12bytes"), None);
        assert_eq!(unseen_bytes_in("unseen= 5 bytes"), None);
        assert_eq!(unseen_bytes_in(""), None);
        // (Only ASCII digits; a number past u128 saturates.)
        assert_eq!(unseen_bytes_in("unseen=\u{0663} bytes"), None);
        assert_eq!(
            unseen_bytes_in(&format!("={} bytes", "9".repeat(60))),
            Some(u128::MAX)
        );
    }

    #[test]
    fn spans_contain_the_times_between_a_start_and_the_reach_before_it() {
        // [0, 10], [5, 7], [20, 30]: reach 10, 10, 30.
        let z = Spans::new(vec![0, 5, 20], vec![10, 10, 30]);
        for (t, inside) in [
            (-1, false),
            (0, true),
            (8, true),
            (10, true),
            (11, false),
            (20, true),
            (31, false),
        ] {
            assert_eq!(z.contains(t), inside, "{t}");
        }
        assert!(!Spans::default().contains(0));
    }

    /// A label code past the actions given is an error, not a panic.
    #[test]
    fn an_unknown_label_code_is_refused() {
        let mut r = Reading::new(Params {
            long_ns: 1,
            episode_tail_ns: 1,
            wait_ns: 1,
            timeout_min_s: 1.0,
            zero_windows: None,
            block: BLOCK,
        });
        let rows = Rows {
            frames: &[1],
            times: &[1],
            codes: &[3],
            rto: &[f64::NAN],
        };
        let runs = Runs {
            codes: &[],
            keys: &[],
            firsts: &[],
            first_frames: &[],
            lasts: &[],
            counts: &[],
        };
        assert_eq!(
            r.first(&rows, |_| None, &runs, &[0, 1]),
            Err(UnknownCode(3))
        );
        assert_eq!(r.second(&rows, &runs, &[0, 1]), Err(UnknownCode(3)));
    }
}
