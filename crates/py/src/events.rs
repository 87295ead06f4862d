//! The `tcp_events` table regrouped by connection for the diagnosis
//! (`nastriage.diagnosis.events.EventsByStream`): per connection, columns of
//! machine integers handed over as bytes (Python's `array.frombytes`), a
//! label code per event and a duplicate ACK's detail as its two numbers.
//! The same regrouping in Python made an object per cell of every row: on a
//! lossy single-connection copy (100,000 flags per GiB) it was most of the
//! diagnosis' time.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use nastriage_engine::tcp::{Detail, TcpEvent};
use nastriage_engine::Analysis;

/// Texts shorter than this repeat (flag names) and are shared; longer ones
/// (a retransmission's frame and time) rarely do. As the Python reader.
const SHARED_TEXT: usize = 24;

/// One connection's events, in table order.
#[derive(Default)]
struct Columns {
    frames: Vec<u8>,
    times: Vec<u8>,
    codes: Vec<u8>,
    details: Vec<Option<Py<PyString>>>,
    acked: Vec<u8>,
    dup_numbers: Vec<u8>,
    last: Option<(i64, u64)>,
    in_order: bool,
}

impl Columns {
    fn push(&mut self, e: &TcpEvent, code: u16, detail: Option<Py<PyString>>, dup: (i64, i64)) {
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
        self.dup_numbers.extend_from_slice(&dup.0.to_ne_bytes());
        self.acked.extend_from_slice(&dup.1.to_ne_bytes());
    }
}

/// Rows `start..stop` of `tcp_events` regrouped: `(labels, streams)`.
/// `labels` are the (direction, kind) pairs numbered by first appearance
/// in the table: the caller's `known` ones (from earlier rows) and those
/// these rows add. `streams` maps each connection, in order of its first
/// event here, to `(frames, times, codes, details, acked, dup_numbers,
/// in_order)` — native-endian i64 / i64 / u16 / i64 / i64 bytes and a list
/// of detail texts (None for a duplicate ACK, whose numbers are in
/// `dup_numbers` and `acked`; elsewhere those hold 0 and -1), and whether
/// these rows of the connection are in (time, frame) order. Read a range at
/// a time, the bytes of a lossy copy's hundreds of thousands of events are
/// never all held twice.
pub(crate) fn by_stream<'py>(
    py: Python<'py>,
    a: &Analysis,
    start: usize,
    stop: usize,
    known: Vec<(String, String)>,
) -> PyResult<Bound<'py, PyTuple>> {
    // The labels by name; `codes` caches them by the engine's static names
    // so that an event costs no allocation.
    let mut labels: Vec<(String, String)> = known;
    let mut by_name: HashMap<(String, String), u16> = HashMap::new();
    for (i, l) in labels.iter().enumerate() {
        by_name.insert(l.clone(), u16::try_from(i).unwrap_or(u16::MAX));
    }
    let mut codes: HashMap<(&'static str, &'static str), u16> = HashMap::new();
    let mut order: Vec<u32> = Vec::new();
    let mut streams: HashMap<u32, Columns> = HashMap::new();
    let mut shared: HashMap<String, Py<PyString>> = HashMap::new();
    for (e, direction) in a.tcp_event_rows(start, stop) {
        let kind = e.kind.name();
        let code = *codes.entry((direction, kind)).or_insert_with(|| {
            let name = (direction.to_string(), kind.to_string());
            *by_name.entry(name.clone()).or_insert_with(|| {
                // Labels are (direction, flag) pairs: a few dozen at most.
                labels.push(name);
                u16::try_from(labels.len() - 1).unwrap_or(u16::MAX)
            })
        });
        let cols = streams.entry(e.stream).or_insert_with(|| {
            order.push(e.stream);
            Columns::default()
        });
        if let (Detail::DupAck { num, frame }, "duplicate_ack") = (e.detail, kind) {
            cols.push(&e, code, None, (i64::from(num), frame as i64));
            continue;
        }
        let text = e.detail_text();
        let detail = if text.len() < SHARED_TEXT {
            match shared.get(&text) {
                Some(s) => s.clone_ref(py),
                None => {
                    let s = PyString::new(py, &text).unbind();
                    shared.insert(text, s.clone_ref(py));
                    s
                }
            }
        } else {
            PyString::new(py, &text).unbind()
        };
        cols.push(&e, code, Some(detail), (0, -1));
    }
    let out = PyDict::new(py);
    for stream in order {
        let Some(c) = streams.remove(&stream) else {
            continue;
        };
        let details = PyList::new(py, c.details)?;
        let item = (
            PyBytes::new(py, &c.frames),
            PyBytes::new(py, &c.times),
            PyBytes::new(py, &c.codes),
            details,
            PyBytes::new(py, &c.acked),
            PyBytes::new(py, &c.dup_numbers),
            c.in_order,
        );
        out.set_item(stream, item)?;
    }
    let labels = PyList::new(py, labels)?;
    PyTuple::new(py, [labels.into_any(), out.into_any()])
}
