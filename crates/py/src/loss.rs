//! `LossReading`: the loss analysis' reading of one data direction of a
//! connection (`nastriage_engine::tcp::loss_reading`), for the diagnosis'
//! `retrans`, which hands it each range's columns as the bytes of its
//! arrays and makes its results from what `finish` gives.

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use nastriage_engine::tcp::loss_reading::{KeptRun, Params, Reading, Rows, Runs, Spans};

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

/// A range's rows decoded: frames, times, label codes and (for the second
/// reading) each one's `rto`.
struct RowCols {
    frames: Vec<i64>,
    times: Vec<i64>,
    codes: Vec<u16>,
    rto: Vec<f64>,
}

impl RowCols {
    /// `also`: the length of another column of the rows (the details).
    fn decode(
        frames: &[u8],
        times: &[u8],
        codes: &[u8],
        rto: Option<&[u8]>,
        also: Option<usize>,
    ) -> PyResult<Self> {
        let c = RowCols {
            frames: i64s("frames", frames)?,
            times: i64s("times", times)?,
            codes: values("codes", codes, u16::from_ne_bytes)?,
            rto: match rto {
                Some(b) => values("rto", b, f64::from_ne_bytes)?,
                None => Vec::new(),
            },
        };
        let mut lens = vec![c.frames.len(), c.times.len(), c.codes.len()];
        lens.extend(rto.map(|_| c.rto.len()));
        lens.extend(also);
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
}

/// A range's duplicate-ACK runs decoded: label codes and the int64 columns
/// given (acknowledged frames, first times, then for the second reading
/// first frames, last times and counts).
struct RunCols {
    codes: Vec<u16>,
    cols: [Vec<i64>; 5],
}

impl RunCols {
    fn decode(codes: &[u8], given: &[(&str, &[u8])]) -> PyResult<Self> {
        let mut c = RunCols {
            codes: values("run_codes", codes, u16::from_ne_bytes)?,
            cols: Default::default(),
        };
        let mut lens = vec![c.codes.len()];
        for (col, (name, bytes)) in c.cols.iter_mut().zip(given) {
            *col = i64s(name, bytes)?;
            lens.push(col.len());
        }
        one_length(&lens)?;
        Ok(c)
    }

    fn runs(&self) -> Runs<'_> {
        let [keys, firsts, first_frames, lasts, counts] = &self.cols;
        Runs {
            codes: &self.codes,
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

    /// The first reading of a range: its rows (`details`: their texts) and
    /// the label codes, acknowledged frames and first times of its
    /// duplicate-ACK runs; `actions`: one per label code.
    #[allow(clippy::too_many_arguments)]
    fn first(
        &mut self,
        frames: &[u8],
        times: &[u8],
        codes: &[u8],
        details: &Bound<'_, PyList>,
        run_codes: &[u8],
        run_keys: &[u8],
        run_firsts: &[u8],
        actions: &[u8],
    ) -> PyResult<()> {
        let rows = RowCols::decode(frames, times, codes, None, Some(details.len()))?;
        let runs = RunCols::decode(
            run_codes,
            &[("run_keys", run_keys), ("run_firsts", run_firsts)],
        )?;
        let detail = |i: usize| {
            details
                .get_item(i)
                .ok()
                .and_then(|d| d.extract::<Option<String>>().ok().flatten())
        };
        self.reading()?
            .first(&rows.rows(), detail, &runs.runs(), actions)
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// The first reading is over: whether the direction is read again.
    fn decide(&mut self) -> PyResult<bool> {
        Ok(self.reading()?.decide())
    }

    /// The second reading of a range: its rows (with each one's `rto` as
    /// float64 bytes) and its runs whole.
    #[allow(clippy::too_many_arguments)]
    fn second(
        &mut self,
        frames: &[u8],
        times: &[u8],
        codes: &[u8],
        rto: &[u8],
        run_codes: &[u8],
        run_keys: &[u8],
        run_firsts: &[u8],
        run_first_frames: &[u8],
        run_lasts: &[u8],
        run_counts: &[u8],
        actions: &[u8],
    ) -> PyResult<()> {
        let rows = RowCols::decode(frames, times, codes, Some(rto), None)?;
        let runs = RunCols::decode(
            run_codes,
            &[
                ("run_keys", run_keys),
                ("run_firsts", run_firsts),
                ("run_first_frames", run_first_frames),
                ("run_lasts", run_lasts),
                ("run_counts", run_counts),
            ],
        )?;
        self.reading()?
            .second(&rows.rows(), &runs.runs(), actions)
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
