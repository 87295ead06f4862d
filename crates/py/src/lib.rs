//! `nastriage._core`: the thin Python binding of the engine. It runs the
//! analysis with the GIL released and hands tables to Python through the
//! Arrow PyCapsule stream interface (zero-copy for pyarrow, DuckDB, polars).

mod events;
mod lists;
mod loss;

use std::sync::Arc;

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{RecordBatch, RecordBatchIterator};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyIndexError, PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCapsule, PyDict, PyList, PyTuple};

use nastriage_engine::app::layer::AppKind;
use nastriage_engine::{Analysis, AnalyzeOptions};

create_exception!(
    _core,
    CaptureError,
    PyException,
    "Unreadable capture input."
);

/// Result of an analysis run.
#[pyclass(frozen, name = "Analysis", module = "nastriage._core")]
struct PyAnalysis {
    inner: Arc<Analysis>,
}

fn opt_i64(py: Python<'_>, v: Option<i64>) -> Py<PyAny> {
    match v {
        Some(x) => x
            .into_pyobject(py)
            .map(|o| o.into_any().unbind())
            .unwrap_or_else(|_| py.None()),
        None => py.None(),
    }
}

#[pymethods]
impl PyAnalysis {
    #[getter]
    fn captures<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for c in &self.inner.captures {
            let d = PyDict::new(py);
            d.set_item("path", &c.path)?;
            d.set_item("format", &c.format)?;
            d.set_item("format_description", &c.format_description)?;
            d.set_item("compression", &c.compression)?;
            d.set_item("link_types", &c.link_types)?;
            d.set_item("frames", c.frames)?;
            d.set_item("bytes", c.bytes)?;
            d.set_item("captured_bytes", c.captured_bytes)?;
            d.set_item("first_time_ns", opt_i64(py, c.first_ts))?;
            d.set_item("last_time_ns", opt_i64(py, c.last_ts))?;
            d.set_item("truncated_frames", c.truncated_frames)?;
            d.set_item("warnings", &c.warnings)?;
            out.append(d)?;
        }
        Ok(out)
    }

    #[getter]
    fn protocols<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for p in &self.inner.protocols {
            let d = PyDict::new(py);
            d.set_item("protocol", &p.protocol)?;
            d.set_item("frames", p.frames)?;
            d.set_item("bytes", p.bytes)?;
            out.append(d)?;
        }
        Ok(out)
    }

    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings.clone()
    }

    /// Counters of the NFS/SMB parsers (see `Analysis::app_stats`).
    #[getter]
    fn app_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        // (Tables and counters from the digest wait for its thread: without
        // the GIL, so that Python's other threads go on.)
        let stats = py.detach(|| self.inner.app_stats());
        let d = PyDict::new(py);
        for (k, v) in stats {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    #[getter]
    fn frames(&self) -> u64 {
        self.inner.frames
    }

    fn table_names(&self) -> Vec<&'static str> {
        self.inner.table_names()
    }

    /// Wait (without the GIL) until the tables derived from the transactions
    /// are made.
    fn wait_for_digest(&self, py: Python<'_>) {
        py.detach(|| self.inner.wait_for_digest());
    }

    fn table(&self, py: Python<'_>, name: &str) -> PyResult<TableStream> {
        match py.detach(|| self.inner.table(name)) {
            Some(batch) => Ok(TableStream { batch }),
            None => Err(PyKeyError::new_err(format!("no table named {name:?}"))),
        }
    }

    /// Rows `start..stop` of a table (clamped), made from those rows alone
    /// where the engine can (`tcp_events`).
    fn table_rows(
        &self,
        py: Python<'_>,
        name: &str,
        start: usize,
        stop: usize,
    ) -> PyResult<TableStream> {
        match py.detach(|| self.inner.table_rows(name, start, stop)) {
            Some(batch) => Ok(TableStream { batch }),
            None => Err(PyKeyError::new_err(format!("no table named {name:?}"))),
        }
    }

    /// The `srt` rows of one breakdown ("op", "client", ...), made without
    /// the other breakdowns' rows.
    fn srt_rows(&self, py: Python<'_>, breakdown: &str) -> PyResult<TableStream> {
        match py.detach(|| self.inner.srt_rows(breakdown)) {
            Some(batch) => Ok(TableStream { batch }),
            None => Err(PyKeyError::new_err(format!(
                "no srt breakdown named {breakdown:?}"
            ))),
        }
    }

    /// Rows of a table, without making it where the engine can.
    fn table_len(&self, py: Python<'_>, name: &str) -> PyResult<usize> {
        py.detach(|| self.inner.table_len(name))
            .ok_or_else(|| PyKeyError::new_err(format!("no table named {name:?}")))
    }

    /// The median receive window offered to each sender direction over its
    /// `tcp_series` bins with payload: `(stream, direction, median)` tuples.
    fn tcp_series_window_medians<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let medians = py.detach(|| self.inner.tcp_series_window_medians());
        PyList::new(py, medians)
    }

    /// The `tcp_series` rows with payload grouped by (stream, direction):
    /// `[(stream, direction, interval_ns, throughput_bps, receive_window)]`,
    /// the last two native-endian f64 bytes (NaN: no window seen); `stream`:
    /// that connection's only.
    #[pyo3(signature = (stream=None))]
    fn tcp_series_by_direction<'py>(
        &self,
        py: Python<'py>,
        stream: Option<u32>,
    ) -> PyResult<Bound<'py, PyList>> {
        let groups = py.detach(|| self.inner.tcp_series_by_direction(stream));
        let f64_bytes = |v: &[f64]| -> Vec<u8> { v.iter().flat_map(|x| x.to_ne_bytes()).collect() };
        let items = groups
            .iter()
            .map(|g| {
                (
                    g.stream,
                    g.direction,
                    g.interval_ns,
                    PyBytes::new(py, &f64_bytes(&g.throughput_bps)),
                    PyBytes::new(py, &f64_bytes(&g.receive_window)),
                )
            })
            .collect::<Vec<_>>();
        PyList::new(py, items)
    }

    /// Rows `start..stop` of `tcp_events` regrouped by connection, as the
    /// diagnosis reads them; `labels` are those of the rows before; `part`:
    /// which events and how (see `events::Part::parse`).
    #[pyo3(signature = (start, stop, labels, part="all"))]
    fn tcp_events_by_stream<'py>(
        &self,
        py: Python<'py>,
        start: usize,
        stop: usize,
        labels: Vec<(String, String)>,
        part: &str,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let part = events::Part::parse(part).ok_or_else(|| {
            PyValueError::new_err(format!("no part of the events named {part:?}"))
        })?;
        events::by_stream(py, &self.inner, start, stop, labels, part)
    }
}

