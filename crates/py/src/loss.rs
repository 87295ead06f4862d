//! `LossReading`: the loss analysis' reading of one data direction of a
//! connection (`nastriage_engine::tcp::loss_reading`), for the diagnosis'
//! `retrans`, which hands it each range's columns as the bytes of its
//! arrays and makes its results from what `finish` gives.

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use nastriage_engine::tcp::loss_reading::{action, KeptRun, Params, Reading, Rows, Runs, Spans};

/// Native-endian values of `N` bytes each from a column's bytes.
fn values<T, const N: usize>(
    name: &str,
    b: &[u8],
    from: impl Fn([u8; N]) -> T,
) -> PyResult<Vec<T>> {
    if !b.len().is_multiple_of(N) {
        return Err(PyValueError::new_err(format!(
            "{name}: {} bytes is not a whole number of {N}-byte values",
            b.len()
        )));
    }
    Ok(b.chunks_exact(N)
        .map(|c| from(c.try_into().unwrap_or([0; N])))
        .collect())
}

fn i64s(name: &str, b: &[u8]) -> PyResult<Vec<i64>> {
    values(name, b, i64::from_ne_bytes)
}

fn one_length(lens: &[usize]) -> PyResult<()> {
    if lens.windows(2).any(|w| w[0] != w[1]) {
        return Err(PyValueError::new_err(format!(
            "the columns of a range must have one length (got {lens:?})"
        )));
    }
    Ok(())
}

/// The names of a range's columns, in the order the tuple gives them
/// (`retrans._columns`): the rows', then the duplicate-ACK runs'.
const COLUMNS: [&str; 10] = [
    "frames",
    "times",
    "codes",
    "rto",
    "run_codes",
    "run_keys",
    "run_firsts",
    "run_first_frames",
    "run_lasts",
    "run_counts",
];

/// A range's columns decoded: the rows' frames, times, label codes and
/// `rto`, and its runs' label codes and int64 columns.
struct RangeCols {
    frames: Vec<i64>,
    times: Vec<i64>,
    codes: Vec<u16>,
    rto: Vec<f64>,
    run_codes: Vec<u16>,
    runs: [Vec<i64>; 5],
}

impl RangeCols {
    /// From the tuple of the columns' bytes ([`COLUMNS`]); `rows`: the
    /// length of another column of the rows (the details), if any.
    fn decode(t: &Bound<'_, PyTuple>, rows: Option<usize>) -> PyResult<Self> {
        if t.len() != COLUMNS.len() {
            return Err(PyValueError::new_err(format!(
                "a range is {} columns ({}), not {}",
                COLUMNS.len(),
                COLUMNS.join(", "),
                t.len()
            )));
        }
        let cols = (0..COLUMNS.len())
            .map(|i| Ok(t.get_item(i)?.cast_into::<PyBytes>()?))
            .collect::<PyResult<Vec<_>>>()?;
        let bytes = |i: usize| cols[i].as_bytes();
        let mut c = RangeCols {
            frames: i64s(COLUMNS[0], bytes(0))?,
            times: i64s(COLUMNS[1], bytes(1))?,
            codes: values(COLUMNS[2], bytes(2), u16::from_ne_bytes)?,
            rto: values(COLUMNS[3], bytes(3), f64::from_ne_bytes)?,
            run_codes: values(COLUMNS[4], bytes(4), u16::from_ne_bytes)?,
            runs: Default::default(),
        };
        for (k, col) in c.runs.iter_mut().enumerate() {
            *col = i64s(COLUMNS[5 + k], bytes(5 + k))?;
        }
        let mut lens = vec![c.frames.len(), c.times.len(), c.codes.len(), c.rto.len()];
        lens.extend(rows);
        one_length(&lens)?;
        let mut lens = vec![c.run_codes.len()];
        lens.extend(c.runs.iter().map(Vec::len));
        one_length(&lens)?;
        Ok(c)
    }

    fn rows(&self) -> Rows<'_> {
        Rows {
            frames: &self.frames,
            times: &self.times,
            codes: &self.codes,
            rto: &self.rto,
        }
    }

    fn runs(&self) -> Runs<'_> {
        let [keys, firsts, first_frames, lasts, counts] = &self.runs;
        Runs {
            codes: &self.run_codes,
            keys,
            firsts,
            first_frames,
            lasts,
            counts,
        }
    }
}

/// One data direction's reading: `first` for every range, `decide`, then
/// `second` for every range and `finish` (once).
#[pyclass(module = "nastriage._core")]
pub(crate) struct LossReading {
    inner: Option<Reading>,
}

impl LossReading {
    fn reading(&mut self) -> PyResult<&mut Reading> {
        self.inner
            .as_mut()
            .ok_or_else(|| PyRuntimeError::new_err("the reading is finished"))
    }
}

