//! The `tcp_events` table regrouped by connection for the diagnosis
//! (`nastriage.diagnosis.events.EventsByStream`): per connection, columns of
//! machine integers handed over as bytes (Python's `array.frombytes`), a
//! label code per event and a duplicate ACK's detail as its two numbers.
//! The same regrouping in Python made an object per cell of every row: on a
//! lossy single-connection copy (100,000 flags per GiB) it was most of the
//! diagnosis' time.
//!
//! The diagnosis takes duplicate ACKs as runs instead (one per label and
//! acknowledged frame: first time and frame, last time, count), made over
//! a range of rows like the rest ([`Part`]): the runs are all the loss
//! analysis reads of duplicate ACKs, which are most of a lossy copy's
//! flags, and one by one they were most of the diagnosis' memory. A run
//! that goes on past a range's end continues in the next one's first run
//! of its label (the engine's duplicate ACKs of one direction repeat later
//! and later ACKs); the reader joins them.

// (foldhash: a regrouped range hashes a few keys per event; std's SipHash
// was a tenth of the loss analysis' time.)
use foldhash::{HashMap, HashMapExt};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use nastriage_engine::tcp::{Detail, Flag, TcpEvent};
use nastriage_engine::Analysis;

/// One connection's events, in table order.
#[derive(Default)]
struct Columns {
    frames: Vec<u8>,
    times: Vec<u8>,
    codes: Vec<u8>,
    details: Vec<Option<Py<PyString>>>,
    rto: Vec<u8>,
    acked: Vec<u8>,
    dup_numbers: Vec<u8>,
    last: Option<(i64, u64)>,
    in_order: bool,
}

impl Columns {
    /// `dup`: the duplicate-ACK number and acknowledged frame columns' values
    /// (none when duplicate ACKs come as runs: the columns stay empty).
    fn push(
        &mut self,
        e: &TcpEvent,
        code: u16,
        detail: Option<Py<PyString>>,
        dup: Option<(i64, i64)>,
    ) {
        self.rto.extend_from_slice(&rto_seconds(e).to_ne_bytes());
        // Table order is (time, frame) order unless some event goes back.
        let key = (e.ts, e.frame);
        self.in_order = match self.last {
            None => true,
            Some(last) => self.in_order && key >= last,
        };
        self.last = Some(key);
        // Frames fit an i64 (Python's array "q"), as they fit a Python int.
        self.frames
            .extend_from_slice(&(e.frame as i64).to_ne_bytes());
        self.times.extend_from_slice(&e.ts.to_ne_bytes());
        self.codes.extend_from_slice(&code.to_ne_bytes());
        self.details.push(detail);
        if let Some((num, acked)) = dup {
            self.dup_numbers.extend_from_slice(&num.to_ne_bytes());
            self.acked.extend_from_slice(&acked.to_ne_bytes());
        }
    }
}

/// An event's detail text. Flag names and byte counts repeat, and each is
/// made once, looked up by the event's kind and detail (the text is made of
/// them alone): looked up by the text, it was made every time and the
/// comparisons of strings were a fifth of this regrouping. A
/// retransmission's time and frame, or a duplicate ACK's number and frame,
/// rarely repeat and are made each time.
fn text_of(
    py: Python<'_>,
    e: &TcpEvent,
    shared: &mut HashMap<(Flag, Detail), Py<PyString>>,
) -> Py<PyString> {
    if matches!(e.detail, Detail::Rto { .. } | Detail::DupAck { .. }) {
        return PyString::new(py, &e.detail_text()).unbind();
    }
    shared
        .entry((e.kind, e.detail))
        .or_insert_with(|| PyString::new(py, &e.detail_text()).unbind())
        .clone_ref(py)
}