/// One table, exported through `__arrow_c_stream__`.
#[pyclass(frozen, module = "nastriage._core")]
struct TableStream {
    batch: RecordBatch,
}

#[pymethods]
impl TableStream {
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        // Schema negotiation is optional in the protocol; we always export
        // our own schema (consumers cast if they asked for another).
        let _ = requested_schema;
        let schema = self.batch.schema();
        let reader = RecordBatchIterator::new(vec![Ok(self.batch.clone())], schema);
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }

    #[getter]
    fn num_rows(&self) -> usize {
        self.batch.num_rows()
    }

    /// The column names, in table order.
    #[getter]
    fn column_names(&self) -> Vec<String> {
        let schema = self.batch.schema();
        schema.fields().iter().map(|f| f.name().clone()).collect()
    }

    /// The named columns (all when `names` is None) as Python lists, by
    /// name; names the table lacks are left out. Timestamps as integer
    /// nanoseconds since the epoch. `start` and `stop` choose rows as a
    /// Python slice does (non-negative; clamped to the table), so that a
    /// long table can be read a piece at a time.
    #[pyo3(signature = (names=None, start=0, stop=None))]
    fn columns<'py>(
        &self,
        py: Python<'py>,
        names: Option<Vec<String>>,
        start: usize,
        stop: Option<usize>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        let rows = self.batch.num_rows();
        let stop = stop.map_or(rows, |s| s.min(rows));
        let start = start.min(stop);
        // (A slice shares the columns' buffers: nothing is copied.)
        let batch = if (start, stop) == (0, rows) {
            self.batch.clone()
        } else {
            self.batch.slice(start, stop - start)
        };
        let schema = batch.schema();
        let wanted: Vec<String> = match names {
            Some(n) => n,
            None => self.column_names(),
        };
        for name in wanted {
            if let Ok(i) = schema.index_of(&name) {
                let list = lists::to_list(py, batch.column(i).as_ref())?;
                out.set_item(name, list)?;
            }
        }
        Ok(out)
    }

    /// The value at column `column` (its position in `column_names`), row
    /// `row`, as `columns` gives it: a row read in place, without turning
    /// the table's other values into Python objects.
    fn value<'py>(
        &self,
        py: Python<'py>,
        column: usize,
        row: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let col = self.batch.columns().get(column).ok_or_else(|| {
            PyIndexError::new_err(format!(
                "no column {column} in a table of {}",
                self.batch.num_columns()
            ))
        })?;
        if row >= col.len() {
            return Err(PyIndexError::new_err(format!(
                "row {row} of a table of {} rows",
                col.len()
            )));
        }
        // (A slice shares the column's buffers.)
        lists::to_list(py, col.slice(row, 1).as_ref())?.get_item(0)
    }
}