#[pymethods]
impl LossReading {
    // What the reading does with an event (`actions`: one per label code),
    // the engine's numbering, so that the diagnosis has no second one.
    #[classattr]
    const SKIP: u8 = action::SKIP;
    #[classattr]
    const RESENT: u8 = action::RESENT;
    #[classattr]
    const SPURIOUS: u8 = action::SPURIOUS;
    #[classattr]
    const HOLE: u8 = action::HOLE;
    #[classattr]
    const DUP_ACK: u8 = action::DUP_ACK;
    #[classattr]
    const UNSEEN: u8 = action::UNSEEN;

    /// `zw_starts`/`zw_reach`: the zero-window spans (`retrans.Spans`'s
    /// columns as int64 bytes; empty: none); `block`: values per spilled
    /// block.
    #[new]
    #[pyo3(signature = (long_ns, episode_tail_ns, wait_ns, timeout_min_s, zw_starts, zw_reach, block))]
    fn new(
        long_ns: i64,
        episode_tail_ns: i64,
        wait_ns: i64,
        timeout_min_s: f64,
        zw_starts: &[u8],
        zw_reach: &[u8],
        block: usize,
    ) -> PyResult<Self> {
        let starts = i64s("zw_starts", zw_starts)?;
        let reach = i64s("zw_reach", zw_reach)?;
        one_length(&[starts.len(), reach.len()])?;
        let zero_windows = (!starts.is_empty()).then(|| Spans::new(starts, reach));
        Ok(LossReading {
            inner: Some(Reading::new(Params {
                long_ns,
                episode_tail_ns,
                wait_ns,
                timeout_min_s,
                zero_windows,
                block,
            })),
        })
    }

    /// Whether any event concerned the direction.
    #[getter]
    fn selected(&self) -> bool {
        self.inner.as_ref().is_some_and(Reading::selected)
    }

    /// The first reading of a range: `range`, its columns' bytes
    /// ([`COLUMNS`]); `details`: its rows' texts; `actions`: one per label
    /// code.
    fn first(
        &mut self,
        range: &Bound<'_, PyTuple>,
        details: &Bound<'_, PyList>,
        actions: &[u8],
    ) -> PyResult<()> {
        let c = RangeCols::decode(range, Some(details.len()))?;
        let detail = |i: usize| {
            details
                .get_item(i)
                .ok()
                .and_then(|d| d.extract::<Option<String>>().ok().flatten())
        };
        self.reading()?
            .first(&c.rows(), detail, &c.runs(), actions)
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// The first reading is over: whether the direction is read again.
    fn decide(&mut self) -> PyResult<bool> {
        Ok(self.reading()?.decide())
    }

    /// The second reading of a range (as `first`).
    fn second(&mut self, range: &Bound<'_, PyTuple>, actions: &[u8]) -> PyResult<()> {
        let c = RangeCols::decode(range, None)?;
        self.reading()?
            .second(&c.rows(), &c.runs(), actions)
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// The second reading is over: what was found, by the names of the
    /// diagnosis' `LossAnalysis` (runs as `(ack_frame, first, first_frame,
    /// last, count, fill_delay_ns, retransmitted, kind)`, capture drops as
    /// `(frame, time, detail)`).
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let reading = self
            .inner
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("the reading is finished"))?;
        let o = reading.finish();
        let runs = |v: &[KeptRun]| -> Vec<_> {
            v.iter()
                .map(|r| {
                    (
                        r.ack_frame,
                        r.first,
                        r.first_frame,
                        r.last,
                        r.count,
                        r.fill_delay_ns,
                        r.retransmitted,
                        r.kind.name(),
                    )
                })
                .collect()
        };
        let d = PyDict::new(py);
        d.set_item("downstream", o.downstream)?;
        d.set_item("loss_runs", runs(&o.loss_runs))?;
        d.set_item("loss_run_count", o.loss_run_count)?;
        d.set_item("reorder_runs", runs(&o.reorder_runs))?;
        d.set_item("reorder_run_count", o.reorder_run_count)?;
        d.set_item("resent_count", o.resent_count)?;
        d.set_item("resent_frames", o.resent_frames)?;
        d.set_item("episode_resent_frames", o.episode_resent_frames)?;
        d.set_item("last_resent_time", o.last_resent_time)?;
        d.set_item("timeout_count", o.timeout_count)?;
        d.set_item("timeout_frames", o.timeout_frames)?;
        d.set_item("hole_count", o.hole_count)?;
        let unseen: Vec<_> = o
            .ack_unseen
            .into_iter()
            .map(|u| (u.frame, u.time, u.detail))
            .collect();
        d.set_item("ack_unseen", unseen)?;
        d.set_item("ack_unseen_count", o.ack_unseen_count)?;
        d.set_item("unseen_bytes", o.unseen_bytes)?;
        d.set_item("spurious", o.spurious)?;
        d.set_item("lost_segments", o.lost_segments)?;
        d.set_item("reordered_segments", o.reordered_segments)?;
        d.set_item("needless_retransmissions", o.needless_retransmissions)?;
        d.set_item("recovery_ns", o.recovery_ns)?;
        d.set_item("episodes", o.episodes)?;
        d.set_item("episode_count", o.episode_count)?;
        d.set_item("first_episode_segments", o.first_episode_segments)?;
        Ok(d)
    }
}