/// The seconds a retransmission's text gives after `rto=` (the time since
/// the oldest un-acknowledged segment, to the microsecond), as the table
/// reader reads them from the text (`diagnosis.events`: the digits and dots
/// after `rto=`, then `s`); NaN for an event without them (a negative time,
/// after a clock step, shows a sign there, not digits).
fn rto_seconds(e: &TcpEvent) -> f64 {
    match e.detail {
        Detail::Rto { ns, .. } if ns >= 0 => {
            // The text's number without making the text (formatting and
            // reading it back were a sixth of this regrouping).
            let shown = ns as f64 / 1e9;
            match micros_shown(shown) {
                Some(us) => us as f64 / 1e6,
                None => rto_seconds_from_text(e),
            }
        }
        _ => f64::NAN,
    }
}

/// The whole microseconds `{:.6}` shows of `x` (≥ 0, finite): `x` × 10⁶
/// rounded from its exact binary value, half to even, as Rust's exact
/// formatting rounds. None when it does not fit below 2⁵³ (then
/// `us as f64 / 1e6` would not be the text's number read back).
fn micros_shown(x: f64) -> Option<u64> {
    if !x.is_finite() || x < 0.0 {
        return None;
    }
    let bits = x.to_bits();
    let (exp, frac) = ((bits >> 52) & 0x7ff, bits & ((1 << 52) - 1));
    // x = m × 2^e exactly.
    let (m, e) = if exp == 0 {
        (frac, -1074i64)
    } else {
        (frac | 1 << 52, exp as i64 - 1075)
    };
    // (From 2⁵² s on, far past 2⁵³ µs.)
    let k = u32::try_from(-e).ok().filter(|&k| k > 0)?;
    let scaled = u128::from(m) * 1_000_000;
    let us = if k >= 127 {
        0 // (below half a microsecond: m × 10⁶ < 2⁷³)
    } else {
        let q = scaled >> k;
        let rest = scaled - (q << k);
        let half = 1u128 << (k - 1);
        q + u128::from(rest > half || (rest == half && q & 1 == 1))
    };
    u64::try_from(us).ok().filter(|&us| us < 1 << 53)
}

/// [`rto_seconds`] read from the event's text (the reference).
fn rto_seconds_from_text(e: &TcpEvent) -> f64 {
    if !matches!(e.detail, Detail::Rto { .. }) {
        return f64::NAN;
    }
    let text = e.detail_text();
    let Some(rest) = text.strip_prefix("rto=") else {
        return f64::NAN;
    };
    let n = rest
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b'.')
        .count();
    match (rest.as_bytes().get(n), rest.get(..n)) {
        (Some(b's'), Some(number)) if n > 0 => number.parse().unwrap_or(f64::NAN),
        _ => f64::NAN,
    }
}

/// Which of a range's events to hand over, and how.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// Every event in the columns (a connection's full list).
    All,
    /// Every event but duplicate ACKs in the columns, and the duplicate ACKs
    /// as runs (what the loss analysis reads).
    RowsAndRuns,
}

impl Part {
    /// The part Python names: "all" or "rows+runs".
    pub(crate) fn parse(name: &str) -> Option<Part> {
        match name {
            "all" => Some(Part::All),
            "rows+runs" => Some(Part::RowsAndRuns),
            _ => None,
        }
    }
}

/// Duplicate ACKs of one connection, by (label code, acknowledged frame),
/// in order of the first one of each in the rows.
#[derive(Default)]
struct Runs {
    index: HashMap<(u16, u64), usize>,
    /// The runs are not in order of their first duplicate ACK's (time,
    /// frame): the rows went back in time.
    out_of_order: bool,
    codes: Vec<u16>,
    acked: Vec<i64>,
    first: Vec<(i64, u64)>,
    last: Vec<i64>,
    count: Vec<i64>,
}

impl Runs {
    fn add(&mut self, e: &TcpEvent, code: u16, acked: u64) {
        let key = (e.ts, e.frame);
        match self.index.get(&(code, acked)) {
            Some(&i) => {
                // (The first and last in (time, frame) order, whatever the
                // rows' order.)
                self.out_of_order |= key < self.first[i];
                self.first[i] = self.first[i].min(key);
                self.last[i] = self.last[i].max(e.ts);
                self.count[i] += 1;
            }
            None => {
                self.out_of_order |= self.first.last().is_some_and(|&f| key < f);
                self.index.insert((code, acked), self.codes.len());
                self.codes.push(code);
                // Frames fit an i64, as in `Columns::push`.
                self.acked.push(acked as i64);
                self.first.push(key);
                self.last.push(e.ts);
                self.count.push(1);
            }
        }
    }