fn capture_error(py: Python<'_>, e: &nastriage_engine::CaptureError) -> PyErr {
    let err = CaptureError::new_err(e.to_string());
    let value = err.value(py);
    let _ = value.setattr("path", &e.path);
    let _ = value.setattr("offset", e.offset);
    err
}

/// The JSON view's conversation objects of `conversations` rows
/// `start..stop`, as text (see `nastriage_engine::json_text`).
#[pyfunction]
#[pyo3(signature = (conversations, tcp_connections, tcp_flag_counts, start, stop))]
fn conversation_json(
    py: Python<'_>,
    conversations: PyRef<'_, TableStream>,
    tcp_connections: Option<PyRef<'_, TableStream>>,
    tcp_flag_counts: Option<PyRef<'_, TableStream>>,
    start: usize,
    stop: usize,
) -> PyResult<String> {
    let (conv, tcp, flags) = (
        &conversations.batch,
        tcp_connections.as_ref().map(|t| &t.batch),
        tcp_flag_counts.as_ref().map(|t| &t.batch),
    );
    py.detach(|| nastriage_engine::json_text::conversation_objects(conv, tcp, flags, start, stop))
        .map_err(pyo3::exceptions::PyRuntimeError::new_err)
}

/// Analyse captures in one streaming pass; see `_core.pyi`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (paths, progress=None, progress_interval_bytes=64 << 20, decode_as=Vec::new(), segments_for=Vec::new(), segment_points=4000, segment_points_total=1_000_000, keep_transactions=true))]
fn analyze(
    py: Python<'_>,
    paths: Vec<String>,
    progress: Option<Py<PyAny>>,
    progress_interval_bytes: u64,
    decode_as: Vec<(u16, String)>,
    segments_for: Vec<u32>,
    segment_points: usize,
    segment_points_total: usize,
    keep_transactions: bool,
) -> PyResult<PyAnalysis> {
    let decode_as = decode_as
        .into_iter()
        .map(|(port, proto)| match proto.to_ascii_lowercase().as_str() {
            "nfs" | "rpc" => Ok((port, AppKind::Rpc)),
            "smb" | "smb2" | "cifs" => Ok((port, AppKind::Smb)),
            other => Err(PyValueError::new_err(format!(
                "decode_as: unknown protocol {other:?} (use nfs or smb)"
            ))),
        })
        .collect::<PyResult<Vec<_>>>()?;
    let mut cb_error: Option<PyErr> = None;
    let result = py.detach(|| {
        let mut call = |done: u64, total: u64| -> bool {
            let Some(cb) = progress.as_ref() else {
                return true;
            };
            Python::attach(|py| match cb.call1(py, (done, total)) {
                Ok(_) => true,
                Err(e) => {
                    // A raising callback (KeyboardInterrupt included) stops the run.
                    cb_error = Some(e);
                    false
                }
            })
        };
        let opts = AnalyzeOptions {
            progress: Some(&mut call),
            progress_interval: progress_interval_bytes.max(1 << 20),
            decode_as,
            segments_for,
            seq_points: nastriage_engine::tcp::seq_points::SeqPointsConfig {
                per_dir: segment_points,
                total: segment_points_total,
                ..Default::default()
            },
            keep_transactions,
        };
        nastriage_engine::analyze(&paths, opts)
    });
    if let Some(e) = cb_error {
        return Err(e);
    }
    match result {
        Ok(a) => Ok(PyAnalysis { inner: Arc::new(a) }),
        Err(e) => Err(capture_error(py, &e)),
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", nastriage_engine::VERSION)?;
    // "profile-guided" when the package's build backend compiled the engine
    // from a profile (`build_support/pgo_backend.py`), else "plain".
    m.add(
        "__build__",
        option_env!("NASTRIAGE_BUILD").unwrap_or("plain"),
    )?;
    m.add("CaptureError", m.py().get_type::<CaptureError>())?;
    m.add_class::<PyAnalysis>()?;
    m.add_class::<TableStream>()?;
    m.add_class::<loss::LossReading>()?;
    m.add_function(wrap_pyfunction!(analyze, m)?)?;
    m.add_function(wrap_pyfunction!(events::time_order, m)?)?;
    m.add_function(wrap_pyfunction!(conversation_json, m)?)?;
    Ok(())
}