    /// `(codes, acked, first times, first frames, last times, counts,
    /// in_order, per_code)`: native-endian u16 and i64 bytes, whether the
    /// runs are in order of their first duplicate ACK's (time, frame), and
    /// the runs summed up per label ([`Runs::per_code`]: tuples as
    /// `diagnosis.events.CodeRuns`).
    fn into_py<'py>(self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        fn bytes<'py, T: Copy, const N: usize>(
            py: Python<'py>,
            v: impl Iterator<Item = T>,
            f: impl Fn(T) -> [u8; N],
        ) -> Bound<'py, PyBytes> {
            let b: Vec<u8> = v.flat_map(f).collect();
            PyBytes::new(py, &b)
        }
        let items = [
            bytes(py, self.codes.iter().copied(), u16::to_ne_bytes),
            bytes(py, self.acked.iter().copied(), i64::to_ne_bytes),
            bytes(py, self.first.iter().map(|f| f.0), i64::to_ne_bytes),
            bytes(py, self.first.iter().map(|f| f.1 as i64), i64::to_ne_bytes),
            bytes(py, self.last.iter().copied(), i64::to_ne_bytes),
            bytes(py, self.count.iter().copied(), i64::to_ne_bytes),
        ];
        let in_order = pyo3::types::PyBool::new(py, !self.out_of_order).to_owned();
        let mut items: Vec<Bound<'py, PyAny>> = items.into_iter().map(Bound::into_any).collect();
        items.push(in_order.into_any());
        let per_code = PyList::empty(py);
        for c in self.per_code() {
            per_code.append((
                c.code, c.first.0, c.first.1, c.first.2, c.second, c.last.0, c.last.1, c.last.2,
                c.rising,
            ))?;
        }
        items.push(per_code.into_any());
        PyTuple::new(py, items)
    }

    /// The runs summed up per label, in order of each label's first run (as
    /// `diagnosis.events.code_runs` does from a table).
    fn per_code(&self) -> Vec<CodeRuns> {
        let mut out: Vec<CodeRuns> = Vec::new();
        for (i, &code) in self.codes.iter().enumerate() {
            let run = (self.acked[i], self.first[i].0, self.first[i].1 as i64);
            // (Labels are a few dozen at most.)
            match out.iter_mut().find(|c| c.code == code) {
                None => out.push(CodeRuns {
                    code,
                    first: run,
                    second: None,
                    last: run,
                    rising: true,
                }),
                Some(c) => {
                    c.second = c.second.or(Some(run.1));
                    c.rising &= run.0 > c.last.0;
                    c.last = run;
                }
            }
        }
        out
    }
}

/// One label's duplicate-ACK runs in a range: the first and last run's
/// (acknowledged frame, first time, first frame), the second's first time,
/// and whether the acknowledged frames rise from run to run.
struct CodeRuns {
    code: u16,
    first: (i64, i64, i64),
    second: Option<i64>,
    last: (i64, i64, i64),
    rising: bool,
}

/// Rows `start..stop` of `tcp_events` regrouped: `(labels, streams)`.
/// `labels` are the (direction, kind) pairs numbered by first appearance
/// in the table: the caller's `known` ones (from earlier rows) and those
/// these rows add. `streams` maps each connection, in order of its first
/// event here, to `(frames, times, codes, details, acked, dup_numbers,
/// in_order, runs, rto)` — native-endian i64 / i64 / u16 / i64 / i64 bytes
/// and a list of detail texts (None for a duplicate ACK, whose numbers are
/// in `dup_numbers` and `acked`; elsewhere those hold 0 and -1; both are
/// empty unless `part` is [`Part::All`]. But for [`Part::All`], None too
/// for a retransmission's "rto=… since frame …": a string per event, it
/// was most of what the diagnosis kept of a lossy copy), whether these
/// rows of the connection are in (time, frame) order, then its duplicate
/// ACKs as runs for [`Part::RowsAndRuns`] (see [`Runs::into_py`]), else
/// None, and each event's [`rto_seconds`] as
/// native-endian f64 bytes. Read a range at a time, the bytes of a lossy
/// copy's hundreds of thousands of events are never all held twice.
pub(crate) fn by_stream<'py>(
    py: Python<'py>,
    a: &Analysis,
    start: usize,
    stop: usize,
    known: Vec<(String, String)>,
    part: Part,
) -> PyResult<Bound<'py, PyTuple>> {
    // The labels by name; `codes` caches them by direction and flag so that
    // an event costs no allocation and no comparison of strings.
    let mut labels: Vec<(String, String)> = known;
    let mut by_name: HashMap<(String, String), u16> = HashMap::new();
    for (i, l) in labels.iter().enumerate() {
        by_name.insert(l.clone(), u16::try_from(i).unwrap_or(u16::MAX));
    }
    // (By sender direction, "c2s" or "s2c", and flag: a lookup by the
    // label's strings for each event was a tenth of this regrouping.)
    let mut codes = [[None::<u16>; Flag::COUNT]; 2];
    let mut order: Vec<u32> = Vec::new();
    let mut streams: HashMap<u32, (Columns, Runs)> = HashMap::new();
    let mut shared: HashMap<(Flag, Detail), Py<PyString>> = HashMap::new();
    for (e, direction) in a.tcp_event_rows(start, stop) {
        let mut label = || {
            let name = (direction.to_string(), e.kind.name().to_string());
            *by_name.entry(name.clone()).or_insert_with(|| {
                // Labels are (direction, flag) pairs: a few dozen at most.
                labels.push(name);
                u16::try_from(labels.len() - 1).unwrap_or(u16::MAX)
            })
        };
        let code = match direction {
            "c2s" => *codes[0][e.kind as usize].get_or_insert_with(label),
            "s2c" => *codes[1][e.kind as usize].get_or_insert_with(label),
            _ => label(),
        };
        let (cols, runs) = streams.entry(e.stream).or_insert_with(|| {
            order.push(e.stream);
            Default::default()
        });
        let dup_ack = e.kind == Flag::DuplicateAck;
        match (part, dup_ack, e.detail) {
            // The run of the ACK it repeats (one of its own without that).
            (Part::RowsAndRuns, true, Detail::DupAck { frame, .. }) => {
                runs.add(&e, code, frame);
                continue;
            }
            (Part::RowsAndRuns, true, _) => {
                runs.add(&e, code, e.frame);
                continue;
            }
            (Part::All, true, Detail::DupAck { num, frame }) => {
                cols.push(&e, code, None, Some((i64::from(num), frame as i64)));
                continue;
            }
            _ => {}
        }
        let detail = if part != Part::All && matches!(e.detail, Detail::Rto { .. }) {
            // (Its number is in `rto`; a full list reads the text again.)
            None
        } else {
            Some(text_of(py, &e, &mut shared))
        };
        cols.push(&e, code, detail, (part == Part::All).then_some((0, -1)));
    }
    let out = PyDict::new(py);
    for stream in order {
        let Some((c, runs)) = streams.remove(&stream) else {
            continue;
        };
        let details = PyList::new(py, c.details)?;
        let runs = if part == Part::RowsAndRuns {
            runs.into_py(py)?.into_any()
        } else {
            py.None().into_bound(py)
        };
        let item = (
            PyBytes::new(py, &c.frames),
            PyBytes::new(py, &c.times),
            PyBytes::new(py, &c.codes),
            details,
            PyBytes::new(py, &c.acked),
            PyBytes::new(py, &c.dup_numbers),
            // (A connection with no events in the columns here: in order.)
            c.in_order || c.last.is_none(),
            runs,
            PyBytes::new(py, &c.rto),
        );
        out.set_item(stream, item)?;
    }
    let labels = PyList::new(py, labels)?;
    PyTuple::new(py, [labels.into_any(), out.into_any()])
}

/// Positions of rows in (time, frame) order, ties in row order (a stable
/// sort), for the diagnosis' reading of a connection whose events go back
/// in time (`nastriage.diagnosis.events.time_order`): `times` and `frames`
/// as native-endian i64 bytes, the positions the same. In Python a sort of
/// the rows as tuples took about 170 bytes a row; here 12 are held while
/// sorting, and the GIL is released.
#[pyfunction]
pub(crate) fn time_order<'py>(
    py: Python<'py>,
    times: &[u8],
    frames: &[u8],
) -> PyResult<Bound<'py, PyBytes>> {
    if times.len() != frames.len() || !times.len().is_multiple_of(8) {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "times and frames must be int64 columns of one length ({} and {} bytes)",
            times.len(),
            frames.len()
        )));
    }
    let order = py.detach(|| order_by_time(times, frames));
    Ok(PyBytes::new(py, &order))
}

fn order_by_time(times: &[u8], frames: &[u8]) -> Vec<u8> {
    let value = |col: &[u8], i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&col[i * 8..i * 8 + 8]);
        i64::from_ne_bytes(b)
    };
    let mut order: Vec<usize> = (0..times.len() / 8).collect();
    // (Stable: equal keys keep their rows' order.)
    order.sort_by_key(|&i| (value(times, i), value(frames, i)));
    order
        .into_iter()
        .flat_map(|i| (i as i64).to_ne_bytes())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(v: &[i64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    fn rto_event(ns: i64) -> TcpEvent {
        TcpEvent {
            frame: 9,
            ts: 0,
            stream: 0,
            dir: 0,
            kind: Flag::Retransmission,
            detail: Detail::Rto { ns, frame: 1 },
        }
    }

    /// The seconds worked out from the nanoseconds are the text's, read
    /// back: ties at the seventh decimal (odd multiples of 1/128 s, which
    /// the formatting rounds to even), times past 2⁵³ µs, negative times.
    #[test]
    fn rto_seconds_are_the_texts() {
        let mut all: Vec<i64> = vec![1, 499, 500, 501, 999, 1_000, 1_500, 2_500, 999_999_999];
        all.extend([
            i64::MAX,
            i64::MAX - 1,
            9_007_199_254_740_991_000,
            -1,
            -7_812_500,
        ]);
        all.extend((1..400).step_by(2).map(|k| k * 7_812_500));
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let digits = (x % 19) as u32;
            all.push((x >> 8) as i64 % 10i64.pow(digits).max(1));
        }
        for ns in all {
            let e = rto_event(ns);
            let (fast, text) = (rto_seconds(&e), rto_seconds_from_text(&e));
            assert!(
                fast.to_bits() == text.to_bits() || (fast.is_nan() && text.is_nan()),
                "{ns} ns: {fast} vs {text} ({})",
                e.detail_text()
            );
        }
        assert!(rto_seconds(&rto_event(-3)).is_nan());
        // Past 2⁵³ µs (and far past it, 2⁵² s and more): read from the text.
        for x in [
            9.1e9,
            2f64.powi(52),
            2f64.powi(60),
            1e300,
            f64::INFINITY,
            -1.0,
        ] {
            assert_eq!(micros_shown(x), None, "{x}");
        }
        assert_eq!(micros_shown(f64::MIN_POSITIVE), Some(0));
        assert_eq!(micros_shown(0.0), Some(0));
        assert_eq!(micros_shown(9.0e9), Some(9_000_000_000_000_000));
        assert_eq!(rto_seconds(&rto_event(7_812_500)), 0.007812);
        assert_eq!(rto_seconds(&rto_event(23_437_500)), 0.023438);
    }

    #[test]
    fn order_by_time_is_a_stable_sort_by_time_then_frame() {
        let times = [5, 3, 5, 3, -1, 5];
        let frames = [2, 9, 1, 9, 4, 1];
        let got = order_by_time(&bytes(&times), &bytes(&frames));
        // (3, 9) twice keeps rows 1 then 3; (5, 1) twice keeps rows 2 then 5.
        assert_eq!(got, bytes(&[4, 1, 3, 2, 5, 0]));
    }
}
